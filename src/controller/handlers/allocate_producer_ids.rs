//! AllocateProducerIds (key 67): a broker asks for the next block of producer ids, which the
//! controller hands out by writing a ProducerIdsRecord; blocks never overlap, across
//! controllers and restarts, because the next id lives in the metadata log.

use bytes::Bytes;

use crate::controller::core::{ControllerError, Request};
use crate::protocol::allocate_producer_ids::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse,
};

use super::{encode_message, error_code, Decoded, HandlerError};

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = AllocateProducerIdsRequest::decode_exact(body, version)?;
    Ok(Decoded::Request(Request::AllocateProducerIds(request)))
}

pub fn encode(
    version: i16,
    reply: Result<(i64, i32), ControllerError>,
) -> Result<Bytes, HandlerError> {
    let response = match reply {
        Ok((producer_id_start, producer_id_len)) => AllocateProducerIdsResponse {
            producer_id_start,
            producer_id_len,
            ..Default::default()
        },
        Err(e) => AllocateProducerIdsResponse {
            error_code: error_code(&e).code(),
            producer_id_start: -1,
            ..Default::default()
        },
    };
    encode_message(&response, version)
}
