//! The `samsa` command: `samsa broker [FILE] [--override key=value]...` runs a node;
//! `topics`, `produce` and `consume` are client tools over `crate::client` (shared plumbing in
//! `common`, the consumer's format strings in `format`). Data goes to stdout, logs and
//! errors to stderr, and a failure exits non-zero.

pub mod broker;
pub mod common;
pub mod consume;
pub mod consume_group;
pub mod controller;
pub mod format;
pub mod groups;
pub mod leader_election;
pub mod metadata_quorum;
pub mod perf;
pub mod perf_clean;
pub mod perf_commit;
pub mod produce;
pub mod storage;
pub mod topics;

use std::process::ExitCode;

const USAGE: &str = "usage: samsa <command> [args]

commands:
  broker [FILE] [--override key=value]...   run a broker node (Kafka's server.properties keys)
  controller [FILE] [--override key=value]...   run a metadata quorum voter (controller.properties)
  storage random-uuid|format [options]      a cluster id; meta.properties with it (kafka-storage.sh)
  perf produce|consume|commit [options]     load generators (see `samsa perf --help`)
  topics create|list|describe|alter|delete  administer topics
  produce --topic T [options]               write stdin lines as records
  consume --topic T [--group G] [options]   print records (as a group member with --group)
  groups list|describe|delete|reset-offsets|delete-offsets   administer consumer groups
  leader-election --election-type preferred|unclean (--all-topic-partitions | --topic T --partition N)
                                            elect partition leaders (kafka-leader-election.sh)
  metadata-quorum --bootstrap-server|--bootstrap-controller H:P describe --status|--replication
                                            the KRaft quorum (kafka-metadata-quorum.sh)
  version                                   print the version";

/// Runs the command line `args` (without the program name).
pub fn main(args: Vec<String>) -> ExitCode {
    match args.first().map(String::as_str) {
        Some("broker") => broker::main(&args[1..]),
        Some("controller") => controller::main(&args[1..]),
        Some("perf") => perf::main(&args[1..]),
        Some("storage") => storage::main(&args[1..]),
        Some("topics") => topics::main(&args[1..]),
        Some("produce") => produce::main(&args[1..]),
        Some("consume") => consume::main(&args[1..]),
        Some("groups") => groups::main(&args[1..]),
        Some("metadata-quorum") => metadata_quorum::main(&args[1..]),
        Some("leader-election") => leader_election::main(&args[1..]),
        Some("version" | "--version" | "-V") => {
            println!("samsa {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("help" | "--help" | "-h") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("samsa: unknown command '{other}'\n{USAGE}");
            ExitCode::from(2)
        }
        None => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Sends `tracing` output to stderr, filtered by `SAMSA_LOG` (default `info`).
pub fn init_logging() {
    init_logging_with("info");
}

/// Logging for the client tools: only warnings unless `SAMSA_LOG` says otherwise, so stderr
/// stays quiet when all goes well.
pub fn init_tool_logging() {
    init_logging_with("warn");
}

fn init_logging_with(default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SAMSA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
