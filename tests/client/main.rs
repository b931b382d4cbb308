//! The Rust client's integration tests, in one test binary (link time grows with every one):
//! the producer against the real broker, and the client's protocol handling and admin methods
//! against scripted fake brokers over real TCP. Run one area with
//! `cargo test --test client -- <module>::`.

// Each module includes the support files it uses as its own private copy (`#[path]`),
// as it did when it was a binary of its own: some copies differ (each codec module has its
// own `strategies`), and sharing one would couple the modules' imports.
#![allow(clippy::duplicate_mod)]

mod admin_fake_broker;
mod against_fake_broker;
mod producer;
mod producer_fake;
