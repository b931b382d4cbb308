//! A `samsa broker` child process for integration tests: started on a free loopback port with
//! its data in a temporary directory, stopped gracefully (SIGTERM), killed (SIGKILL) and
//! restarted on the same data directory and port.
//!
//! Include it with `#[path = "support/broker_process.rs"] mod broker_process;`.
//!
//! Invariants:
//! - The broker's stderr goes to `broker-stderr.log` in the temporary directory, appended to
//!   across restarts, so one file tells the whole story of a test. When the test thread panics
//!   while a `BrokerProcess` is alive, `Drop` prints that file and keeps the directory.
//! - A `BrokerProcess` never outlives its test: `Drop` kills a still-running child with
//!   SIGKILL and reaps it.
//! - Every wait is a bounded number of attempts with a named limit; nothing waits forever.
#![allow(dead_code)]

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// Connection attempts while waiting for the broker to listen, one per `READY_POLL_MS`
/// (30 s in all: the first start of a debug build under load can be slow).
pub const READY_ATTEMPTS_MAX: u32 = 300;
pub const READY_POLL_MS: u64 = 100;
/// Polls of `try_wait` after SIGTERM before the shutdown counts as hung (30 s in all).
pub const SHUTDOWN_ATTEMPTS_MAX: u32 = 300;
pub const SHUTDOWN_POLL_MS: u64 = 100;

/// The file in the temporary directory that collects the broker's stderr.
pub const STDERR_FILE: &str = "broker-stderr.log";
/// How much of the end of the broker's stderr a failure message shows (the whole file stays
/// in the kept directory).
pub const STDERR_SHOWN_BYTES_MAX: usize = 32 * 1024;

/// One broker child process and the directory that outlives its restarts.
pub struct BrokerProcess {
    dir: Option<tempfile::TempDir>,
    data_dir: PathBuf,
    port: u16,
    overrides: Vec<(String, String)>,
    child: Option<Child>,
    starts: u32,
}

/// Attempts at a port not handed out before (see [`free_port`]).
const FREE_PORT_TRIES_MAX: usize = 1_000;

/// A loopback port that was free a moment ago: bound to port 0, read, and released; never one
/// this test binary handed out before (the kernel may give a released port to the next bind
/// of port 0 at once, and two brokers of tests running side by side would share it).
pub fn free_port() -> u16 {
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    for _ in 0..FREE_PORT_TRIES_MAX {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener
            .local_addr()
            .expect("local address of a bound socket")
            .port();
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|p| p.into_inner());
        if handed_out.insert(port) {
            return port;
        }
    }
    panic!("no port not handed out before in {FREE_PORT_TRIES_MAX} binds of port 0");
}

impl BrokerProcess {
    /// Starts a broker with the default test settings and waits until it accepts connections.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a broker with extra `--override key=value` settings (Kafka's names) on top of
    /// the listener and log directory, and waits until it accepts connections.
    pub fn start_with(overrides: &[(&str, &str)]) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("samsa-broker-")
            .tempdir()
            .expect("create a temporary directory");
        let data_dir = dir.path().join("data");
        let mut broker = BrokerProcess {
            dir: Some(dir),
            data_dir,
            port: free_port(),
            overrides: overrides
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            child: None,
            starts: 0,
        };
        broker.spawn_and_wait();
        broker
    }

    /// `127.0.0.1:PORT`, for `bootstrap.servers` and `-b`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The temporary directory: the data directory and the stderr file live in it.
    pub fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map(tempfile::TempDir::path)
            .expect("the directory lives as long as the BrokerProcess")
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn stderr_path(&self) -> PathBuf {
        self.dir().join(STDERR_FILE)
    }

    /// Everything the broker wrote to stderr so far, across restarts.
    pub fn stderr_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(self.stderr_path()) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// The last `STDERR_SHOWN_BYTES_MAX` bytes of the broker's stderr, for failure messages.
    pub fn stderr_tail(&self) -> String {
        let text = self.stderr_text();
        if text.len() <= STDERR_SHOWN_BYTES_MAX {
            return text;
        }
        let mut start = text.len() - STDERR_SHOWN_BYTES_MAX;
        while !text.is_char_boundary(start) {
            start += 1;
        }
        format!(
            "[... {start} earlier bytes in {}]\n{}",
            self.stderr_path().display(),
            &text[start..]
        )
    }

    /// Whether the child is still running (not exited, not killed).
    pub fn is_alive(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The child's pid, if one is running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Panics with the broker's stderr unless it is still running.
    pub fn assert_alive(&mut self, after: &str) {
        if !self.is_alive() {
            let status = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            panic!(
                "the broker is not running after {after} (exit status {status:?}); stderr:\n{}",
                self.stderr_tail()
            );
        }
    }

    /// SIGTERM, then waits for a graceful exit. Returns the exit status; panics (with
    /// stderr) if the broker does not exit within the shutdown limit.
    pub fn stop(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        let Some(child) = self.child.as_mut() else {
            panic!("stop: no broker is running");
        };
        for _ in 0..SHUTDOWN_ATTEMPTS_MAX {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status;
            }
            std::thread::sleep(Duration::from_millis(SHUTDOWN_POLL_MS));
        }
        let _ = child.kill();
        let _ = child.wait();
        self.child = None;
        panic!(
            "the broker did not exit within {} ms of SIGTERM; stderr:\n{}",
            u64::from(SHUTDOWN_ATTEMPTS_MAX) * SHUTDOWN_POLL_MS,
            self.stderr_tail()
        );
    }

    /// SIGKILL: the process dies at once, without flushing or closing anything. The page
    /// cache keeps what it wrote, as after any process crash.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the broker again on the same data directory, port and settings, and waits
    /// until it accepts connections. The previous process must have exited.
    pub fn restart(&mut self) {
        assert!(
            self.child.is_none(),
            "restart: stop or kill the running broker first"
        );
        self.spawn_and_wait();
    }

    fn signal(&mut self, signal: libc::c_int) {
        let Some(child) = self.child.as_ref() else {
            return;
        };
        let Ok(pid) = libc::pid_t::try_from(child.id()) else {
            return;
        };
        // SAFETY: kill(2) on the pid of our own unreaped child: the pid cannot have been
        // reused by another process while the child is not waited for.
        unsafe {
            libc::kill(pid, signal);
        }
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_samsa"));
        cmd.arg("broker")
            .arg("--override")
            .arg(format!("listeners=PLAINTEXT://127.0.0.1:{}", self.port))
            .arg("--override")
            .arg(format!("log.dirs={}", self.data_dir.display()));
        for (k, v) in &self.overrides {
            cmd.arg("--override").arg(format!("{k}={v}"));
        }
        cmd
    }

    fn spawn_and_wait(&mut self) {
        self.starts += 1;
        let mut stderr = File::options()
            .create(true)
            .append(true)
            .open(self.stderr_path())
            .expect("open the broker's stderr file");
        {
            use std::io::Write;
            let _ = writeln!(
                stderr,
                "===== test harness: start #{} of the broker on port {}",
                self.starts, self.port
            );
        }
        let child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr))
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "spawn {}: {e} (is the binary built?)",
                    env!("CARGO_BIN_EXE_samsa")
                )
            });
        self.child = Some(child);
        self.wait_ready();
    }

    /// Polls a TCP connect until the broker accepts, or panics (with stderr) if it exits or
    /// the attempts run out.
    fn wait_ready(&mut self) {
        let addr = self.addr();
        for _ in 0..READY_ATTEMPTS_MAX {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                self.child = None;
                panic!(
                    "the broker exited before accepting connections ({status}); stderr:\n{}",
                    self.stderr_tail()
                );
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(READY_POLL_MS)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(READY_POLL_MS));
        }
        panic!(
            "the broker did not accept connections on {addr} after {READY_ATTEMPTS_MAX} attempts; stderr:\n{}",
            self.stderr_tail()
        );
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.kill9();
        if std::thread::panicking() {
            eprintln!(
                "----- broker stderr ({}):\n{}\n----- end of broker stderr",
                self.stderr_path().display(),
                self.stderr_tail()
            );
            if let Some(dir) = self.dir.take() {
                let kept = dir.keep();
                eprintln!("kept the broker's directory: {}", kept.display());
            }
        }
    }
}
