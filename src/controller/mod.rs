//! The KRaft controller: Kafka's metadata records ([`records`]), the metadata image every
//! node applies them to ([`image`]), the controller that decides which records to write
//! ([`core`]), its driver above a KRaft replica ([`driver`]), its APIs on the controller
//! listener ([`handlers`]), the config rules it applies ([`policy`]) and the records a
//! single-node data directory of the previous release is migrated as ([`migration`]).
//!
//! Invariants: the image is a pure function of the committed records applied in log order;
//! nothing but the driver does IO, and it decides nothing.

pub mod core;
pub mod driver;
pub mod handlers;
pub mod image;
pub mod migration;
pub mod policy;
pub mod records;
