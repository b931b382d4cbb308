//! The KRaft controller: Kafka's metadata records ([`records`]), the metadata image every
//! node applies them to ([`image`]), and the controller that decides which records to write.
//!
//! Invariants: the image is a pure function of the committed records applied in log order;
//! nothing here does IO (the drivers on `rt` do).

pub mod core;
pub mod image;
pub mod records;
