//! The `samsa` command: `samsa broker [FILE] [--override key=value]...` runs a node; more
//! tools (topics, produce, consume, perf) arrive with step 4. Data goes to stdout, logs and
//! errors to stderr, and a failure exits non-zero.

pub mod broker;
pub mod perf;

use std::process::ExitCode;

const USAGE: &str = "usage: samsa <command> [args]

commands:
  broker [FILE] [--override key=value]...   run a broker node (Kafka's server.properties keys)
  perf produce|consume [options]            load generators (see `samsa perf --help`)
  version                                   print the version";

/// Runs the command line `args` (without the program name).
pub fn main(args: Vec<String>) -> ExitCode {
    match args.first().map(String::as_str) {
        Some("broker") => broker::main(&args[1..]),
        Some("perf") => perf::main(&args[1..]),
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
    let filter = tracing_subscriber::EnvFilter::try_from_env("SAMSA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
