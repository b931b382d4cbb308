//! BrokerHeartbeat (key 63): a registered broker's session with the active controller. The
//! answer says whether the broker caught up with the metadata log, whether it is fenced and
//! whether its controlled shutdown may finish; a heartbeat that changes the broker's state
//! (unfence, fence on request, begin a controlled shutdown) is answered once that commits.

use bytes::Bytes;

use crate::controller::core::{ControllerError, HeartbeatReply, Request};
use crate::protocol::broker_heartbeat::{BrokerHeartbeatRequest, BrokerHeartbeatResponse};

use super::{encode_message, error_code, Decoded, HandlerError};

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = BrokerHeartbeatRequest::decode_exact(body, version)?;
    Ok(Decoded::Request(Request::Heartbeat(request)))
}

pub fn encode(
    version: i16,
    reply: Result<HeartbeatReply, ControllerError>,
) -> Result<Bytes, HandlerError> {
    let response = match reply {
        Ok(r) => BrokerHeartbeatResponse {
            is_caught_up: r.is_caught_up,
            is_fenced: r.is_fenced,
            should_shut_down: r.should_shut_down,
            ..Default::default()
        },
        Err(e) => BrokerHeartbeatResponse {
            error_code: error_code(&e).code(),
            is_fenced: true,
            ..Default::default()
        },
    };
    encode_message(&response, version)
}
