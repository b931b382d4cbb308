//! The replica fetcher (placeholder until the driver lands).
