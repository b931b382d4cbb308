//! The consumer group member side of the classic protocol: [`consumer::GroupConsumer`], and
//! what it is built of: the partition assignors a
//! group's leader runs (`assignor`), the member's IO-free state machine (`member`), and
//! finding a group's coordinator (`coordinator`) and reading and committing its offsets
//! (`offsets`). `admin` has the group administration calls of [`crate::client::Client`]
//! (list, describe, delete, offsets) that `samsa groups` uses.
//!
//! The consumer protocol's bytes (subscriptions and assignments) are
//! `protocol::consumer_protocol`'s.

pub mod admin;
pub mod assignor;
pub mod consumer;
pub mod coordinator;
pub mod member;
pub mod offsets;
