//! Source rules that keep simulation runs deterministic, checked over the project's own code:
//! every `select!` is `biased;` (an unbiased one draws from tokio's own generator, so the same
//! seed would take different branches), and nothing outside `src/rt` reaches for time, tasks,
//! randomness or the file system directly (clippy enforces the same through clippy.toml; this
//! test also covers macro bodies and code clippy does not lint).

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn project_files(dirs: &[&str]) -> Vec<(PathBuf, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in dirs {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            (p, text)
        })
        .collect()
}

/// Positions (1-based lines) of `select!` invocations whose first token is not `biased;`.
fn unbiased_selects(text: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut search = 0;
    while let Some(at) = text[search..].find("select!") {
        let start = search + at;
        search = start + "select!".len();
        // Skip mentions in comments and strings on the same line.
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let prefix = &text[line_start..start];
        if prefix.contains("//") || prefix.matches('"').count() % 2 == 1 {
            continue;
        }
        let rest = text[search..].trim_start();
        let Some(body) = rest.strip_prefix(['{', '(']) else {
            continue;
        };
        if !body.trim_start().starts_with("biased;") {
            found.push(text[..start].matches('\n').count() + 1);
        }
    }
    found
}

#[test]
fn every_select_is_biased() {
    let mut offenders = Vec::new();
    for (path, text) in project_files(&["src", "sim", "tests", "benches", "spec/src"]) {
        for line in unbiased_selects(&text) {
            offenders.push(format!("{}:{line}", path.display()));
        }
    }
    assert!(
        offenders.is_empty(),
        "select! without `biased;` (breaks determinism under madsim): {offenders:?}"
    );
}

#[test]
fn the_checker_catches_an_unbiased_select() {
    let bad = "async fn f() {\n    tokio::select! {\n        _ = a => {}\n    }\n}\n";
    let good =
        "async fn f() {\n    tokio::select! {\n        biased;\n        _ = a => {}\n    }\n}\n";
    assert_eq!(unbiased_selects(bad), vec![2]);
    assert!(unbiased_selects(good).is_empty());
    assert!(unbiased_selects("// select! { in a comment }").is_empty());
}

#[test]
fn nothing_outside_rt_bypasses_the_runtime() {
    let forbidden = [
        "tokio::spawn(",
        "std::thread::spawn",
        "Instant::now()",
        "SystemTime::now()",
        "thread_rng()",
        "tokio::fs::",
        "std::fs::",
        // tokio's watch wakes receivers in an order drawn from a process-wide seed (see
        // ARCHITECTURE.md, determinism rule 7); rt::latch replaces it.
        "sync::watch",
        "watch::channel",
    ];
    let mut offenders = Vec::new();
    // The harness may time itself and write reports once a simulation is over; inside the
    // simulation it is held to the watch rule like everything else.
    let watch_only = ["sync::watch", "watch::channel"];
    let files = project_files(&["src"])
        .into_iter()
        .map(|f| (f, &forbidden[..]))
        .chain(
            project_files(&["sim"])
                .into_iter()
                .map(|f| (f, &watch_only[..])),
        );
    for ((path, text), forbidden) in files {
        if path.components().any(|c| c.as_os_str() == "rt") {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for &pattern in forbidden {
                if code.contains(pattern) {
                    offenders.push(format!("{}:{}: {pattern}", path.display(), n + 1));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "calls that bypass src/rt: {offenders:?}"
    );
}
