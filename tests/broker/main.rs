//! The broker's integration tests, in one test binary (each binary is linked on its own, and
//! link time grows with every one): the handlers over real TCP with hand-built requests, the
//! admin APIs, hostile peers, idempotence, retention, SIGKILL, zero-copy fetch, the Rust group
//! consumer and the `samsa` command-line tools against the real broker process. Run one area with
//! `cargo test --test broker -- <module>::`, e.g. `cargo test --test broker -- api::groups::`.

// Each module includes the support files it uses as its own private copy (`#[path]`),
// as it did when it was a binary of its own: some copies differ (each codec module has its
// own `strategies`), and sharing one would couple the modules' imports.
#![allow(clippy::duplicate_mod)]

mod admin;
mod api;
mod cli;
mod fetch_zero_copy;
mod group_consumer;
mod hostile;
mod idempotence;
mod previous_release;
mod retention;
mod sigkill;
