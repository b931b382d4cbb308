//! The wire codec's integration tests, in one test binary (link time grows with every one):
//! differential tests against the `kafka-protocol` crate, proptest robustness against hostile
//! bytes, and real clients' captured request frames decoded and re-encoded byte for byte
//! (`capture_client_fixtures` regenerates those: `cargo test --test codec --
//! capture_client_fixtures:: --ignored`). Run one area with `cargo test --test codec -- <module>::`.

// Each module includes the support files it uses as its own private copy (`#[path]`),
// as it did when it was a binary of its own: some copies differ (each codec module has its
// own `strategies`), and sharing one would couple the modules' imports.
#![allow(clippy::duplicate_mod)]

// Declared once for the binary: it installs the counting global allocator the fuzz modules
// measure with (per thread, so the other modules' tests are unaffected).
#[path = "../support/fuzz_support.rs"]
mod fuzz_support;

mod capture_client_fixtures;
mod client_fixtures;
mod differential;
mod differential_groups;
mod differential_produce_consume;
mod differential_replication;
mod fuzz;
mod fuzz_groups;
mod fuzz_produce_consume;
mod fuzz_replication;
