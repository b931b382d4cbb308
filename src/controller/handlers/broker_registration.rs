//! BrokerRegistration (key 62): a broker starting up registers with the active controller,
//! which writes a RegisterBrokerRecord and answers with the broker epoch (that record's
//! offset) once it committed. The broker starts fenced.

use bytes::Bytes;

use crate::controller::core::{ControllerError, Request};
use crate::protocol::broker_registration::{BrokerRegistrationRequest, BrokerRegistrationResponse};

use super::{encode_message, error_code, Decoded, HandlerError};

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = BrokerRegistrationRequest::decode_exact(body, version)?;
    Ok(Decoded::Request(Request::RegisterBroker(request)))
}

pub fn encode(version: i16, reply: Result<i64, ControllerError>) -> Result<Bytes, HandlerError> {
    let response = match reply {
        Ok(broker_epoch) => BrokerRegistrationResponse {
            broker_epoch,
            ..Default::default()
        },
        Err(e) => {
            // A restarted broker is refused until its old session expires, one attempt per
            // retry backoff: that is expected, not news.
            if matches!(e, ControllerError::DuplicateBrokerRegistration { .. }) {
                tracing::debug!(error = %e, "refused a broker registration");
            } else {
                tracing::info!(error = %e, "refused a broker registration");
            }
            BrokerRegistrationResponse {
                error_code: error_code(&e).code(),
                broker_epoch: -1,
                ..Default::default()
            }
        }
    };
    encode_message(&response, version)
}
