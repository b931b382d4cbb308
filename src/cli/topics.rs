//! `samsa topics create|list|describe|alter|delete`: topic administration over the Rust
//! client, in the manner of Kafka's `kafka-topics.sh` (and `kafka-configs.sh` for config
//! overrides).
//!
//! Output: `create` prints `Created topic NAME.` as Kafka does; `list` one name per line;
//! `describe` Kafka's layout (a topic line with its id, counts and config overrides, then a
//! line per partition). `alter` and `delete` print nothing on success. Every failure goes to
//! stderr and the exit code is non-zero; an operation on several topics still tries them all.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::ExitCode;

use super::common::{self, Arg, Args, CliError};
use crate::client::{
    AlterConfigOp, Client, ClientError, ConfigResource, ConfigSource, PartitionMetadata,
    TopicDescription,
};
use crate::protocol::error::ErrorCode;

pub const USAGE: &str = "usage: samsa topics <create|list|describe|alter|delete> [options]

  create NAME [--partitions N] [--replication-factor N] [--config k=v]... [--if-not-exists]
  list
  describe [NAME...] [--under-replicated-partitions | --under-min-isr-partitions |
            --at-min-isr-partitions | --unavailable-partitions]
  alter NAME [--partitions N] [--config k=v]... [--delete-config k]...
  delete NAME... [--if-exists]

options for every subcommand:
  -b, --bootstrap-server HOST:PORT[,HOST:PORT]   broker to ask (default 127.0.0.1:9092)

Without --partitions or --replication-factor, create uses the broker's num.partitions and
default.replication.factor. describe without names describes every topic; its Configs are the
topic's overrides (from DescribeConfigs). With one of the report options describe prints only
the partitions that match, without the topic lines, as kafka-topics.sh: under-replicated (ISR
smaller than the replicas), under min ISR (no leader, or an ISR below the topic's
min.insync.replicas), at min ISR, unavailable (no leader, or a leader not among the live
brokers).";

/// `describe`'s report options (kafka-topics.sh's), at most one per command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionReport {
    UnderReplicated,
    UnderMinIsr,
    AtMinIsr,
    Unavailable,
}

impl PartitionReport {
    const FLAGS: [(&'static str, PartitionReport); 4] = [
        (
            "--under-replicated-partitions",
            PartitionReport::UnderReplicated,
        ),
        ("--under-min-isr-partitions", PartitionReport::UnderMinIsr),
        ("--at-min-isr-partitions", PartitionReport::AtMinIsr),
        ("--unavailable-partitions", PartitionReport::Unavailable),
    ];

    /// Whether partition `p` is reported, given its topic's `min.insync.replicas` (if known)
    /// and the live brokers (Kafka's `PartitionDescription` predicates).
    pub fn matches(self, p: &PartitionMetadata, min_isr: Option<usize>, live: &[i32]) -> bool {
        let has_leader = p.leader_id >= 0;
        match self {
            PartitionReport::UnderReplicated => p.isr.len() < p.replicas.len(),
            PartitionReport::UnderMinIsr => {
                !has_leader || min_isr.is_some_and(|min| p.isr.len() < min)
            }
            PartitionReport::AtMinIsr => min_isr == Some(p.isr.len()),
            PartitionReport::Unavailable => !has_leader || !live.contains(&p.leader_id),
        }
    }
}

/// What a `topics` command line asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Create {
        name: String,
        partitions: i32,
        replication_factor: i16,
        configs: Vec<(String, String)>,
        if_not_exists: bool,
    },
    List,
    Describe {
        names: Vec<String>,
        report: Option<PartitionReport>,
    },
    Alter {
        name: String,
        partitions: Option<i32>,
        set: Vec<(String, String)>,
        delete: Vec<String>,
    },
    Delete {
        names: Vec<String>,
        if_exists: bool,
    },
}

/// The parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub bootstrap: Vec<String>,
    pub command: Command,
}

pub fn parse_args(args: &[String]) -> Result<Parsed, CliError> {
    let Some((sub, rest)) = args.split_first() else {
        return Err(CliError::Usage("missing subcommand".into()));
    };
    let mut bootstrap = common::bootstrap_list(common::BOOTSTRAP_DEFAULT)?;
    let mut positionals: Vec<String> = Vec::new();
    let mut partitions: Option<i32> = None;
    let mut replication_factor: Option<i16> = None;
    let mut configs: Vec<(String, String)> = Vec::new();
    let mut deletes: Vec<String> = Vec::new();
    let mut if_not_exists = false;
    let mut if_exists = false;
    let mut report: Option<PartitionReport> = None;
    let mut scan = Args::new(rest);
    // Which flags each subcommand takes; anything else is refused by name.
    let allowed: &[&str] = match sub.as_str() {
        "create" => &[
            "--partitions",
            "--replication-factor",
            "--config",
            "--if-not-exists",
        ],
        "alter" => &["--partitions", "--config", "--delete-config"],
        "delete" => &["--if-exists"],
        "describe" => &PartitionReport::FLAGS.map(|(flag, _)| flag),
        "list" => &[],
        other => return Err(CliError::Usage(format!("unknown subcommand '{other}'"))),
    };
    while let Some(arg) = scan.next_arg() {
        let (name, inline) = match arg {
            Arg::Positional(value) => {
                positionals.push(value.to_owned());
                continue;
            }
            Arg::Flag { name, inline } => (name, inline),
        };
        if common::is_bootstrap_flag(name) {
            bootstrap = common::bootstrap_list(scan.value(name, inline)?)?;
            continue;
        }
        if !allowed.contains(&name) {
            return Err(CliError::Usage(format!(
                "unknown option '{name}' for 'topics {sub}'"
            )));
        }
        match name {
            "--partitions" => {
                let n: i32 = scan.number(name, inline)?;
                if n < 1 {
                    return Err(CliError::Usage(format!(
                        "--partitions: {n} is not positive"
                    )));
                }
                partitions = Some(n);
            }
            "--replication-factor" => {
                let n: i16 = scan.number(name, inline)?;
                if n < 1 {
                    return Err(CliError::Usage(format!(
                        "--replication-factor: {n} is not positive"
                    )));
                }
                replication_factor = Some(n);
            }
            "--config" => {
                let (k, v) = common::key_value(name, scan.value(name, inline)?)?;
                configs.push((k.to_owned(), v.to_owned()));
            }
            "--delete-config" => deletes.push(scan.value(name, inline)?.to_owned()),
            "--if-not-exists" => if_not_exists = true,
            "--if-exists" => if_exists = true,
            flag => {
                let Some((_, wanted)) = PartitionReport::FLAGS.iter().find(|(f, _)| *f == flag)
                else {
                    unreachable!("every allowed flag is matched")
                };
                if report.is_some_and(|r| r != *wanted) {
                    return Err(CliError::Usage(format!(
                        "{flag}: only one of {} at a time",
                        PartitionReport::FLAGS.map(|(f, _)| f).join(", ")
                    )));
                }
                report = Some(*wanted);
            }
        }
    }
    let one_name = |positionals: Vec<String>| -> Result<String, CliError> {
        let mut iter = positionals.into_iter();
        match (iter.next(), iter.next()) {
            (Some(name), None) => Ok(name),
            (None, _) => Err(CliError::Usage(format!(
                "'topics {sub}' needs a topic name"
            ))),
            (Some(_), Some(extra)) => Err(CliError::Usage(format!(
                "unexpected argument '{extra}': 'topics {sub}' takes one topic"
            ))),
        }
    };
    let command = match sub.as_str() {
        "create" => Command::Create {
            name: one_name(positionals)?,
            partitions: partitions.unwrap_or(-1),
            replication_factor: replication_factor.unwrap_or(-1),
            configs,
            if_not_exists,
        },
        "list" => {
            if let Some(extra) = positionals.first() {
                return Err(CliError::Usage(format!(
                    "unexpected argument '{extra}': 'topics list' takes no names"
                )));
            }
            Command::List
        }
        "describe" => Command::Describe {
            names: positionals,
            report,
        },
        "alter" => {
            let name = one_name(positionals)?;
            if partitions.is_none() && configs.is_empty() && deletes.is_empty() {
                return Err(CliError::Usage(
                    "'topics alter' needs --partitions, --config or --delete-config".into(),
                ));
            }
            Command::Alter {
                name,
                partitions,
                set: configs,
                delete: deletes,
            }
        }
        _ => {
            if positionals.is_empty() {
                return Err(CliError::Usage("'topics delete' needs a topic name".into()));
            }
            Command::Delete {
                names: positionals,
                if_exists,
            }
        }
    };
    Ok(Parsed { bootstrap, command })
}

pub fn main(args: &[String]) -> ExitCode {
    common::tool_main("topics", USAGE, args, parse_args, run)
}

pub async fn run(parsed: Parsed) -> Result<(), CliError> {
    let mut client = common::client(&parsed.bootstrap);
    match parsed.command {
        Command::Create {
            name,
            partitions,
            replication_factor,
            configs,
            if_not_exists,
        } => {
            let pairs: Vec<(&str, &str)> = configs
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            let results = client
                .create_topics(&[(name.as_str(), partitions, replication_factor, &pairs)])
                .await
                .map_err(CliError::client(format!("creating topic '{name}'")))?;
            for (topic, result) in results {
                match result {
                    Ok(()) => println!("Created topic {topic}."),
                    Err(e)
                        if if_not_exists && e.code() == Some(ErrorCode::TOPIC_ALREADY_EXISTS) => {}
                    Err(e) => {
                        return Err(CliError::Failed(format!("creating topic '{topic}': {e}")))
                    }
                }
            }
            Ok(())
        }
        Command::List => {
            let topics = client
                .describe_topics(&[])
                .await
                .map_err(CliError::client("listing topics"))?;
            let mut out = std::io::stdout().lock();
            for topic in topics.iter().filter(|t| t.error == ErrorCode::NONE) {
                writeln!(out, "{}", topic.name).map_err(CliError::Output)?;
            }
            out.flush().map_err(CliError::Output)
        }
        Command::Describe { names, report } => describe(&mut client, &names, report).await,
        Command::Alter {
            name,
            partitions,
            set,
            delete,
        } => alter(&mut client, &name, partitions, &set, &delete).await,
        Command::Delete { names, if_exists } => {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let results = client
                .delete_topics(&refs)
                .await
                .map_err(CliError::client("deleting topics"))?;
            let mut failed = Vec::new();
            for (topic, result) in results {
                match result {
                    Ok(()) => {}
                    Err(e)
                        if if_exists && e.code() == Some(ErrorCode::UNKNOWN_TOPIC_OR_PARTITION) => {
                    }
                    Err(e) => {
                        eprintln!("samsa topics: deleting topic '{topic}': {e}");
                        failed.push(topic);
                    }
                }
            }
            if failed.is_empty() {
                Ok(())
            } else {
                Err(CliError::Failed(format!(
                    "{} of {} topics not deleted",
                    failed.len(),
                    names.len()
                )))
            }
        }
    }
}

/// The error for a topic Metadata could not describe.
fn topic_error(topic: &TopicDescription) -> String {
    if topic.error == ErrorCode::UNKNOWN_TOPIC_OR_PARTITION {
        format!("topic '{}' does not exist", topic.name)
    } else {
        format!("topic '{}': {}", topic.name, topic.error)
    }
}

async fn describe(
    client: &mut Client,
    names: &[String],
    report: Option<PartitionReport>,
) -> Result<(), CliError> {
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let topics = client
        .describe_topics(&refs)
        .await
        .map_err(CliError::client("describing topics"))?;
    let (found, missing): (Vec<&TopicDescription>, Vec<&TopicDescription>) =
        topics.iter().partition(|t| t.error == ErrorCode::NONE);
    let configs = topic_configs(client, &found).await?;
    // Kafka's TopicCommand judges availability against the brokers the cluster reports live.
    let live: Vec<i32> = if report == Some(PartitionReport::Unavailable) {
        client
            .describe_cluster()
            .await
            .map_err(CliError::client("describing the cluster"))?
            .brokers
            .iter()
            .map(|b| b.node_id)
            .collect()
    } else {
        Vec::new()
    };
    let mut out = std::io::stdout().lock();
    for topic in &found {
        let min_isr = configs.min_isr.get(&topic.name).copied();
        if report.is_none() {
            let overrides = configs
                .overrides
                .get(&topic.name)
                .map(|pairs| {
                    pairs
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            let replication = topic.partitions.first().map_or(0, |p| p.replicas.len());
            writeln!(
                out,
                "Topic: {}\tTopicId: {}\tPartitionCount: {}\tReplicationFactor: {}\tConfigs: {}",
                topic.name,
                topic.topic_id.to_base64(),
                topic.partitions.len(),
                replication,
                overrides
            )
            .map_err(CliError::Output)?;
        }
        for p in &topic.partitions {
            if report.is_some_and(|r| !r.matches(p, min_isr, &live)) {
                continue;
            }
            let leader = if p.leader_id < 0 {
                "none".to_owned()
            } else {
                p.leader_id.to_string()
            };
            let list = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
            writeln!(
                out,
                "\tTopic: {}\tPartition: {}\tLeader: {}\tReplicas: {}\tIsr: {}",
                topic.name,
                p.partition,
                leader,
                list(&p.replicas),
                list(&p.isr)
            )
            .map_err(CliError::Output)?;
        }
    }
    out.flush().map_err(CliError::Output)?;
    drop(out);
    if missing.is_empty() {
        return Ok(());
    }
    for topic in &missing {
        eprintln!("samsa topics: {}", topic_error(topic));
    }
    Err(CliError::Failed(format!(
        "{} of {} topics not described",
        missing.len(),
        topics.len()
    )))
}

/// What `describe` shows of the topics' configs: each one's overrides, sorted by name, and its
/// effective `min.insync.replicas` (whatever its source).
#[derive(Default)]
struct TopicConfigs {
    overrides: BTreeMap<String, Vec<(String, String)>>,
    min_isr: BTreeMap<String, usize>,
}

/// The topics' configs (from DescribeConfigs). A broker without DescribeConfigs gets a
/// warning and none, so `describe` still shows the partitions.
async fn topic_configs(
    client: &mut Client,
    topics: &[&TopicDescription],
) -> Result<TopicConfigs, CliError> {
    let mut configs = TopicConfigs::default();
    if topics.is_empty() {
        return Ok(configs);
    }
    let resources: Vec<ConfigResource> = topics
        .iter()
        .map(|t| ConfigResource::Topic(t.name.clone()))
        .collect();
    let results = match client.describe_configs(&resources).await {
        Ok(results) => results,
        Err(e @ ClientError::UnsupportedApi { .. }) => {
            tracing::warn!("topic configs not shown: {e}");
            return Ok(configs);
        }
        Err(e) => return Err(CliError::client("describing topic configs")(e)),
    };
    for (resource, result) in results {
        let ConfigResource::Topic(name) = resource else {
            continue;
        };
        match result {
            Ok(entries) => {
                if let Some(min_isr) = entries
                    .iter()
                    .find(|e| e.name == "min.insync.replicas")
                    .and_then(|e| e.value.as_deref()?.parse::<usize>().ok())
                {
                    configs.min_isr.insert(name.clone(), min_isr);
                }
                let mut pairs: Vec<(String, String)> = entries
                    .into_iter()
                    .filter(|e| e.source == ConfigSource::DYNAMIC_TOPIC_CONFIG)
                    .map(|e| {
                        let value = if e.is_sensitive {
                            "(sensitive)".to_owned()
                        } else {
                            e.value.unwrap_or_default()
                        };
                        (e.name, value)
                    })
                    .collect();
                pairs.sort();
                configs.overrides.insert(name, pairs);
            }
            Err(e) => tracing::warn!("configs of topic '{name}' not shown: {e}"),
        }
    }
    Ok(configs)
}

async fn alter(
    client: &mut Client,
    name: &str,
    partitions: Option<i32>,
    set: &[(String, String)],
    delete: &[String],
) -> Result<(), CliError> {
    let topics = client
        .describe_topics(&[name])
        .await
        .map_err(CliError::client(format!("describing topic '{name}'")))?;
    match topics.iter().find(|t| t.name == name) {
        Some(t) if t.error == ErrorCode::NONE => {}
        Some(t) => return Err(CliError::Failed(topic_error(t))),
        None => return Err(CliError::Failed(format!("topic '{name}' does not exist"))),
    }
    if let Some(count) = partitions {
        let results = client
            .create_partitions(&[(name, count)], false)
            .await
            .map_err(CliError::client(format!(
                "adding partitions to topic '{name}'"
            )))?;
        for (topic, result) in results {
            result.map_err(|e| {
                CliError::Failed(format!("adding partitions to topic '{topic}': {e}"))
            })?;
        }
    }
    if set.is_empty() && delete.is_empty() {
        return Ok(());
    }
    let resource = ConfigResource::Topic(name.to_owned());
    let ops: Vec<AlterConfigOp> = set
        .iter()
        .map(|(k, v)| AlterConfigOp::Set {
            name: k.clone(),
            value: v.clone(),
        })
        .chain(
            delete
                .iter()
                .map(|k| AlterConfigOp::Delete { name: k.clone() }),
        )
        .collect();
    let context = format!("altering the configs of topic '{name}'");
    let results = match client
        .incremental_alter_configs(&[(resource.clone(), ops)], false)
        .await
    {
        Ok(results) => results,
        Err(ClientError::UnsupportedApi { .. }) => {
            // A broker from before KIP-339 only replaces the whole set of overrides: read
            // them, apply the changes, and write them all back.
            tracing::info!("IncrementalAlterConfigs unsupported; using AlterConfigs");
            let current = topic_overrides_strict(client, &resource).await?;
            let mut merged: BTreeMap<String, String> = current.into_iter().collect();
            for k in delete {
                merged.remove(k);
            }
            for (k, v) in set {
                merged.insert(k.clone(), v.clone());
            }
            client
                .alter_configs(&[(resource, merged.into_iter().collect())], false)
                .await
                .map_err(CliError::client(context.clone()))?
        }
        Err(e) => return Err(CliError::client(context)(e)),
    };
    for (_, result) in results {
        result.map_err(|e| CliError::Failed(format!("{context}: {e}")))?;
    }
    Ok(())
}

/// The overrides of one resource; any failure is an error (they are about to be rewritten).
async fn topic_overrides_strict(
    client: &mut Client,
    resource: &ConfigResource,
) -> Result<Vec<(String, String)>, CliError> {
    let results = client
        .describe_configs(std::slice::from_ref(resource))
        .await
        .map_err(CliError::client(format!(
            "describing the configs of {resource}"
        )))?;
    let mut pairs = Vec::new();
    for (_, result) in results {
        let entries = result.map_err(|e| CliError::Failed(e.to_string()))?;
        pairs.extend(
            entries
                .into_iter()
                .filter(|e| e.source == ConfigSource::DYNAMIC_TOPIC_CONFIG)
                .filter_map(|e| Some((e.name, e.value?))),
        );
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Parsed, String> {
        common::parse_strs(parse_args, args)
    }

    #[test]
    fn cli_topics_parses_each_subcommand() {
        let parsed = parse(&[
            "create",
            "t",
            "--partitions",
            "3",
            "--config=retention.ms=1000",
            "-b",
            "h:9",
            "--replication-factor=1",
        ])
        .unwrap();
        assert_eq!(parsed.bootstrap, vec!["h:9".to_owned()]);
        assert_eq!(
            parsed.command,
            Command::Create {
                name: "t".into(),
                partitions: 3,
                replication_factor: 1,
                configs: vec![("retention.ms".into(), "1000".into())],
                if_not_exists: false,
            }
        );
        let parsed = parse(&["create", "t"]).unwrap();
        assert_eq!(parsed.bootstrap, vec!["127.0.0.1:9092".to_owned()]);
        assert!(matches!(
            parsed.command,
            Command::Create {
                partitions: -1,
                replication_factor: -1,
                ..
            }
        ));
        assert_eq!(parse(&["list"]).unwrap().command, Command::List);
        assert_eq!(
            parse(&["describe", "a", "b"]).unwrap().command,
            Command::Describe {
                names: vec!["a".into(), "b".into()],
                report: None,
            }
        );
        assert_eq!(
            parse(&["describe", "--under-min-isr-partitions"])
                .unwrap()
                .command,
            Command::Describe {
                names: Vec::new(),
                report: Some(PartitionReport::UnderMinIsr),
            }
        );
        assert_eq!(
            parse(&["alter", "t", "--delete-config", "x", "--config", "y=1"])
                .unwrap()
                .command,
            Command::Alter {
                name: "t".into(),
                partitions: None,
                set: vec![("y".into(), "1".into())],
                delete: vec!["x".into()],
            }
        );
        assert_eq!(
            parse(&["delete", "a", "b", "--if-exists"]).unwrap().command,
            Command::Delete {
                names: vec!["a".into(), "b".into()],
                if_exists: true
            }
        );
    }

    #[test]
    fn cli_topics_refuses_bad_command_lines_naming_the_problem() {
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert_eq!(err(&[]), "missing subcommand");
        assert_eq!(err(&["make", "t"]), "unknown subcommand 'make'");
        assert_eq!(err(&["create"]), "'topics create' needs a topic name");
        assert_eq!(
            err(&["create", "a", "b"]),
            "unexpected argument 'b': 'topics create' takes one topic"
        );
        assert_eq!(
            err(&["create", "t", "--partition", "3"]),
            "unknown option '--partition' for 'topics create'"
        );
        assert_eq!(
            err(&["create", "t", "--partitions", "x"]),
            "--partitions: 'x' is not a valid number"
        );
        assert_eq!(
            err(&["create", "t", "--partitions", "0"]),
            "--partitions: 0 is not positive"
        );
        assert_eq!(
            err(&["create", "t", "--config", "novalue"]),
            "--config: 'novalue' is not of the form key=value"
        );
        assert_eq!(
            err(&["alter", "t"]),
            "'topics alter' needs --partitions, --config or --delete-config"
        );
        assert_eq!(err(&["delete"]), "'topics delete' needs a topic name");
        assert_eq!(
            err(&["list", "--delete-config", "x"]),
            "unknown option '--delete-config' for 'topics list'"
        );
        assert_eq!(err(&["list", "-b"]), "-b needs a value");
        assert_eq!(
            err(&[
                "describe",
                "--unavailable-partitions",
                "--under-replicated-partitions"
            ]),
            "--under-replicated-partitions: only one of --under-replicated-partitions, \
             --under-min-isr-partitions, --at-min-isr-partitions, --unavailable-partitions at \
             a time"
        );
        assert_eq!(
            err(&["list", "--unavailable-partitions"]),
            "unknown option '--unavailable-partitions' for 'topics list'"
        );
    }

    #[test]
    fn cli_topics_reports_partitions_as_kafka_topics_does() {
        let p = |leader: i32, isr: &[i32]| PartitionMetadata {
            partition: 0,
            error: ErrorCode::NONE,
            leader_id: leader,
            leader_epoch: 3,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
        };
        let live = [1, 2];
        let whole = p(1, &[1, 2, 3]);
        let short = p(1, &[1, 2]);
        let alone = p(1, &[1]);
        let leaderless = p(-1, &[]);
        let on_dead = p(3, &[3]);
        use PartitionReport::*;
        let reported = |r: PartitionReport| {
            [&whole, &short, &alone, &leaderless, &on_dead]
                .iter()
                .map(|p| r.matches(p, Some(2), &live))
                .collect::<Vec<_>>()
        };
        assert_eq!(reported(UnderReplicated), [false, true, true, true, true]);
        assert_eq!(reported(UnderMinIsr), [false, false, true, true, true]);
        assert_eq!(reported(AtMinIsr), [false, true, false, false, false]);
        assert_eq!(reported(Unavailable), [false, false, false, true, true]);
        // Without a known min.insync.replicas only a leaderless partition is under it.
        assert!(!UnderMinIsr.matches(&alone, None, &live));
        assert!(UnderMinIsr.matches(&leaderless, None, &live));
    }
}
