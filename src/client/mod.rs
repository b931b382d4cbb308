//! The Rust client: connections to brokers, metadata, producing with acks and retries, and
//! fetching. It depends only on `protocol` and `rt`, so it runs under real tokio and under
//! the simulator alike.

// @client-modules
