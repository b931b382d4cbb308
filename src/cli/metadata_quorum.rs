//! `samsa metadata-quorum (--bootstrap-server | --bootstrap-controller) HOST:PORT[,...]
//! describe (--status | --replication [--human-readable])`: Kafka's `kafka-metadata-quorum.sh
//! describe`. This module owns the command line of that tool, the one DescribeQuorum (API 55)
//! exchange it makes for `__cluster_metadata` partition 0, and the two views of the answer.
//!
//! Output format: that of Kafka 4.1's `MetadataQuorumCommand` (apache/kafka, `tools/`; the
//! same in 4.0 and trunk), with `ToolsUtils.prettyPrintTable` for the table:
//! - `--status`: one `Name:` line per field, the value starting at column 25 (`ClusterId`,
//!   `LeaderId`, `LeaderEpoch`, `HighWatermark`, `MaxFollowerLag`, `MaxFollowerLagTimeMs`,
//!   `CurrentVoters`, `CurrentObservers`). The replica lists are Kafka 3.9+'s
//!   `[{"id": 1, "directoryId": "...", "endpoints": ["CONTROLLER://host:9093"]}, ...]`,
//!   `directoryId` left out when it is the zero id and `endpoints` when the answer's `Nodes`
//!   name none (as Samsa's controller does today, so its voters print as `{"id": 1}`).
//! - `--replication`: columns NodeId, DirectoryId, LogEndOffset, Lag, LastFetchTimestamp,
//!   LastCaughtUpTimestamp, Status; the leader, then the other voters (Follower), then the
//!   observers, in the answer's order. Each cell is padded to its column's width and followed
//!   by a tab (the last one too), timestamps in ms since the epoch (`-1` when unknown), or
//!   `N ms ago` with `--human-readable`, which fails as Kafka does on a timestamp not in
//!   (epoch, now].
//!
//! `MaxFollowerLag` is the leader's log end offset less the smallest among the voters (the
//! first such voter in answer order, the leader included); `MaxFollowerLagTimeMs` is 0 when
//! that voter is the leader, else the leader's last caught-up time less that voter's, or -1
//! when either is unknown: Kafka's computation.
//!
//! The addresses are asked in order: an unreachable one, one that does not serve
//! DescribeQuorum, or one that answers NOT_LEADER_OR_FOLLOWER / NOT_CONTROLLER (a controller
//! that is not the active one) passes the question to the next. A controller listener answers
//! itself; a broker's client listener forwards the request to the active controller: the
//! request is the same. `ClusterId` comes from DescribeCluster on the connection that
//! answered, as Kafka's tool asks it; a peer that does not serve DescribeCluster (Samsa's
//! controller listener today) leaves it `-`, with a warning on stderr.

use std::fmt::Write as _;
use std::process::ExitCode;

use super::common::{self, Arg, Args, CliError};
use crate::client::connection::{Connection, ConnectionLimits};
use crate::protocol::describe_cluster::{DescribeClusterRequest, DescribeClusterResponse};
use crate::protocol::describe_quorum::{
    DescribeQuorumNode, DescribeQuorumReplicaState, DescribeQuorumRequest,
    DescribeQuorumRequestPartition, DescribeQuorumRequestTopic, DescribeQuorumResponse,
    DescribeQuorumResponsePartition,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::wire::Uuid;
use crate::raft::wire::{METADATA_PARTITION, METADATA_TOPIC};
use crate::rt::time::{self, Duration};

pub const USAGE: &str = "usage: samsa metadata-quorum (--bootstrap-server | --bootstrap-controller) HOST:PORT[,HOST:PORT...] describe (--status | --replication [--human-readable])

Describes the KRaft metadata quorum as Kafka's kafka-metadata-quorum.sh does.

  --bootstrap-server, -b HOST:PORT[,...]   brokers to ask (one forwards to the active controller)
  --bootstrap-controller HOST:PORT[,...]   controller listeners to ask (the active one answers)
  describe --status                        leader, epoch, high watermark, lag, voters, observers
  describe --replication                   one line per replica: log end, lag, last fetch and
                                           last caught-up times, Leader/Follower/Observer
           --human-readable                with --replication: times as 'N ms ago'";

/// Addresses of the bootstrap list asked in one pass (the rest of a longer list is ignored).
pub const ADDRESSES_MAX: usize = 32;
/// Passes over the list; another pass is made only if some node answered that it does not
/// lead (an election may be under way).
pub const PASSES_MAX: u32 = 3;
/// The pause before another pass.
pub const PASS_BACKOFF_MS: u64 = 500;
/// How long opening one connection may take.
pub const CONNECT_TIMEOUT_MS: u64 = 5_000;
/// How long one request may wait for its answer (a broker forwards to the controller).
pub const REQUEST_TIMEOUT_MS: u64 = 15_000;
/// The largest answer read: a quorum's description is a few hundred bytes per replica.
pub const RESPONSE_BYTES_MAX: usize = 4 << 20;
/// The label column of `--status` (Kafka's labels are padded to this many characters).
pub const STATUS_LABEL_WIDTH: usize = 24;
/// DescribeCluster's endpoint types (KIP-919).
const ENDPOINT_TYPE_BROKER: i8 = 1;
const ENDPOINT_TYPE_CONTROLLER: i8 = 2;
/// What `--status` prints for a cluster id the peer does not tell.
const UNKNOWN: &str = "-";

/// Whom the addresses name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `--bootstrap-server`: brokers' client listeners.
    Brokers,
    /// `--bootstrap-controller`: controller listeners.
    Controllers,
}

/// What `describe` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Status,
    Replication { human_readable: bool },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub bootstrap: Vec<String>,
    pub target: Target,
    pub view: View,
}

fn usage(text: impl Into<String>) -> CliError {
    CliError::Usage(text.into())
}

pub fn parse_args(args: &[String]) -> Result<Parsed, CliError> {
    let mut bootstraps: Vec<(&str, Target, Vec<String>)> = Vec::new();
    let mut command: Option<&str> = None;
    let (mut status, mut replication, mut human_readable) = (false, false, false);
    let mut scan = Args::new(args);
    while let Some(arg) = scan.next_arg() {
        let (name, inline) = match arg {
            Arg::Positional(value) if command.is_none() => {
                if value != "describe" {
                    return Err(usage(format!(
                        "unknown subcommand '{value}' (only 'describe' is supported)"
                    )));
                }
                command = Some(value);
                continue;
            }
            Arg::Positional(value) => {
                return Err(usage(format!("unexpected argument '{value}'")));
            }
            Arg::Flag { name, inline } => (name, inline),
        };
        let target = match name {
            "--bootstrap-controller" => Some(Target::Controllers),
            _ if common::is_bootstrap_flag(name) => Some(Target::Brokers),
            _ => None,
        };
        if let Some(target) = target {
            let value = scan.value(name, inline)?;
            let addrs = common::bootstrap_list(value)
                .map_err(|_| usage(format!("{name}: '{value}' is not a list of host:port")))?;
            bootstraps.retain(|(_, t, _)| *t != target);
            bootstraps.push((name, target, addrs));
            continue;
        }
        let flag = match name {
            "--status" => &mut status,
            "--replication" => &mut replication,
            "--human-readable" => &mut human_readable,
            _ => return Err(usage(format!("unknown option '{name}'"))),
        };
        Args::switch(name, inline)?;
        *flag = true;
    }
    let (bootstrap, target) = match bootstraps.as_mut_slice() {
        [] => {
            return Err(usage(
                "one of --bootstrap-server or --bootstrap-controller is required",
            ))
        }
        [(_, target, addrs)] => (std::mem::take(addrs), *target),
        [(a, ..), (b, ..), ..] => return Err(usage(format!("{b} is not allowed with {a}"))),
    };
    if command.is_none() {
        return Err(usage("missing subcommand (describe)"));
    }
    // Kafka's own messages for these three.
    let view = match (status, replication) {
        (true, true) => return Err(usage(
            "Only one of --status or --replication should be specified with describe sub-command",
        )),
        (false, false) => {
            return Err(usage(
                "One of --status or --replication must be specified with describe sub-command",
            ))
        }
        (true, false) if human_readable => {
            return Err(usage(
                "The option --human-readable is only supported along with --replication",
            ))
        }
        (true, false) => View::Status,
        (false, true) => View::Replication { human_readable },
    };
    Ok(Parsed {
        bootstrap,
        target,
        view,
    })
}

pub fn main(args: &[String]) -> ExitCode {
    common::tool_main("metadata-quorum", USAGE, args, parse_args, run)
}

async fn run(parsed: Parsed) -> Result<(), CliError> {
    let text = execute(&parsed).await?;
    common::write_stdout(text.as_bytes())
}

/// Asks the quorum and renders the view `parsed` names: what the tool prints.
pub async fn execute(parsed: &Parsed) -> Result<String, CliError> {
    let answer = ask(&parsed.bootstrap, parsed.target).await?;
    if parsed.view == View::Status && answer.cluster_id.is_none() {
        tracing::warn!(
            addr = %answer.addr,
            "the node does not tell its cluster id (no DescribeCluster); ClusterId shows '{UNKNOWN}'"
        );
    }
    let now_ms = crate::rt::clock::Clock::new().now_ms();
    let text = match parsed.view {
        View::Status => status(&answer.response, answer.cluster_id.as_deref()),
        View::Replication { human_readable } => {
            replication(&answer.response, human_readable, now_ms)
        }
    };
    text.map_err(|e| CliError::Failed(format!("{}: {e}", answer.addr)))
}

/// The quorum's description as one node gave it.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The address that answered.
    pub addr: String,
    pub response: DescribeQuorumResponse,
    /// From DescribeCluster on the same connection, if the node serves it.
    pub cluster_id: Option<String>,
}

/// Why one address did not answer.
enum Unanswered {
    /// It does not lead the quorum (NOT_LEADER_OR_FOLLOWER, NOT_CONTROLLER): ask the next.
    NotLeading(String),
    /// Unreachable, or no DescribeQuorum there: ask the next.
    Unavailable(String),
    /// It answered with another error: that is the answer.
    Refused(String),
}

/// DescribeQuorum for `__cluster_metadata` partition 0, to the addresses in order (see the
/// module's doc), at most [`PASSES_MAX`] times over the list.
pub async fn ask(bootstrap: &[String], target: Target) -> Result<Answer, CliError> {
    let mut reasons: Vec<String> = Vec::new();
    for pass in 0..PASSES_MAX {
        if pass > 0 {
            time::sleep(Duration::from_millis(PASS_BACKOFF_MS)).await;
        }
        reasons.clear();
        let mut not_leading = false;
        for addr in bootstrap.iter().take(ADDRESSES_MAX) {
            match ask_one(addr, target).await {
                Ok(answer) => return Ok(answer),
                Err(Unanswered::NotLeading(why)) => {
                    not_leading = true;
                    reasons.push(format!("{addr}: {why}"));
                }
                Err(Unanswered::Unavailable(why)) => reasons.push(why),
                Err(Unanswered::Refused(why)) => {
                    return Err(CliError::Failed(format!("{addr}: {why}")))
                }
            }
        }
        if !not_leading {
            break;
        }
    }
    Err(CliError::Failed(format!(
        "no node answered for the metadata quorum: {}",
        reasons.join("; ")
    )))
}

async fn ask_one(addr: &str, target: Target) -> Result<Answer, Unanswered> {
    let limits = ConnectionLimits {
        response_bytes_max: RESPONSE_BYTES_MAX,
        request_timeout_ms: REQUEST_TIMEOUT_MS,
        connect_timeout_ms: CONNECT_TIMEOUT_MS,
    };
    let unavailable = |e: crate::client::ClientError| Unanswered::Unavailable(e.to_string());
    let mut conn = Connection::connect(addr, common::CLIENT_ID, limits)
        .await
        .map_err(unavailable)?;
    let api_key = DescribeQuorumRequest::API_KEY;
    let version = conn.version_for(api_key).map_err(unavailable)?;
    let request = DescribeQuorumRequest {
        topics: vec![DescribeQuorumRequestTopic {
            topic_name: METADATA_TOPIC.into(),
            partitions: vec![DescribeQuorumRequestPartition {
                partition_index: METADATA_PARTITION,
            }],
        }],
    };
    let response: DescribeQuorumResponse = conn
        .send(api_key, version, &request)
        .await
        .map_err(unavailable)?;
    if let Err((code, why)) = metadata_partition(&response) {
        return Err(match code {
            ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::NOT_CONTROLLER => {
                Unanswered::NotLeading(why)
            }
            _ => Unanswered::Refused(why),
        });
    }
    let cluster_id = cluster_id(&mut conn, target).await;
    Ok(Answer {
        addr: addr.to_owned(),
        response,
        cluster_id,
    })
}

/// The cluster id by DescribeCluster, if the node serves it and answers without error.
async fn cluster_id(conn: &mut Connection, target: Target) -> Option<String> {
    let api_key = DescribeClusterRequest::API_KEY;
    conn.broker_versions(api_key)?;
    let version = conn.version_for(api_key).ok()?;
    let request = DescribeClusterRequest {
        endpoint_type: match target {
            Target::Brokers => ENDPOINT_TYPE_BROKER,
            Target::Controllers => ENDPOINT_TYPE_CONTROLLER,
        },
        ..DescribeClusterRequest::default()
    };
    match conn
        .send::<_, DescribeClusterResponse>(api_key, version, &request)
        .await
    {
        Ok(response) if response.error_code == 0 => Some(response.cluster_id),
        Ok(response) => {
            tracing::warn!(error = %ErrorCode(response.error_code), "DescribeCluster refused");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "DescribeCluster failed");
            None
        }
    }
}

/// The metadata log's partition in `response`, checked as Kafka's admin client checks it: no
/// top-level error, one topic `__cluster_metadata` with one partition 0, no partition error.
/// An error is its code with a message naming it.
pub fn metadata_partition(
    response: &DescribeQuorumResponse,
) -> Result<&DescribeQuorumResponsePartition, (ErrorCode, String)> {
    let refused = |code: i16, message: &Option<String>| {
        let code = ErrorCode(code);
        let text = match message {
            Some(m) => format!("{code}: {m}"),
            None => code.to_string(),
        };
        (code, text)
    };
    let malformed = |what: String| (ErrorCode::UNKNOWN_SERVER_ERROR, what);
    if response.error_code != 0 {
        return Err(refused(response.error_code, &response.error_message));
    }
    let topic = match response.topics.as_slice() {
        [topic] => topic,
        topics => {
            return Err(malformed(format!(
                "the answer has {} topics, not 1",
                topics.len()
            )))
        }
    };
    if topic.topic_name != METADATA_TOPIC {
        return Err(malformed(format!(
            "the answer is about topic '{}', not {METADATA_TOPIC}",
            topic.topic_name
        )));
    }
    let partition = match topic.partitions.as_slice() {
        [partition] => partition,
        partitions => {
            return Err(malformed(format!(
                "the answer has {} partitions, not 1",
                partitions.len()
            )))
        }
    };
    if partition.partition_index != METADATA_PARTITION {
        return Err(malformed(format!(
            "the answer is about partition {}, not {METADATA_PARTITION}",
            partition.partition_index
        )));
    }
    if partition.error_code != 0 {
        return Err(refused(partition.error_code, &partition.error_message));
    }
    Ok(partition)
}

/// The leader's entry among the voters and its index (Kafka's tool cannot describe a quorum
/// without one).
fn leader_of(
    partition: &DescribeQuorumResponsePartition,
) -> Result<(usize, &DescribeQuorumReplicaState), String> {
    let leader_id = partition.leader_id.0;
    partition
        .current_voters
        .iter()
        .enumerate()
        .find(|(_, v)| v.replica_id.0 == leader_id)
        .ok_or_else(|| {
            format!(
                "the quorum's leader {leader_id} (epoch {}) is not among its voters",
                partition.leader_epoch.0
            )
        })
}

/// A timestamp as Kafka's admin client reads it: -1 means unknown.
fn known(timestamp_ms: i64) -> Option<i64> {
    (timestamp_ms != -1).then_some(timestamp_ms)
}

/// `describe --status`: Kafka's eight `Name: value` lines.
pub fn status(
    response: &DescribeQuorumResponse,
    cluster_id: Option<&str>,
) -> Result<String, String> {
    let partition = metadata_partition(response).map_err(|(_, why)| why)?;
    let (leader_at, leader) = leader_of(partition)?;
    let voters = &partition.current_voters;
    // Kafka's Stream.min keeps the first of equal minima.
    let (lagging_at, lagging) = voters
        .iter()
        .enumerate()
        .fold(
            None,
            |min: Option<(usize, &DescribeQuorumReplicaState)>, (i, v)| match min {
                Some((_, m)) if m.log_end_offset.0 <= v.log_end_offset.0 => min,
                _ => Some((i, v)),
            },
        )
        .ok_or("the quorum has no voters")?;
    let max_lag = leader
        .log_end_offset
        .0
        .wrapping_sub(lagging.log_end_offset.0);
    let max_lag_time_ms = if lagging_at == leader_at {
        0
    } else {
        match (
            known(leader.last_caught_up_timestamp),
            known(lagging.last_caught_up_timestamp),
        ) {
            (Some(l), Some(f)) => l.wrapping_sub(f),
            _ => -1,
        }
    };
    let fields = [
        ("ClusterId", cluster_id.unwrap_or(UNKNOWN).to_string()),
        ("LeaderId", partition.leader_id.0.to_string()),
        ("LeaderEpoch", partition.leader_epoch.0.to_string()),
        ("HighWatermark", partition.high_watermark.0.to_string()),
        ("MaxFollowerLag", max_lag.to_string()),
        ("MaxFollowerLagTimeMs", max_lag_time_ms.to_string()),
        (
            "CurrentVoters",
            replica_list(&partition.current_voters, &response.nodes),
        ),
        (
            "CurrentObservers",
            replica_list(&partition.observers, &response.nodes),
        ),
    ];
    let mut out = String::new();
    for (name, value) in fields {
        let label = format!("{name}:");
        let _ = writeln!(out, "{label:<STATUS_LABEL_WIDTH$}{value}");
    }
    Ok(out)
}

/// Kafka 3.9+'s replica list: `[{"id": 1, "directoryId": "...", "endpoints": ["L://h:p"]}, ...]`.
fn replica_list(replicas: &[DescribeQuorumReplicaState], nodes: &[DescribeQuorumNode]) -> String {
    let items: Vec<String> = replicas
        .iter()
        .map(|r| {
            let mut item = format!("{{\"id\": {}", r.replica_id.0);
            if r.replica_directory_id != Uuid::ZERO {
                let _ = write!(
                    item,
                    ", \"directoryId\": \"{}\"",
                    r.replica_directory_id.to_base64()
                );
            }
            let endpoints: Vec<String> = nodes
                .iter()
                .find(|n| n.node_id.0 == r.replica_id.0)
                .map(|n| {
                    n.listeners
                        .iter()
                        .map(|l| {
                            // IPv6 hosts in brackets, as Kafka's RaftVoterEndpoint prints them.
                            if l.host.contains(':') {
                                format!("\"{}://[{}]:{}\"", l.name, l.host, l.port)
                            } else {
                                format!("\"{}://{}:{}\"", l.name, l.host, l.port)
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            if !endpoints.is_empty() {
                let _ = write!(item, ", \"endpoints\": [{}]", endpoints.join(", "));
            }
            item.push('}');
            item
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// `describe --replication`: Kafka's table, leader first, then followers, then observers;
/// `now_ms` (the wall clock) for `--human-readable`.
pub fn replication(
    response: &DescribeQuorumResponse,
    human_readable: bool,
    now_ms: i64,
) -> Result<String, String> {
    let partition = metadata_partition(response).map_err(|(_, why)| why)?;
    let (_, leader) = leader_of(partition)?;
    let leader_id = leader.replica_id.0;
    let followers = partition
        .current_voters
        .iter()
        .filter(|v| v.replica_id.0 != leader_id);
    let replicas = std::iter::once((leader, "Leader"))
        .chain(followers.map(|v| (v, "Follower")))
        .chain(partition.observers.iter().map(|o| (o, "Observer")));
    let time = |timestamp_ms: i64, what: &str| -> Result<String, String> {
        match known(timestamp_ms) {
            None => Ok("-1".into()),
            Some(at) if human_readable => {
                relative_ms(at, what, now_ms).map(|ms| format!("{ms} ms ago"))
            }
            Some(at) => Ok(at.to_string()),
        }
    };
    let mut rows = vec![[
        "NodeId",
        "DirectoryId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    .map(String::from)];
    for (replica, role) in replicas {
        rows.push([
            replica.replica_id.0.to_string(),
            replica.replica_directory_id.to_base64(),
            replica.log_end_offset.0.to_string(),
            leader
                .log_end_offset
                .0
                .wrapping_sub(replica.log_end_offset.0)
                .to_string(),
            time(replica.last_fetch_timestamp, "last fetch")?,
            time(replica.last_caught_up_timestamp, "last caught up")?,
            role.to_string(),
        ]);
    }
    Ok(tab_table(&rows))
}

/// How long before `now_ms` `timestamp_ms` was; Kafka refuses a time at or before the epoch
/// or after now (the clocks disagree).
fn relative_ms(timestamp_ms: i64, what: &str, now_ms: i64) -> Result<i64, String> {
    if timestamp_ms <= 0 || timestamp_ms > now_ms {
        return Err(format!(
            "Error while computing relative time, possible drift in system clock.\nCurrent timestamp is {now_ms}, {what} timestamp is {timestamp_ms}"
        ));
    }
    Ok(now_ms - timestamp_ms)
}

/// Kafka's `ToolsUtils.prettyPrintTable`: each cell padded to its column's widest cell (the
/// header included) and followed by a tab, the row's last too.
fn tab_table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        for (width, cell) in widths.iter().zip(row) {
            let _ = write!(out, "{cell:<width$}\t");
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::describe_quorum::{DescribeQuorumListener, DescribeQuorumResponseTopic};
    use crate::protocol::types::{LeaderEpoch, NodeId, Offset};

    fn parse(args: &[&str]) -> Result<Parsed, String> {
        common::parse_strs(parse_args, args)
    }

    fn replica(id: i32, end: i64, fetch: i64, caught_up: i64) -> DescribeQuorumReplicaState {
        DescribeQuorumReplicaState {
            replica_id: NodeId(id),
            replica_directory_id: Uuid::ZERO,
            log_end_offset: Offset(end),
            last_fetch_timestamp: fetch,
            last_caught_up_timestamp: caught_up,
        }
    }

    /// Three voters led by 2 (end 120), voter 3 lagging 20 behind (caught up 1500 ms before
    /// the leader), voter 1 caught up; one observer, 7, that never fetched.
    fn quorum() -> DescribeQuorumResponse {
        let mut voter_1 = replica(1, 120, 1_700_000_009_990, 1_700_000_009_990);
        voter_1.replica_directory_id = Uuid([1; 16]);
        DescribeQuorumResponse {
            topics: vec![DescribeQuorumResponseTopic {
                topic_name: METADATA_TOPIC.into(),
                partitions: vec![DescribeQuorumResponsePartition {
                    partition_index: 0,
                    leader_id: NodeId(2),
                    leader_epoch: LeaderEpoch(5),
                    high_watermark: Offset(118),
                    current_voters: vec![
                        voter_1,
                        replica(2, 120, 1_700_000_010_000, 1_700_000_010_000),
                        replica(3, 100, 1_700_000_009_000, 1_700_000_008_500),
                    ],
                    observers: vec![replica(7, 90, -1, -1)],
                    ..Default::default()
                }],
            }],
            nodes: vec![DescribeQuorumNode {
                node_id: NodeId(2),
                listeners: vec![
                    DescribeQuorumListener {
                        name: "CONTROLLER".into(),
                        host: "localhost".into(),
                        port: 9093,
                    },
                    DescribeQuorumListener {
                        name: "CONTROLLER".into(),
                        host: "::1".into(),
                        port: 9094,
                    },
                ],
            }],
            ..Default::default()
        }
    }

    fn partition_mut(r: &mut DescribeQuorumResponse) -> &mut DescribeQuorumResponsePartition {
        &mut r.topics[0].partitions[0]
    }

    #[test]
    fn cli_metadata_quorum_status_prints_each_field_as_kafka_does() {
        let text = status(&quorum(), Some("fMCL8kv1SWm87L_Md-I2hg")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let dir = Uuid([1; 16]).to_base64();
        assert_eq!(
            lines,
            vec![
                "ClusterId:              fMCL8kv1SWm87L_Md-I2hg",
                "LeaderId:               2",
                "LeaderEpoch:            5",
                "HighWatermark:          118",
                // Voter 3 is 20 behind the leader, and last caught up 1500 ms before it.
                "MaxFollowerLag:         20",
                "MaxFollowerLagTimeMs:   1500",
                &format!(
                    "CurrentVoters:          [{{\"id\": 1, \"directoryId\": \"{dir}\"}}, {{\"id\": 2, \"endpoints\": [\"CONTROLLER://localhost:9093\", \"CONTROLLER://[::1]:9094\"]}}, {{\"id\": 3}}]"
                ),
                "CurrentObservers:       [{\"id\": 7}]",
            ]
        );
        assert!(text.ends_with('\n'));
        // Without a cluster id the field says so.
        assert!(status(&quorum(), None)
            .unwrap()
            .starts_with("ClusterId:              -\n"));
    }

    #[test]
    fn cli_metadata_quorum_lag_time_follows_kafka_rules() {
        let lag = |r: &DescribeQuorumResponse| -> String {
            let text = status(r, None).unwrap();
            let line = text
                .lines()
                .find(|l| l.starts_with("MaxFollowerLagTimeMs:"))
                .unwrap();
            line.split_whitespace().nth(1).unwrap().to_string()
        };
        // Every voter at the leader's end: the first of them is the "most lagging", so the
        // time is the leader's caught-up time less that voter's (0 if that is the leader).
        let mut caught_up = quorum();
        partition_mut(&mut caught_up).current_voters[2].log_end_offset = Offset(120);
        assert_eq!(lag(&caught_up), "10");
        assert!(status(&caught_up, None)
            .unwrap()
            .contains("MaxFollowerLag:         0\n"));
        let mut leader_first = caught_up.clone();
        partition_mut(&mut leader_first).current_voters.swap(0, 1);
        assert_eq!(lag(&leader_first), "0");
        // An unknown caught-up time makes it -1.
        let mut unknown = quorum();
        partition_mut(&mut unknown).current_voters[2].last_caught_up_timestamp = -1;
        assert_eq!(lag(&unknown), "-1");
    }

    #[test]
    fn cli_metadata_quorum_replication_table_lists_leader_followers_observers() {
        let text = replication(&quorum(), false, 1_700_000_011_000).unwrap();
        let dir = Uuid([1; 16]).to_base64();
        let zero = Uuid::ZERO.to_base64();
        let expected = [
            "NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus  \t".to_string(),
            format!("2     \t{zero}\t120         \t0  \t1700000010000     \t1700000010000        \tLeader  \t"),
            format!("1     \t{dir}\t120         \t0  \t1700000009990     \t1700000009990        \tFollower\t"),
            format!("3     \t{zero}\t100         \t20 \t1700000009000     \t1700000008500        \tFollower\t"),
            format!("7     \t{zero}\t90          \t30 \t-1                \t-1                   \tObserver\t"),
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected);

        let human = replication(&quorum(), true, 1_700_000_011_000).unwrap();
        let follower: Vec<&str> = human
            .lines()
            .nth(3)
            .unwrap()
            .split('\t')
            .map(str::trim)
            .collect();
        assert_eq!(
            follower,
            [
                "3",
                zero.as_str(),
                "100",
                "20",
                "2000 ms ago",
                "2500 ms ago",
                "Follower",
                ""
            ]
        );
        // A time after now is refused, as Kafka refuses it.
        let err = replication(&quorum(), true, 1_700_000_009_500).unwrap_err();
        assert!(err.contains("possible drift in system clock"), "{err}");
        assert!(
            err.contains("last fetch timestamp is 1700000010000"),
            "{err}"
        );
    }

    #[test]
    fn cli_metadata_quorum_refuses_answers_it_cannot_describe() {
        let mut not_leader = quorum();
        let p = partition_mut(&mut not_leader);
        p.error_code = ErrorCode::NOT_LEADER_OR_FOLLOWER.0;
        p.error_message = Some("not the leader".into());
        let (code, why) = metadata_partition(&not_leader).unwrap_err();
        assert_eq!(code, ErrorCode::NOT_LEADER_OR_FOLLOWER);
        assert!(
            why.contains("NOT_LEADER_OR_FOLLOWER") && why.contains("not the leader"),
            "{why}"
        );

        let mut other_topic = quorum();
        other_topic.topics[0].topic_name = "orders".into();
        assert_eq!(
            metadata_partition(&other_topic).unwrap_err().0,
            ErrorCode::UNKNOWN_SERVER_ERROR
        );
        let mut no_topics = quorum();
        no_topics.topics.clear();
        assert!(status(&no_topics, None).unwrap_err().contains("0 topics"));

        let mut no_leader = quorum();
        partition_mut(&mut no_leader).leader_id = NodeId(-1);
        assert!(status(&no_leader, None)
            .unwrap_err()
            .contains("not among its voters"));
        assert!(replication(&no_leader, false, 0).is_err());
    }

    #[test]
    fn cli_metadata_quorum_parses_kafka_command_lines() {
        assert_eq!(
            parse(&["--bootstrap-server", "h:1,h:2", "describe", "--status"]),
            Ok(Parsed {
                bootstrap: vec!["h:1".into(), "h:2".into()],
                target: Target::Brokers,
                view: View::Status,
            })
        );
        assert_eq!(
            parse(&[
                "--bootstrap-controller=c:9093",
                "describe",
                "--replication",
                "--human-readable"
            ]),
            Ok(Parsed {
                bootstrap: vec!["c:9093".into()],
                target: Target::Controllers,
                view: View::Replication {
                    human_readable: true
                },
            })
        );
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert!(err(&["describe", "--status"]).contains("is required"));
        assert!(err(&[
            "-b",
            "h:1",
            "--bootstrap-controller",
            "c:1",
            "describe",
            "--status"
        ])
        .contains("not allowed with"));
        assert!(err(&["-b", "h:1"]).contains("missing subcommand"));
        assert!(err(&["-b", "h:1", "add-controller"]).contains("only 'describe'"));
        assert!(err(&["-b", "h:1", "describe"]).contains("One of --status or --replication"));
        assert!(
            err(&["-b", "h:1", "describe", "--status", "--replication"]).contains("Only one of")
        );
        assert!(
            err(&["-b", "h:1", "describe", "--status", "--human-readable"])
                .contains("only supported along with --replication")
        );
        assert!(
            err(&["--bootstrap-controller", "nohost", "describe", "--status"])
                .contains("--bootstrap-controller: 'nohost'")
        );
        assert!(err(&["-b", "h:1", "describe", "--status", "x"]).contains("unexpected argument"));
        assert!(err(&["-b", "h:1", "describe", "--verbose"]).contains("unknown option"));
    }
}
