//! AlterPartition (key 56): a partition's leader asks the controller to change the partition's
//! ISR (and its leader recovery state). The core decides each partition against its current
//! leader and partition epochs and the eligibility of the new members, writes the accepted
//! changes as one PartitionChangeRecord batch, and the answer, sent once that commits, gives
//! each accepted partition's state after the change: the leader takes the new ISR as
//! committed from it.
//!
//! A refusal of the whole request (the requester's broker epoch is stale, this controller is
//! not the active one) is the response's top-level error with no topics, as Kafka answers it.

use bytes::Bytes;

use crate::controller::core::{AlterPartitionResults, ControllerError, Request};
use crate::protocol::alter_partition::{
    AlterPartitionRequest, AlterPartitionResponse, AlterPartitionResponsePartition,
    AlterPartitionResponseTopic,
};
use crate::protocol::types::{LeaderEpoch, NodeId};

use super::{encode_message, error_code, Decoded, HandlerError};

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = AlterPartitionRequest::decode_exact(body, version)?;
    Ok(Decoded::Request(Request::AlterPartition(request)))
}

pub fn encode(
    version: i16,
    reply: Result<AlterPartitionResults, ControllerError>,
) -> Result<Bytes, HandlerError> {
    encode_message(&response(reply), version)
}

/// The core's reply as Kafka's response (also what the broker's controller channel returns
/// for a request its own controller answered).
pub fn response(reply: Result<AlterPartitionResults, ControllerError>) -> AlterPartitionResponse {
    let topics = match reply {
        Ok(topics) => topics,
        Err(e) => {
            return AlterPartitionResponse {
                error_code: error_code(&e).code(),
                ..Default::default()
            }
        }
    };
    let topics = topics
        .into_iter()
        .map(|(topic_id, partitions)| AlterPartitionResponseTopic {
            topic_id,
            partitions: partitions
                .into_iter()
                .map(|(partition_index, result)| match result {
                    Ok(state) => AlterPartitionResponsePartition {
                        partition_index,
                        error_code: 0,
                        leader_id: NodeId(state.leader),
                        leader_epoch: LeaderEpoch(state.leader_epoch),
                        isr: state.isr.into_iter().map(NodeId).collect(),
                        leader_recovery_state: state.leader_recovery_state,
                        partition_epoch: state.partition_epoch,
                    },
                    // Kafka sets only the index and the code of a refused partition.
                    Err(e) => AlterPartitionResponsePartition {
                        partition_index,
                        error_code: error_code(&e).code(),
                        ..Default::default()
                    },
                })
                .collect(),
        })
        .collect();
    AlterPartitionResponse {
        topics,
        ..Default::default()
    }
}
