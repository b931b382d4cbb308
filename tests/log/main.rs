//! The partition log's integration tests on real files, in one test binary (link time grows
//! with every one): a smoke test, damaged log directories, and the model-based state-machine
//! test. Run one area with `cargo test --test log -- <module>::`. (The allocation test,
//! `tests/log_validator_alloc.rs`, stays a binary of its own: it installs a global allocator.)

// Each module includes the support files it uses as its own private copy (`#[path]`),
// as it did when it was a binary of its own: some copies differ (each codec module has its
// own `strategies`), and sharing one would couple the modules' imports.
#![allow(clippy::duplicate_mod)]

mod corruption;
mod smoke;
mod state_machine;
