//! Source rules over the project's own code.
//!
//! Determinism: every `select!` is `biased;` (an unbiased one draws from tokio's own
//! generator, so the same seed would take different branches), and nothing outside `src/rt`
//! reaches for time, tasks, randomness or the file system directly (clippy enforces the same
//! through clippy.toml; this test also covers macro bodies and code clippy does not lint).
//!
//! Layering (ARCHITECTURE.md: dependencies run one way): `src/protocol/` reaches nothing of
//! the crate outside `crate::protocol` but the macros it exports itself; `src/log/` reaches
//! nothing of `crate::broker`; and the files of an IO-free core ([`CORE_FILES`]) reach no
//! `rt` and contain no `async`. Paths are read from the code with comments and literals
//! blanked: `crate::x` and `$crate::x`, every name of a `crate::{..}` group, and `super::`
//! chains that climb out of the file's module (inline `mod`s counted).

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

// --- layering ---------------------------------------------------------------------------

/// What part of a core file must be IO-free.
enum Scope {
    /// The whole file.
    File,
    /// Only the block that opens with these tokens (`impl State`): the file's other parts do
    /// IO.
    Block(&'static str),
}

/// The files of the IO-free cores: no `rt`, no `async`. A listed file that does not exist
/// yet is skipped with a note; one that exists is checked.
const CORE_FILES: &[(&str, Scope)] = &[
    ("src/coordinator/group.rs", Scope::File),
    ("src/coordinator/shard.rs", Scope::File),
    ("src/coordinator/records.rs", Scope::File),
    // The producer's sender task, connections and `Producer` API are async and use `rt` in
    // the same file; its bookkeeping, `State`, is the IO-free core (time comes in as `now`,
    // the partitioner's generator from the caller).
    ("src/client/producer.rs", Scope::Block("impl State")),
    ("src/log/producer_state.rs", Scope::File),
    ("src/client/group/assignor.rs", Scope::File),
    ("src/client/group/member.rs", Scope::File),
    ("src/raft/election.rs", Scope::File),
    ("src/raft/log_view.rs", Scope::File),
    ("src/raft/message.rs", Scope::File),
    ("src/raft/core.rs", Scope::File),
];

/// `text` with comments, string and character literals blanked (newlines kept, so lines
/// still count): what remains is code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let at = |i: usize| chars.get(i).copied().unwrap_or('\0');
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == '/' {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (at(i + 1) == '"' || at(i + 1) == '#')
            && !(i > 0 && is_ident(chars[i - 1]) && chars[i - 1] != 'b')
        {
            // A raw string: r"..", r#".."#, br#".."#.
            let mut j = i + 1;
            while at(j) == '#' {
                j += 1;
            }
            if at(j) != '"' {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.push_str(&" ".repeat(j - i + 1));
            i = j + 1;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#') {
                    out.push_str(&" ".repeat(hashes + 1));
                    i += hashes + 1;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (at(i + 1) == '\\' || (at(i + 2) == '\'' && at(i + 1) != '\'')) {
            // A character literal ('x', '\n', '\''); otherwise it is a lifetime.
            let end = if at(i + 1) == '\\' {
                (i + 3..chars.len())
                    .find(|&k| chars[k] == '\'')
                    .unwrap_or(chars.len() - 1)
            } else {
                i + 2
            };
            out.push_str(&" ".repeat(end - i + 1));
            i = end + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Open,
    Close,
    Other(char),
}

/// The tokens of code (see [`code_only`]) with their 1-based lines; numbers and most
/// punctuation come out as `Other`.
fn tokens(code: &str) -> Vec<(usize, Tok)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push((
                line,
                if c.is_ascii_digit() {
                    Tok::Other('0')
                } else {
                    Tok::Ident(word)
                },
            ));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((line, Tok::Sep));
            i += 2;
        } else {
            out.push((
                line,
                match c {
                    '{' => Tok::Open,
                    '}' => Tok::Close,
                    other => Tok::Other(other),
                },
            ));
            i += 1;
        }
    }
    out
}

fn is_ident(tok: Option<&(usize, Tok)>, name: &str) -> bool {
    matches!(tok, Some((_, Tok::Ident(n))) if n == name)
}

/// The first names of the comma-separated items of the `{..}` group opening at `toks[open]`.
fn group_names(toks: &[(usize, Tok)], open: usize) -> Vec<(usize, String)> {
    let mut names = Vec::new();
    let mut depth = 0;
    let mut expect_name = false;
    for (line, tok) in &toks[open..] {
        match tok {
            Tok::Open => {
                depth += 1;
                expect_name = depth == 1;
            }
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            Tok::Other(',') if depth == 1 => expect_name = true,
            Tok::Ident(name) if depth == 1 && expect_name => {
                names.push((*line, name.clone()));
                expect_name = false;
            }
            _ => {}
        }
    }
    names
}

/// Every crate-level module that `text`, the file of module `module` (e.g. `["log",
/// "segment"]`), reaches, with its line: `x` of `crate::x` and `$crate::x`, each first name
/// of a `crate::{..}` group, and the name a `super::` chain reaches once it climbs past the
/// crate's top-level module (`*` for a glob).
fn crate_paths(text: &str, module: &[&str]) -> Vec<(usize, String)> {
    let toks = tokens(&code_only(text));
    let mut found = Vec::new();
    // One entry per open brace: the name of the inline `mod` it opens, if any.
    let mut braces: Vec<Option<String>> = Vec::new();
    let reached = |at: usize, found: &mut Vec<(usize, String)>| match toks.get(at) {
        Some((line, Tok::Ident(name))) if name != "self" => found.push((*line, name.clone())),
        Some((_, Tok::Open)) => found.extend(
            group_names(&toks, at)
                .into_iter()
                .filter(|(_, n)| n != "self"),
        ),
        Some((line, Tok::Other('*'))) => found.push((*line, "*".to_string())),
        _ => {}
    };
    for i in 0..toks.len() {
        let starts_path = i == 0 || toks[i - 1].1 != Tok::Sep;
        match &toks[i].1 {
            Tok::Open => {
                let inline_mod = match (i.checked_sub(2).map(|k| &toks[k].1), &toks[i - 1].1) {
                    (Some(Tok::Ident(m)), Tok::Ident(name)) if m == "mod" => Some(name.clone()),
                    _ => None,
                };
                braces.push(inline_mod);
            }
            Tok::Close => {
                braces.pop();
            }
            Tok::Ident(word)
                if word == "crate"
                    && starts_path
                    && toks.get(i + 1).map(|t| &t.1) == Some(&Tok::Sep) =>
            {
                reached(i + 2, &mut found);
            }
            Tok::Ident(word) if word == "super" && starts_path => {
                let mut climbs = 0;
                let mut j = i;
                while is_ident(toks.get(j), "super")
                    && toks.get(j + 1).map(|t| &t.1) == Some(&Tok::Sep)
                {
                    climbs += 1;
                    j += 2;
                }
                let depth = module.len() + braces.iter().flatten().count();
                if climbs >= depth {
                    reached(j, &mut found);
                }
            }
            _ => {}
        }
    }
    found
}

/// The macros that `text` exports at the crate root (`#[macro_export] macro_rules! name`).
fn exported_macros(text: &str) -> Vec<String> {
    let toks = tokens(&code_only(text));
    let mut names = Vec::new();
    for i in 0..toks.len() {
        if !is_ident(toks.get(i), "macro_export") {
            continue;
        }
        if let Some(k) = (i..toks.len()).find(|&k| is_ident(toks.get(k), "macro_rules")) {
            if let Some((_, Tok::Ident(name))) = toks.get(k + 2) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// Where a core's code does IO or waits: `async`, `.await`, and paths to `rt` (through the
/// crate root or a bare `rt::` after an import).
fn io_in_core(text: &str, module: &[&str]) -> Vec<String> {
    let toks = tokens(&code_only(text));
    let mut found = Vec::new();
    for (i, (line, tok)) in toks.iter().enumerate() {
        let after_sep = i > 0 && toks[i - 1].1 == Tok::Sep;
        match tok {
            Tok::Ident(word) if word == "async" => found.push(format!("{line}: async")),
            Tok::Ident(word) if word == "await" && i > 0 && toks[i - 1].1 == Tok::Other('.') => {
                found.push(format!("{line}: .await"))
            }
            Tok::Ident(word)
                if word == "rt"
                    && !after_sep
                    && toks.get(i + 1).map(|t| &t.1) == Some(&Tok::Sep) =>
            {
                found.push(format!("{line}: rt::"))
            }
            _ => {}
        }
    }
    for (line, name) in crate_paths(text, module) {
        if name == "rt" {
            found.push(format!("{line}: crate::rt"));
        }
    }
    found.sort();
    found.dedup();
    found
}

/// `text` with everything outside the block that opens with `header`'s tokens blanked (lines
/// kept), or `None` if there is no such block.
fn only_block(text: &str, header: &str) -> Option<String> {
    let code = code_only(text);
    let want: Vec<Tok> = tokens(header).into_iter().map(|(_, t)| t).collect();
    let toks = tokens(&code);
    let start = (0..toks.len()).find(|&i| {
        toks[i..].len() > want.len()
            && toks[i..i + want.len()]
                .iter()
                .map(|(_, t)| t)
                .eq(want.iter())
            && toks[i + want.len()].1 == Tok::Open
    })?;
    let (first_line, _) = toks[start];
    let mut depth = 0;
    let mut last_line = first_line;
    for (line, tok) in &toks[start + want.len()..] {
        match tok {
            Tok::Open => depth += 1,
            Tok::Close => depth -= 1,
            _ => {}
        }
        if depth == 0 {
            last_line = *line;
            break;
        }
    }
    Some(
        code.lines()
            .enumerate()
            .map(|(n, l)| {
                if (first_line..=last_line).contains(&(n + 1)) {
                    l
                } else {
                    ""
                }
            })
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// The module path of a file under `src/`: `src/log/segment.rs` is `["log", "segment"]`, a
/// `mod.rs` its directory's module.
fn module_of(path: &Path) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let relative = path.strip_prefix(&root).unwrap_or(path);
    let mut parts: Vec<String> = relative
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

fn crate_paths_of(path: &Path, text: &str) -> Vec<(usize, String)> {
    let module = module_of(path);
    let module: Vec<&str> = module.iter().map(String::as_str).collect();
    crate_paths(text, &module)
}

/// Each path, in the files under `dir`, to a crate-level module that `allowed` refuses.
fn paths_refused(dir: &str, allowed: impl Fn(&str) -> bool) -> Vec<String> {
    let mut offenders = Vec::new();
    for (path, text) in project_files(&[dir]) {
        for (line, name) in crate_paths_of(&path, &text) {
            if !allowed(&name) {
                offenders.push(format!("{}:{line}: crate::{name}", path.display()));
            }
        }
    }
    offenders
}

#[test]
fn protocol_reaches_nothing_outside_itself() {
    let macros: Vec<String> = project_files(&["src/protocol"])
        .iter()
        .flat_map(|(_, text)| exported_macros(text))
        .collect();
    assert!(
        macros.iter().any(|m| m == "message"),
        "found the exported macros: {macros:?}"
    );
    let offenders = paths_refused("src/protocol", |name| {
        name == "protocol" || macros.iter().any(|m| m == name)
    });
    assert!(
        offenders.is_empty(),
        "src/protocol reaches outside crate::protocol: {offenders:?}"
    );
}

#[test]
fn log_reaches_no_broker() {
    let offenders = paths_refused("src/log", |name| name != "broker");
    assert!(
        offenders.is_empty(),
        "src/log reaches crate::broker: {offenders:?}"
    );
}

#[test]
fn cores_do_no_io() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut offenders = Vec::new();
    let mut checked = 0;
    for (file, scope) in CORE_FILES {
        let path = root.join(file);
        let Ok(text) = std::fs::read_to_string(&path) else {
            eprintln!("note: core file {file} does not exist yet; skipped");
            continue;
        };
        let text = match scope {
            Scope::File => text,
            Scope::Block(header) => match only_block(&text, header) {
                Some(block) => block,
                None => {
                    offenders.push(format!("{file}: no `{header}` block to check"));
                    continue;
                }
            },
        };
        let module = module_of(&path);
        let module: Vec<&str> = module.iter().map(String::as_str).collect();
        offenders.extend(
            io_in_core(&text, &module)
                .into_iter()
                .map(|o| format!("{file}:{o}")),
        );
        checked += 1;
    }
    assert!(checked > 0, "no core file was checked");
    assert!(
        offenders.is_empty(),
        "IO-free cores reach rt or are async: {offenders:?}"
    );
}

#[test]
fn the_lexer_blanks_comments_and_literals() {
    let text = "let a = \"crate::log\"; // crate::broker\n/* crate::rt /* nested */ */ b\n\
                let c = r#\"crate::x \"quoted\"\"#; let d = '\"'; let e: &'static str = \"\\\"\";\n";
    let code = code_only(text);
    assert_eq!(code.lines().count(), text.lines().count());
    assert!(!code.contains("crate"), "{code}");
    assert!(code.contains("'static"), "a lifetime is code: {code}");
    assert!(code.contains(" b"), "{code}");
}

#[test]
fn the_layering_checks_catch_each_rule() {
    let reach = |text: &str, module: &[&str]| -> Vec<String> {
        crate_paths(text, module)
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    };
    // protocol importing the log, directly, in a group, through $crate and by climbing.
    let module = ["protocol", "wire"];
    assert_eq!(reach("use crate::log::Log;\n", &module), ["log"]);
    assert_eq!(
        reach(
            "use crate::{protocol::wire, broker::Broker, self};\n",
            &module
        ),
        ["protocol", "broker"]
    );
    assert_eq!(reach("fn f() { $crate::rt::now() }\n", &module), ["rt"]);
    assert_eq!(reach("use super::super::log::Log;\n", &module), ["log"]);
    assert_eq!(reach("use super::super::*;\n", &module), ["*"]);
    // Staying inside: super within the module, an inline test module's super, comments.
    assert!(reach("use super::record_batch::X;\n", &module).is_empty());
    assert!(reach("mod tests {\n    use super::super::wire::X;\n}\n", &module).is_empty());
    assert!(reach("// crate::log::Log\n/// [`crate::broker`]\n", &module).is_empty());
    assert_eq!(reach("use crate::message;\n", &module), ["message"]);
    assert_eq!(
        exported_macros("#[macro_export]\nmacro_rules! message { () => {} }\n"),
        ["message"]
    );
    // log importing the broker.
    let found = crate_paths("fn f(b: &crate::broker::Broker) {}\n", &["log", "segment"]);
    assert_eq!(found, [(1, "broker".to_string())]);
    // A core with async, an await, rt by the crate root and by an imported name.
    let core = "use crate::rt::time;\nasync fn f() {\n    g().await;\n    rt::now();\n}\n";
    assert_eq!(
        io_in_core(core, &["coordinator", "group"]),
        ["1: crate::rt", "2: async", "3: .await", "4: rt::"]
    );
    assert!(io_in_core(
        "fn f(now: Instant) {} // async\n",
        &["coordinator", "group"]
    )
    .is_empty());
    // Only the listed block of a file is checked.
    let file = "async fn outside() {}\nimpl State {\n    fn f() {}\n}\nimpl Other {\n    async fn g() {}\n}\n";
    let block = only_block(file, "impl State").expect("found");
    assert!(
        io_in_core(&block, &["client", "producer"]).is_empty(),
        "{block}"
    );
    let bad = file.replace("fn f() {}", "fn f() { crate::rt::rand::small_rng(); }");
    let block = only_block(&bad, "impl State").expect("found");
    assert_eq!(
        io_in_core(&block, &["client", "producer"]),
        ["3: crate::rt"]
    );
    assert!(only_block(file, "impl Missing").is_none());
}
