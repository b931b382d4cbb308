//! The driver of a broker's lifecycle ([`Lifecycle`]) on `rt`: it sends the core's
//! registration and heartbeats to the controllers' listeners, one connection at a time, moves
//! to the next controller after NOT_CONTROLLER or a failed exchange, feeds the core the
//! metadata offset the broker applied and the start of a controlled shutdown, and publishes
//! the broker's state. It decides nothing.
//!
//! Invariants: one request at a time (the core's); every exchange has a timeout
//! (`REQUEST_TIMEOUT_MS`); the input queue is bounded (`INPUT_QUEUE_MAX`).

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::client::connection::{Connection, ConnectionLimits};
use crate::protocol::broker_heartbeat::BrokerHeartbeatResponse;
use crate::protocol::broker_registration::BrokerRegistrationResponse;
use crate::rt::task::{self, JoinHandle};
use crate::rt::time::{self, Duration, Instant};
use crate::rt::watch::Watched;

use super::lifecycle::{Answer, BrokerState, Lifecycle, LifecycleConfig, Outgoing};

/// The longest one registration or heartbeat exchange may take.
pub const REQUEST_TIMEOUT_MS: u64 = 5_000;
/// Inputs waiting for the driver.
pub const INPUT_QUEUE_MAX: usize = 64;
/// The longest the driver sleeps without looking at the core again.
pub const WAKE_INTERVAL_MS_MAX: u64 = 1_000;

/// What the lifecycle publishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LifecycleStatus {
    pub state: BrokerState,
    pub epoch: Option<i64>,
}

enum Input {
    MetadataApplied(i64),
    ControlledShutdown,
    Stop,
}

/// A handle on a running lifecycle.
#[derive(Clone)]
pub struct LifecycleHandle {
    inputs: mpsc::Sender<Input>,
    status: Arc<Watched<LifecycleStatus>>,
    muted: Arc<std::sync::atomic::AtomicBool>,
}

impl LifecycleHandle {
    /// A fault for the simulation: while muted the driver sends nothing, as if the broker
    /// were cut off from every controller (it is fenced once its session expires).
    pub fn set_muted(&self, muted: bool) {
        self.muted
            .store(muted, std::sync::atomic::Ordering::Release);
    }

    pub fn status(&self) -> LifecycleStatus {
        self.status.get()
    }

    /// Waits until `ready` holds for the status, at most `timeout`; the last status if not.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        ready: impl Fn(&LifecycleStatus) -> bool,
    ) -> Result<LifecycleStatus, LifecycleStatus> {
        self.status.wait_for(timeout, ready).await
    }

    /// The broker applied the metadata log up to `offset` (dropped if the queue is full: a
    /// later one carries a higher offset).
    pub fn metadata_applied(&self, offset: i64) {
        let _ = self.inputs.try_send(Input::MetadataApplied(offset));
    }

    /// Starts a controlled shutdown; [`BrokerState::ShutDown`] once the controller allows it.
    pub async fn begin_controlled_shutdown(&self) {
        let _ = self.inputs.send(Input::ControlledShutdown).await;
    }

    /// Stops the driver's task.
    pub async fn stop(&self) {
        let _ = self.inputs.send(Input::Stop).await;
    }
}

/// Starts the lifecycle against the controllers at `controllers` (`host:port` of their
/// listeners), beginning with the first.
pub fn start(
    config: LifecycleConfig,
    controllers: Vec<String>,
) -> (LifecycleHandle, JoinHandle<()>) {
    assert!(
        !controllers.is_empty(),
        "a lifecycle needs a controller to talk to"
    );
    let (inputs, queue) = mpsc::channel(INPUT_QUEUE_MAX);
    let status = Arc::new(Watched::new(LifecycleStatus {
        state: BrokerState::Starting,
        epoch: None,
    }));
    let client_id = format!("broker-{}-lifecycle", config.registration.broker_id.0);
    let muted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let driver = Driver {
        muted: muted.clone(),
        core: Lifecycle::new(config),
        controllers,
        at: 0,
        conn: None,
        client_id,
        status: status.clone(),
        origin: time::now(),
    };
    let task = task::spawn(driver.run(queue));
    (
        LifecycleHandle {
            inputs,
            status,
            muted,
        },
        task,
    )
}

struct Driver {
    /// See [`LifecycleHandle::set_muted`].
    muted: Arc<std::sync::atomic::AtomicBool>,
    core: Lifecycle,
    controllers: Vec<String>,
    /// The controller asked next.
    at: usize,
    conn: Option<Connection>,
    client_id: String,
    status: Arc<Watched<LifecycleStatus>>,
    origin: Instant,
}

impl Driver {
    fn now_ms(&self) -> u64 {
        time::millis_since(self.origin)
    }

    async fn run(mut self, mut inputs: mpsc::Receiver<Input>) {
        loop {
            self.status.set(LifecycleStatus {
                state: self.core.state().clone(),
                epoch: self.core.epoch(),
            });
            if self.core.take_wrong_controller() {
                self.conn = None;
                self.at = (self.at + 1) % self.controllers.len();
            }
            let now_ms = self.now_ms();
            if let Some(outgoing) = self.core.poll(now_ms) {
                self.exchange(outgoing).await;
                continue;
            }
            let wait_ms = self
                .core
                .next_deadline_ms()
                .map_or(WAKE_INTERVAL_MS_MAX, |at| {
                    at.saturating_sub(now_ms).clamp(1, WAKE_INTERVAL_MS_MAX)
                });
            tokio::select! {
                biased;
                input = inputs.recv() => match input {
                    Some(Input::MetadataApplied(offset)) => self.core.metadata_applied(offset),
                    Some(Input::ControlledShutdown) => {
                        let now_ms = self.now_ms();
                        self.core.begin_controlled_shutdown(now_ms);
                    }
                    Some(Input::Stop) | None => return,
                },
                _ = time::sleep(Duration::from_millis(wait_ms)) => {}
            }
        }
    }

    async fn exchange(&mut self, outgoing: Outgoing) {
        if self.muted.load(std::sync::atomic::Ordering::Acquire) {
            // Cut off: the exchange fails as a lost connection would.
            self.conn = None;
            let now_ms = self.now_ms();
            match outgoing {
                Outgoing::Register(_) => self.core.on_registration(now_ms, Answer::Failed),
                Outgoing::Heartbeat(_) => self.core.on_heartbeat(now_ms, Answer::Failed),
            }
            return;
        }
        if self.conn.is_none() {
            let limits = ConnectionLimits {
                request_timeout_ms: REQUEST_TIMEOUT_MS,
                connect_timeout_ms: REQUEST_TIMEOUT_MS,
                ..ConnectionLimits::default()
            };
            let addr = &self.controllers[self.at];
            match Connection::connect(addr, &self.client_id, limits).await {
                Ok(conn) => self.conn = Some(conn),
                Err(e) => {
                    tracing::debug!(controller = %addr, error = %e, "lifecycle: cannot connect")
                }
            }
        }
        let now_ms = self.now_ms();
        match outgoing {
            Outgoing::Register(request) => {
                let answer = match self.conn.as_mut() {
                    Some(conn) => send::<_, BrokerRegistrationResponse>(conn, 62, &request).await,
                    None => Answer::Failed,
                };
                if matches!(answer, Answer::Failed) {
                    self.conn = None;
                }
                self.core.on_registration(now_ms, answer);
            }
            Outgoing::Heartbeat(request) => {
                let answer = match self.conn.as_mut() {
                    Some(conn) => send::<_, BrokerHeartbeatResponse>(conn, 63, &request).await,
                    None => Answer::Failed,
                };
                if matches!(answer, Answer::Failed) {
                    self.conn = None;
                }
                self.core.on_heartbeat(now_ms, answer);
            }
        }
        if let BrokerState::Failed(why) = self.core.state() {
            tracing::error!(reason = %why, "the controller refused this broker");
        }
    }
}

async fn send<Req, Resp>(conn: &mut Connection, api_key: i16, request: &Req) -> Answer<Resp>
where
    Req: crate::protocol::message::Message,
    Resp: crate::protocol::message::Message,
{
    let Ok(version) = conn.version_for(api_key) else {
        return Answer::Failed;
    };
    match conn.send(api_key, version, request).await {
        Ok(response) => Answer::Response(response),
        Err(e) => {
            tracing::debug!(api_key, error = %e, "lifecycle: exchange failed");
            Answer::Failed
        }
    }
}
