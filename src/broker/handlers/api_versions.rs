//! ApiVersions (key 18): the APIs and versions this broker handles.
//!
//! A client sends it first, at the newest version it knows. A version newer than ours gets
//! UNSUPPORTED_VERSION with the full list in a v0-format body, so the client can retry at a
//! version both sides know (KIP-511). The list is the handler registry,
//! [`crate::broker::handlers::HANDLERS`], from which dispatch starts requests too.

use std::sync::Arc;

use crate::broker::handlers::supported_apis;
use crate::broker::Broker;
use crate::protocol::api_versions::{ApiVersion, ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::error::ErrorCode;

pub fn handle(_broker: &Arc<Broker>, version: i16) -> ApiVersionsResponse {
    let error_code = if version > ApiVersionsRequest::VERSIONS.1 {
        ErrorCode::UNSUPPORTED_VERSION
    } else {
        ErrorCode::NONE
    };
    ApiVersionsResponse {
        error_code: error_code.code(),
        api_keys: supported_apis()
            .into_iter()
            .map(|(api_key, min_version, max_version)| ApiVersion {
                api_key,
                min_version,
                max_version,
            })
            .collect(),
        ..Default::default()
    }
}
