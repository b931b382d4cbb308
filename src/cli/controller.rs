//! `samsa controller [FILE] [--override key=value]...`: runs one voter of a KRaft metadata
//! quorum (Kafka's `process.roles=controller` node) from a `controller.properties` (see
//! `raft::settings` for the keys): opens the metadata log, serves Vote, BeginQuorumEpoch,
//! EndQuorumEpoch, Fetch and FetchSnapshot on `__cluster_metadata` and DescribeQuorum on the
//! controller listener, and logs each change of epoch and leader, until SIGINT or SIGTERM,
//! when it closes the log cleanly. Above the log runs the controller (`controller::driver`):
//! BrokerRegistration, BrokerHeartbeat, CreateTopics, DeleteTopics, CreatePartitions,
//! AlterConfigs, IncrementalAlterConfigs and AllocateProducerIds are served on the same
//! listener, and snapshots of its metadata image are written when due. The cluster id
//! brokers must present is the one in `meta.properties` of `metadata.log.dir` (created on
//! first start, as the broker creates its own; Kafka's `kafka-storage.sh format` writes it).

use std::process::ExitCode;
use std::sync::Arc;

use super::broker::{server_command_line, wait_for_signal};
use crate::broker::config::{parse_properties, BrokerConfig};
use crate::controller::core::ControllerConfig;
use crate::controller::policy::BrokerConfigPolicy;
use crate::raft::core::RaftConfig;
use crate::raft::driver::{self, RaftHandle, Status};
use crate::raft::settings::ControllerSettings;
use crate::rt::clock::Clock;
use crate::rt::disk::Disk;
use crate::rt::net::TcpListener;
use crate::rt::time::Duration;

const USAGE: &str = "usage: samsa controller [FILE] [--override key=value]...

FILE is a Kafka-style controller.properties: node.id and controller.quorum.voters
(id@host:port,...) are required; metadata.log.dir (or log.dirs) says where the metadata log
lives; listeners=CONTROLLER://host:port is bound (the voter's own address by default).";

pub fn main(args: &[String]) -> ExitCode {
    let (args, text) = match server_command_line("samsa controller", USAGE, args) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let pairs = match &text {
        None => Ok(Vec::new()),
        Some(text) => parse_properties(text),
    };
    let settings =
        match pairs.and_then(|p| ControllerSettings::from_properties(&p, &args.overrides)) {
            Ok(settings) => settings,
            Err(e) => {
                let source = args.file.as_deref().unwrap_or("the command line");
                eprintln!("samsa controller: invalid configuration ({source}): {e}");
                return ExitCode::from(2);
            }
        };
    for key in &settings.ignored {
        tracing::warn!(key = %key, "setting has no effect on a controller");
    }
    super::broker::run_to_exit("samsa controller", run(settings))
}

/// Runs the voter until a shutdown signal or a failure of its log.
pub async fn run(settings: ControllerSettings) -> Result<(), String> {
    let dir = &settings.metadata_log_dir;
    let disk = Disk::real(dir).map_err(|e| format!("opening metadata.log.dir {dir}: {e}"))?;
    let listener = TcpListener::bind(&settings.listen)
        .await
        .map_err(|e| format!("listening on {}: {e}", settings.listen))?;
    let node_id = settings.node.node_id;
    let raft = settings.node.raft;
    let meta = crate::broker::meta::load_or_create(&disk, "", node_id)
        .await
        .map_err(|e| e.to_string())?;
    let (apis, forwarded) = crate::controller::driver::listener_apis();
    let node = driver::start_with(
        settings.node,
        disk,
        Clock::new(),
        listener,
        None,
        Some(apis),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut controller_config =
        ControllerConfig::new(node_id, &meta.cluster_id, crate::rt::rand::random_u64());
    controller_config.proposal_bytes_max = proposal_bytes_max(&raft);
    let policy = Arc::new(BrokerConfigPolicy {
        broker: Arc::new(BrokerConfig::default()),
    });
    let controller = crate::controller::driver::start(
        node.handle.clone(),
        controller_config,
        policy,
        Some(forwarded),
    );
    tracing::info!(
        node = node_id,
        listener = %node.handle.local_addr(),
        metadata_log_dir = %dir,
        "samsa controller running"
    );
    let watcher = crate::rt::task::spawn(report_changes(node.handle.clone()));
    let mut task = node.task;
    let mut controller_task = controller.task;
    let outcome = tokio::select! {
        biased;
        result = &mut task => Some(result),
        stopped = &mut controller_task => {
            let reason = match stopped {
                Ok(Ok(())) => "stopped".to_string(),
                Ok(Err(e)) => e.to_string(),
                Err(e) => format!("its task failed: {e}"),
            };
            tracing::error!(%reason, "the controller stopped; shutting down");
            resign(&node.handle, raft).await;
            node.handle.shutdown().await;
            let _ = (&mut task).await;
            return Err(format!("the controller stopped: {reason}"));
        }
        signal = wait_for_signal() => {
            tracing::info!("{signal}: shutting down");
            None
        }
    };
    watcher.abort();
    controller.handle.shutdown().await;
    let _ = controller_task.await;
    let result = match outcome {
        Some(result) => result,
        None => {
            resign(&node.handle, raft).await;
            node.handle.shutdown().await;
            task.await
        }
    };
    match result {
        Ok(Ok(())) => {
            tracing::info!("shut down cleanly");
            Ok(())
        }
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("the replica's task failed: {e}")),
    }
}

/// What one proposal of the controller may hold: a batch the quorum's fetch can carry, less
/// room for the batch's framing and each record's header.
pub fn proposal_bytes_max(raft: &RaftConfig) -> usize {
    raft.fetch_max_bytes - raft.fetch_max_bytes / 8
}

/// The longest a stopping leader waits for another voter to take over after it resigned.
pub const RESIGN_WAIT_MS_MAX: u64 = 5_000;

/// A leader that stops resigns first (EndQuorumEpoch), so the others elect a successor at once
/// instead of after the fetch timeout; it waits until one leads, for about one election
/// (twice the election timeout and the longest backoff, at most `RESIGN_WAIT_MS_MAX`).
async fn resign(handle: &RaftHandle, raft: RaftConfig) {
    let status = handle.status();
    let alone = matches!(handle.describe().await, Ok(Some(q)) if q.voters.len() <= 1);
    if !status.is_leader || alone || handle.resign().await.is_err() {
        return;
    }
    let epoch = status.epoch;
    let wait_ms =
        (2 * raft.election_timeout_ms + raft.election_backoff_max_ms).min(RESIGN_WAIT_MS_MAX);
    let wait = Duration::from_millis(wait_ms);
    match handle
        .wait_for(wait, |s| s.epoch > epoch && s.leader_id.is_some())
        .await
    {
        Ok(s) => {
            tracing::info!(epoch = s.epoch, leader = ?s.leader_id, "resigned; a successor leads")
        }
        Err(_) => tracing::warn!("resigned; no successor within {wait_ms} ms"),
    }
}

/// Logs each change of epoch or leader.
async fn report_changes(handle: RaftHandle) {
    let mut last: Option<Status> = None;
    loop {
        let seen = last;
        let status = match handle
            .wait_for(Duration::from_secs(60), |s| {
                seen.is_none_or(|l| l.epoch != s.epoch || l.leader_id != s.leader_id)
            })
            .await
        {
            Ok(status) | Err(status) => status,
        };
        if seen.is_none_or(|l| l.epoch != status.epoch || l.leader_id != status.leader_id) {
            match status.leader_id {
                Some(leader) => tracing::info!(
                    epoch = status.epoch,
                    leader,
                    leading = status.is_leader,
                    "metadata quorum leader"
                ),
                None => tracing::info!(epoch = status.epoch, "metadata quorum without a leader"),
            }
        }
        last = Some(status);
    }
}
