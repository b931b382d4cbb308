//! IO-free wire formats. For now: Kafka's record batch (magic v2). The declarative message
//! codec arrives with step 2.

pub mod record_batch;
