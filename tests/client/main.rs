//! The Rust client's integration tests, in one test binary (link time grows with every one):
//! the producer against the real broker, and the client's protocol handling and admin methods
//! against scripted fake brokers over real TCP. Run one area with
//! `cargo test --test client -- <module>::`.

mod admin_fake_broker;
mod fake_broker;
mod producer;
mod producer_fake;
