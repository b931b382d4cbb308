//! The controller's driver on `rt`: it owns the controller core ([`Controller`]) above one
//! KRaft replica ([`RaftHandle`]), and does the core's IO. It decides nothing.
//!
//! One task, one loop:
//! 1. follow the replica's leadership: a controller whose replica stopped leading its epoch
//!    becomes inactive before it applies anything more (a batch of another epoch is never
//!    taken for its own);
//! 2. apply every committed batch in order (metadata records decoded from the batch, control
//!    batches as offsets only); a log start past what was applied means the rest is in the
//!    latest snapshot, which is loaded first;
//! 3. become active once the replica leads, its high watermark reached its log end, and
//!    everything up to that end is applied (so the working image starts from all that any
//!    earlier controller wrote);
//! 4. hand a snapshot of the committed image to the replica when it says one is due;
//! 5. append the core's proposals with [`RaftHandle::propose_at`], at the offsets and epoch
//!    the core decided them for; a proposal that cannot land there deactivates the core;
//! 6. send the core's replies: to an in-process caller, or encoded for the connection the
//!    request came in on ([`super::handlers`]);
//! 7. publish the committed image, and wait for the replica's status to change, a request,
//!    or the core's next deadline.
//!
//! Invariants: the image published is always the committed image after a whole batch; a
//! reply never leaves before the core released it (after its offset committed); every queue
//! has a named bound, and a record or snapshot that does not apply stops the controller with
//! an error naming its offset, rather than serving an image that is not the log's.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use crate::raft::driver::{DriverError, ForwardedRequest, RaftHandle, StateMachineApis, Status};
use crate::raft::message::RaftRecord;
use crate::rt::task::{self, JoinHandle};
use crate::rt::time::{self, Duration, Instant};
use crate::rt::watch::Watched;

use super::core::{ConfigPolicy, Controller, ControllerConfig, Reply, Request, RequestId};
use super::handlers::{self, Decoded};
use super::image::{ImageError, MetadataImage};
use super::records::MetadataRecord;

/// Requests waiting for the driver, from this process.
pub const INPUT_QUEUE_MAX: usize = 1024;
/// Requests waiting for the driver, from the controller listener.
pub const FORWARDED_QUEUE_MAX: usize = 1024;
/// Bytes of committed batches read at once.
pub const READ_BYTES_MAX: usize = 1 << 20;
/// The largest request of the controller's APIs the listener reads (Kafka's
/// `socket.request.max.bytes` is larger; a CreateTopics of the most topics one request may
/// name, each with configs, fits well within this).
pub const REQUEST_BYTES_MAX: usize = 8 << 20;
/// How long a connection waits for its request's reply (a write waits for its commit);
/// Kafka's CreateTopics timeout default.
pub const REPLY_TIMEOUT_MS: u64 = 60_000;
/// The longest the driver waits without ticking the core.
pub const TICK_INTERVAL_MS_MAX: u64 = 1_000;

const _: () = assert!(super::core::DEFERRED_REPLIES_MAX >= FORWARDED_QUEUE_MAX);

/// Why the controller stopped.
#[derive(Debug)]
pub enum ControllerDriverError {
    /// The replica below stopped or failed.
    Raft(DriverError),
    /// A committed record does not decode.
    Record { offset: i64, reason: String },
    /// A committed record or a snapshot does not apply to the image.
    Image(ImageError),
}

impl std::fmt::Display for ControllerDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControllerDriverError::Raft(e) => write!(f, "the metadata log: {e}"),
            ControllerDriverError::Record { offset, reason } => write!(
                f,
                "the metadata record at offset {offset} does not decode: {reason}"
            ),
            ControllerDriverError::Image(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ControllerDriverError {}

impl From<DriverError> for ControllerDriverError {
    fn from(e: DriverError) -> Self {
        ControllerDriverError::Raft(e)
    }
}

impl From<ImageError> for ControllerDriverError {
    fn from(e: ImageError) -> Self {
        ControllerDriverError::Image(e)
    }
}

/// What the controller publishes of itself.
#[derive(Clone, Debug, PartialEq)]
pub struct Published {
    /// The last committed offset applied (first, so that comparing two values, as
    /// [`Watched::set`] does, stops here rather than walking the image).
    pub applied_offset: i64,
    /// The epoch this controller is active in, if it is the active controller.
    pub active_epoch: Option<i32>,
    /// The committed image, after the last batch applied.
    pub image: Arc<MetadataImage>,
}

enum Input {
    Submit {
        request: Request,
        reply: oneshot::Sender<Reply>,
    },
    Shutdown,
}

/// Where a reply goes.
enum Waiter {
    Local(oneshot::Sender<Reply>),
    Wire {
        api_key: i16,
        version: i16,
        reply: oneshot::Sender<Bytes>,
    },
}

/// A handle on a running controller.
#[derive(Clone)]
pub struct ControllerHandle {
    inputs: mpsc::Sender<Input>,
    published: Arc<Watched<Published>>,
}

impl ControllerHandle {
    /// Hands a request to the core and waits for its reply (NOT_CONTROLLER on a controller
    /// that is not active).
    pub async fn submit(&self, request: Request) -> Result<Reply, DriverError> {
        let (reply, answer) = oneshot::channel();
        self.inputs
            .send(Input::Submit { request, reply })
            .await
            .map_err(|_| DriverError::Stopped)?;
        answer.await.map_err(|_| DriverError::Stopped)
    }

    pub fn published(&self) -> Published {
        self.published.get()
    }

    /// Waits until `ready` holds for what is published, at most `timeout`; the last value if
    /// not.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        ready: impl Fn(&Published) -> bool,
    ) -> Result<Published, Published> {
        self.published.wait_for(timeout, ready).await
    }

    /// Stops the controller (not the replica below it).
    pub async fn shutdown(&self) {
        let _ = self.inputs.send(Input::Shutdown).await;
    }
}

/// A started controller: its handle and its task.
pub struct ControllerNode {
    pub handle: ControllerHandle,
    pub task: JoinHandle<Result<(), ControllerDriverError>>,
}

/// The APIs the controller serves on the controller listener, to pass to
/// [`crate::raft::driver::start_with`], and the queue their requests arrive on, to pass to
/// [`start`].
pub fn listener_apis() -> (StateMachineApis, mpsc::Receiver<ForwardedRequest>) {
    let (requests, queue) = mpsc::channel(FORWARDED_QUEUE_MAX);
    let apis = StateMachineApis {
        apis: handlers::APIS.to_vec(),
        requests,
        request_bytes_max: REQUEST_BYTES_MAX,
        reply_timeout_ms: REPLY_TIMEOUT_MS,
    };
    (apis, queue)
}

/// Starts the controller above `raft`, serving the requests of `forwarded` (see
/// [`listener_apis`]).
pub fn start(
    raft: RaftHandle,
    config: ControllerConfig,
    policy: Arc<dyn ConfigPolicy>,
    forwarded: Option<mpsc::Receiver<ForwardedRequest>>,
) -> ControllerNode {
    let (inputs, queue) = mpsc::channel(INPUT_QUEUE_MAX);
    let published = Arc::new(Watched::new(Published {
        image: Arc::new(MetadataImage::empty()),
        applied_offset: -1,
        active_epoch: None,
    }));
    let driver = Driver {
        core: Controller::new(config, policy),
        raft,
        waiting: BTreeMap::new(),
        next_id: 0,
        active_epoch: None,
        published: published.clone(),
        snapshot_attempted_at: -1,
        origin: time::now(),
    };
    let task = task::spawn(driver.run(queue, forwarded));
    ControllerNode {
        handle: ControllerHandle { inputs, published },
        task,
    }
}

struct Driver {
    core: Controller,
    raft: RaftHandle,
    waiting: BTreeMap<RequestId, Waiter>,
    next_id: RequestId,
    /// The epoch the core is active in.
    active_epoch: Option<i32>,
    published: Arc<Watched<Published>>,
    /// The end offset of the last snapshot asked for, so a refused one is not asked again.
    snapshot_attempted_at: i64,
    origin: Instant,
}

impl Driver {
    fn now_ms(&self) -> u64 {
        time::millis_since(self.origin)
    }

    async fn run(
        mut self,
        mut inputs: mpsc::Receiver<Input>,
        mut forwarded: Option<mpsc::Receiver<ForwardedRequest>>,
    ) -> Result<(), ControllerDriverError> {
        loop {
            let status = self.raft.status();
            self.step_down_if_deposed(&status);
            self.catch_up().await?;
            let status = self.raft.status();
            self.step_down_if_deposed(&status);
            self.activate_if_ready(&status);
            self.maybe_snapshot(&status).await?;
            let now_ms = self.now_ms();
            self.core.tick(now_ms);
            self.flush().await?;
            self.publish();

            let wait_ms = match self.core.next_deadline_ms() {
                Some(deadline) => deadline
                    .saturating_sub(now_ms)
                    .clamp(1, TICK_INTERVAL_MS_MAX),
                None => TICK_INTERVAL_MS_MAX,
            };
            let raft = self.raft.clone();
            let status_changed = raft.wait_for(Duration::from_millis(wait_ms), |s| *s != status);
            let next_forwarded = async {
                match forwarded.as_mut() {
                    Some(queue) => queue.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = status_changed => {}
                input = inputs.recv() => match input {
                    Some(Input::Submit { request, reply }) => {
                        self.handle(request, Waiter::Local(reply));
                    }
                    Some(Input::Shutdown) | None => {
                        self.core.become_inactive();
                        self.active_epoch = None;
                        self.flush().await?;
                        return Ok(());
                    }
                },
                request = next_forwarded => match request {
                    Some(request) => self.handle_forwarded(request),
                    None => forwarded = None,
                },
            }
        }
    }

    fn handle(&mut self, request: Request, waiter: Waiter) {
        let id = self.next_id;
        self.next_id += 1;
        self.waiting.insert(id, waiter);
        let now_ms = self.now_ms();
        self.core.handle(now_ms, id, request);
    }

    fn handle_forwarded(&mut self, request: ForwardedRequest) {
        let ForwardedRequest {
            api_key,
            version,
            client_id,
            body,
            reply,
        } = request;
        match handlers::decode(api_key, version, body) {
            Ok(Decoded::Request(request)) => self.handle(
                request,
                Waiter::Wire {
                    api_key,
                    version,
                    reply,
                },
            ),
            Ok(Decoded::Answer(body)) => {
                let _ = reply.send(body);
            }
            Err(e) => {
                // Dropping the reply slot closes the connection, as Kafka does.
                tracing::warn!(api_key, version, client_id = ?client_id, error = %e, "controller: refused a request");
            }
        }
    }

    /// A core active in an epoch its replica no longer leads steps down at once.
    fn step_down_if_deposed(&mut self, status: &Status) {
        let Some(epoch) = self.active_epoch else {
            return;
        };
        if !status.is_leader || status.epoch != epoch {
            tracing::info!(epoch, now = status.epoch, "controller: no longer active");
            self.core.become_inactive();
            self.active_epoch = None;
        }
    }

    fn activate_if_ready(&mut self, status: &Status) {
        if self.active_epoch.is_some()
            || !status.is_leader
            || status.high_watermark != status.log_end_offset
            || self.core.applied_offset() + 1 != status.log_end_offset
        {
            return;
        }
        let now_ms = self.now_ms();
        self.core
            .become_active(now_ms, status.epoch, status.log_end_offset);
        if let Some((node_id, silent_ms)) = status.predecessor_silence {
            self.core.backdate_session(node_id, silent_ms, now_ms);
        }
        self.active_epoch = Some(status.epoch);
        tracing::info!(
            epoch = status.epoch,
            offset = status.log_end_offset,
            "controller: active"
        );
    }

    /// Applies every committed batch not yet applied.
    async fn catch_up(&mut self) -> Result<(), ControllerDriverError> {
        loop {
            let from = self.core.applied_offset() + 1;
            let batches = match self.raft.read_committed(from, READ_BYTES_MAX).await {
                Ok(batches) => batches,
                Err(DriverError::BelowLogStart { log_start_offset }) => {
                    self.load_snapshot(log_start_offset).await?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            if batches.is_empty() {
                return Ok(());
            }
            for batch in batches {
                if batch.next_offset() <= from {
                    continue;
                }
                assert_eq!(
                    batch.base_offset,
                    self.core.applied_offset() + 1,
                    "a gap in the committed log"
                );
                if let Some(epoch) = self.active_epoch {
                    if batch.epoch != epoch {
                        // Written by another leader: this controller was deposed.
                        self.core.become_inactive();
                        self.active_epoch = None;
                    }
                }
                let mut records = Vec::with_capacity(batch.records.len());
                for (i, record) in batch.records.iter().enumerate() {
                    if let RaftRecord::Data(bytes) = record {
                        let offset = batch.base_offset + i as i64;
                        let decoded = MetadataRecord::decode(bytes.clone()).map_err(|e| {
                            ControllerDriverError::Record {
                                offset,
                                reason: e.to_string(),
                            }
                        })?;
                        records.push(decoded);
                    }
                }
                self.core.replay_committed(
                    batch.base_offset,
                    batch.next_offset() - 1,
                    batch.epoch,
                    &records,
                )?;
            }
        }
    }

    /// Loads the latest snapshot: what lies below the log start.
    async fn load_snapshot(&mut self, log_start_offset: i64) -> Result<(), ControllerDriverError> {
        let Some((id, contents)) = self.raft.latest_snapshot().await? else {
            return Err(ControllerDriverError::Raft(DriverError::Config(format!(
                "the metadata log starts at {log_start_offset} and there is no snapshot"
            ))));
        };
        if self.active_epoch.take().is_some() {
            self.core.become_inactive();
        }
        let mut records = Vec::with_capacity(contents.records.len());
        for bytes in contents.records {
            let record =
                MetadataRecord::decode(bytes).map_err(|e| ControllerDriverError::Record {
                    offset: id.end_offset - 1,
                    reason: format!("in the snapshot ending at {}: {e}", id.end_offset),
                })?;
            records.push(record);
        }
        let image = MetadataImage::from_snapshot(id.end_offset, id.epoch, &records)?;
        tracing::info!(
            end_offset = id.end_offset,
            epoch = id.epoch,
            "controller: loaded the metadata snapshot"
        );
        self.core.load_snapshot(image, id.end_offset);
        Ok(())
    }

    async fn maybe_snapshot(&mut self, status: &Status) -> Result<(), ControllerDriverError> {
        let end_offset = self.core.applied_offset() + 1;
        if !status.snapshot_due || end_offset <= self.snapshot_attempted_at || end_offset == 0 {
            return Ok(());
        }
        self.snapshot_attempted_at = end_offset;
        let records = self
            .core
            .committed()
            .to_records()
            .iter()
            .map(MetadataRecord::encode)
            .collect();
        match self.raft.create_snapshot(end_offset, records).await? {
            Ok(id) => tracing::info!(
                end_offset = id.end_offset,
                epoch = id.epoch,
                "controller: wrote a metadata snapshot"
            ),
            Err(e) => tracing::warn!(end_offset, error = %e, "controller: snapshot refused"),
        }
        Ok(())
    }

    /// Appends the core's proposals and sends its replies.
    async fn flush(&mut self) -> Result<(), ControllerDriverError> {
        loop {
            let ready = self.core.ready();
            if ready.proposals.is_empty() && ready.replies.is_empty() {
                return Ok(());
            }
            for proposal in ready.proposals {
                if self.active_epoch != Some(proposal.epoch) {
                    // Deactivated by an earlier proposal of this round: dropped with the
                    // working image.
                    continue;
                }
                let records = proposal
                    .records
                    .iter()
                    .map(MetadataRecord::encode)
                    .collect();
                match self
                    .raft
                    .propose_at(proposal.epoch, proposal.base_offset, records)
                    .await?
                {
                    Ok(offset) => assert_eq!(offset, proposal.base_offset),
                    Err(e) => {
                        tracing::warn!(error = %e, base_offset = proposal.base_offset, "controller: a proposal did not land; stepping down");
                        self.core.become_inactive();
                        self.active_epoch = None;
                    }
                }
            }
            // Replies go out after the image they answer from is published, so that a
            // broker that waits for its publisher to reach the published offset after an
            // answer sees the change (`broker::controller_channel`).
            if !ready.replies.is_empty() {
                self.publish();
            }
            for (id, reply) in ready.replies {
                let Some(waiter) = self.waiting.remove(&id) else {
                    panic!("a reply to request {id}, which is not waiting");
                };
                match waiter {
                    Waiter::Local(sender) => {
                        let _ = sender.send(reply);
                    }
                    Waiter::Wire {
                        api_key,
                        version,
                        reply: sender,
                    } => match handlers::encode(api_key, version, reply) {
                        Ok(body) => {
                            let _ = sender.send(body);
                        }
                        Err(e) => {
                            tracing::warn!(api_key, version, error = %e, "controller: an answer did not encode")
                        }
                    },
                }
            }
        }
    }

    fn publish(&mut self) {
        let current = self.published.get();
        let applied_offset = self.core.applied_offset();
        if current.applied_offset == applied_offset && current.active_epoch == self.active_epoch {
            return;
        }
        let image = if current.applied_offset == applied_offset {
            current.image
        } else {
            Arc::new(self.core.committed().clone())
        };
        self.published.set(Published {
            image,
            applied_offset,
            active_epoch: self.active_epoch,
        });
    }
}
