//! `samsa storage random-uuid | format`: Kafka's `kafka-storage.sh`. Every node of one
//! cluster must carry the same cluster id in the `meta.properties` of its directories, or a
//! controller refuses its brokers (INCONSISTENT_CLUSTER_ID); a node started on an empty
//! directory makes up its own, which is right for one node and wrong for several. So a
//! cluster's directories are formatted first, with one id drawn once:
//!
//! ```sh
//! id=$(samsa storage random-uuid)
//! samsa storage format --cluster-id "$id" --config node-1.properties
//! ```
//!
//! `format` writes `meta.properties` (cluster id, node id, a fresh directory id) into each of
//! `log.dirs` (or `log.dir`, default `./samsa-data`) and `metadata.log.dir`, from the file and
//! `--override`s. A directory that already has one is an error (exit 1) naming it, unless
//! `--ignore-formatted` is given and it holds the same cluster and node id. Invariant: an
//! existing `meta.properties` is never rewritten.

use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::broker::config::parse_properties;
use crate::broker::meta::{self, MetaProperties, META_PROPERTIES_FILE};
use crate::rt::disk::Disk;

const USAGE: &str = "usage: samsa storage random-uuid
       samsa storage format --cluster-id ID [--config FILE] [--override key=value]... [--ignore-formatted]

random-uuid prints a new cluster id. format writes meta.properties with ID and node.id
(or broker.id) into each of log.dirs (or log.dir; default ./samsa-data) and metadata.log.dir,
as Kafka's kafka-storage.sh does; every node of a cluster is formatted with the same ID.";

/// The broker's data directory when none is configured.
const DEFAULT_LOG_DIR: &str = "./samsa-data";

pub fn main(args: &[String]) -> ExitCode {
    match args.first().map(String::as_str) {
        Some("random-uuid") if args.len() == 1 => {
            println!("{}", meta::random_uuid());
            ExitCode::SUCCESS
        }
        Some("format") => match parse(&args[1..]) {
            Ok(format) => super::broker::run_to_exit("samsa storage format", run(format)),
            Err(e) => {
                eprintln!("samsa storage format: {e}\n{USAGE}");
                ExitCode::from(2)
            }
        },
        Some("-h" | "--help" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// What `format` was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub struct Format {
    pub cluster_id: String,
    pub node_id: i32,
    pub dirs: Vec<String>,
    pub ignore_formatted: bool,
}

/// Reads the command line (and the file it names) into a [`Format`].
pub fn parse(args: &[String]) -> Result<Format, String> {
    let mut cluster_id = None;
    let mut file = None;
    let mut overrides: Vec<(String, String)> = Vec::new();
    let mut ignore_formatted = false;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match arg.as_str() {
            "--cluster-id" | "-t" => cluster_id = Some(value(arg)?),
            "--config" | "-c" => file = Some(value(arg)?),
            "--override" => {
                let pair = value(arg)?;
                let (k, v) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("--override '{pair}' is not key=value"))?;
                overrides.push((k.trim().to_string(), v.trim().to_string()));
            }
            "--ignore-formatted" | "-g" => ignore_formatted = true,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    let cluster_id = cluster_id.ok_or("--cluster-id is required")?;
    if meta::uuid_from_str(&cluster_id).is_none() {
        return Err(format!(
            "cluster id '{cluster_id}' is not a Kafka UUID (22 characters of base64url; `samsa storage random-uuid` makes one)"
        ));
    }
    let mut settings: BTreeMap<String, String> = BTreeMap::new();
    if let Some(path) = &file {
        let text = crate::rt::disk::read_host_file(path).map_err(|e| format!("{path}: {e}"))?;
        for (k, v, _line) in parse_properties(&text).map_err(|e| format!("{path}: {e}"))? {
            settings.insert(k, v);
        }
    }
    settings.extend(overrides);
    let node_id = settings
        .get("node.id")
        .or_else(|| settings.get("broker.id"))
        .ok_or("node.id is required (in the file or as --override node.id=N)")?;
    let node_id: i32 = node_id
        .parse()
        .ok()
        .filter(|id| *id >= 0)
        .ok_or_else(|| format!("node.id '{node_id}' is not a non-negative number"))?;
    let mut dirs: Vec<String> = settings
        .get("log.dirs")
        .or_else(|| settings.get("log.dir"))
        .map_or_else(
            || vec![DEFAULT_LOG_DIR.to_string()],
            |v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(str::to_string)
                    .collect()
            },
        );
    if let Some(dir) = settings.get("metadata.log.dir") {
        dirs.push(dir.trim().to_string());
    }
    dirs.sort();
    dirs.dedup();
    Ok(Format {
        cluster_id,
        node_id,
        dirs,
        ignore_formatted,
    })
}

async fn run(format: Format) -> Result<(), String> {
    for dir in &format.dirs {
        // Created if missing.
        let disk = Disk::real(dir).map_err(|e| format!("{dir}: {e}"))?;
        let file = format!("{dir}/{META_PROPERTIES_FILE}");
        if disk
            .exists(META_PROPERTIES_FILE)
            .await
            .map_err(|e| format!("{file}: {e}"))?
        {
            let existing = meta::load_or_create(&disk, "", format.node_id)
                .await
                .map_err(|e| e.to_string())?;
            if !format.ignore_formatted {
                return Err(format!(
                    "{file} exists already (cluster {}); --ignore-formatted skips formatted directories",
                    existing.cluster_id
                ));
            }
            if existing.cluster_id != format.cluster_id {
                return Err(format!(
                    "{file} belongs to cluster {}, not {}",
                    existing.cluster_id, format.cluster_id
                ));
            }
            println!(
                "{dir}: already formatted for cluster {}",
                existing.cluster_id
            );
            continue;
        }
        let meta = MetaProperties {
            cluster_id: format.cluster_id.clone(),
            ..MetaProperties::generate(format.node_id)
        };
        disk.write_file_atomic(META_PROPERTIES_FILE, meta.encode().as_bytes())
            .await
            .map_err(|e| format!("{file}: {e}"))?;
        println!(
            "{dir}: formatted for cluster {} as node {}",
            meta.cluster_id, meta.node_id
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn storage_format_reads_its_command_line() {
        let id = "pk5ZlY13SxKKmKpulbGLrQ";
        let format = parse(&args(&[
            "--cluster-id",
            id,
            "--override",
            "node.id=3",
            "--override",
            "log.dirs=/a,/b",
            "--override",
            "metadata.log.dir=/m",
        ]))
        .expect("valid");
        assert_eq!(
            format,
            Format {
                cluster_id: id.into(),
                node_id: 3,
                dirs: vec!["/a".into(), "/b".into(), "/m".into()],
                ignore_formatted: false,
            }
        );
        let defaults = parse(&args(&["-t", id, "--override", "broker.id=1", "-g"])).unwrap();
        assert_eq!(defaults.dirs, vec![DEFAULT_LOG_DIR.to_string()]);
        assert!(defaults.ignore_formatted);
        for (bad, why) in [
            (args(&["--override", "node.id=1"]), "--cluster-id"),
            (
                args(&["--cluster-id", "nope", "--override", "node.id=1"]),
                "not a Kafka UUID",
            ),
            (args(&["--cluster-id", id]), "node.id is required"),
            (
                args(&["--cluster-id", id, "--override", "node.id=-2"]),
                "non-negative",
            ),
            (args(&["--cluster-id", id, "--bogus"]), "unknown argument"),
        ] {
            let e = parse(&bad).expect_err("refused");
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}
