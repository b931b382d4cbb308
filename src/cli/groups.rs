//! `samsa groups list|describe|delete|reset-offsets|delete-offsets`: consumer group
//! administration over the Rust client, in the manner of Kafka's `kafka-consumer-groups.sh`,
//! whose tables it prints (column names, `-` for a missing value, columns at least 15 wide).
//!
//! - `list`: one group id per line, sorted.
//! - `describe --group G...` (or `--all-groups`): per partition with a committed offset or
//!   an owner, GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST
//!   CLIENT-ID; `--members`: one line per member with its partition count; `--state`: the
//!   coordinator, the assignor, the state and the member count.
//! - `delete --group G...`: DeleteGroups; refused (NON_EMPTY_GROUP) while a group has members.
//! - `reset-offsets --group G (--topic T[:P,...]... | --all-topics) <how> [--execute]`: shows
//!   the new offsets; with `--execute` it commits them too, and only while the group has no
//!   members (Empty or not there), as Kafka requires. `<how>` is one of `--to-earliest`,
//!   `--to-latest`, `--to-offset N`, `--to-datetime YYYY-MM-DDTHH:MM:SS[.mmm][Z|±HH:MM]`,
//!   `--shift-by N`, `--by-duration PnDTnHnMnS`; every new offset is clamped into the
//!   partition's [log start, log end].
//! - `delete-offsets --group G --topic T[:P,...]...`: OffsetDelete, with a status per
//!   partition.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

use super::common::{self, Arg, Args, CliError};
use crate::client::group::offsets::TopicPartition;
use crate::client::Client;
use crate::protocol::consumer_protocol::ConsumerProtocolAssignment;
use crate::protocol::describe_groups::DescribedGroup;
use crate::protocol::error::ErrorCode;

pub const USAGE: &str =
    "usage: samsa groups <list|describe|delete|reset-offsets|delete-offsets> [options]

  list
  describe (--group G... | --all-groups) [--members | --state]
  delete --group G...
  reset-offsets --group G (--topic T[:P,P...]... | --all-topics) HOW [--execute | --dry-run]
      HOW: --to-earliest | --to-latest | --to-offset N | --shift-by N
           | --to-datetime YYYY-MM-DDTHH:MM:SS[.mmm][Z|+HH:MM|-HH:MM] (default UTC)
           | --by-duration PnDTnHnMnS (that long before now)
  delete-offsets --group G --topic T[:P,P...]...

options for every subcommand:
  -b, --bootstrap-server HOST:PORT[,HOST:PORT]   broker to ask (default 127.0.0.1:9092)

reset-offsets shows the new offsets and changes nothing without --execute; it is refused while
the group has members. New offsets are clamped to each partition's log start and end.";

/// Kafka's narrowest column.
pub const COLUMN_WIDTH_MIN: usize = 15;

/// How `reset-offsets` picks the new offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResetTo {
    Earliest,
    Latest,
    Offset(i64),
    ShiftBy(i64),
    /// A timestamp in milliseconds since the epoch.
    Datetime(i64),
    /// This many milliseconds before now.
    Duration(i64),
}

/// Which partitions a `--topic` names: all of the topic's, or these.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicArg {
    pub topic: String,
    pub partitions: Option<Vec<i32>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DescribeView {
    Offsets,
    Members,
    State,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    List,
    Describe {
        groups: Vec<String>,
        all_groups: bool,
        view: DescribeView,
    },
    Delete {
        groups: Vec<String>,
    },
    ResetOffsets {
        group: String,
        topics: Vec<TopicArg>,
        all_topics: bool,
        to: ResetTo,
        execute: bool,
    },
    DeleteOffsets {
        group: String,
        topics: Vec<TopicArg>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub bootstrap: Vec<String>,
    pub command: Command,
}

fn usage(text: impl Into<String>) -> CliError {
    CliError::Usage(text.into())
}

/// `T` or `T:P,P,...`.
fn topic_arg(name: &str, value: &str) -> Result<TopicArg, CliError> {
    let (topic, partitions) = match value.split_once(':') {
        None => (value, None),
        Some((topic, list)) => {
            let mut partitions = Vec::new();
            for p in list.split(',') {
                let p: i32 = common::parse_number(name, p)?;
                if p < 0 {
                    return Err(usage(format!("{name}: partition {p} is negative")));
                }
                partitions.push(p);
            }
            (topic, Some(partitions))
        }
    };
    if topic.is_empty() {
        return Err(usage(format!("{name}: '{value}' names no topic")));
    }
    Ok(TopicArg {
        topic: topic.to_owned(),
        partitions,
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `YYYY-MM-DDTHH:MM:SS[.mmm][Z|±HH:MM]` (Kafka's `--to-datetime`; UTC without a zone) in
/// milliseconds since the epoch.
pub fn parse_datetime(text: &str) -> Option<i64> {
    let (date, time) = text.split_once('T')?;
    let mut d = date.split('-');
    let (year, month, day): (i64, i64, i64) = (
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
        d.next()?.parse().ok()?,
    );
    if d.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (clock, offset_ms) = if let Some(clock) = time.strip_suffix('Z') {
        (clock, 0)
    } else if let Some(at) = time.rfind(['+', '-']) {
        let (clock, zone) = time.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, m) = zone[1..].split_once(':')?;
        let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
        if h > 23 || m > 59 {
            return None;
        }
        (clock, sign * (h * 3_600_000 + m * 60_000))
    } else {
        (time, 0)
    };
    let (hms, millis) = match clock.split_once('.') {
        Some((hms, frac)) if !frac.is_empty() && frac.len() <= 3 => {
            let scale = 10i64.pow(3 - u32::try_from(frac.len()).ok()?);
            (hms, frac.parse::<i64>().ok()? * scale)
        }
        Some(_) => return None,
        None => (clock, 0),
    };
    let mut t = hms.split(':');
    let (h, m, s): (i64, i64, i64) = (
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
        t.next()?.parse().ok()?,
    );
    if t.next().is_some() || h > 23 || m > 59 || s > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    Some(((days * 86_400 + h * 3_600 + m * 60 + s) * 1_000 + millis) - offset_ms)
}

/// An ISO-8601 duration of days, hours, minutes and seconds (`P1DT2H3M4.5S`, `PT15M`) in
/// milliseconds (Kafka's `--by-duration`).
pub fn parse_duration(text: &str) -> Option<i64> {
    let rest = text.strip_prefix('P')?;
    let (days_part, time_part) = match rest.split_once('T') {
        Some((d, t)) => (d, Some(t)),
        None => (rest, None),
    };
    let mut total = 0f64;
    let mut any = false;
    if !days_part.is_empty() {
        total += days_part.strip_suffix('D')?.parse::<f64>().ok()? * 86_400_000.0;
        any = true;
    }
    if let Some(mut t) = time_part {
        for (unit, ms) in [('H', 3_600_000.0), ('M', 60_000.0), ('S', 1_000.0)] {
            if let Some(at) = t.find(unit) {
                total += t[..at].parse::<f64>().ok()? * ms;
                t = &t[at + 1..];
                any = true;
            }
        }
        if !t.is_empty() {
            return None;
        }
    }
    // Below 2^53 ms the conversion is exact; anything longer is no real duration.
    (any && total.is_finite() && (0.0..9.0e15).contains(&total)).then_some(total as i64)
}

pub fn parse_args(args: &[String]) -> Result<Parsed, CliError> {
    let Some((sub, rest)) = args.split_first() else {
        return Err(usage("missing subcommand"));
    };
    let allowed: &[&str] = match sub.as_str() {
        "list" => &[],
        "describe" => &["--group", "--all-groups", "--members", "--state"],
        "delete" => &["--group"],
        "reset-offsets" => &[
            "--group",
            "--topic",
            "--all-topics",
            "--to-earliest",
            "--to-latest",
            "--to-offset",
            "--shift-by",
            "--to-datetime",
            "--by-duration",
            "--execute",
            "--dry-run",
        ],
        "delete-offsets" => &["--group", "--topic"],
        other => return Err(usage(format!("unknown subcommand '{other}'"))),
    };
    let mut bootstrap = common::bootstrap_list(common::BOOTSTRAP_DEFAULT)?;
    let mut groups: Vec<String> = Vec::new();
    let mut topics: Vec<TopicArg> = Vec::new();
    let mut all_groups = false;
    let mut all_topics = false;
    let mut views: Vec<(&str, DescribeView)> = Vec::new();
    let mut tos: Vec<(&str, ResetTo)> = Vec::new();
    let mut execute = false;
    let mut dry_run = false;
    let mut scan = Args::new(rest);
    while let Some(arg) = scan.next_arg() {
        let (name, inline) = match arg {
            Arg::Positional(value) => {
                return Err(usage(format!(
                    "unexpected argument '{value}' (groups are named with --group)"
                )))
            }
            Arg::Flag { name, inline } => (name, inline),
        };
        if common::is_bootstrap_flag(name) {
            bootstrap = common::bootstrap_list(scan.value(name, inline)?)?;
            continue;
        }
        if !allowed.contains(&name) {
            return Err(usage(format!("unknown option '{name}' for 'groups {sub}'")));
        }
        let switch = |flag: &mut bool| -> Result<(), CliError> {
            Args::switch(name, inline)?;
            *flag = true;
            Ok(())
        };
        match name {
            "--group" => {
                let group = scan.value(name, inline)?;
                if group.is_empty() {
                    return Err(usage("--group: the group id is empty"));
                }
                groups.push(group.to_owned());
            }
            "--topic" => topics.push(topic_arg(name, scan.value(name, inline)?)?),
            "--all-groups" => switch(&mut all_groups)?,
            "--all-topics" => switch(&mut all_topics)?,
            "--execute" => switch(&mut execute)?,
            "--dry-run" => switch(&mut dry_run)?,
            "--members" | "--state" | "--to-earliest" | "--to-latest" => {
                Args::switch(name, inline)?;
                match name {
                    "--members" => views.push((name, DescribeView::Members)),
                    "--state" => views.push((name, DescribeView::State)),
                    "--to-earliest" => tos.push((name, ResetTo::Earliest)),
                    _ => tos.push((name, ResetTo::Latest)),
                }
            }
            "--to-offset" => tos.push((name, ResetTo::Offset(scan.number(name, inline)?))),
            "--shift-by" => tos.push((name, ResetTo::ShiftBy(scan.number(name, inline)?))),
            "--to-datetime" | "--by-duration" => {
                let text = scan.value(name, inline)?;
                let parsed = if name == "--to-datetime" {
                    parse_datetime(text).map(ResetTo::Datetime)
                } else {
                    parse_duration(text).map(ResetTo::Duration)
                };
                let expected = if name == "--to-datetime" {
                    "YYYY-MM-DDTHH:MM:SS[.mmm][Z|+HH:MM|-HH:MM]"
                } else {
                    "an ISO-8601 duration such as P1DT2H3M4S"
                };
                let to =
                    parsed.ok_or_else(|| usage(format!("{name}: '{text}' is not {expected}")))?;
                tos.push((name, to));
            }
            _ => unreachable!("every allowed flag is matched"),
        }
    }
    let one_group = |groups: Vec<String>| -> Result<String, CliError> {
        let mut iter = groups.into_iter();
        match (iter.next(), iter.next()) {
            (Some(g), None) => Ok(g),
            (None, _) => Err(usage(format!("'groups {sub}' needs --group"))),
            (Some(_), Some(_)) => Err(usage(format!("'groups {sub}' takes one --group"))),
        }
    };
    let command = match sub.as_str() {
        "list" => Command::List,
        "describe" => {
            if groups.is_empty() != all_groups {
                return Err(usage(
                    "'groups describe' needs --group or --all-groups (one of them)",
                ));
            }
            let view = match views.as_slice() {
                [] => DescribeView::Offsets,
                [(_, view)] => view.clone(),
                [(a, _), (b, _), ..] => {
                    return Err(usage(format!("{a} and {b} are different views; give one")))
                }
            };
            Command::Describe {
                groups,
                all_groups,
                view,
            }
        }
        "delete" => {
            if groups.is_empty() {
                return Err(usage("'groups delete' needs --group"));
            }
            Command::Delete { groups }
        }
        "reset-offsets" => {
            let group = one_group(groups)?;
            if topics.is_empty() != all_topics {
                return Err(usage(
                    "'groups reset-offsets' needs --topic or --all-topics (one of them)",
                ));
            }
            let to = match tos.as_slice() {
                [(_, to)] => to.clone(),
                [] => {
                    return Err(usage(
                        "'groups reset-offsets' needs one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by, --by-duration",
                    ))
                }
                [(a, _), (b, _), ..] => {
                    return Err(usage(format!("{a} and {b} both say where to reset; give one")))
                }
            };
            if execute && dry_run {
                return Err(usage("--execute and --dry-run contradict each other"));
            }
            Command::ResetOffsets {
                group,
                topics,
                all_topics,
                to,
                execute,
            }
        }
        _ => {
            let group = one_group(groups)?;
            if topics.is_empty() {
                return Err(usage("'groups delete-offsets' needs --topic"));
            }
            Command::DeleteOffsets { group, topics }
        }
    };
    Ok(Parsed { bootstrap, command })
}

pub fn main(args: &[String]) -> ExitCode {
    common::tool_main("groups", USAGE, args, parse_args, run)
}

/// Kafka's tables: each column as wide as its widest cell (at least `min` wide, the last
/// not padded), after a blank line.
pub fn table(widths_min: &[usize], rows: &[Vec<String>]) -> String {
    let columns = widths_min.len();
    let mut widths = widths_min.to_vec();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let mut out = String::from("\n");
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 < row.len() {
                let _ = write!(line, "{cell:<w$} ", w = widths[i]);
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn print(text: &str) -> Result<(), CliError> {
    common::write_stdout(text.as_bytes())
}

fn dash(value: Option<i64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

pub async fn run(parsed: Parsed) -> Result<(), CliError> {
    let mut client = common::client(&parsed.bootstrap);
    match parsed.command {
        Command::List => {
            let groups = client
                .list_groups()
                .await
                .map_err(CliError::client("listing groups"))?;
            let mut out = String::new();
            for g in groups {
                out.push_str(&g.group_id);
                out.push('\n');
            }
            print(&out)
        }
        Command::Describe {
            groups,
            all_groups,
            view,
        } => {
            let groups = if all_groups {
                client
                    .list_groups()
                    .await
                    .map_err(CliError::client("listing groups"))?
                    .into_iter()
                    .map(|g| g.group_id)
                    .collect()
            } else {
                groups
            };
            let mut failed = Vec::new();
            for group in &groups {
                match describe(&mut client, group, &view).await {
                    Ok(text) => print(&text)?,
                    Err(e) => {
                        eprintln!("samsa groups: {e}");
                        failed.push(group.clone());
                    }
                }
            }
            if failed.is_empty() {
                Ok(())
            } else {
                Err(CliError::Failed(format!(
                    "could not describe {}",
                    quoted(&failed)
                )))
            }
        }
        Command::Delete { groups } => {
            let mut failed = Vec::new();
            for group in &groups {
                if let Err(e) = client.delete_group(group).await {
                    failed.push(format!("* Group '{group}' could not be deleted: {e}"));
                }
            }
            if failed.is_empty() {
                print(&format!(
                    "Deletion of requested consumer groups ({}) was successful.\n",
                    quoted(&groups)
                ))
            } else {
                Err(CliError::Failed(format!(
                    "deletion of some consumer groups failed:\n{}",
                    failed.join("\n")
                )))
            }
        }
        Command::ResetOffsets {
            group,
            topics,
            all_topics,
            to,
            execute,
        } => reset_offsets(&mut client, &group, &topics, all_topics, &to, execute).await,
        Command::DeleteOffsets { group, topics } => {
            let partitions = expand(&mut client, &topics).await?;
            let results = client
                .delete_group_offsets(&group, &partitions)
                .await
                .map_err(CliError::client(format!(
                    "deleting offsets of group '{group}'"
                )))?;
            let mut rows = vec![vec!["TOPIC".into(), "PARTITION".into(), "STATUS".into()]];
            let mut refused = 0;
            for ((topic, partition), code) in &results {
                let status = if *code == ErrorCode::NONE {
                    "Successful".to_string()
                } else {
                    refused += 1;
                    format!("Error: {code}")
                };
                rows.push(vec![topic.clone(), partition.to_string(), status]);
            }
            print(&table(&[30, COLUMN_WIDTH_MIN, COLUMN_WIDTH_MIN], &rows))?;
            if refused > 0 {
                return Err(CliError::Failed(format!(
                    "{refused} of {} offsets of group '{group}' were not deleted",
                    results.len()
                )));
            }
            Ok(())
        }
    }
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|g| format!("'{g}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A member's partitions from its assignment bytes (none if they are not the consumer
/// protocol's).
fn member_partitions(assignment: &bytes::Bytes) -> Vec<TopicPartition> {
    ConsumerProtocolAssignment::from_bytes(assignment.clone())
        .map(|a| {
            a.assigned_partitions
                .into_iter()
                .flat_map(|tp| {
                    let topic = tp.topic;
                    tp.partitions.into_iter().map(move |p| (topic.clone(), p))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The text `describe` prints for one group, or why it cannot.
async fn describe(
    client: &mut Client,
    group: &str,
    view: &DescribeView,
) -> Result<String, CliError> {
    let described = match client.describe_group(group).await {
        Ok(described) => described,
        Err(e) if e.code() == Some(ErrorCode::GROUP_ID_NOT_FOUND) => {
            return Err(CliError::Failed(format!(
                "consumer group '{group}' does not exist"
            )))
        }
        Err(e) => return Err(CliError::client(format!("describing group '{group}'"))(e)),
    };
    // Before Kafka 4 (DescribeGroups below v6) a missing group is described as Dead.
    if described.group_state == "Dead" {
        return Err(CliError::Failed(format!(
            "consumer group '{group}' does not exist"
        )));
    }
    let mut out = String::new();
    match described.group_state.as_str() {
        "Empty" if *view != DescribeView::State => {
            let _ = write!(out, "\nConsumer group '{group}' has no active members.\n");
        }
        "PreparingRebalance" | "CompletingRebalance" => {
            let _ = write!(out, "\nWarning: Consumer group '{group}' is rebalancing.\n");
        }
        _ => {}
    }
    match view {
        DescribeView::State => {
            let coordinator = client
                .find_coordinator(group)
                .await
                .map_err(CliError::client(format!(
                    "finding the coordinator of '{group}'"
                )))?;
            let rows = vec![
                vec![
                    "GROUP".into(),
                    "COORDINATOR (ID)".into(),
                    "ASSIGNMENT-STRATEGY".into(),
                    "STATE".into(),
                    "#MEMBERS".into(),
                ],
                vec![
                    group.to_owned(),
                    format!("{}  ({})", coordinator.addr, coordinator.node_id),
                    described.protocol_data.clone(),
                    described.group_state.clone(),
                    described.members.len().to_string(),
                ],
            ];
            out.push_str(&table(
                &[COLUMN_WIDTH_MIN, 25, 20, COLUMN_WIDTH_MIN, 0],
                &rows,
            ));
        }
        DescribeView::Members => {
            let mut rows = vec![vec![
                "GROUP".into(),
                "CONSUMER-ID".into(),
                "HOST".into(),
                "CLIENT-ID".into(),
                "#PARTITIONS".into(),
            ]];
            for m in &described.members {
                rows.push(vec![
                    group.to_owned(),
                    m.member_id.clone(),
                    m.client_host.clone(),
                    m.client_id.clone(),
                    member_partitions(&m.member_assignment).len().to_string(),
                ]);
            }
            if !described.members.is_empty() {
                out.push_str(&table(&[COLUMN_WIDTH_MIN; 5], &rows));
            }
        }
        DescribeView::Offsets => {
            out.push_str(&offsets_table(client, group, &described).await?);
        }
    }
    Ok(out)
}

/// The offsets view: every partition with a committed offset or an owner.
async fn offsets_table(
    client: &mut Client,
    group: &str,
    described: &DescribedGroup,
) -> Result<String, CliError> {
    let committed = client
        .group_offsets(group)
        .await
        .map_err(CliError::client(format!(
            "fetching the offsets of group '{group}'"
        )))?;
    let mut owners: BTreeMap<TopicPartition, usize> = BTreeMap::new();
    for (i, m) in described.members.iter().enumerate() {
        for tp in member_partitions(&m.member_assignment) {
            owners.insert(tp, i);
        }
    }
    let mut partitions: Vec<TopicPartition> = committed.keys().cloned().collect();
    partitions.extend(owners.keys().cloned());
    partitions.sort();
    partitions.dedup();
    let mut rows = vec![[
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    .map(String::from)
    .to_vec()];
    for tp in &partitions {
        let current = committed.get(tp).copied().flatten();
        let end = client
            .list_offsets(&tp.0, tp.1, -1)
            .await
            .map(|(offset, _)| offset)
            .ok();
        let lag = match (current, end) {
            (Some(c), Some(e)) => Some((e - c).max(0)),
            _ => None,
        };
        let owner = owners.get(tp).map(|&i| &described.members[i]);
        rows.push(vec![
            group.to_owned(),
            tp.0.clone(),
            tp.1.to_string(),
            dash(current),
            dash(end),
            dash(lag),
            owner.map_or("-".into(), |m| m.member_id.clone()),
            owner.map_or("-".into(), |m| m.client_host.clone()),
            owner.map_or("-".into(), |m| m.client_id.clone()),
        ]);
    }
    let mut widths = [COLUMN_WIDTH_MIN; 9];
    widths[2] = 10;
    Ok(table(&widths, &rows))
}

/// The partitions `--topic` arguments name (all of a topic's when none are listed).
async fn expand(client: &mut Client, topics: &[TopicArg]) -> Result<Vec<TopicPartition>, CliError> {
    let mut out = Vec::new();
    for arg in topics {
        match &arg.partitions {
            Some(list) => out.extend(list.iter().map(|&p| (arg.topic.clone(), p))),
            None => {
                let described = client
                    .describe_topics(&[arg.topic.as_str()])
                    .await
                    .map_err(CliError::client(format!(
                        "looking up topic '{}'",
                        arg.topic
                    )))?;
                match described.iter().find(|t| t.name == arg.topic) {
                    Some(t) if t.error == ErrorCode::NONE => {
                        out.extend(
                            t.partitions
                                .iter()
                                .map(|p| (arg.topic.clone(), p.partition)),
                        );
                    }
                    _ => {
                        return Err(CliError::Failed(format!(
                            "topic '{}' does not exist",
                            arg.topic
                        )))
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

async fn reset_offsets(
    client: &mut Client,
    group: &str,
    topics: &[TopicArg],
    all_topics: bool,
    to: &ResetTo,
    execute: bool,
) -> Result<(), CliError> {
    let state = match client.describe_group(group).await {
        Ok(described) => described.group_state,
        // No group yet: its offsets can be set.
        Err(e) if e.code() == Some(ErrorCode::GROUP_ID_NOT_FOUND) => "Dead".to_string(),
        Err(e) => return Err(CliError::client(format!("describing group '{group}'"))(e)),
    };
    if !matches!(state.as_str(), "Empty" | "Dead") {
        return Err(CliError::Failed(format!(
            "assignments can only be reset if the group '{group}' is inactive, but the current state is {state}"
        )));
    }
    let committed = client
        .group_offsets(group)
        .await
        .map_err(CliError::client(format!(
            "fetching the offsets of group '{group}'"
        )))?;
    let partitions = if all_topics {
        committed.keys().cloned().collect()
    } else {
        expand(client, topics).await?
    };
    let now_ms = crate::rt::clock::Clock::new().now_ms();
    let mut plan: BTreeMap<TopicPartition, i64> = BTreeMap::new();
    for tp in &partitions {
        let earliest = list_offset(client, tp, -2).await?;
        let latest = list_offset(client, tp, -1).await?;
        let wanted = match to {
            ResetTo::Earliest => earliest,
            ResetTo::Latest => latest,
            ResetTo::Offset(n) => *n,
            ResetTo::ShiftBy(n) => match committed.get(tp).copied().flatten() {
                Some(current) => current.saturating_add(*n),
                None => {
                    return Err(CliError::Failed(format!(
                        "{}-{} has no committed offset to shift",
                        tp.0, tp.1
                    )))
                }
            },
            ResetTo::Datetime(ts) => at_time(client, tp, *ts, latest).await?,
            ResetTo::Duration(ms) => {
                at_time(client, tp, now_ms.saturating_sub(*ms), latest).await?
            }
        };
        plan.insert(tp.clone(), wanted.clamp(earliest, latest.max(earliest)));
    }
    if execute {
        let results = client
            .alter_group_offsets(group, &plan)
            .await
            .map_err(CliError::client(format!(
                "committing the offsets of group '{group}'"
            )))?;
        if let Some((tp, code)) = results.iter().find(|(_, c)| **c != ErrorCode::NONE) {
            return Err(CliError::Failed(format!(
                "resetting {}-{} of group '{group}' failed: {code}",
                tp.0, tp.1
            )));
        }
    }
    let mut rows = vec![["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
        .map(String::from)
        .to_vec()];
    for ((topic, partition), offset) in &plan {
        rows.push(vec![
            group.to_owned(),
            topic.clone(),
            partition.to_string(),
            offset.to_string(),
        ]);
    }
    print(&table(&[30, 30, 10, COLUMN_WIDTH_MIN], &rows))?;
    if !execute {
        eprintln!("samsa groups: a dry run: no offset changed (add --execute to reset them)");
    }
    Ok(())
}

async fn list_offset(
    client: &mut Client,
    tp: &TopicPartition,
    timestamp: i64,
) -> Result<i64, CliError> {
    client
        .list_offsets(&tp.0, tp.1, timestamp)
        .await
        .map(|(offset, _)| offset)
        .map_err(CliError::client(format!(
            "looking up offsets of {}-{}",
            tp.0, tp.1
        )))
}

/// The first offset at or after `timestamp_ms`, or `latest` when no record is that late.
async fn at_time(
    client: &mut Client,
    tp: &TopicPartition,
    timestamp_ms: i64,
    latest: i64,
) -> Result<i64, CliError> {
    match list_offset(client, tp, timestamp_ms.max(0)).await? {
        -1 => Ok(latest),
        offset => Ok(offset),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Parsed, String> {
        common::parse_strs(parse_args, args)
    }

    #[test]
    fn cli_groups_parses_each_subcommand() {
        assert_eq!(parse(&["list"]).unwrap().command, Command::List);
        assert_eq!(
            parse(&["describe", "--group", "a", "--group=b", "--members"])
                .unwrap()
                .command,
            Command::Describe {
                groups: vec!["a".into(), "b".into()],
                all_groups: false,
                view: DescribeView::Members
            }
        );
        assert_eq!(
            parse(&[
                "reset-offsets",
                "--group",
                "g",
                "--topic",
                "t:0,2",
                "--topic",
                "u",
                "--shift-by",
                "-5",
                "--execute"
            ])
            .unwrap()
            .command,
            Command::ResetOffsets {
                group: "g".into(),
                topics: vec![
                    TopicArg {
                        topic: "t".into(),
                        partitions: Some(vec![0, 2])
                    },
                    TopicArg {
                        topic: "u".into(),
                        partitions: None
                    }
                ],
                all_topics: false,
                to: ResetTo::ShiftBy(-5),
                execute: true
            }
        );
    }

    #[test]
    fn cli_groups_refuses_bad_command_lines_naming_the_problem() {
        let cases: &[(&[&str], &str)] = &[
            (&["describe"], "'groups describe' needs --group or --all-groups (one of them)"),
            (
                &["describe", "--group", "g", "--members", "--state"],
                "--members and --state are different views; give one",
            ),
            (
                &["reset-offsets", "--group", "g", "--all-topics"],
                "'groups reset-offsets' needs one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by, --by-duration",
            ),
            (
                &["reset-offsets", "--group", "g", "--topic", "t", "--to-earliest", "--to-latest"],
                "--to-earliest and --to-latest both say where to reset; give one",
            ),
            (
                &["reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"],
                "--topic: 'x' is not a valid number",
            ),
            (
                &["reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"],
                "--to-datetime: 'yesterday' is not YYYY-MM-DDTHH:MM:SS[.mmm][Z|+HH:MM|-HH:MM]",
            ),
            (&["delete", "--topic", "t"], "unknown option '--topic' for 'groups delete'"),
            (&["delete", "g"], "unexpected argument 'g' (groups are named with --group)"),
            (&["rebalance"], "unknown subcommand 'rebalance'"),
        ];
        for (args, want) in cases {
            assert_eq!(parse(args).unwrap_err(), *want, "{args:?}");
        }
    }

    #[test]
    fn datetimes_and_durations_parse_as_kafka_reads_them() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00"), Some(0));
        assert_eq!(
            parse_datetime("2023-11-14T22:13:20.000Z"),
            Some(1_700_000_000_000)
        );
        assert_eq!(
            parse_datetime("2023-11-14T23:13:20.5+01:00"),
            Some(1_700_000_000_500)
        );
        assert_eq!(
            parse_datetime("2024-02-29T12:00:00-02:30"),
            Some(1_709_217_000_000)
        );
        for bad in [
            "2023-13-01T00:00:00",
            "2023-11-14",
            "2023-11-14T25:00:00",
            "2023-11-14T1:2",
        ] {
            assert_eq!(parse_datetime(bad), None, "{bad}");
        }
        assert_eq!(parse_duration("PT15M"), Some(900_000));
        assert_eq!(parse_duration("P1DT2H3M4.5S"), Some(93_784_500));
        assert_eq!(parse_duration("P2D"), Some(172_800_000));
        for bad in ["15M", "P", "PT", "PT5X", "P-1D"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn tables_pad_every_column_but_the_last_to_its_widest_cell() {
        let rows = vec![
            vec!["GROUP".to_string(), "TOPIC".into(), "LAG".into()],
            vec!["a-rather-long-group-id".to_string(), "t".into(), "5".into()],
        ];
        assert_eq!(
            table(&[15, 15, 15], &rows),
            "\nGROUP                  TOPIC           LAG\na-rather-long-group-id t               5\n"
        );
    }
}
