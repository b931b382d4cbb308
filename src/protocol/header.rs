//! Request and response headers, which frame every message body.
//!
//! This module owns the header structs and the rules that pick a header version for an API
//! version: request header v2 and response header v1 in the API's flexible versions, v1 and v0
//! otherwise, except that an ApiVersions response always uses response header v0 (a client
//! must be able to read it before it knows what the broker supports).
//!
//! Invariant: `client_id` keeps its classic int16-length encoding even in request header v2;
//! the schema excludes it from flexible encoding so that any broker can read the client id of
//! a request whose API version it does not understand.

use crate::message;
use crate::protocol::wire::kt;

message! {
    /// The header in front of every request body.
    pub struct RequestHeader {
        versions: (0-2),
        flexible: (2+),
        fields {
            /// The API key of the request.
            request_api_key: kt::Int16, versions(0+);
            /// The API version of the request.
            request_api_version: kt::Int16, versions(0+);
            /// Echoed in the response, which is how the client matches the two.
            correlation_id: kt::Int32, versions(0+);
            /// The client id; null is allowed.
            client_id: kt::NullableString, versions(1+), nullable(1+),
                flags(ignorable, non_compact);
        }
        tagged {}
    }
}

message! {
    /// The header in front of every response body.
    pub struct ResponseHeader {
        versions: (0-1),
        flexible: (1+),
        fields {
            /// The correlation id of the request this answers.
            correlation_id: kt::Int32, versions(0+);
        }
        tagged {}
    }
}
