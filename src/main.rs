//! The `samsa` command. For now it only reports what it is; the broker and the tools arrive
//! with the later steps (see README.md).

#[cfg(feature = "sim")]
fn main() {
    // `cargo test --features sim` still builds this binary; a simulation build must never be
    // run as a real program, so it refuses instead of failing to compile.
    eprintln!("samsa: this binary was built with the `sim` feature (madsim simulation) and cannot run; build it without `--features sim`");
    std::process::exit(2);
}

#[cfg(not(feature = "sim"))]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--version") | Some("version") => println!("samsa {}", env!("CARGO_PKG_VERSION")),
        _ => {
            eprintln!(
                "samsa {}: the broker and command-line tools are not built yet (step 3 of the plan); \
                 this build provides the durable partition log library and its simulation suites",
                env!("CARGO_PKG_VERSION")
            );
            std::process::exit(2);
        }
    }
}
