//! IO-free wire formats: Kafka's record batch (magic v2) and the declarative message codec.
//!
//! [`wire`] holds the primitive types and the reader, [`message`] the `message!` macro that
//! derives a codec from each message's description, and the remaining modules describe the
//! messages themselves. This module also owns the choice of header version for an API version.

pub mod api_versions;
pub mod header;
pub mod message;
pub mod metadata;
pub mod record_batch;
pub mod wire;

use api_versions::ApiVersionsRequest;
use metadata::MetadataRequest;

/// The API keys whose messages are described so far.
pub const API_KEYS_COVERED: &[i16] = &[MetadataRequest::API_KEY, ApiVersionsRequest::API_KEY];

/// The first flexible version of an API's request (and response), if the API is covered.
fn flexible_from(api_key: i16) -> Option<i16> {
    match api_key {
        MetadataRequest::API_KEY => Some(MetadataRequest::FLEXIBLE_VERSIONS_FROM),
        ApiVersionsRequest::API_KEY => Some(ApiVersionsRequest::FLEXIBLE_VERSIONS_FROM),
        _ => None,
    }
}

/// The request header version a request of `api_key` at `api_version` carries: 2 in the API's
/// flexible versions, 1 otherwise. `None` for an API not covered yet, for which guessing could
/// misread the client id.
pub fn request_header_version(api_key: i16, api_version: i16) -> Option<i16> {
    let from = flexible_from(api_key)?;
    Some(if api_version >= from { 2 } else { 1 })
}

/// The response header version of a response of `api_key` at `api_version`: 1 in flexible
/// versions, 0 otherwise, and always 0 for ApiVersions, whose response a client must be able
/// to read before it knows which versions the broker speaks (KIP-511).
pub fn response_header_version(api_key: i16, api_version: i16) -> Option<i16> {
    let from = flexible_from(api_key)?;
    if api_key == ApiVersionsRequest::API_KEY {
        return Some(0);
    }
    Some(if api_version >= from { 1 } else { 0 })
}
