//! InitProducerId (key 22): a producer id and epoch for an idempotent producer.
//!
//! - `transactional_id` null (an idempotent producer): a new producer id, never handed out
//!   before (see `broker::producer_ids`), with epoch 0. As in Kafka, a v3+ request that names
//!   its current id and epoch still gets a fresh id: for idempotent producers the epoch bump of
//!   KIP-360 happens in the client, which bumps its own epoch and asks for a new id only when
//!   the epoch would overflow. The partitions accept the new id at any sequence.
//! - `transactional_id` empty: INVALID_REQUEST, as Kafka answers.
//! - any other `transactional_id`: TRANSACTIONAL_ID_AUTHORIZATION_FAILED. Transactions come in a
//!   later step; clients treat an authorization failure as fatal, so a transactional producer
//!   stops with a clear error instead of retrying forever.
//!
//! The id block file is written before the answer; a failure to write it fails the log
//! directory (as any disk error does) and answers COORDINATOR_NOT_AVAILABLE, which clients
//! retry.

use std::sync::Arc;

use crate::broker::producer_ids::ProducerIdError;
use crate::broker::Broker;
use crate::protocol::error::ErrorCode;
use crate::protocol::init_producer_id::{InitProducerIdRequest, InitProducerIdResponse};
use crate::protocol::types::{ProducerEpoch, ProducerId};

pub async fn handle(
    broker: &Arc<Broker>,
    _version: i16,
    request: InitProducerIdRequest,
) -> InitProducerIdResponse {
    let refused = |code: ErrorCode| InitProducerIdResponse {
        error_code: code.code(),
        producer_id: ProducerId::NONE,
        producer_epoch: ProducerEpoch::NONE,
        ..Default::default()
    };
    match request.transactional_id.as_deref() {
        None => {}
        Some("") => return refused(ErrorCode::INVALID_REQUEST),
        Some(transactional_id) => {
            tracing::info!(
                transactional_id,
                "refusing InitProducerId for a transactional producer: transactions are not supported yet"
            );
            return refused(ErrorCode::TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        }
    }
    match broker.producer_ids.allocate().await {
        Ok(id) => InitProducerIdResponse {
            error_code: ErrorCode::NONE.code(),
            producer_id: ProducerId(id),
            producer_epoch: ProducerEpoch(0),
            ..Default::default()
        },
        Err(e @ ProducerIdError::Exhausted) | Err(e @ ProducerIdError::Corrupt { .. }) => {
            tracing::error!(error = %e, "cannot hand out a producer id");
            refused(ErrorCode::UNKNOWN_SERVER_ERROR)
        }
        Err(ProducerIdError::Controller(e)) => {
            tracing::warn!(error = %e, "no producer id block from the controller");
            // Retriable for the client (COORDINATOR_NOT_AVAILABLE, NOT_CONTROLLER, ...).
            refused(match e.code() {
                ErrorCode::NOT_CONTROLLER | ErrorCode::REQUEST_TIMED_OUT => {
                    ErrorCode::COORDINATOR_NOT_AVAILABLE
                }
                code => code,
            })
        }
        Err(e @ ProducerIdError::Io { .. }) => {
            broker.health.fail(&format!("producer id block: {e}"));
            refused(ErrorCode::COORDINATOR_NOT_AVAILABLE)
        }
    }
}
