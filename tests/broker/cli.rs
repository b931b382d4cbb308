//! The `samsa` client tools (`topics`, `produce`, `consume`) as a user runs them: the built
//! binary against a broker process, with stdout compared exactly and stderr checked for a
//! message naming the problem.
//!
//! The tests marked `needs broker admin APIs` exercise CreatePartitions, DescribeConfigs and
//! IncrementalAlterConfigs, which the broker gains on the wip-admin branch; run them with
//! `cargo test --test broker -- cli:: --ignored` once it is merged.
#![cfg(not(feature = "sim"))]

#[path = "../support/broker_process.rs"]
mod broker_process;

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use broker_process::{free_port, BrokerProcess};

/// Polls while waiting for a tailing consumer's output (10 s in all).
const TAIL_POLLS_MAX: u32 = 200;
const TAIL_POLL_MS: u64 = 50;

/// What one run of the tool produced.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn from(output: Output) -> Run {
        Run {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Panics with the whole run unless it exited 0.
    fn ok(self, what: &str) -> Run {
        assert_eq!(
            self.code,
            Some(0),
            "{what} failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        self
    }

    /// Asserts a failure with exit code `code`, nothing on stdout, and `needle` on stderr.
    fn fails(self, what: &str, code: i32, needle: &str) {
        assert_eq!(
            self.code,
            Some(code),
            "{what}: exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
        assert_eq!(self.stdout, "", "{what}: stdout must stay empty on failure");
        assert!(
            self.stderr.contains(needle),
            "{what}: stderr should name the problem ({needle:?}):\n{}",
            self.stderr
        );
    }
}

fn samsa_command(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_samsa"));
    cmd.args(args).env_remove("SAMSA_LOG");
    cmd
}

/// Runs `samsa ARGS` with `stdin` as its input.
fn samsa(args: &[&str], stdin: &str) -> Run {
    let mut child = samsa_command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn samsa");
    let mut input = child.stdin.take().expect("piped stdin");
    // A tool that fails on its arguments exits without reading stdin; the write then meets a
    // closed pipe, which is not the test's concern (its exit status and output are).
    match input.write_all(stdin.as_bytes()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(e) => panic!("write the tool's stdin: {e}"),
    }
    drop(input);
    Run::from(child.wait_with_output().expect("wait for samsa"))
}

/// `samsa ARGS --bootstrap-server B` with empty stdin.
fn tool(broker: &BrokerProcess, args: &[&str]) -> Run {
    tool_in(broker, args, "")
}

fn tool_in(broker: &BrokerProcess, args: &[&str], stdin: &str) -> Run {
    let bootstrap = broker.bootstrap();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--bootstrap-server", bootstrap.as_str()]);
    samsa(&all, stdin)
}

#[test]
fn cli_topics_create_list_describe_delete() {
    let broker = BrokerProcess::start();
    let run = tool(&broker, &["topics", "create", "alpha", "--partitions", "3"]).ok("create");
    assert_eq!(run.stdout, "Created topic alpha.\n");
    assert_eq!(run.stderr, "");
    tool(&broker, &["topics", "create", "beta"]).ok("create beta");
    assert_eq!(
        tool(&broker, &["topics", "list"]).ok("list").stdout,
        "alpha\nbeta\n"
    );

    let described = tool(&broker, &["topics", "describe", "alpha"]).ok("describe");
    let lines: Vec<&str> = described.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", described.stdout);
    let head = lines.first().copied().unwrap_or_default();
    let (id_part, rest) = head
        .strip_prefix("Topic: alpha\tTopicId: ")
        .and_then(|r| r.split_once('\t'))
        .unwrap_or_else(|| panic!("topic line: {head}"));
    assert_eq!(
        id_part.len(),
        22,
        "a topic id in Kafka's base64 form: {id_part}"
    );
    assert_ne!(id_part, "AAAAAAAAAAAAAAAAAAAAAA");
    assert_eq!(rest, "PartitionCount: 3\tReplicationFactor: 1\tConfigs: ");
    for p in 0..3 {
        assert_eq!(
            lines.get(p + 1).copied(),
            Some(
                format!("\tTopic: alpha\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1").as_str()
            )
        );
    }
    let all = tool(&broker, &["topics", "describe"]).ok("describe all");
    assert!(all.stdout.starts_with(&described.stdout), "{}", all.stdout);
    assert!(
        all.stdout.contains("Topic: beta\tTopicId: "),
        "{}",
        all.stdout
    );

    tool(&broker, &["topics", "create", "alpha"]).fails("create twice", 1, "TOPIC_ALREADY_EXISTS");
    let again = tool(&broker, &["topics", "create", "alpha", "--if-not-exists"]);
    let again = again.ok("create --if-not-exists");
    assert_eq!(again.stdout, "");

    let deleted = tool(&broker, &["topics", "delete", "alpha"]).ok("delete");
    assert_eq!(deleted.stdout, "");
    assert_eq!(
        tool(&broker, &["topics", "list"]).ok("list").stdout,
        "beta\n"
    );
    tool(&broker, &["topics", "delete", "alpha"]).fails(
        "delete a deleted topic",
        1,
        "UNKNOWN_TOPIC_OR_PARTITION",
    );
    tool(&broker, &["topics", "delete", "alpha", "--if-exists"]).ok("delete --if-exists");
    tool(&broker, &["topics", "describe", "alpha"]).fails(
        "describe a deleted topic",
        1,
        "topic 'alpha' does not exist",
    );
}

#[test]
fn cli_produce_keys_and_headers_then_consume_them_back_exactly() {
    let broker = BrokerProcess::start();
    tool(&broker, &["topics", "create", "rt", "--partitions", "3"]).ok("create");
    let count = 40;
    let lines: Vec<(String, String)> = (0..count)
        .map(|i| (format!("key{i}"), format!("value {i}: a=b, c")))
        .collect();
    let input: String = lines.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect();
    let produced = tool_in(
        &broker,
        &[
            "produce",
            "--topic",
            "rt",
            "--key-separator",
            "\t",
            "--header",
            "src=cli",
            "--header",
            "n=1",
            "--compression",
            "gzip",
        ],
        &input,
    )
    .ok("produce");
    assert_eq!(
        (produced.stdout.as_str(), produced.stderr.as_str()),
        ("", "")
    );

    // One Fetch returns every partition in order, each in produce order from offset 0.
    let mut expected = String::new();
    for p in 0..3 {
        let mut offset = 0;
        for (k, v) in &lines {
            if samsa::client::partitioner::partition_for_key(k.as_bytes(), 3) == p {
                expected.push_str(&format!(
                    "rt|{p}|{offset}|{k}|{v}|src=cli,n=1|{}\n",
                    v.len()
                ));
                offset += 1;
            }
        }
    }
    let max = count.to_string();
    let consumed = tool(
        &broker,
        &[
            "consume",
            "--topic",
            "rt",
            "--from-beginning",
            "--max-messages",
            &max,
            "--format",
            "%t|%p|%o|%k|%s|%h|%S\\n",
            "--timeout-ms",
            "20000",
        ],
    )
    .ok("consume");
    assert_eq!(consumed.stdout, expected);
    assert_eq!(consumed.stderr, "");
    // --exit-at-end: everything there is, then exit, without a count.
    let to_end = tool(
        &broker,
        &[
            "consume",
            "-t",
            "rt",
            "--from-beginning",
            "--exit-at-end",
            "-f",
            "%t|%p|%o|%k|%s|%h|%S\\n",
            "--timeout-ms",
            "20000",
        ],
    )
    .ok("consume to the end");
    assert_eq!(to_end.stdout, expected);

    // One partition, the default format.
    let only = tool(
        &broker,
        &[
            "consume",
            "-t",
            "rt",
            "-p",
            "1",
            "--from-beginning",
            "-n",
            "2",
        ],
    )
    .ok("consume one partition");
    let in_1: Vec<String> = lines
        .iter()
        .filter(|(k, _)| samsa::client::partitioner::partition_for_key(k.as_bytes(), 3) == 1)
        .take(2)
        .map(|(_, v)| format!("{v}\n"))
        .collect();
    assert_eq!(only.stdout, in_1.concat());
}

#[test]
fn cli_consume_starts_at_an_offset_or_a_timestamp() {
    let broker = BrokerProcess::start();
    tool(&broker, &["topics", "create", "pos", "--partitions", "1"]).ok("create");
    tool_in(
        &broker,
        &["produce", "-t", "pos", "-p", "0"],
        "a0\na1\na2\na3\na4\n",
    )
    .ok("produce a");
    // Two runs far enough apart in time that the second run's records have later
    // timestamps (each run stamps its records with its clock).
    std::thread::sleep(Duration::from_millis(20));
    tool_in(
        &broker,
        &["produce", "-t", "pos", "-z", "zstd"],
        "b0\nb1\nb2\nb3\nb4\n",
    )
    .ok("produce b");
    let consume = |extra: &[&str]| {
        let mut args = vec!["consume", "-t", "pos", "--timeout-ms", "20000"];
        args.extend_from_slice(extra);
        tool(&broker, &args)
    };
    let stamped = consume(&["--from-beginning", "-n", "10", "-f", "%T %o %s\\n"]).ok("stamps");
    let stamps: Vec<(i64, String)> = stamped
        .stdout
        .lines()
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let ts = parts.next().and_then(|t| t.parse().ok()).unwrap_or(-1);
            (ts, parts.nth(1).unwrap_or_default().to_owned())
        })
        .collect();
    assert_eq!(stamps.len(), 10, "{}", stamped.stdout);
    let b0 = stamps
        .iter()
        .find(|(_, v)| v == "b0")
        .map(|(ts, _)| *ts)
        .unwrap_or(-1);
    let a4 = stamps.get(4).map(|(ts, _)| *ts).unwrap_or(-1);
    assert!(b0 > a4, "b0 stamped {b0}, after a4 {a4}");

    assert_eq!(
        consume(&["--offset", "3", "-n", "2"]).ok("offset").stdout,
        "a3\na4\n"
    );
    assert_eq!(
        consume(&["--offset", "-2", "-n", "2"])
            .ok("offset from end")
            .stdout,
        "b3\nb4\n"
    );
    let ts = b0.to_string();
    assert_eq!(
        consume(&["--timestamp", &ts, "-n", "5"])
            .ok("timestamp")
            .stdout,
        "b0\nb1\nb2\nb3\nb4\n"
    );
    // Nothing at or after the timestamp: it waits at the end, and stops at the timeout.
    let late = (b0 + 3_600_000).to_string();
    let waited = tool(
        &broker,
        &[
            "consume",
            "-t",
            "pos",
            "--timestamp",
            &late,
            "--timeout-ms",
            "300",
        ],
    )
    .ok("timestamp after the end");
    assert_eq!(waited.stdout, "");
    consume(&["--offset", "100"]).fails(
        "offset past the end",
        1,
        "offset 100 is out of range for pos-0 (log start 0, end 10)",
    );
}

#[test]
fn cli_consume_tails_until_sigint_and_exits_zero() {
    let broker = BrokerProcess::start();
    tool(&broker, &["topics", "create", "tail"]).ok("create");
    let bootstrap = broker.bootstrap();
    let mut child = samsa_command(&[
        "consume",
        "-t",
        "tail",
        "--from-beginning",
        "-f",
        "%o=%s\\n",
        "-b",
        &bootstrap,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("spawn the consumer");
    let out = Arc::new(Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().expect("piped stdout");
    let sink = out.clone();
    // A plain thread drains the pipe: tests run outside the simulation's rules.
    #[allow(clippy::disallowed_methods)]
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock()
                .expect("output lock")
                .extend_from_slice(&buf[..n]);
        }
    });
    tool_in(&broker, &["produce", "-t", "tail"], "x\ny\n").ok("produce");
    let want = "0=x\n1=y\n";
    for _ in 0..TAIL_POLLS_MAX {
        if out.lock().expect("output lock").len() >= want.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(TAIL_POLL_MS));
    }
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) on our own unreaped child.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    let status = child.wait().expect("wait for the consumer");
    let _ = reader.join();
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let got = String::from_utf8_lossy(&out.lock().expect("output lock")).into_owned();
    assert_eq!(got, want, "stderr:\n{stderr}");
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
}

#[test]
fn cli_errors_exit_non_zero_naming_the_problem_with_nothing_on_stdout() {
    let broker = BrokerProcess::start();
    tool(&broker, &["topics", "create", "there"]).ok("create");
    tool_in(&broker, &["produce", "-t", "nope"], "x\n").fails(
        "produce to an unknown topic",
        1,
        "topic 'nope' does not exist",
    );
    tool(&broker, &["consume", "-t", "nope", "--from-beginning"]).fails(
        "consume an unknown topic",
        1,
        "topic 'nope' does not exist",
    );
    tool(&broker, &["consume", "-t", "there", "-p", "5"]).fails(
        "consume an unknown partition",
        1,
        "topic 'there' has no partition 5",
    );
    tool_in(
        &broker,
        &["produce", "-t", "there", "--partition", "5"],
        "x\n",
    )
    .fails(
        "produce to an unknown partition",
        1,
        "topic 'there' has no partition 5 (it has 1)",
    );
    tool(&broker, &["topics", "create", "x", "--bogus"]).fails(
        "a bad flag",
        2,
        "unknown option '--bogus' for 'topics create'",
    );
    tool(&broker, &["consume", "-t", "there", "--format", "%q"]).fails(
        "a bad format",
        2,
        "unknown directive '%q'",
    );
    tool(&broker, &["produce", "-t", "there", "--acks", "2"]).fails(
        "bad acks",
        2,
        "--acks: '2' is not one of 0, 1, all",
    );
    samsa(&["frobnicate"], "").fails("an unknown command", 2, "unknown command 'frobnicate'");
    // A server.properties must name the node (Kafka 4 requires node.id), and the KRaft
    // settings are checked by name.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("server.properties");
    #[allow(clippy::disallowed_methods)] // a test's scratch file
    std::fs::write(&file, "log.dirs=./unused\n").expect("write the file");
    samsa(&["broker", file.to_str().expect("utf-8")], "").fails(
        "a file without node.id",
        2,
        "node.id is required",
    );
    #[allow(clippy::disallowed_methods)] // a test's scratch file
    std::fs::write(&file, "node.id=1\nprocess.roles=broker\n").expect("write the file");
    samsa(&["broker", file.to_str().expect("utf-8")], "").fails(
        "a broker without a controller",
        2,
        "process.roles",
    );
    // Lines without the separator fail one by one; the others are produced.
    tool_in(
        &broker,
        &["produce", "-t", "there", "-K", ":"],
        "k:v\nnokey\nk2:v2\n",
    )
    .fails(
        "records without a key separator",
        1,
        "line 2: no key separator ':' in the line",
    );
    let back = tool(
        &broker,
        &[
            "consume",
            "-t",
            "there",
            "--from-beginning",
            "-n",
            "2",
            "-f",
            "%k=%s\\n",
        ],
    )
    .ok("consume the produced ones");
    assert_eq!(back.stdout, "k=v\nk2=v2\n");

    let nobody = format!("127.0.0.1:{}", free_port());
    for args in [
        &["topics", "list"][..],
        &["consume", "-t", "there"][..],
        &["produce", "-t", "there"][..],
    ] {
        let mut all = args.to_vec();
        all.extend(["-b", nobody.as_str()]);
        samsa(&all, "x\n").fails("an unreachable broker", 1, "no broker reachable");
    }
}

#[test]
fn cli_help_goes_to_stdout_and_exits_zero() {
    for tool in ["topics", "produce", "consume"] {
        let run = samsa(&[tool, "--help"], "").ok("help");
        assert!(
            run.stdout.starts_with(&format!("usage: samsa {tool}")),
            "{}",
            run.stdout
        );
        assert_eq!(run.stderr, "");
    }
}

#[test]
fn cli_topics_alter_partitions_and_configs() {
    let broker = BrokerProcess::start();
    tool(
        &broker,
        &[
            "topics",
            "create",
            "cfg",
            "--partitions",
            "1",
            "--config",
            "retention.ms=60000",
        ],
    )
    .ok("create");
    let config_part = |broker: &BrokerProcess| {
        let run = tool(broker, &["topics", "describe", "cfg"]).ok("describe");
        assert_eq!(run.stderr, "", "describe warns about nothing");
        let head = run.stdout.lines().next().unwrap_or_default().to_owned();
        let count = run.stdout.lines().count() - 1;
        (
            head.split_once("\tPartitionCount: ")
                .map(|(_, r)| r.to_owned())
                .unwrap_or_default(),
            count,
        )
    };
    assert_eq!(
        config_part(&broker),
        (
            "1\tReplicationFactor: 1\tConfigs: retention.ms=60000".to_owned(),
            1
        )
    );
    tool(
        &broker,
        &[
            "topics",
            "alter",
            "cfg",
            "--partitions",
            "4",
            "--config",
            "segment.bytes=1048576",
        ],
    )
    .ok("alter");
    assert_eq!(
        config_part(&broker),
        (
            "4\tReplicationFactor: 1\tConfigs: retention.ms=60000,segment.bytes=1048576".to_owned(),
            4
        )
    );
    tool(
        &broker,
        &["topics", "alter", "cfg", "--delete-config", "retention.ms"],
    )
    .ok("alter --delete-config");
    assert_eq!(
        config_part(&broker),
        (
            "4\tReplicationFactor: 1\tConfigs: segment.bytes=1048576".to_owned(),
            4
        )
    );
    tool(&broker, &["topics", "alter", "cfg", "--partitions", "2"]).fails(
        "shrinking",
        1,
        "INVALID_PARTITIONS",
    );
    tool(
        &broker,
        &["topics", "alter", "cfg", "--config", "no.such.config=1"],
    )
    .fails("an unknown config", 1, "INVALID_CONFIG");
    // A keyed record now lands where the Java client would put it among 4 partitions.
    tool_in(&broker, &["produce", "-t", "cfg", "-K", ":"], "k:v\n").ok("produce");
    let p = samsa::client::partitioner::partition_for_key(b"k", 4);
    let run = tool(
        &broker,
        &[
            "consume",
            "-t",
            "cfg",
            "--from-beginning",
            "-n",
            "1",
            "-f",
            "%p %s\\n",
        ],
    )
    .ok("consume");
    assert_eq!(run.stdout, format!("{p} v\n"));
}

/// The value of `"key":NUMBER` in a one-line JSON object.
fn json_number(json: &str, key: &str) -> f64 {
    let pattern = format!("\"{key}\":");
    let at = json
        .find(&pattern)
        .unwrap_or_else(|| panic!("no {key} in {json}"));
    let rest = &json[at + pattern.len()..];
    let end = rest
        .find(|c: char| c != '.' && c != '-' && !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end]
        .parse()
        .unwrap_or_else(|e| panic!("{key} in {json}: {e}"))
}

#[test]
fn cli_perf_produces_and_consumes_the_requested_records() {
    let help = samsa(&["perf", "produce", "--help"], "").ok("perf help");
    assert!(
        help.stdout.starts_with("usage: samsa perf"),
        "{}",
        help.stdout
    );

    let broker = BrokerProcess::start();
    let produced = tool(
        &broker,
        &[
            "perf",
            "produce",
            "--topic",
            "load",
            "--num-records",
            "3000",
            "--record-size",
            "100",
            "--partitions",
            "2",
            "--json",
        ],
    )
    .ok("perf produce");
    let summary = produced.stdout.trim();
    assert_eq!(json_number(summary, "records"), 3000.0, "{summary}");
    assert_eq!(json_number(summary, "errors"), 0.0, "{summary}");
    assert!(json_number(summary, "p99") >= json_number(summary, "p50"));

    // `perf consume` of all 3000 records, with `extra` options: its JSON summary.
    let perf_consume = |extra: &[&str]| {
        let mut args = vec![
            "perf",
            "consume",
            "--topic",
            "load",
            "--num-records",
            "3000",
        ];
        args.extend_from_slice(extra);
        args.push("--json");
        tool(&broker, &args).ok("perf consume").stdout
    };
    let consumed = perf_consume(&[]);
    let summary = consumed.trim();
    assert_eq!(json_number(summary, "records"), 3000.0, "{summary}");
    assert_eq!(json_number(summary, "bytes"), 300_000.0, "{summary}");
    // As a group member: the group's partitions from the log start, committed as it goes.
    let member = perf_consume(&["--group", "perf-group"]);
    let summary = member.trim();
    assert_eq!(json_number(summary, "records"), 3000.0, "{summary}");
    assert_eq!(json_number(summary, "partitions"), 2.0, "{summary}");
    let described = tool(&broker, &["groups", "describe", "--group", "perf-group"]).ok("describe");
    let lags: Vec<&str> = described
        .stdout
        .lines()
        .filter(|l| l.starts_with("perf-group "))
        .map(|l| l.split_whitespace().nth(5).unwrap_or("?"))
        .collect();
    assert_eq!(
        lags,
        ["0", "0"],
        "everything consumed was committed:\n{}",
        described.stdout
    );

    // What perf wrote is ordinary data: every record of 100 bytes, on both partitions.
    let sizes = tool(
        &broker,
        &[
            "consume",
            "--topic",
            "load",
            "--from-beginning",
            "--max-messages",
            "3000",
            "--format",
            "%p %S\\n",
        ],
    )
    .ok("consume perf's records");
    let lines: Vec<&str> = sizes.stdout.lines().collect();
    assert_eq!(lines.len(), 3000);
    assert!(
        lines.iter().all(|l| l.ends_with(" 100")),
        "{}",
        sizes.stdout
    );
    for partition in ["0 ", "1 "] {
        assert!(lines.iter().any(|l| l.starts_with(partition)));
    }
}

#[test]
fn cli_perf_commit_commits_at_the_requested_rate_and_the_offsets_are_fetchable() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::{Offset, TopicPartitionList};

    let broker = BrokerProcess::start();
    let run = tool(
        &broker,
        &[
            "perf",
            "commit",
            "--topic",
            "offsets",
            "--group",
            "perf-g",
            "--throughput",
            "200",
            "--duration-s",
            "1",
            "--warmup-s",
            "0",
            "--json",
        ],
    )
    .ok("perf commit");
    let summary = run.stdout.trim();
    assert_eq!(json_number(summary, "commits"), 200.0, "{summary}");
    assert!(json_number(summary, "p99") >= json_number(summary, "p50"));

    // Commit i went to partition i % 6 at offset i: the last of each partition is what the
    // group's committed offsets now say.
    let consumer: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap())
        .set("broker.address.family", "v4")
        .set("group.id", "perf-g")
        .create()
        .expect("create a consumer");
    let mut tpl = TopicPartitionList::new();
    for p in 0..6 {
        tpl.add_partition("offsets", p);
    }
    let committed = consumer
        .committed_offsets(tpl, Duration::from_secs(30))
        .expect("OffsetFetch");
    let offsets: Vec<Offset> = (0..6)
        .map(|p| {
            committed
                .find_partition("offsets", p)
                .map(|e| e.offset())
                .unwrap_or(Offset::Invalid)
        })
        .collect();
    let expected: Vec<Offset> = [198, 199, 194, 195, 196, 197]
        .into_iter()
        .map(Offset::Offset)
        .collect();
    assert_eq!(offsets, expected);
}

/// Broker settings for the group tests: no initial rebalance delay (one member at a time).
const GROUP_BROKER: &[(&str, &str)] = &[("group.initial.rebalance.delay.ms", "0")];

#[test]
fn cli_consume_group_resumes_where_the_group_committed() {
    let broker = BrokerProcess::start_with(GROUP_BROKER);
    tool(&broker, &["topics", "create", "gt"]).ok("create");
    tool_in(&broker, &["produce", "-t", "gt"], "r0\nr1\nr2\nr3\nr4\n").ok("produce");
    let group = |args: &[&str]| {
        let mut all = vec!["consume", "-t", "gt", "-f", "%o=%s\\n"];
        all.extend_from_slice(args);
        tool(&broker, &all)
    };
    // One poll returns all five records; only three are printed, and three committed.
    let first = group(&["-g", "g1", "--from-beginning", "-n", "3"]).ok("first member");
    assert_eq!(first.stdout, "0=r0\n1=r1\n2=r2\n");
    let second = group(&["-g", "g1", "--from-beginning", "-n", "2"]).ok("second member");
    assert_eq!(
        second.stdout, "3=r3\n4=r4\n",
        "resumes at the committed offset"
    );
    let third = group(&["-g", "g1", "--timeout-ms", "1500"]).ok("third member");
    assert_eq!(third.stdout, "", "everything is committed");
    // Another group sees every record; a new group without --from-beginning starts at the
    // end.
    let other = group(&["--group=g2", "--from-beginning", "-n", "5"]).ok("other group");
    assert_eq!(other.stdout, "0=r0\n1=r1\n2=r2\n3=r3\n4=r4\n");
    let latest = group(&["-g", "g3", "--timeout-ms", "1500"]).ok("latest");
    assert_eq!(latest.stdout, "");
    tool_in(&broker, &["produce", "-t", "gt"], "r5\n").ok("produce more");
    let after = group(&["-g", "g3", "-n", "1"]).ok("g3 again");
    assert_eq!(after.stdout, "5=r5\n", "g3 committed the end when it left");
}

#[test]
fn cli_consume_group_refuses_options_the_group_decides() {
    let broker = BrokerProcess::start_with(GROUP_BROKER);
    tool(&broker, &["consume", "-t", "x", "-g", "g", "--offset", "3"]).fails(
        "offset with a group",
        2,
        "--offset/--timestamp cannot be used with --group",
    );
}

/// `samsa consume -g GROUP` in the background, tailing, until [`stop_member`].
fn spawn_member(broker: &BrokerProcess, topic: &str, group: &str) -> std::process::Child {
    let bootstrap = broker.bootstrap();
    samsa_command(&["consume", "-t", topic, "-g", group, "-b", &bootstrap])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a group member")
}

/// SIGINT: the member commits, leaves and exits 0.
fn stop_member(mut child: std::process::Child) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) on our own unreaped child.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
    let status = child.wait().expect("wait for the member");
    assert_eq!(status.code(), Some(0), "the member exits 0 on SIGINT");
}

#[test]
fn cli_groups_list_describe_reset_and_delete() {
    let broker = BrokerProcess::start_with(GROUP_BROKER);
    tool(&broker, &["topics", "create", "gt", "--partitions", "2"]).ok("create");
    tool_in(&broker, &["produce", "-t", "gt", "-p", "0"], "a\nb\nc\n").ok("produce 0");
    tool_in(&broker, &["produce", "-t", "gt", "-p", "1"], "d\ne\n").ok("produce 1");
    let consume = |args: &[&str]| {
        let mut all = vec!["consume", "-t", "gt", "-g", "g1"];
        all.extend_from_slice(args);
        tool(&broker, &all).ok("consume as g1")
    };
    let groups = |args: &[&str]| {
        let mut all = vec!["groups"];
        all.extend_from_slice(args);
        tool(&broker, &all)
    };
    let reset = |args: &[&str]| {
        let mut all = vec!["reset-offsets", "--group", "g1"];
        all.extend_from_slice(args);
        groups(&all)
    };
    let described = || groups(&["describe", "--group", "g1"]).ok("describe").stdout;
    consume(&["--from-beginning", "-n", "5"]);
    assert_eq!(groups(&["list"]).ok("list").stdout, "g1\n");
    let header = "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID";
    let describe = |current: [i64; 2]| {
        let lags = [3 - current[0], 2 - current[1]];
        format!(
            "\nConsumer group 'g1' has no active members.\n\n{header}\n\
             g1              gt              0          {:<15} 3               {:<15} -               -               -\n\
             g1              gt              1          {:<15} 2               {:<15} -               -               -\n",
            current[0], lags[0], current[1], lags[1]
        )
    };
    assert_eq!(described(), describe([3, 2]));
    // A dry run shows the plan and changes nothing.
    let plan =
        "\nGROUP                          TOPIC                          PARTITION  NEW-OFFSET\n\
                g1                             gt                             0          0\n\
                g1                             gt                             1          0\n";
    let dry = reset(&["--topic", "gt", "--to-earliest"]).ok("dry run");
    assert_eq!(dry.stdout, plan);
    assert!(dry.stderr.contains("dry run"), "{}", dry.stderr);
    assert_eq!(described(), describe([3, 2]));
    let executed = reset(&["--all-topics", "--to-earliest", "--execute"]).ok("reset");
    assert_eq!(executed.stdout, plan);
    assert_eq!(described(), describe([0, 0]));
    // Shift one partition, and clamp an offset past the end to the end.
    reset(&["--topic", "gt:0", "--shift-by", "2", "--execute"]).ok("shift-by");
    reset(&["--topic", "gt:1", "--to-offset", "99", "--execute"]).ok("to-offset");
    assert_eq!(described(), describe([2, 2]));
    // A member resumes there: it prints exactly what is left (the third record of
    // partition 0).
    assert_eq!(consume(&["-n", "1"]).stdout, "c\n");
    // While the group has a member: reset and delete are refused; the member is listed.
    let member = spawn_member(&broker, "gt", "g1");
    let mut state = String::new();
    for _ in 0..TAIL_POLLS_MAX {
        state = groups(&["describe", "--group", "g1", "--state"])
            .ok("state")
            .stdout;
        if state.contains("Stable") {
            break;
        }
        std::thread::sleep(Duration::from_millis(TAIL_POLL_MS));
    }
    let lines: Vec<&str> = state.lines().collect();
    assert_eq!(
        lines[1],
        "GROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE           #MEMBERS"
    );
    let coordinator = format!("{}  (1)", broker.bootstrap());
    assert_eq!(
        lines[2],
        format!("g1              {coordinator:<25} range                Stable          1")
    );
    let members = groups(&["describe", "--group", "g1", "--members"]).ok("members");
    let rows: Vec<&str> = members.stdout.lines().collect();
    assert!(
        rows[1].starts_with("GROUP ") && rows[1].ends_with(" #PARTITIONS"),
        "{}",
        members.stdout
    );
    let row: Vec<&str> = rows[2].split_whitespace().collect();
    assert_eq!(
        (row[0], row[2], row[3], row[4]),
        ("g1", "/127.0.0.1", "samsa-cli", "2"),
        "{}",
        members.stdout
    );
    reset(&["--all-topics", "--to-latest", "--execute"]).fails(
        "reset while active",
        1,
        "can only be reset if the group 'g1' is inactive, but the current state is Stable",
    );
    groups(&["delete", "--group", "g1"]).fails("delete while active", 1, "NON_EMPTY_GROUP");
    stop_member(member);
    // delete-offsets, then delete the group.
    let deleted =
        groups(&["delete-offsets", "--group", "g1", "--topic", "gt:1"]).ok("delete-offsets");
    assert_eq!(
        deleted.stdout,
        "\nTOPIC                          PARTITION       STATUS\ngt                             1               Successful\n"
    );
    assert_eq!(
        groups(&["delete", "--group", "g1"]).ok("delete").stdout,
        "Deletion of requested consumer groups ('g1') was successful.\n"
    );
    assert_eq!(groups(&["list"]).ok("list").stdout, "");
    groups(&["describe", "--group", "g1"]).fails(
        "describe a deleted group",
        1,
        "consumer group 'g1' does not exist",
    );
}

/// `samsa perf clean` on a small log: both copies clean to the same size, with every key
/// kept and the superseded records removed; a non-empty directory is refused by name.
#[test]
fn cli_perf_clean_cleans_both_copies_and_refuses_a_used_directory() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("logs");
    let path = path.to_str().expect("utf-8 path");
    // 8,000 records of 128 bytes over 100 keys, in 64 KiB segments.
    let run = samsa(
        &[
            "perf",
            "clean",
            "--dir",
            path,
            "--bytes",
            "1024000",
            "--record-bytes",
            "128",
            "--keys",
            "100",
            "--segment-bytes",
            "65536",
            "--compression",
            "lz4",
            "--json",
        ],
        "",
    )
    .ok("perf clean");
    let summary = run.stdout.trim();
    let removed = json_number(summary, "records_removed");
    let output = json_number(summary, "output_bytes");
    let input = json_number(summary, "input_bytes");
    assert!(removed > 6_000.0, "{summary}");
    assert!(output > 0.0 && output < input / 4.0, "{summary}");
    assert!(json_number(summary, "clean_cold_mb_s") > 0.0, "{summary}");
    samsa(&["perf", "clean", "--dir", path], "").fails("used directory", 1, "is not empty");
    samsa(
        &["perf", "clean", "--dir", path, "--compression", "zstd"],
        "",
    )
    .fails("bad codec", 2, "--compression");
}

/// `samsa storage`: a cluster id, and directories formatted with it (never twice, unless asked
/// to skip formatted ones of the same cluster).
#[test]
fn cli_storage_formats_directories_with_one_cluster_id() {
    let uuid = samsa(&["storage", "random-uuid"], "").ok("random-uuid");
    let id = uuid.stdout.trim().to_string();
    assert_eq!(id.len(), 22, "a Kafka UUID: {id}");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let metadata = dir.path().join("metadata");
    let log_dirs = format!("log.dirs={}", data.display());
    let metadata_dir = format!("metadata.log.dir={}", metadata.display());
    let format = |extra: &[&str]| {
        let mut args = vec![
            "storage",
            "format",
            "--cluster-id",
            id.as_str(),
            "--override",
            "node.id=4",
            "--override",
            log_dirs.as_str(),
            "--override",
            metadata_dir.as_str(),
        ];
        args.extend(extra);
        samsa(&args, "")
    };
    format(&[]).ok("format");
    for path in [&data, &metadata] {
        #[allow(clippy::disallowed_methods)] // the test reads what the tool wrote
        let text = std::fs::read_to_string(path.join("meta.properties")).unwrap();
        assert!(text.contains(&format!("cluster.id={id}\n")), "{text}");
        assert!(text.contains("node.id=4\n"), "{text}");
    }
    format(&[]).fails("formatting twice", 1, "exists already");
    format(&["--ignore-formatted"]).ok("format again, skipping formatted directories");
    samsa(
        &[
            "storage",
            "format",
            "--cluster-id",
            "pk5ZlY13SxKKmKpulbGLrQ",
            "--override",
            "node.id=4",
            "--override",
            log_dirs.as_str(),
            "--ignore-formatted",
        ],
        "",
    )
    .fails("another cluster's directory", 1, "belongs to cluster");
    samsa(&["storage", "format", "--cluster-id", "x"], "").fails("a bad id", 2, "not a Kafka UUID");
}
