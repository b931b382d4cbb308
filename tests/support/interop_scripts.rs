//! Finding the Python and Node.js interpreters that run the client scripts of
//! `tests/interop/`, shared by the test binaries that run them (`interop_clients`, `cluster`).
//!
//! Python is `SAMSA_PYTHON`, else `.ci/venv/bin/python` (where .ci/run installs
//! tests/interop/requirements.txt), else `python3`; Node is `SAMSA_NODE`, else `node`. A
//! missing interpreter or package skips the test with a notice, unless
//! `SAMSA_REQUIRE_CLIENTS=1` (set by CI): then it fails. [`script_command`] is how each of
//! them starts a script.
#![allow(dead_code)] // each including binary uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where the scripts live (and run).
pub fn interop_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop")
}

/// `interpreter script`, to run in the interop directory with the environment every script
/// needs: without `LD_LIBRARY_PATH` (`cargo test` puts the rdkafka crate's bundled
/// librdkafka there; the clients use their own), Python unbuffered (its lines arrive as
/// written) and writing no bytecode into the source tree. The caller adds its own
/// environment and stdio.
pub fn script_command(interpreter: &Path, script: &str) -> Command {
    let mut command = Command::new(interpreter);
    command
        .arg(script)
        .current_dir(interop_dir())
        .env_remove("LD_LIBRARY_PATH")
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    command
}

/// The Python interpreter the scripts run with.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("SAMSA_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/venv/bin/python");
    if venv.is_file() {
        return venv;
    }
    PathBuf::from("python3")
}

pub fn node() -> PathBuf {
    std::env::var_os("SAMSA_NODE").map_or_else(|| PathBuf::from("node"), PathBuf::from)
}

/// Runs `program args` quietly in the interop directory; whether it exited with 0.
pub fn probe(program: &Path, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .current_dir(interop_dir())
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `Some(interpreter)` when `probe_args` (an import of the client and its codecs) succeeds
/// with it; otherwise a notice and `None`, or a panic when `SAMSA_REQUIRE_CLIENTS=1`.
pub fn client_or_skip(
    test: &str,
    interpreter: PathBuf,
    probe_args: &[&str],
    install: &str,
) -> Option<PathBuf> {
    if probe(&interpreter, probe_args) {
        return Some(interpreter);
    }
    let why = format!(
        "`{} {}` failed (install: {install})",
        interpreter.display(),
        probe_args.join(" ")
    );
    if std::env::var("SAMSA_REQUIRE_CLIENTS").as_deref() == Ok("1") {
        panic!("{test}: the client is missing and SAMSA_REQUIRE_CLIENTS=1: {why}");
    }
    eprintln!("SKIPPED {test}: {why}; set SAMSA_REQUIRE_CLIENTS=1 to make this a failure");
    None
}

pub const PIP_INSTALL: &str =
    "python3 -m venv .ci/venv && .ci/venv/bin/pip install -r tests/interop/requirements.txt";

pub fn python_or_skip(test: &str, imports: &str) -> Option<PathBuf> {
    client_or_skip(test, python(), &["-c", imports], PIP_INSTALL)
}

pub fn node_or_skip(test: &str) -> Option<PathBuf> {
    client_or_skip(
        test,
        node(),
        &["-e", "require('kafkajs')"],
        "cd tests/interop && npm ci",
    )
}
