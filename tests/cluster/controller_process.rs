//! Three `samsa controller` processes form a metadata quorum on loopback: DescribeQuorum on
//! the controller listener names a leader whose first record a majority holds; the leader
//! stopped with SIGTERM resigns and a successor leads; it comes back from its directory; the
//! new leader killed with SIGKILL, the two others elect another in a later epoch; SIGTERM
//! stops each cleanly. Formatted with one cluster id, the processes' controllers create a
//! topic, and again through the survivors after the active one is killed (the time it took is
//! printed). A bad setting is refused by name with exit status 2.
#![cfg(not(feature = "sim"))]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use samsa::client::connection::{Connection, ConnectionLimits};
use samsa::protocol::describe_quorum::{
    DescribeQuorumRequest, DescribeQuorumRequestPartition, DescribeQuorumRequestTopic,
    DescribeQuorumResponse, DescribeQuorumResponsePartition,
};

/// Polls while waiting for the quorum, one per `POLL_MS` (30 s in all).
const POLLS_MAX: u32 = 300;
const POLL_MS: u64 = 100;

/// Three voters' ids and free ports, and `controller.quorum.voters` naming them.
fn three_voters() -> (Vec<(i32, u16)>, String) {
    let ports: Vec<(i32, u16)> = (1..=3).map(|id| (id, free_port())).collect();
    let voters = ports
        .iter()
        .map(|(id, port)| format!("{id}@127.0.0.1:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    (ports, voters)
}

/// Attempts at a port not handed out before (see [`free_port`]).
const FREE_PORT_TRIES_MAX: usize = 1_000;

/// A port nothing listens on (bound, then released), and never one this test binary handed
/// out before: the kernel may give a released port to the next bind of port 0 at once, and
/// two nodes of one cluster (or of two tests running side by side) on one port leave a
/// quorum a voter short (seen: two controllers given port 46233).
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    for _ in 0..FREE_PORT_TRIES_MAX {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if handed_out.insert(port) {
            return port;
        }
    }
    panic!("no port not handed out before in {FREE_PORT_TRIES_MAX} binds of port 0");
}

// The child's stderr goes to a file of the test's own directory, outside the system under
// test.
#[allow(clippy::disallowed_methods)]
fn spawn(dir: &Path, id: i32, voters: &str, port: u16) -> Child {
    spawn_with(
        dir,
        id,
        voters,
        port,
        &[
            "controller.quorum.election.timeout.ms=300",
            "controller.quorum.fetch.timeout.ms=600",
            "controller.quorum.election.backoff.max.ms=200",
        ],
    )
}

// The child's stderr goes to a file of the test's own directory, outside the system under
// test.
#[allow(clippy::disallowed_methods)]
fn spawn_with(dir: &Path, id: i32, voters: &str, port: u16, settings: &[&str]) -> Child {
    let stderr = std::fs::File::create(dir.join(format!("controller-{id}.log"))).expect("log");
    let mut overrides: Vec<String> = Vec::new();
    for setting in settings {
        overrides.push("--override".into());
        overrides.push(setting.to_string());
    }
    Command::new(env!("CARGO_BIN_EXE_samsa"))
        .args([
            "controller",
            "--override",
            &format!("node.id={id}"),
            "--override",
            &format!("controller.quorum.voters={voters}"),
            "--override",
            &format!("listeners=CONTROLLER://127.0.0.1:{port}"),
            "--override",
            &format!(
                "metadata.log.dir={}",
                dir.join(format!("meta-{id}")).display()
            ),
        ])
        .args(&overrides)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start samsa controller")
}

async fn describe(port: u16) -> Option<DescribeQuorumResponsePartition> {
    let mut conn = Connection::connect(
        &format!("127.0.0.1:{port}"),
        "test",
        ConnectionLimits {
            request_timeout_ms: 2_000,
            connect_timeout_ms: 1_000,
            ..ConnectionLimits::default()
        },
    )
    .await
    .ok()?;
    let request = DescribeQuorumRequest {
        topics: vec![DescribeQuorumRequestTopic {
            topic_name: "__cluster_metadata".into(),
            partitions: vec![DescribeQuorumRequestPartition { partition_index: 0 }],
        }],
    };
    let response: DescribeQuorumResponse = conn.send(55, 2, &request).await.ok()?;
    response.topics.first()?.partitions.first().cloned()
}

/// Waits until one of `ports` answers as a leader whose voters all hold its first record.
async fn leader(ports: &[(i32, u16)], above_epoch: i32) -> (i32, i32) {
    for _ in 0..POLLS_MAX {
        for (_, port) in ports {
            if let Some(p) = describe(*port).await {
                let caught_up = p
                    .current_voters
                    .iter()
                    .filter(|v| v.log_end_offset.0 >= 1)
                    .count();
                if p.error_code == 0 && p.leader_epoch.0 > above_epoch && caught_up * 2 > 3 {
                    return (p.leader_id.0, p.leader_epoch.0);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
    }
    panic!("no leader above epoch {above_epoch} among {ports:?}");
}

/// Kills node `id` with SIGKILL and waits for it; the other nodes' ports.
fn sigkill(children: &mut Vec<(i32, Child)>, ports: &[(i32, u16)], id: i32) -> Vec<(i32, u16)> {
    let at = children
        .iter()
        .position(|(child, _)| *child == id)
        .expect("its process");
    let (_, mut killed) = children.remove(at);
    killed.kill().expect("SIGKILL");
    let _ = killed.wait();
    ports
        .iter()
        .copied()
        .filter(|(other, _)| *other != id)
        .collect()
}

pub fn sigterm(child: &Child) {
    let pid = i32::try_from(child.id()).expect("a pid");
    // SAFETY: kill(2) with a pid this test spawned and has not reaped.
    let _ = unsafe { libc::kill(pid, libc::SIGTERM) };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_controller_processes_elect_and_fail_over() {
    let dir = tempfile::tempdir().expect("a directory");
    let (ports, voters) = three_voters();
    let mut children: Vec<(i32, Child)> = ports
        .iter()
        .map(|(id, port)| (*id, spawn(dir.path(), *id, &voters, *port)))
        .collect();
    let log_of = |id: i32| {
        std::fs::read_to_string(dir.path().join(format!("controller-{id}.log"))).unwrap_or_default()
    };
    let (first, epoch) = leader(&ports, 0).await;

    // A leader stopped gracefully resigns, and a successor leads.
    let at = children
        .iter()
        .position(|(id, _)| *id == first)
        .expect("the leader's process");
    let (_, mut stopped) = children.remove(at);
    sigterm(&stopped);
    let status = stopped.wait().expect("exits");
    assert!(
        status.success(),
        "the leader exited {status}:\n{}",
        log_of(first)
    );
    assert!(
        log_of(first).contains("resigned; a successor leads"),
        "{}",
        log_of(first)
    );
    let others: Vec<(i32, u16)> = ports
        .iter()
        .copied()
        .filter(|(id, _)| *id != first)
        .collect();
    let (second, later) = leader(&others, epoch).await;
    assert_ne!(second, first);

    // It comes back from its directory; then the new leader is killed.
    let port = ports.iter().find(|(id, _)| *id == first).expect("a port").1;
    children.push((first, spawn(dir.path(), first, &voters, port)));
    let survivors = sigkill(&mut children, &ports, second);
    let (third, last) = leader(&survivors, later).await;
    assert_ne!(third, second);
    assert!(last > later);

    for (id, child) in &mut children {
        sigterm(child);
        let status = child.wait().expect("exits");
        let log = log_of(*id);
        assert!(status.success(), "controller {id} exited {status}:\n{log}");
        assert!(log.contains("shut down cleanly"), "controller {id}:\n{log}");
    }
}

/// Three `samsa controller` processes formatted with one cluster id (`samsa storage format`),
/// with Samsa's default quorum timings: a broker registers with the active controller, a topic
/// is created on it; the active controller is killed with SIGKILL, and a topic is created
/// again through the survivors (trying each, as a broker does after NOT_CONTROLLER). The time
/// from the SIGKILL to that creation is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_again_after_the_active_controller_is_killed() {
    use samsa::protocol::broker_heartbeat::BrokerHeartbeatResponse;
    use samsa::protocol::broker_registration::BrokerRegistrationResponse;
    use samsa::protocol::create_topics::{
        CreatableTopic, CreateTopicsRequest, CreateTopicsResponse,
    };
    use samsa::protocol::wire::Uuid;

    let dir = tempfile::tempdir().expect("a directory");
    let cluster_id = {
        let out = Command::new(env!("CARGO_BIN_EXE_samsa"))
            .args(["storage", "random-uuid"])
            .output()
            .expect("random-uuid");
        String::from_utf8(out.stdout)
            .expect("utf-8")
            .trim()
            .to_string()
    };
    let (ports, voters) = three_voters();
    for (id, _) in &ports {
        let status = Command::new(env!("CARGO_BIN_EXE_samsa"))
            .args([
                "storage",
                "format",
                "--cluster-id",
                &cluster_id,
                "--override",
                &format!("node.id={id}"),
                "--override",
                &format!(
                    "log.dirs={}",
                    dir.path().join(format!("meta-{id}")).display()
                ),
            ])
            .stdout(Stdio::null())
            .status()
            .expect("format");
        assert!(status.success());
    }
    let mut children: Vec<(i32, Child)> = ports
        .iter()
        .map(|(id, port)| (*id, spawn_with(dir.path(), *id, &voters, *port, &[])))
        .collect();
    let limits = ConnectionLimits {
        request_timeout_ms: 5_000,
        connect_timeout_ms: 1_000,
        ..ConnectionLimits::default()
    };
    // Registers broker 9 (and heartbeats it unfenced), then creates `name`, trying every
    // port until the active controller answers; the port that did.
    let create_on = |ports: Vec<(i32, u16)>, name: String, cluster_id: String| {
        let limits = limits.clone();
        async move {
            for _ in 0..POLLS_MAX {
                for (id, port) in &ports {
                    let Ok(mut conn) =
                        Connection::connect(&format!("127.0.0.1:{port}"), "test", limits.clone())
                            .await
                    else {
                        continue;
                    };
                    let registration = crate::controller_requests::registration(
                        9,
                        &cluster_id,
                        Uuid([9; 16]),
                        "127.0.0.1",
                    );
                    let Ok(registered) = conn
                        .send::<_, BrokerRegistrationResponse>(62, 0, &registration)
                        .await
                    else {
                        continue;
                    };
                    if registered.error_code != 0 {
                        continue;
                    }
                    let heartbeat =
                        crate::controller_requests::caught_up_heartbeat(9, registered.broker_epoch);
                    let _: Result<BrokerHeartbeatResponse, _> = conn.send(63, 0, &heartbeat).await;
                    let request = CreateTopicsRequest {
                        topics: vec![CreatableTopic {
                            name: name.clone(),
                            num_partitions: 1,
                            replication_factor: 1,
                            ..Default::default()
                        }],
                        timeout_ms: 5_000,
                        validate_only: false,
                    };
                    if let Ok(created) = conn.send::<_, CreateTopicsResponse>(19, 7, &request).await
                    {
                        if created.topics[0].error_code == 0 {
                            return *id;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("no controller among {ports:?} created {name}");
        }
    };
    let active = create_on(ports.clone(), "before".into(), cluster_id.clone()).await;
    let killed_at = samsa::rt::time::now();
    let survivors = sigkill(&mut children, &ports, active);
    let next = create_on(survivors, "after".into(), cluster_id.clone()).await;
    let elapsed = killed_at.elapsed();
    assert_ne!(next, active);
    eprintln!(
        "SIGKILL of the active controller to the next topic created: {} ms (default quorum timings)",
        elapsed.as_millis()
    );
    for (_, child) in &mut children {
        sigterm(child);
        let _ = child.wait();
    }
}

#[test]
fn a_bad_setting_is_refused_by_name() {
    let output = Command::new(env!("CARGO_BIN_EXE_samsa"))
        .args([
            "controller",
            "--override",
            "node.id=1",
            "--override",
            "controller.quorum.voters=1@127.0.0.1:1",
            "--override",
            "metadata.log.dir=/nonexistent-not-used",
            "--override",
            "controller.quorum.fetch.timeout.ms=zero",
        ])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("controller.quorum.fetch.timeout.ms"),
        "{stderr}"
    );
}
