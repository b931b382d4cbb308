//! ElectLeaders (key 43) on the controller (KIP-460): the partitions named, or every
//! partition when the list is null, get the leader their election type chooses (0: the
//! preferred replica, if it is in the ISR and live; 1: unclean, for a partition without a
//! leader: an ISR or ELR member if one is live, else any live replica). The changes are
//! written as one batch and answered once it commits, each partition with its outcome:
//! ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
//! UNKNOWN_TOPIC_OR_PARTITION. An election type other than 0 or 1 is INVALID_REQUEST.

use bytes::Bytes;

use crate::controller::core::{ElectLeadersResults, ElectionType, Request};
use crate::protocol::elect_leaders::{
    ElectLeadersPartitionResult, ElectLeadersRequest, ElectLeadersResponse, ReplicaElectionResult,
};
use crate::protocol::error::ErrorCode;

use super::{encode_message, outcome, Decoded, HandlerError};

/// The wire's election types.
pub const ELECTION_TYPE_PREFERRED: i8 = 0;
pub const ELECTION_TYPE_UNCLEAN: i8 = 1;

/// The election type a request carries (v0 knows only preferred).
pub fn election_type(request: &ElectLeadersRequest, version: i16) -> Option<ElectionType> {
    if version < 1 {
        return Some(ElectionType::Preferred);
    }
    match request.election_type {
        ELECTION_TYPE_PREFERRED => Some(ElectionType::Preferred),
        ELECTION_TYPE_UNCLEAN => Some(ElectionType::Unclean),
        _ => None,
    }
}

/// The wire number of an election type.
pub fn wire_election_type(election: ElectionType) -> i8 {
    match election {
        ElectionType::Preferred => ELECTION_TYPE_PREFERRED,
        ElectionType::Unclean => ELECTION_TYPE_UNCLEAN,
    }
}

/// The partitions a request names, per topic (None: every partition).
pub fn partitions(request: ElectLeadersRequest) -> Option<Vec<(String, Vec<i32>)>> {
    request.topic_partitions.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.topic, t.partitions))
            .collect()
    })
}

pub fn decode(version: i16, body: Bytes) -> Result<Decoded, HandlerError> {
    let request = ElectLeadersRequest::decode_exact(body, version)?;
    let Some(election) = election_type(&request, version) else {
        let response = ElectLeadersResponse {
            error_code: ErrorCode::INVALID_REQUEST.0,
            ..Default::default()
        };
        return Ok(Decoded::Answer(encode_message(&response, version)?));
    };
    Ok(Decoded::Request(Request::ElectLeaders {
        election,
        partitions: partitions(request),
    }))
}

/// The response of a reply (the broker's handler answers with it too).
pub fn response(reply: ElectLeadersResults) -> ElectLeadersResponse {
    let replica_election_results = reply
        .into_iter()
        .map(|(topic, partitions)| ReplicaElectionResult {
            topic,
            partition_result: partitions
                .into_iter()
                .map(|(partition_id, result)| {
                    let (error_code, error_message) = outcome(&result);
                    ElectLeadersPartitionResult {
                        partition_id,
                        error_code,
                        error_message,
                    }
                })
                .collect(),
        })
        .collect();
    ElectLeadersResponse {
        replica_election_results,
        ..Default::default()
    }
}

pub fn encode(version: i16, reply: ElectLeadersResults) -> Result<Bytes, HandlerError> {
    encode_message(&response(reply), version)
}
