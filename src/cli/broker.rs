//! `samsa broker [FILE] [--override key=value]...`: loads the configuration (the embedded
//! default when neither is given), starts the node (`broker::node`: a metadata quorum of one,
//! its controller, and the broker registered with it; a data directory of the previous
//! release is migrated on first start), listens, and serves until SIGINT or SIGTERM, then
//! shuts down in a controlled way and closes every log cleanly (flush, checkpoint,
//! clean-shutdown marker).

use std::process::ExitCode;

use crate::broker::config::{parse_override, BrokerConfig};
use crate::broker::node::Node;
use crate::broker::server::Serving;
use crate::rt::clock::Clock;
use crate::rt::disk::Disk;
use crate::rt::net::TcpListener;

const USAGE: &str = "usage: samsa broker [FILE] [--override key=value]...

FILE is a Kafka-style server.properties (node.id required); --override sets one key on top
of it. Without either: node.id=1, log.dirs=./samsa-data, listeners=PLAINTEXT://127.0.0.1:9092,
process.roles=broker,controller (a metadata quorum of one; its CONTROLLER listener takes an
ephemeral port on 127.0.0.1 unless `listeners` names one).";

/// Parsed command line of `samsa broker`.
#[derive(Debug, PartialEq)]
pub(super) struct Args {
    pub(super) file: Option<String>,
    pub(super) overrides: Vec<(String, String)>,
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut file = None;
    let mut overrides = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let value = if arg == "--override" {
            Some(
                rest.next()
                    .ok_or("--override needs a key=value argument")?
                    .as_str(),
            )
        } else {
            arg.strip_prefix("--override=")
        };
        if let Some(value) = value {
            overrides.push(parse_override(value).map_err(|e| e.to_string())?);
        } else if arg.starts_with('-') {
            return Err(format!("unknown option '{arg}'"));
        } else if file.is_none() {
            file = Some(arg.clone());
        } else {
            return Err(format!("unexpected argument '{arg}': only one FILE"));
        }
    }
    Ok(Args { file, overrides })
}

pub fn main(args: &[String]) -> ExitCode {
    let (args, text) = match server_command_line("samsa broker", USAGE, args) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let config = match BrokerConfig::load(text.as_deref(), &args.overrides) {
        Ok(config) => config,
        Err(e) => {
            let source = args.file.as_deref().unwrap_or("the command line");
            eprintln!("samsa broker: invalid configuration ({source}): {e}");
            return ExitCode::from(2);
        }
    };
    if args.file.is_some() && !config.sets("node.id") && !config.sets("broker.id") {
        eprintln!(
            "samsa broker: invalid configuration ({}): node.id is required (as in Kafka 4)",
            args.file.as_deref().unwrap_or_default()
        );
        return ExitCode::from(2);
    }
    for key in config.ignored_keys() {
        tracing::warn!(key = %key, "setting accepted for compatibility but has no effect yet");
    }
    run_to_exit("samsa broker", run(config))
}

/// The start of a server command (`broker`, `controller`): `--help`, logging, the arguments,
/// and the text of FILE if one was given; `Err` is the exit status to leave with.
pub(super) fn server_command_line(
    name: &str,
    usage: &str,
    args: &[String],
) -> Result<(Args, Option<String>), ExitCode> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{usage}");
        return Err(ExitCode::SUCCESS);
    }
    super::init_logging();
    let args = match parse_args(args) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("{name}: {e}\n{usage}");
            return Err(ExitCode::from(2));
        }
    };
    let text = match &args.file {
        None => None,
        Some(path) => match crate::rt::disk::read_host_file(path) {
            Ok(text) => Some(text),
            Err(e) => {
                eprintln!("{name}: cannot read {path}: {e}");
                return Err(ExitCode::from(2));
            }
        },
    };
    Ok((args, text))
}

/// Runs a server's future on a multi-thread runtime: exit status 0 when it ends well, 1 (its
/// error printed after `name`) when it fails or the runtime cannot start.
pub(super) fn run_to_exit(
    name: &str,
    future: impl std::future::Future<Output = Result<(), String>>,
) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{name}: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(future) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a node until a shutdown signal, then closes it cleanly.
pub async fn run(config: BrokerConfig) -> Result<(), String> {
    let log_dir = config.log_dir().to_string();
    let Some(listener) = config.listeners.first().cloned() else {
        return Err("listeners is empty".to_string());
    };
    if config.kraft.bootstrap_servers_without_voters {
        tracing::warn!(
            "controller.quorum.bootstrap.servers is set without controller.quorum.voters: \
             starting as a quorum of one with this node as its only voter (a dynamic quorum, \
             KIP-853, is not supported yet)"
        );
    }
    let disk = Disk::real(&log_dir).map_err(|e| format!("opening log.dirs {log_dir}: {e}"))?;
    let metadata_disk = match &config.kraft.metadata_log_dir {
        Some(dir) if dir != &log_dir => {
            Disk::real(dir).map_err(|e| format!("opening metadata.log.dir {dir}: {e}"))?
        }
        _ => disk.clone(),
    };
    let address = format!("{}:{}", listener.host, listener.port);
    let socket = TcpListener::bind(&address)
        .await
        .map_err(|e| format!("listening on {address}: {e}"))?;
    let bound = socket
        .local_addr()
        .map_err(|e| format!("listening on {address}: {e}"))?;
    let controller_address = controller_address(&config);
    let controller_socket = TcpListener::bind(&controller_address)
        .await
        .map_err(|e| format!("listening on {controller_address} (the controller listener): {e}"))?;
    let mut node = Node::start(config, disk, metadata_disk, Clock::new(), controller_socket)
        .await
        .map_err(|e| e.to_string())?;
    tracing::info!(listener = %bound, controller = %node.controller_address, log_dir = %log_dir, "samsa broker listening");
    let serving = Serving::start(&node.broker, socket);
    tokio::select! {
        biased;
        why = node.failed() => {
            // Kafka halts a broker whose only log directory failed: recovery at the next
            // start is the safe way back, a clean close is not possible.
            return Err(format!("stopping: {why} (see the error above); restart to recover"));
        }
        signal = wait_for_signal() => tracing::info!("{signal}: shutting down"),
    }
    serving.stop().await;
    node.shutdown()
        .await
        .map_err(|e| format!("closing logs: {e}"))?;
    tracing::info!("shut down cleanly");
    Ok(())
}

/// Where the controller listener binds: the `CONTROLLER` listener of `listeners`, else this
/// node's address in `controller.quorum.voters`, else an ephemeral port on 127.0.0.1 (a
/// quorum of one needs no fixed address).
pub fn controller_address(config: &BrokerConfig) -> String {
    if let Some(endpoint) = &config.kraft.controller_listener {
        return format!("{}:{}", endpoint.host, endpoint.port);
    }
    if let Some(address) = config.kraft.quorum_voters.get(&config.node_id) {
        return address.clone();
    }
    "127.0.0.1:0".to_string()
}

/// Waits for SIGINT or SIGTERM and names the one that came.
pub(super) async fn wait_for_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                biased;
                _ = crate::rt::signal::ctrl_c() => return "SIGINT",
                _ = term.recv() => return "SIGTERM",
            }
        }
    }
    let _ = crate::rt::signal::ctrl_c().await;
    "SIGINT"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_take_a_file_and_overrides_in_either_form() {
        let parsed = parse_args(&strings(&[
            "server.properties",
            "--override",
            "node.id=3",
            "--override=log.dirs=/tmp/x",
        ]))
        .unwrap();
        assert_eq!(parsed.file.as_deref(), Some("server.properties"));
        assert_eq!(
            parsed.overrides,
            vec![
                ("node.id".to_string(), "3".to_string()),
                ("log.dirs".to_string(), "/tmp/x".to_string())
            ]
        );
        assert!(parse_args(&strings(&["a", "b"])).is_err());
        assert!(parse_args(&strings(&["--override"])).is_err());
        assert!(parse_args(&strings(&["--overide", "x=1"])).is_err());
        assert!(parse_args(&strings(&["--override", "novalue"])).is_err());
    }
}
