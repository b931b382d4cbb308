//! What the client tools (`topics`, `produce`, `consume`) share: hand-rolled argument
//! scanning (`--flag value`, `--flag=value`, `--` ends the flags), the `--bootstrap-server`
//! option, the [`CliError`] every tool fails with, the exit codes, and running an async tool
//! on a runtime of its own.
//!
//! Conventions (those of Kafka's tools and kcat): data goes to stdout; logs, warnings and
//! errors go to stderr; a usage error exits 2, any other failure 1, and a stdout closed by
//! its reader (`| head`) ends the tool quietly with success.

use std::fmt;
use std::future::Future;
use std::io;
use std::process::ExitCode;
use std::str::FromStr;

use crate::client::{Client, ClientConfig, ClientError};

/// Where the tools look for a broker unless told otherwise.
pub const BOOTSTRAP_DEFAULT: &str = "127.0.0.1:9092";

/// The client id the tools present to the broker (it shows in the broker's logs).
pub const CLIENT_ID: &str = "samsa-cli";

/// Why a tool failed.
#[derive(Debug)]
pub enum CliError {
    /// The command line is wrong; the tool's usage follows the message. Exit code 2.
    Usage(String),
    /// A client operation failed; `context` says what the tool was doing.
    Client {
        context: String,
        source: ClientError,
    },
    /// The operation ran but did not succeed (a topic is missing, records failed).
    Failed(String),
    /// Writing the output failed (other than the reader going away).
    Output(io::Error),
}

impl CliError {
    pub fn client(context: impl Into<String>) -> impl FnOnce(ClientError) -> CliError {
        let context = context.into();
        move |source| CliError::Client { context, source }
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Usage(_) => ExitCode::from(2),
            _ => ExitCode::FAILURE,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Usage(message) | CliError::Failed(message) => f.write_str(message),
            CliError::Client { context, source } => write!(f, "{context}: {source}"),
            CliError::Output(source) => write!(f, "writing to stdout: {source}"),
        }
    }
}

impl std::error::Error for CliError {}

/// One command-line argument as the scanner sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg<'a> {
    /// `--name`, `--name=value` (with `inline`), or a short `-x`.
    Flag {
        name: &'a str,
        inline: Option<&'a str>,
    },
    Positional(&'a str),
}

/// Scans arguments one at a time; a flag's value is taken on demand with [`Args::value`], so
/// a value may itself start with `-` (`--offset -1`, `--key-separator -`).
#[derive(Debug)]
pub struct Args<'a> {
    rest: std::slice::Iter<'a, String>,
    flags_ended: bool,
}

impl<'a> Args<'a> {
    pub fn new(args: &'a [String]) -> Args<'a> {
        Args {
            rest: args.iter(),
            flags_ended: false,
        }
    }

    pub fn next_arg(&mut self) -> Option<Arg<'a>> {
        let arg = self.rest.next()?.as_str();
        if self.flags_ended {
            return Some(Arg::Positional(arg));
        }
        if arg == "--" {
            self.flags_ended = true;
            return self.next_arg();
        }
        if let Some(long) = arg.strip_prefix("--") {
            return Some(match long.split_once('=') {
                Some((name, value)) => Arg::Flag {
                    name: &arg[..name.len() + 2],
                    inline: Some(value),
                },
                None => Arg::Flag {
                    name: arg,
                    inline: None,
                },
            });
        }
        if arg.len() > 1 && arg.starts_with('-') {
            return Some(Arg::Flag {
                name: arg,
                inline: None,
            });
        }
        Some(Arg::Positional(arg))
    }

    /// The value of flag `name`: the inline one, or the next argument.
    pub fn value(&mut self, name: &str, inline: Option<&'a str>) -> Result<&'a str, CliError> {
        if let Some(value) = inline {
            return Ok(value);
        }
        self.rest
            .next()
            .map(String::as_str)
            .ok_or_else(|| CliError::Usage(format!("{name} needs a value")))
    }

    /// The next flag as `(name, inline value)`, refusing a positional argument: for the tools
    /// that take flags only.
    pub fn next_flag(&mut self) -> Result<Option<(&'a str, Option<&'a str>)>, CliError> {
        match self.next_arg() {
            None => Ok(None),
            Some(Arg::Positional(value)) => {
                Err(CliError::Usage(format!("unexpected argument '{value}'")))
            }
            Some(Arg::Flag { name, inline }) => Ok(Some((name, inline))),
        }
    }

    /// Checks that switch `name` (a flag without a value) was not given one.
    pub fn switch(name: &str, inline: Option<&str>) -> Result<(), CliError> {
        match inline {
            Some(_) => Err(CliError::Usage(format!("{name} takes no value"))),
            None => Ok(()),
        }
    }

    /// The value of flag `name` as a partition index, refused when negative.
    pub fn partition(&mut self, name: &str, inline: Option<&'a str>) -> Result<i32, CliError> {
        let p: i32 = self.number(name, inline)?;
        if p < 0 {
            return Err(CliError::Usage(format!("{name}: {p} is negative")));
        }
        Ok(p)
    }

    /// The value of flag `name` parsed as a number.
    pub fn number<T: FromStr>(
        &mut self,
        name: &str,
        inline: Option<&'a str>,
    ) -> Result<T, CliError> {
        let value = self.value(name, inline)?;
        parse_number(name, value)
    }
}

pub fn parse_number<T: FromStr>(name: &str, value: &str) -> Result<T, CliError> {
    value
        .parse()
        .map_err(|_| CliError::Usage(format!("{name}: '{value}' is not a valid number")))
}

/// Splits `key=value` (the value may be empty or contain '=').
pub fn key_value<'a>(name: &str, value: &'a str) -> Result<(&'a str, &'a str), CliError> {
    match value.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key, value)),
        _ => Err(CliError::Usage(format!(
            "{name}: '{value}' is not of the form key=value"
        ))),
    }
}

/// Writes `bytes` to stdout and flushes it: the tools' data output, written as it comes.
pub fn write_stdout(bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(CliError::Output)
}

/// The `--topic` value, which the tools that take one require.
pub fn required_topic(topic: Option<String>) -> Result<String, CliError> {
    topic.ok_or_else(|| CliError::Usage("--topic is required".into()))
}

/// True for the flags every tool takes for the broker address.
pub fn is_bootstrap_flag(name: &str) -> bool {
    matches!(name, "--bootstrap-server" | "-b")
}

/// True for `-h` and `--help`.
pub fn is_help(args: &[String]) -> bool {
    args.iter()
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help")
}

/// The `--bootstrap-server` value as a list of addresses (comma-separated, like Kafka's).
pub fn bootstrap_list(value: &str) -> Result<Vec<String>, CliError> {
    let addrs: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect();
    if addrs.is_empty() || addrs.iter().any(|a| !a.contains(':')) {
        return Err(CliError::Usage(format!(
            "--bootstrap-server: '{value}' is not a list of host:port"
        )));
    }
    Ok(addrs)
}

/// The client settings of the tools. Topics are never created as a side effect of a lookup:
/// a typo in a topic name is an error, not a new topic.
pub fn client_config(bootstrap: &[String]) -> ClientConfig {
    ClientConfig {
        bootstrap: bootstrap.to_vec(),
        client_id: CLIENT_ID.into(),
        allow_auto_topic_creation: false,
        ..ClientConfig::default()
    }
}

/// A client with [`client_config`].
pub fn client(bootstrap: &[String]) -> Client {
    Client::new(client_config(bootstrap))
}

/// A client tool's `main`: prints the usage for `--help`, starts logging, parses `args` with
/// `parse` (a usage error is reported with the usage) and runs `run` on the parsed command
/// line with [`run`].
pub fn tool_main<P, F>(
    tool: &str,
    usage: &str,
    args: &[String],
    parse: impl FnOnce(&[String]) -> Result<P, CliError>,
    run_parsed: impl FnOnce(P) -> F,
) -> ExitCode
where
    F: Future<Output = Result<(), CliError>>,
{
    if is_help(args) {
        println!("{usage}");
        return ExitCode::SUCCESS;
    }
    super::init_tool_logging();
    let parsed = match parse(args) {
        Ok(parsed) => parsed,
        Err(e) => return report(tool, usage, Err(e)),
    };
    run(tool, usage, run_parsed(parsed))
}

/// Runs a tool's future on a current-thread runtime and turns its outcome into an exit code,
/// printing a failure as `samsa <tool>: <message>` on stderr (with the usage after a usage
/// error).
pub fn run<F>(tool: &str, usage: &str, future: F) -> ExitCode
where
    F: Future<Output = Result<(), CliError>>,
{
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("samsa {tool}: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(future);
    // A blocking stdin reader may still wait for input nobody will give; do not wait for it.
    runtime.shutdown_background();
    report(tool, usage, result)
}

/// The exit code of `result`, printing the error (and the usage after a usage error).
pub fn report(tool: &str, usage: &str, result: Result<(), CliError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Output(e)) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e @ CliError::Usage(_)) => {
            eprintln!("samsa {tool}: {e}\n\n{usage}");
            e.exit_code()
        }
        Err(e) => {
            eprintln!("samsa {tool}: {e}");
            e.exit_code()
        }
    }
}

/// For the tools' tests: `parse` on `args`, with the error as its message.
#[cfg(test)]
pub fn parse_strs<P>(
    parse: impl FnOnce(&[String]) -> Result<P, CliError>,
    args: &[&str],
) -> Result<P, String> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    parse(&args).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cli_args_scan_flags_values_and_positionals() {
        let argv = strings(&[
            "--topic=t",
            "-b",
            "h:1",
            "name",
            "--offset",
            "-5",
            "--",
            "--x",
        ]);
        let mut args = Args::new(&argv);
        assert_eq!(
            args.next_arg(),
            Some(Arg::Flag {
                name: "--topic",
                inline: Some("t")
            })
        );
        let Some(Arg::Flag { name, inline }) = args.next_arg() else {
            panic!("expected -b");
        };
        assert_eq!(name, "-b");
        assert_eq!(args.value(name, inline).ok(), Some("h:1"));
        assert_eq!(args.next_arg(), Some(Arg::Positional("name")));
        let Some(Arg::Flag { name, inline }) = args.next_arg() else {
            panic!("expected --offset");
        };
        assert_eq!(args.number::<i64>(name, inline).ok(), Some(-5));
        assert_eq!(args.next_arg(), Some(Arg::Positional("--x")));
        assert_eq!(args.next_arg(), None);
        let err = args.value("--partition", None).unwrap_err();
        assert_eq!(err.to_string(), "--partition needs a value");
    }

    #[test]
    fn cli_values_are_checked_with_messages_naming_the_flag() {
        let err = parse_number::<i32>("--partitions", "three").unwrap_err();
        assert_eq!(
            err.to_string(),
            "--partitions: 'three' is not a valid number"
        );
        assert_eq!(key_value("--config", "a=b=c").ok(), Some(("a", "b=c")));
        assert_eq!(key_value("--config", "a=").ok(), Some(("a", "")));
        assert!(key_value("--config", "=b").is_err());
        assert!(key_value("--config", "ab").is_err());
        assert_eq!(
            bootstrap_list("a:1, b:2").ok(),
            Some(vec!["a:1".to_owned(), "b:2".to_owned()])
        );
        assert!(bootstrap_list("nohost").is_err());
        assert!(bootstrap_list("").is_err());
        assert!(is_help(&strings(&["x", "--help"])));
        assert!(!is_help(&strings(&["--", "--help"])));
    }
}
