//! The partition log's integration tests on real files, in one test binary (link time grows
//! with every one): a smoke test, damaged log directories, and the model-based state-machine
//! test. Run one area with `cargo test --test log -- <module>::`. (The allocation test,
//! `tests/log_validator_alloc.rs`, stays a binary of its own: it installs a global allocator.)

mod corruption;
mod smoke;
mod state_machine;
