//! A broker's lifecycle with the controller, Kafka's `BrokerLifecycleManager` as an IO-free
//! state machine: it registers (BrokerRegistration with this process's incarnation id), then
//! heartbeats (BrokerHeartbeat with the metadata offset the broker applied) every
//! `broker.heartbeat.interval.ms`, learns when it is unfenced (caught up) or fenced again,
//! registers anew when its epoch went stale, and on a controlled shutdown heartbeats with
//! `want_shut_down` until the controller says it may stop.
//!
//! States (Kafka's `BrokerState` names): Starting (not registered) -> Recovery (registered,
//! fenced, catching up) -> Running (unfenced) -> PendingControlledShutdown -> ShutDown; a
//! fence or a stale epoch moves a Running broker back. Failed is final (another cluster).
//!
//! Invariants: at most one request is in flight; a heartbeat always carries the epoch of the
//! registration it follows; every retry waits `retry_backoff_ms` and every heartbeat
//! `heartbeat_interval_ms`, so the broker never floods the controller.

use crate::protocol::broker_heartbeat::{BrokerHeartbeatRequest, BrokerHeartbeatResponse};
use crate::protocol::broker_registration::{BrokerRegistrationRequest, BrokerRegistrationResponse};
use crate::protocol::error::ErrorCode;
use crate::protocol::types::{NodeId, Offset};

/// The broker's state, under Kafka's names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BrokerState {
    Starting,
    Recovery,
    Running,
    PendingControlledShutdown,
    ShutDown,
    /// The controller refused this broker for good (another cluster's id).
    Failed(String),
}

/// The lifecycle's settings.
#[derive(Clone, Debug)]
pub struct LifecycleConfig {
    /// What to register with (broker id, cluster id, incarnation id, listeners, features).
    pub registration: BrokerRegistrationRequest,
    /// `broker.heartbeat.interval.ms` (Kafka's default 2000).
    pub heartbeat_interval_ms: u64,
    /// How long to wait before another attempt after a failure.
    pub retry_backoff_ms: u64,
}

/// A request for the driver to send to the active controller.
#[derive(Clone, Debug, PartialEq)]
pub enum Outgoing {
    Register(BrokerRegistrationRequest),
    Heartbeat(BrokerHeartbeatRequest),
}

/// What came back, or why nothing did.
#[derive(Clone, Debug)]
pub enum Answer<T> {
    Response(T),
    /// No answer (a broken connection, a timeout): the driver tries another controller.
    Failed,
}

/// The state machine.
#[derive(Debug)]
pub struct Lifecycle {
    config: LifecycleConfig,
    state: BrokerState,
    epoch: Option<i64>,
    /// What the next registration names as `PreviousBrokerEpoch` (KIP-966): the epoch this
    /// process last held, or, before its first registration, the epoch of the clean
    /// shutdown that preceded it (-1 after an unclean one). The controller takes a broker
    /// whose value differs from its last registration's epoch out of every ELR.
    previous_epoch: i64,
    in_flight: bool,
    next_send_ms: u64,
    metadata_offset: i64,
    /// Whether the last answer said NOT_CONTROLLER (the driver then asks another).
    wrong_controller: bool,
}

impl Lifecycle {
    pub fn new(config: LifecycleConfig) -> Lifecycle {
        let previous_epoch = config.registration.previous_broker_epoch;
        Lifecycle {
            config,
            state: BrokerState::Starting,
            epoch: None,
            previous_epoch,
            in_flight: false,
            next_send_ms: 0,
            metadata_offset: -1,
            wrong_controller: false,
        }
    }

    pub fn state(&self) -> &BrokerState {
        &self.state
    }

    /// The broker epoch of the current registration.
    pub fn epoch(&self) -> Option<i64> {
        self.epoch
    }

    /// Whether the last answer came from a controller that is not the active one.
    pub fn take_wrong_controller(&mut self) -> bool {
        std::mem::take(&mut self.wrong_controller)
    }

    /// The broker applied the metadata log up to `offset`.
    pub fn metadata_applied(&mut self, offset: i64) {
        let was = self.metadata_offset;
        self.metadata_offset = self.metadata_offset.max(offset);
        // Caught up with its own registration while fenced: heartbeat now rather than a
        // whole interval later, so a starting broker is unfenced as soon as it may be (as
        // Kafka's lifecycle manager heartbeats at once in recovery).
        if let (BrokerState::Recovery, Some(epoch)) = (&self.state, self.epoch) {
            if was < epoch && self.metadata_offset >= epoch {
                self.next_send_ms = 0;
            }
        }
    }

    /// Starts a controlled shutdown: the next heartbeats ask for it.
    pub fn begin_controlled_shutdown(&mut self, now_ms: u64) {
        match self.state {
            BrokerState::Recovery | BrokerState::Running => {
                self.state = BrokerState::PendingControlledShutdown;
                self.next_send_ms = now_ms;
            }
            // Never registered: nothing leads here, nothing to move.
            BrokerState::Starting => self.state = BrokerState::ShutDown,
            _ => {}
        }
    }

    /// When the next request is due (none in flight, not finished).
    pub fn next_deadline_ms(&self) -> Option<u64> {
        (!self.in_flight && !self.finished()).then_some(self.next_send_ms)
    }

    fn finished(&self) -> bool {
        matches!(self.state, BrokerState::ShutDown | BrokerState::Failed(_))
    }

    /// The request to send now, if one is due.
    pub fn poll(&mut self, now_ms: u64) -> Option<Outgoing> {
        if self.in_flight || self.finished() || now_ms < self.next_send_ms {
            return None;
        }
        self.in_flight = true;
        Some(match (&self.state, self.epoch) {
            (BrokerState::Starting, _) | (_, None) => {
                Outgoing::Register(BrokerRegistrationRequest {
                    previous_broker_epoch: self.previous_epoch,
                    ..self.config.registration.clone()
                })
            }
            (state, Some(epoch)) => Outgoing::Heartbeat(BrokerHeartbeatRequest {
                broker_id: self.config.registration.broker_id,
                broker_epoch: epoch,
                current_metadata_offset: Offset(self.metadata_offset),
                want_fence: false,
                want_shut_down: *state == BrokerState::PendingControlledShutdown,
                ..Default::default()
            }),
        })
    }

    fn retry(&mut self, now_ms: u64) {
        self.next_send_ms = now_ms + self.config.retry_backoff_ms;
    }

    fn not_controller(&mut self, now_ms: u64) {
        self.wrong_controller = true;
        self.retry(now_ms);
    }

    /// The answer's response, or `None` after a failure (then the next controller is asked).
    fn received<T>(&mut self, now_ms: u64, answer: Answer<T>) -> Option<T> {
        assert!(self.in_flight, "an answer to no request");
        self.in_flight = false;
        match answer {
            Answer::Response(r) => Some(r),
            Answer::Failed => {
                self.not_controller(now_ms);
                None
            }
        }
    }

    pub fn on_registration(&mut self, now_ms: u64, answer: Answer<BrokerRegistrationResponse>) {
        let Some(response) = self.received(now_ms, answer) else {
            return;
        };
        match ErrorCode(response.error_code) {
            ErrorCode::NONE => {
                assert!(
                    response.broker_epoch >= 0,
                    "a registration without an epoch"
                );
                self.epoch = Some(response.broker_epoch);
                // A later registration of this process (after a stale epoch) follows no
                // crash: its logs are whole, so it names this epoch and stays eligible.
                self.previous_epoch = response.broker_epoch;
                if self.state == BrokerState::Starting {
                    self.state = BrokerState::Recovery;
                }
                self.next_send_ms = now_ms;
            }
            ErrorCode::NOT_CONTROLLER => self.not_controller(now_ms),
            ErrorCode::INCONSISTENT_CLUSTER_ID => {
                self.state = BrokerState::Failed(format!(
                    "the controller belongs to another cluster than '{}'",
                    self.config.registration.cluster_id
                ));
            }
            // DUPLICATE_BROKER_REGISTRATION (the previous incarnation's session has not
            // expired yet), overload, anything else: later.
            _ => self.retry(now_ms),
        }
    }

    pub fn on_heartbeat(&mut self, now_ms: u64, answer: Answer<BrokerHeartbeatResponse>) {
        let Some(response) = self.received(now_ms, answer) else {
            return;
        };
        match ErrorCode(response.error_code) {
            ErrorCode::NONE => {}
            ErrorCode::NOT_CONTROLLER => return self.not_controller(now_ms),
            ErrorCode::STALE_BROKER_EPOCH | ErrorCode::BROKER_ID_NOT_REGISTERED => {
                // The controller no longer knows this registration: register again.
                self.epoch = None;
                if matches!(self.state, BrokerState::Running | BrokerState::Recovery) {
                    self.state = BrokerState::Starting;
                }
                return self.retry(now_ms);
            }
            _ => return self.retry(now_ms),
        }
        self.state = match (&self.state, response.is_fenced, response.should_shut_down) {
            (BrokerState::PendingControlledShutdown, _, true) => BrokerState::ShutDown,
            (BrokerState::PendingControlledShutdown, _, false) => {
                BrokerState::PendingControlledShutdown
            }
            (_, false, _) => BrokerState::Running,
            (_, true, _) => BrokerState::Recovery,
        };
        self.next_send_ms = now_ms + self.config.heartbeat_interval_ms;
    }

    /// The broker id.
    pub fn broker_id(&self) -> NodeId {
        self.config.registration.broker_id
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
