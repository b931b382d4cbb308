//! The `samsa` command; see `samsa::cli`.

#[cfg(feature = "sim")]
fn main() {
    // `cargo test --features sim` still builds this binary; a simulation build must never be
    // run as a real program, so it refuses instead of failing to compile.
    eprintln!("samsa: this binary was built with the `sim` feature (madsim simulation) and cannot run; build it without `--features sim`");
    std::process::exit(2);
}

#[cfg(not(feature = "sim"))]
fn main() -> std::process::ExitCode {
    samsa::cli::main(std::env::args().skip(1).collect())
}
