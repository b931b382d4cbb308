//! The Python and Node.js Kafka clients against the real `samsa broker` binary: each script in
//! `tests/interop/` runs as its own test against a fresh broker and checks everything itself
//! (it prints a summary and exits non-zero on any mismatch); this file starts the broker,
//! runs the script with a bounded wait, and on failure prints the script's output (the
//! broker's stderr follows, printed by `BrokerProcess` when the test panics).
//!
//! | test | client | what the script checks |
//! | --- | --- | --- |
//! | `confluent_kafka_round_trip` | confluent-kafka 2.16 (librdkafka 2.16) | per codec none/gzip/snappy/lz4/zstd: admin create, produce acks=all, read back by assign |
//! | `kafka_python_round_trip` | kafka-python 3.0 (idempotent by default) | the same |
//! | `aiokafka_round_trip` | aiokafka 0.14 | the same |
//! | `kafkajs_produce_admin` | kafkajs 2.2.4 | none/gzip: admin create/metadata/offsets/delete, produce offsets |
//! | `kafka_python_idempotent_producer_across_sigkill` | kafka-python 3.0 | every ack stored exactly once, in order, across a SIGKILL restart |
//! | `groups_confluent_kafka` | confluent-kafka 2.16 | groups: share, SIGKILL takeover, resume at commits after a broker SIGKILL, two groups; cooperative-sticky; static membership; admin group APIs |
//! | `groups_kafka_python` | kafka-python 3.0 | the same |
//! | `groups_aiokafka` | aiokafka 0.14 | groups: share, SIGKILL takeover, resume at commits after a broker SIGKILL, two groups |
//! | `groups_kafkajs` | kafkajs 2.2.4 | the same |
//!
//! The `groups_*` tests run tests/interop/groups_coordinator.py (its docstring lists each
//! scenario's checks) against a broker with `group.initial.rebalance.delay.ms=100`: it
//! starts the client's members as separate processes (session timeout 6000 ms, heartbeat
//! 1000 ms), produces with confluent-kafka, and asks this file for the broker's SIGKILL and
//! restart through the same file handshake as the idempotent-producer test.
//!
//! The four round trips also check DescribeConfigs, (Incremental)AlterConfigs and
//! CreatePartitions through each client (`SAMSA_INTEROP_CONFIG_APIS=1`, which the scripts
//! read, is always set here).
//!
//! Finding the clients: Python is `SAMSA_PYTHON`, else `.ci/venv/bin/python` (where .ci/run
//! installs tests/interop/requirements.txt), else `python3`; Node is `SAMSA_NODE`, else
//! `node`, with kafkajs from `tests/interop/node_modules` (`npm ci` there). A missing
//! interpreter or package skips the test with a notice, unless `SAMSA_REQUIRE_CLIENTS=1`
//! (set by CI): then it fails, as in tests/interop_kcat.rs.
//!
//! The broker binary cannot run in a simulation build, so these tests exist only without the
//! `sim` feature.
#![cfg(not(feature = "sim"))]

#[path = "support/broker_process.rs"]
mod broker_process;

#[path = "support/interop_scripts.rs"]
mod interop_scripts;

use broker_process::BrokerProcess;
use interop_scripts::{node, node_or_skip, python_or_skip, script_command};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::Duration;

/// Polls of a running script before it is killed (600 s in all: five codecs of a
/// pure-Python client against a debug broker on a loaded 2-core machine take well under a
/// minute; the bound is for a hung client, not a slow one).
const SCRIPT_POLLS_MAX: u32 = 6_000;
const SCRIPT_POLL_MS: u64 = 100;
/// How much of a script's output a failure message shows (the files stay in the kept
/// directory).
const OUTPUT_SHOWN_BYTES_MAX: usize = 48 * 1024;

/// The restart handshake of kafka_python_idempotent_restart.py (see its docstring).
const RESTART_REQUEST_FILE: &str = "restart-requested";
const RESTART_DONE_FILE: &str = "restarted";

/// The broker setting of the group tests: low, so three members joining one by one settle
/// in seconds (Kafka's default is 3000 ms).
const GROUP_INITIAL_REBALANCE_DELAY_MS: &str = "100";

/// What one script run left behind.
struct ScriptRun {
    status: ExitStatus,
    output: String,
    command: String,
}

/// The end of `text`, at most `OUTPUT_SHOWN_BYTES_MAX` bytes.
fn tail(text: &str) -> &str {
    if text.len() <= OUTPUT_SHOWN_BYTES_MAX {
        return text;
    }
    let mut start = text.len() - OUTPUT_SHOWN_BYTES_MAX;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// Starts `interpreter script` in tests/interop with the broker's address and `env`, its
/// stdout and stderr together in one file in the broker's directory.
fn spawn_script(
    broker: &BrokerProcess,
    interpreter: &Path,
    script: &str,
    env: &[(&str, String)],
) -> (Child, PathBuf, String) {
    let out_path = broker.dir().join(format!("{script}.out"));
    #[allow(clippy::disallowed_methods)] // a test's scratch file
    let out = File::create(&out_path).expect("create the script's output file");
    let err = out.try_clone().expect("clone the output file handle");
    let mut cmd = script_command(interpreter, script);
    cmd.env("SAMSA_BOOTSTRAP", broker.bootstrap())
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let command = format!("{} {script}", interpreter.display());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command}: {e}"));
    (child, out_path, command)
}

/// Polls `child` until it exits, calling `each_poll` between polls; kills it and panics with
/// its output if it outlives `SCRIPT_POLLS_MAX` polls.
fn wait_script(
    mut child: Child,
    out_path: &Path,
    command: String,
    mut each_poll: impl FnMut(),
) -> ScriptRun {
    let output = || std::fs::read_to_string(out_path).unwrap_or_default();
    for _ in 0..SCRIPT_POLLS_MAX {
        if let Ok(Some(status)) = child.try_wait() {
            return ScriptRun {
                status,
                output: output(),
                command,
            };
        }
        each_poll();
        std::thread::sleep(Duration::from_millis(SCRIPT_POLL_MS));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "{command} still running after {} ms; killed. Its output:\n{}",
        u64::from(SCRIPT_POLLS_MAX) * SCRIPT_POLL_MS,
        tail(&output())
    );
}

/// Panics with the script's output unless it exited with 0; prints the output of a passing
/// run too (cargo shows it with --nocapture).
fn assert_script_passed(run: &ScriptRun) {
    if run.status.success() {
        println!(
            "----- {} ({}):\n{}",
            run.command,
            run.status,
            tail(&run.output)
        );
    }
    assert!(
        run.status.success(),
        "{} exited with {}; its output:\n{}",
        run.command,
        run.status,
        tail(&run.output)
    );
}

/// Runs a round-trip script against a fresh broker and asserts it passed.
fn run_round_trip(interpreter: &Path, script: &str) {
    // Every round trip also checks DescribeConfigs, (Incremental)AlterConfigs and
    // CreatePartitions through the client's admin API.
    let env = vec![("SAMSA_INTEROP_CONFIG_APIS", "1".to_string())];
    let mut broker = BrokerProcess::start();
    let (child, out_path, command) = spawn_script(&broker, interpreter, script, &env);
    let run = wait_script(child, &out_path, command, || {});
    assert_script_passed(&run);
    broker.assert_alive(script);
}

#[test]
fn confluent_kafka_round_trip() {
    let Some(python) = python_or_skip("confluent_kafka_round_trip", "import confluent_kafka")
    else {
        return;
    };
    run_round_trip(&python, "confluent_kafka_round_trip.py");
}

#[test]
fn kafka_python_round_trip() {
    let Some(python) = python_or_skip(
        "kafka_python_round_trip",
        "import kafka, kafka.codec as c; assert c.has_snappy() and c.has_lz4() and c.has_zstd()",
    ) else {
        return;
    };
    run_round_trip(&python, "kafka_python_round_trip.py");
}

#[test]
fn aiokafka_round_trip() {
    let Some(python) = python_or_skip(
        "aiokafka_round_trip",
        "import aiokafka.codec as c; assert c.has_snappy() and c.has_lz4() and c.has_zstd()",
    ) else {
        return;
    };
    run_round_trip(&python, "aiokafka_round_trip.py");
}

#[test]
fn kafkajs_produce_admin() {
    let Some(node) = node_or_skip("kafkajs_produce_admin") else {
        return;
    };
    run_round_trip(&node, "kafkajs_produce_admin.js");
}

/// kafka-python's default (idempotent) producer while the broker is killed with SIGKILL and
/// restarted on the same data directory and port: the script asks for the restart through a
/// file and keeps sending; every acknowledged record must be stored exactly once, in order.
#[test]
fn kafka_python_idempotent_producer_across_sigkill() {
    let Some(python) = python_or_skip(
        "kafka_python_idempotent_producer_across_sigkill",
        "import kafka",
    ) else {
        return;
    };
    let mut broker = BrokerProcess::start();
    run_with_one_restart(
        &mut broker,
        &python,
        "kafka_python_idempotent_restart.py",
        Vec::new(),
    );
    broker.assert_alive("the idempotent producer script");
}

/// Runs `script` with a restart handshake directory in SAMSA_RESTART_DIR: when the script
/// creates `RESTART_REQUEST_FILE` there, the broker is killed with SIGKILL and restarted on
/// the same data directory and port, then `RESTART_DONE_FILE` tells the script it is back.
/// Asserts that the script passed and asked for exactly one restart.
fn run_with_one_restart(
    broker: &mut BrokerProcess,
    interpreter: &Path,
    script: &str,
    mut env: Vec<(&str, String)>,
) {
    let handshake = broker.dir().join("restart-handshake");
    std::fs::create_dir(&handshake).expect("create the handshake directory");
    env.push(("SAMSA_RESTART_DIR", handshake.display().to_string()));
    let (child, out_path, command) = spawn_script(broker, interpreter, script, &env);
    let mut restarts = 0;
    let run = wait_script(child, &out_path, command, || {
        if restarts == 0 && handshake.join(RESTART_REQUEST_FILE).exists() {
            broker.kill9();
            broker.restart();
            restarts += 1;
            #[allow(clippy::disallowed_methods)] // a test's scratch file
            std::fs::write(handshake.join(RESTART_DONE_FILE), b"1\n")
                .expect("write the handshake's done file");
        }
    });
    assert_script_passed(&run);
    assert_eq!(
        restarts, 1,
        "{script} passed without asking for the restart; its output:\n{}",
        run.output
    );
}

/// The group scenarios of groups_coordinator.py for one client (see its docstring): a
/// broker with a 100 ms initial rebalance delay, members as separate processes, a SIGKILL
/// restart of the broker in the middle. `extra` turns on the scenarios only some clients
/// have (cooperative-sticky, static membership, the admin group APIs).
fn run_groups(interpreter: &Path, client: &str, extra: &[&str]) {
    let mut broker = BrokerProcess::start_with(&[(
        "group.initial.rebalance.delay.ms",
        GROUP_INITIAL_REBALANCE_DELAY_MS,
    )]);
    let mut env = vec![
        ("SAMSA_GROUPS_CLIENT", client.to_string()),
        ("SAMSA_NODE", node().display().to_string()),
    ];
    env.extend(extra.iter().map(|k| (*k, "1".to_string())));
    run_with_one_restart(&mut broker, interpreter, "groups_coordinator.py", env);
    broker.assert_alive("the group scenarios");
}

/// The scenarios only confluent-kafka and kafka-python run: kafkajs has neither cooperative
/// rebalancing nor static membership, and aiokafka's admin client can neither alter a
/// group's offsets nor delete a group (kafkajs's admin group APIs are not covered yet).
const GROUPS_EXTRA: [&str; 3] = [
    "SAMSA_GROUPS_COOPERATIVE",
    "SAMSA_GROUPS_STATIC",
    "SAMSA_GROUPS_ADMIN",
];

#[test]
fn groups_confluent_kafka() {
    let Some(python) = python_or_skip("groups_confluent_kafka", "import confluent_kafka") else {
        return;
    };
    run_groups(&python, "confluent-kafka", &GROUPS_EXTRA);
}

#[test]
fn groups_kafka_python() {
    let Some(python) = python_or_skip("groups_kafka_python", "import confluent_kafka, kafka")
    else {
        return;
    };
    run_groups(&python, "kafka-python", &GROUPS_EXTRA);
}

#[test]
fn groups_aiokafka() {
    let Some(python) = python_or_skip("groups_aiokafka", "import confluent_kafka, aiokafka") else {
        return;
    };
    run_groups(&python, "aiokafka", &[]);
}

/// kafkajs members, driven by the Python coordinator (which produces with confluent-kafka).
#[test]
fn groups_kafkajs() {
    let (Some(python), Some(_)) = (
        python_or_skip("groups_kafkajs", "import confluent_kafka"),
        node_or_skip("groups_kafkajs"),
    ) else {
        return;
    };
    run_groups(&python, "kafkajs", &[]);
}
