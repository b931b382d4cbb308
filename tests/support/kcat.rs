//! Running the `kcat` command-line client (Debian's kcat 1.7.1, librdkafka 2.0.2) from tests:
//! finding it, and running it with stdin from a file and stdout and stderr to files, killed if
//! it runs past a named limit, always with the system's librdkafka.
//!
//! Include it with `#[path = "support/kcat.rs"] mod kcat;`.
//!
//! When kcat is not installed, [`kcat_or_skip`] prints a notice and the test returns early,
//! unless `SAMSA_REQUIRE_CLIENTS=1` (set by CI, which installs it): then the test fails.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// Polls of a running kcat before it is killed (60 s in all).
pub const KCAT_POLLS_MAX: u32 = 600;
pub const KCAT_POLL_MS: u64 = 100;

/// Where kcat is, searching `PATH` and then /usr/bin.
pub fn find_kcat() -> Option<PathBuf> {
    let from_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kcat"))
            .find(|p| p.is_file())
    });
    from_path.or_else(|| {
        let p = PathBuf::from("/usr/bin/kcat");
        p.is_file().then_some(p)
    })
}

/// kcat's path, or `None` after printing why the test is skipped. Panics instead when
/// `SAMSA_REQUIRE_CLIENTS=1`.
pub fn kcat_or_skip(test: &str) -> Option<PathBuf> {
    if let Some(p) = find_kcat() {
        return Some(p);
    }
    if std::env::var("SAMSA_REQUIRE_CLIENTS").as_deref() == Ok("1") {
        panic!("{test}: kcat is not installed and SAMSA_REQUIRE_CLIENTS=1 (apt-get install kcat)");
    }
    eprintln!("SKIPPED {test}: kcat is not installed (apt-get install kcat; set SAMSA_REQUIRE_CLIENTS=1 to make this a failure)");
    None
}

/// What one kcat run left behind.
#[derive(Debug)]
pub struct KcatRun {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub args: Vec<String>,
}

impl KcatRun {
    /// Panics with the command line and kcat's stderr unless kcat exited with 0.
    pub fn assert_success(&self) -> &Self {
        assert!(
            self.status.success(),
            "kcat {} exited with {}; stderr:\n{}",
            self.args.join(" "),
            self.status,
            self.stderr
        );
        self
    }

    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

/// Runs kcat with `args`, stdin from `stdin_file` (or empty), in `work_dir` (which receives
/// the output files). Kills it and panics if it is still running after `KCAT_POLLS_MAX`
/// polls.
pub fn run_kcat(
    kcat: &Path,
    work_dir: &Path,
    args: &[String],
    stdin_file: Option<&Path>,
) -> KcatRun {
    let n = std::fs::read_dir(work_dir).map_or(0, |d| d.count());
    let out_path = work_dir.join(format!("kcat-{n}.stdout"));
    let err_path = work_dir.join(format!("kcat-{n}.stderr"));
    #[allow(clippy::disallowed_methods)] // a test's scratch files
    let out = File::create(&out_path).expect("create kcat's stdout file");
    #[allow(clippy::disallowed_methods)] // a test's scratch files
    let err = File::create(&err_path).expect("create kcat's stderr file");
    let stdin = match stdin_file {
        Some(p) => Stdio::from(File::open(p).expect("open kcat's input")),
        None => Stdio::null(),
    };
    // `cargo test` puts the rdkafka crate's build directory, which holds a bundled
    // librdkafka.so.1 (2.12), on LD_LIBRARY_PATH: kcat would load that instead of the system's
    // librdkafka (2.0.2) it was built for, and the older client would never be tested.
    let mut child = Command::new(kcat)
        .env_remove("LD_LIBRARY_PATH")
        .args(args)
        .stdin(stdin)
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", kcat.display()));
    let mut status = None;
    for _ in 0..KCAT_POLLS_MAX {
        if let Ok(Some(s)) = child.try_wait() {
            status = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(KCAT_POLL_MS));
    }
    let stderr = || std::fs::read_to_string(&err_path).unwrap_or_default();
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "kcat {} still running after {} ms; killed. stderr:\n{}",
            args.join(" "),
            u64::from(KCAT_POLLS_MAX) * KCAT_POLL_MS,
            stderr()
        );
    };
    KcatRun {
        status,
        stdout: std::fs::read(&out_path).unwrap_or_default(),
        stderr: stderr(),
        args: args.to_vec(),
    }
}

/// `["-b", bootstrap]` plus `args`, as owned strings.
pub fn args(bootstrap: &str, args: &[&str]) -> Vec<String> {
    let mut v = vec!["-b".to_string(), bootstrap.to_string()];
    v.extend(args.iter().map(|s| s.to_string()));
    v
}
