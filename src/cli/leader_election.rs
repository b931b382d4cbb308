//! `samsa leader-election --bootstrap-server HOST:PORT --election-type preferred|unclean
//! (--all-topic-partitions | --topic T --partition P)`: Kafka's `kafka-leader-election.sh`.
//! This module owns that tool's command line, its one ElectLeaders (API 43) exchange and its
//! report.
//!
//! Output format: that of Kafka's `LeaderElectionCommand`: `Successfully completed leader
//! election (PREFERRED) for partitions t-0, t-1` for the partitions elected, `Valid replica
//! already elected for partitions t-2` for those that needed none (ELECTION_NOT_NEEDED), and
//! for each failure `Error completing leader election (PREFERRED) for partition: t-3: MESSAGE`
//! on stdout; then the tool fails (exit 1) with `N replica(s) could not be elected`. The
//! election type is accepted in any case (Kafka's `ElectionType.valueOf` of the upper-cased
//! value). As Kafka's tool requires, exactly one of `--all-topic-partitions` and `--topic`
//! is given, and `--partition` goes with `--topic` and only with it. `--path-to-json-file`
//! is not supported yet: the tool says so.

use std::process::ExitCode;

use super::common::{self, Arg, Args, CliError};
use crate::client::error::ClientError;
use crate::protocol::error::ErrorCode;

pub const USAGE: &str = "usage: samsa leader-election --bootstrap-server HOST:PORT --election-type preferred|unclean (--all-topic-partitions | --topic TOPIC --partition N)

Elects partition leaders, as Kafka's kafka-leader-election.sh does.

  --bootstrap-server, -b HOST:PORT[,...]   brokers to ask (the request goes to the controller)
  --election-type preferred|unclean        preferred: the first replica of the assignment, if
                                           it is in sync; unclean: any live replica for a
                                           partition without a leader (records may be lost)
  --all-topic-partitions                   every partition of every topic
  --topic TOPIC --partition N              one partition";

/// The election types, as the wire numbers them and Kafka's tool prints them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    Preferred,
    Unclean,
}

impl Election {
    fn wire(self) -> i8 {
        match self {
            Election::Preferred => 0,
            Election::Unclean => 1,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Election::Preferred => "PREFERRED",
            Election::Unclean => "UNCLEAN",
        }
    }
}

/// Which partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    One { topic: String, partition: i32 },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub bootstrap: Vec<String>,
    pub election: Election,
    pub scope: Scope,
}

fn usage(text: impl Into<String>) -> CliError {
    CliError::Usage(text.into())
}

pub fn parse_args(args: &[String]) -> Result<Parsed, CliError> {
    let mut bootstrap = None;
    let mut election = None;
    let (mut all, mut topic, mut partition) = (false, None, None);
    let mut scan = Args::new(args);
    while let Some(arg) = scan.next_arg() {
        let (name, inline) = match arg {
            Arg::Positional(value) => return Err(usage(format!("unexpected argument '{value}'"))),
            Arg::Flag { name, inline } => (name, inline),
        };
        match name {
            _ if common::is_bootstrap_flag(name) => {
                bootstrap = Some(common::bootstrap_list(scan.value(name, inline)?)?);
            }
            "--election-type" => {
                let value = scan.value(name, inline)?;
                election = Some(match value.to_ascii_uppercase().as_str() {
                    "PREFERRED" => Election::Preferred,
                    "UNCLEAN" => Election::Unclean,
                    _ => {
                        return Err(usage(format!(
                            "--election-type: '{value}' is not preferred or unclean"
                        )))
                    }
                });
            }
            "--all-topic-partitions" => {
                Args::switch(name, inline)?;
                all = true;
            }
            "--topic" => topic = Some(scan.value(name, inline)?.to_string()),
            "--partition" => partition = Some(scan.partition(name, inline)?),
            "--path-to-json-file" => {
                return Err(usage(
                    "--path-to-json-file is not supported yet: name one partition with --topic and --partition, or use --all-topic-partitions",
                ))
            }
            other => return Err(usage(format!("unknown option '{other}'"))),
        }
    }
    let bootstrap = bootstrap.ok_or_else(|| usage("--bootstrap-server is required"))?;
    let election = election.ok_or_else(|| usage("--election-type is required"))?;
    let scope = match (all, topic, partition) {
        (true, None, None) => Scope::All,
        (false, Some(topic), Some(partition)) => Scope::One { topic, partition },
        (false, Some(_), None) => return Err(usage("--partition is required with --topic")),
        (_, None, Some(_)) => return Err(usage("--partition goes with --topic")),
        (true, Some(_), _) => {
            return Err(usage(
                "--topic and --all-topic-partitions cannot be given together",
            ))
        }
        (false, None, None) => {
            return Err(usage(
                "one of --all-topic-partitions or --topic is required",
            ))
        }
    };
    Ok(Parsed {
        bootstrap,
        election,
        scope,
    })
}

pub fn main(args: &[String]) -> ExitCode {
    common::tool_main("leader-election", USAGE, args, parse_args, run)
}

pub async fn run(parsed: Parsed) -> Result<(), CliError> {
    let mut client = common::client(&parsed.bootstrap);
    let partitions = match &parsed.scope {
        Scope::All => None,
        Scope::One { topic, partition } => Some(vec![(topic.clone(), vec![*partition])]),
    };
    let outcomes = client
        .elect_leaders(parsed.election.wire(), partitions)
        .await
        .map_err(CliError::client("electing leaders"))?;
    let (text, failed) = report(parsed.election, &outcomes);
    common::write_stdout(text.as_bytes())?;
    if failed > 0 {
        return Err(CliError::Failed(format!(
            "{failed} replica(s) could not be elected"
        )));
    }
    Ok(())
}

/// The tool's report of the outcomes, and how many failed.
pub fn report(
    election: Election,
    outcomes: &[(String, i32, Result<(), ClientError>)],
) -> (String, usize) {
    let mut succeeded = Vec::new();
    let mut not_needed = Vec::new();
    let mut failed = Vec::new();
    for (topic, partition, result) in outcomes {
        let name = format!("{topic}-{partition}");
        match result {
            Ok(()) => succeeded.push(name),
            Err(ClientError::Kafka { code, .. }) if *code == ErrorCode::ELECTION_NOT_NEEDED => {
                not_needed.push(name)
            }
            Err(e) => failed.push((name, e.to_string())),
        }
    }
    let mut out = String::new();
    if !succeeded.is_empty() {
        out.push_str(&format!(
            "Successfully completed leader election ({}) for partitions {}\n",
            election.name(),
            succeeded.join(", ")
        ));
    }
    if !not_needed.is_empty() {
        out.push_str(&format!(
            "Valid replica already elected for partitions {}\n",
            not_needed.join(", ")
        ));
    }
    for (name, why) in &failed {
        out.push_str(&format!(
            "Error completing leader election ({}) for partition: {name}: {why}\n",
            election.name()
        ));
    }
    (out, failed.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::common::parse_strs;

    #[test]
    fn the_command_line_is_kafkas() {
        let parsed = parse_strs(
            parse_args,
            &[
                "--bootstrap-server",
                "h:1",
                "--election-type",
                "PREFERRED",
                "--topic",
                "t",
                "--partition",
                "3",
            ],
        )
        .unwrap();
        assert_eq!(parsed.election, Election::Preferred);
        assert_eq!(
            parsed.scope,
            Scope::One {
                topic: "t".into(),
                partition: 3
            }
        );
        let all = parse_strs(
            parse_args,
            &[
                "-b",
                "h:1",
                "--election-type=unclean",
                "--all-topic-partitions",
            ],
        )
        .unwrap();
        assert_eq!((all.election, all.scope), (Election::Unclean, Scope::All));
        for (args, why) in [
            (
                &["-b", "h:1", "--all-topic-partitions"][..],
                "--election-type is required",
            ),
            (
                &[
                    "-b",
                    "h:1",
                    "--election-type",
                    "fastest",
                    "--all-topic-partitions",
                ][..],
                "not preferred or unclean",
            ),
            (
                &["-b", "h:1", "--election-type", "preferred"][..],
                "one of --all-topic-partitions or --topic",
            ),
            (
                &["-b", "h:1", "--election-type", "preferred", "--topic", "t"][..],
                "--partition is required",
            ),
            (
                &[
                    "-b",
                    "h:1",
                    "--election-type",
                    "preferred",
                    "--partition",
                    "1",
                    "--all-topic-partitions",
                ][..],
                "--partition goes with --topic",
            ),
            (
                &[
                    "-b",
                    "h:1",
                    "--election-type",
                    "preferred",
                    "--topic",
                    "t",
                    "--partition",
                    "1",
                    "--all-topic-partitions",
                ][..],
                "cannot be given together",
            ),
            (
                &["--election-type", "preferred", "--all-topic-partitions"][..],
                "--bootstrap-server is required",
            ),
            (
                &[
                    "-b",
                    "h:1",
                    "--election-type",
                    "preferred",
                    "--path-to-json-file",
                    "x.json",
                ][..],
                "not supported yet",
            ),
        ] {
            let e = parse_strs(parse_args, args).unwrap_err();
            assert!(e.contains(why), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_report_is_kafkas() {
        let kafka = |code: ErrorCode, partition: i32| ClientError::Kafka {
            code,
            message: Some("why".into()),
            topic: "t".into(),
            partition,
        };
        let outcomes = vec![
            ("t".to_string(), 0, Ok(())),
            ("t".to_string(), 1, Ok(())),
            (
                "t".to_string(),
                2,
                Err(kafka(ErrorCode::ELECTION_NOT_NEEDED, 2)),
            ),
            (
                "t".to_string(),
                3,
                Err(kafka(ErrorCode::PREFERRED_LEADER_NOT_AVAILABLE, 3)),
            ),
        ];
        let (text, failed) = report(Election::Preferred, &outcomes);
        assert_eq!(failed, 1);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "Successfully completed leader election (PREFERRED) for partitions t-0, t-1"
        );
        assert_eq!(lines[1], "Valid replica already elected for partitions t-2");
        assert!(
            lines[2]
                .starts_with("Error completing leader election (PREFERRED) for partition: t-3: "),
            "{}",
            lines[2]
        );
        assert_eq!(lines.len(), 3);
    }
}
