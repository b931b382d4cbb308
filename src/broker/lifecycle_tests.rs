use super::*;

const HEARTBEAT_MS: u64 = 2_000;
const BACKOFF_MS: u64 = 100;

fn lifecycle() -> Lifecycle {
    Lifecycle::new(LifecycleConfig {
        registration: BrokerRegistrationRequest {
            broker_id: NodeId(3),
            cluster_id: "c".into(),
            ..Default::default()
        },
        heartbeat_interval_ms: HEARTBEAT_MS,
        retry_backoff_ms: BACKOFF_MS,
    })
}

fn registered(epoch: i64) -> Answer<BrokerRegistrationResponse> {
    Answer::Response(BrokerRegistrationResponse {
        broker_epoch: epoch,
        ..Default::default()
    })
}

fn beat(code: ErrorCode, fenced: bool, shut_down: bool) -> Answer<BrokerHeartbeatResponse> {
    Answer::Response(BrokerHeartbeatResponse {
        error_code: code.0,
        is_caught_up: !fenced,
        is_fenced: fenced,
        should_shut_down: shut_down,
        ..Default::default()
    })
}

fn heartbeat_of(out: Option<Outgoing>) -> BrokerHeartbeatRequest {
    match out {
        Some(Outgoing::Heartbeat(h)) => h,
        other => panic!("expected a heartbeat, got {other:?}"),
    }
}

#[test]
fn lifecycle_registers_then_heartbeats_until_unfenced() {
    let mut l = lifecycle();
    assert_eq!(l.state(), &BrokerState::Starting);
    assert!(matches!(l.poll(0), Some(Outgoing::Register(r)) if r.broker_id == NodeId(3)));
    assert_eq!(l.poll(0), None, "one request in flight");
    l.on_registration(5, registered(42));
    assert_eq!(l.state(), &BrokerState::Recovery);
    assert_eq!(l.epoch(), Some(42));
    l.metadata_applied(40);
    let h = heartbeat_of(l.poll(5));
    assert_eq!(
        (h.broker_epoch, h.current_metadata_offset),
        (42, Offset(40))
    );
    assert!(!h.want_shut_down);
    l.on_heartbeat(6, beat(ErrorCode::NONE, true, false));
    assert_eq!(l.state(), &BrokerState::Recovery, "still fenced");
    assert_eq!(l.next_deadline_ms(), Some(6 + HEARTBEAT_MS));
    assert_eq!(
        l.poll(6 + HEARTBEAT_MS - 1),
        None,
        "not before the interval"
    );
    heartbeat_of(l.poll(6 + HEARTBEAT_MS));
    l.on_heartbeat(2_010, beat(ErrorCode::NONE, false, false));
    assert_eq!(l.state(), &BrokerState::Running);
}

#[test]
fn lifecycle_moves_on_after_a_wrong_controller_or_a_lost_answer() {
    let mut l = lifecycle();
    l.poll(0);
    l.on_registration(
        1,
        Answer::Response(BrokerRegistrationResponse {
            error_code: ErrorCode::NOT_CONTROLLER.0,
            broker_epoch: -1,
            ..Default::default()
        }),
    );
    assert!(l.take_wrong_controller());
    assert!(!l.take_wrong_controller(), "told once");
    assert_eq!(l.poll(1), None, "backs off");
    assert!(l.poll(1 + BACKOFF_MS).is_some());
    l.on_registration(200, Answer::Failed);
    assert!(l.take_wrong_controller());
    assert_eq!(l.state(), &BrokerState::Starting);
}

#[test]
fn lifecycle_registers_again_after_a_stale_epoch_and_follows_fencing() {
    let mut l = lifecycle();
    l.poll(0);
    l.on_registration(0, registered(7));
    l.poll(0);
    l.on_heartbeat(0, beat(ErrorCode::NONE, false, false));
    assert_eq!(l.state(), &BrokerState::Running);
    // Fenced by the controller (its session expired): back to Recovery, still registered.
    heartbeat_of(l.poll(HEARTBEAT_MS));
    l.on_heartbeat(HEARTBEAT_MS, beat(ErrorCode::NONE, true, false));
    assert_eq!(l.state(), &BrokerState::Recovery);
    // Its registration is gone: register again.
    heartbeat_of(l.poll(2 * HEARTBEAT_MS));
    l.on_heartbeat(
        2 * HEARTBEAT_MS,
        beat(ErrorCode::STALE_BROKER_EPOCH, true, false),
    );
    assert_eq!(l.state(), &BrokerState::Starting);
    assert_eq!(l.epoch(), None);
    match l.poll(2 * HEARTBEAT_MS + BACKOFF_MS) {
        // The same process re-registers: no crash came between, so it names the epoch it
        // held and stays eligible for election from the ELR (KIP-966).
        Some(Outgoing::Register(r)) => assert_eq!(r.previous_broker_epoch, 7),
        other => panic!("expected a registration, got {other:?}"),
    }
}

#[test]
fn lifecycle_first_registration_names_the_clean_shutdown_epoch_or_none() {
    for previous in [-1, 42] {
        let mut l = Lifecycle::new(LifecycleConfig {
            registration: BrokerRegistrationRequest {
                broker_id: NodeId(3),
                cluster_id: "c".into(),
                previous_broker_epoch: previous,
                ..Default::default()
            },
            heartbeat_interval_ms: HEARTBEAT_MS,
            retry_backoff_ms: BACKOFF_MS,
        });
        match l.poll(0) {
            Some(Outgoing::Register(r)) => assert_eq!(r.previous_broker_epoch, previous),
            other => panic!("expected a registration, got {other:?}"),
        }
    }
}

#[test]
fn lifecycle_controlled_shutdown_waits_for_the_controller() {
    let mut l = lifecycle();
    l.poll(0);
    l.on_registration(0, registered(7));
    l.poll(0);
    l.on_heartbeat(0, beat(ErrorCode::NONE, false, false));
    l.begin_controlled_shutdown(10);
    assert_eq!(l.state(), &BrokerState::PendingControlledShutdown);
    let h = heartbeat_of(l.poll(10));
    assert!(h.want_shut_down, "asked at once, not after the interval");
    l.on_heartbeat(11, beat(ErrorCode::NONE, false, false));
    assert_eq!(l.state(), &BrokerState::PendingControlledShutdown);
    heartbeat_of(l.poll(11 + HEARTBEAT_MS));
    l.on_heartbeat(12 + HEARTBEAT_MS, beat(ErrorCode::NONE, true, true));
    assert_eq!(l.state(), &BrokerState::ShutDown);
    assert_eq!(l.poll(u64::MAX), None, "nothing after shutdown");
    assert_eq!(l.next_deadline_ms(), None);
}

#[test]
fn lifecycle_fails_for_good_on_another_cluster() {
    let mut l = lifecycle();
    l.poll(0);
    l.on_registration(
        0,
        Answer::Response(BrokerRegistrationResponse {
            error_code: ErrorCode::INCONSISTENT_CLUSTER_ID.0,
            broker_epoch: -1,
            ..Default::default()
        }),
    );
    assert!(matches!(l.state(), BrokerState::Failed(why) if why.contains("'c'")));
    assert_eq!(l.poll(u64::MAX), None);
}
