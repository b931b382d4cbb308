//! The network half of the controller channel: a broker whose own controller is not the
//! active one (a node of a cluster of several voters) sends the controller's APIs directly
//! (CreateTopics, DeleteTopics, CreatePartitions, IncrementalAlterConfigs,
//! AllocateProducerIds) to the quorum's leader on its controller listener, as Kafka's
//! `NodeToControllerChannelManager` does for the requests it forwards without an Envelope
//! (KIP-590's alternative: the broker is trusted and there is no principal to carry yet).
//!
//! After an answer it asks the same controller for the metadata log's high watermark
//! (DescribeQuorum): everything the controller wrote for the request is below it, so the
//! channel's wait for this broker to apply up to that offset means a client that created a
//! topic through this broker then finds it here.
//!
//! Invariants: one exchange at a time over one connection (the channel's requests queue on
//! its lock); every exchange has a timeout (`FORWARD_REQUEST_TIMEOUT_MS`); a connection that
//! failed or reached a controller that is no longer active is dropped and the leader looked
//! up again, at most `FORWARD_ATTEMPTS_MAX` times, `FORWARD_RETRY_BACKOFF_MS` apart.

use std::collections::BTreeMap;

use crate::client::connection::{Connection, ConnectionLimits};
use crate::protocol::describe_quorum::{
    DescribeQuorumRequest, DescribeQuorumRequestPartition, DescribeQuorumRequestTopic,
    DescribeQuorumResponse,
};
use crate::protocol::error::ErrorCode;
use crate::protocol::message::Message;
use crate::raft::driver::RaftHandle;
use crate::rt::time::{self, Duration};

use super::controller_channel::ChannelError;

/// Tries of one forwarded request (each after looking up the leader again).
pub const FORWARD_ATTEMPTS_MAX: u32 = 20;
/// The pause between two tries.
pub const FORWARD_RETRY_BACKOFF_MS: u64 = 100;
/// The longest one exchange with the controller may take (Kafka's
/// `request.timeout.ms` default for the controller channel is 30 s).
pub const FORWARD_REQUEST_TIMEOUT_MS: u64 = 30_000;
/// The longest a try waits for the quorum to know a leader.
pub const LEADER_WAIT_MS_MAX: u64 = 5_000;

const _: () = assert!(LEADER_WAIT_MS_MAX <= FORWARD_REQUEST_TIMEOUT_MS);

/// The metadata log's topic, as DescribeQuorum names it.
const METADATA_TOPIC: &str = "__cluster_metadata";
const DESCRIBE_QUORUM_KEY: i16 = 55;

/// What a controller's answer means to the forwarder.
pub enum Answer<T> {
    Done(T),
    /// NOT_CONTROLLER: the leader moved; look it up again.
    NotController,
    Failed(ChannelError),
}

/// The connection to the active controller.
pub struct Forwarder {
    node_id: i32,
    raft: RaftHandle,
    /// The voters' controller listeners.
    voters: BTreeMap<i32, String>,
    conn: tokio::sync::Mutex<Option<(i32, Connection)>>,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("node_id", &self.node_id)
            .field("voters", &self.voters)
            .finish()
    }
}

impl Forwarder {
    pub fn new(node_id: i32, raft: RaftHandle, voters: BTreeMap<i32, String>) -> Forwarder {
        Forwarder {
            node_id,
            raft,
            voters,
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// Sends `request` to the active controller and reads its answer with `outcome`; the
    /// outcome and the metadata log's high watermark just after (None if the controller
    /// could not say: the caller then waits for nothing more).
    pub async fn forward<Req: Message, Resp: Message, T>(
        &self,
        api_key: i16,
        request: &Req,
        outcome: impl Fn(Resp) -> Answer<T>,
    ) -> Result<(T, Option<i64>), ChannelError> {
        self.exchange(api_key, request, outcome, true).await
    }

    /// [`Forwarder::forward`] for an answer that needs no image applied after it (a
    /// producer-id block, DescribeQuorum): the outcome alone, without asking for the high
    /// watermark.
    pub async fn forward_only<Req: Message, Resp: Message, T>(
        &self,
        api_key: i16,
        request: &Req,
        outcome: impl Fn(Resp) -> Answer<T>,
    ) -> Result<T, ChannelError> {
        let (value, _) = self.exchange(api_key, request, outcome, false).await?;
        Ok(value)
    }

    async fn exchange<Req: Message, Resp: Message, T>(
        &self,
        api_key: i16,
        request: &Req,
        outcome: impl Fn(Resp) -> Answer<T>,
        read_high_watermark: bool,
    ) -> Result<(T, Option<i64>), ChannelError> {
        let mut slot = self.conn.lock().await;
        let mut last = String::from("no leader");
        for attempt in 0..FORWARD_ATTEMPTS_MAX {
            if attempt > 0 {
                time::sleep(Duration::from_millis(FORWARD_RETRY_BACKOFF_MS)).await;
            }
            let leader = match self.leader().await {
                Ok(leader) => leader,
                Err(why) => {
                    last = why;
                    continue;
                }
            };
            if slot
                .as_ref()
                .is_some_and(|(id, c)| *id != leader || c.is_broken())
            {
                *slot = None;
            }
            if slot.is_none() {
                let Some(address) = self.voters.get(&leader) else {
                    last = format!("the leader {leader} is not among the voters");
                    continue;
                };
                let limits = ConnectionLimits {
                    request_timeout_ms: FORWARD_REQUEST_TIMEOUT_MS,
                    connect_timeout_ms: FORWARD_REQUEST_TIMEOUT_MS,
                    ..ConnectionLimits::default()
                };
                let client_id = format!("broker-{}-controller-channel", self.node_id);
                match Connection::connect(address, &client_id, limits).await {
                    Ok(c) => *slot = Some((leader, c)),
                    Err(e) => {
                        last = format!("connecting to controller {leader} at {address}: {e}");
                        continue;
                    }
                }
            }
            let Some((_, conn)) = slot.as_mut() else {
                continue;
            };
            let sent: Result<Resp, String> = match conn.version_for(api_key) {
                Ok(version) => conn
                    .send(api_key, version, request)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let response = match sent {
                Ok(response) => response,
                Err(e) => {
                    last = format!("controller {leader}: {e}");
                    *slot = None;
                    continue;
                }
            };
            match outcome(response) {
                Answer::Done(value) => {
                    let high_watermark = if read_high_watermark {
                        high_watermark(conn).await
                    } else {
                        None
                    };
                    return Ok((value, high_watermark));
                }
                Answer::NotController => {
                    last = format!("controller {leader} is not the active controller");
                    *slot = None;
                }
                Answer::Failed(e) => return Err(e),
            }
        }
        Err(ChannelError::Unreachable {
            attempts: FORWARD_ATTEMPTS_MAX,
            last,
        })
    }

    /// Whether the quorum knows a leader and it is another node.
    pub fn leader_elsewhere(&self) -> bool {
        self.raft
            .status()
            .leader_id
            .is_some_and(|leader| leader != self.node_id)
    }

    /// The quorum's leader, once one is known (the controller beside it is the active one,
    /// or soon will be).
    async fn leader(&self) -> Result<i32, String> {
        self.raft
            .wait_for(Duration::from_millis(LEADER_WAIT_MS_MAX), |s| {
                s.leader_id.is_some()
            })
            .await
            .ok()
            .and_then(|s| s.leader_id)
            .ok_or_else(|| format!("the quorum had no leader for {LEADER_WAIT_MS_MAX} ms"))
    }
}

/// The controller's high watermark of the metadata log, if it answers for it.
async fn high_watermark(conn: &mut Connection) -> Option<i64> {
    let version = conn.version_for(DESCRIBE_QUORUM_KEY).ok()?;
    let request = DescribeQuorumRequest {
        topics: vec![DescribeQuorumRequestTopic {
            topic_name: METADATA_TOPIC.to_string(),
            partitions: vec![DescribeQuorumRequestPartition { partition_index: 0 }],
        }],
    };
    let response: DescribeQuorumResponse = conn
        .send(DESCRIBE_QUORUM_KEY, version, &request)
        .await
        .ok()?;
    let partition = response.topics.first()?.partitions.first()?;
    (response.error_code == 0 && partition.error_code == 0).then_some(partition.high_watermark.0)
}

/// An answer's error code: NOT_CONTROLLER means ask the leader again, another error the
/// controller's refusal.
pub fn answer<T>(code: i16, message: Option<String>, value: impl FnOnce() -> T) -> Answer<T> {
    match ErrorCode(code) {
        ErrorCode::NONE => Answer::Done(value()),
        ErrorCode::NOT_CONTROLLER => Answer::NotController,
        code => Answer::Failed(ChannelError::Remote { code, message }),
    }
}
