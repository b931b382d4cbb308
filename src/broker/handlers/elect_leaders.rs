//! ElectLeaders (key 43) on the broker's client listener, as `kafka-leader-election.sh`
//! sends it (KIP-460): forwarded to the active controller (in process when this node's
//! controller is active), which decides each election (see
//! `controller::handlers::elect_leaders`); the answer is sent once this broker applied the
//! changes. A broker without a metadata quorum leads every partition it has alone: each
//! election there is ELECTION_NOT_NEEDED. An election type other than 0 (preferred) or 1
//! (unclean) is INVALID_REQUEST; a controller that could not be reached fails every
//! partition named with the channel's error (the whole request, for a null list, v1+).

use std::sync::Arc;

use crate::broker::Broker;
use crate::controller::core::{ControllerError, ElectLeadersResults};
use crate::controller::handlers::elect_leaders::{election_type, partitions, response};
use crate::protocol::elect_leaders::{
    ElectLeadersPartitionResult, ElectLeadersRequest, ElectLeadersResponse, ReplicaElectionResult,
};
use crate::protocol::error::ErrorCode;

pub async fn handle(
    broker: &Arc<Broker>,
    version: i16,
    request: ElectLeadersRequest,
) -> ElectLeadersResponse {
    let Some(election) = election_type(&request, version) else {
        return ElectLeadersResponse {
            error_code: ErrorCode::INVALID_REQUEST.0,
            ..Default::default()
        };
    };
    let partitions = partitions(request);
    let Some(channel) = broker.topics.controller_channel() else {
        return response(alone(broker, partitions).await);
    };
    match channel.elect_leaders(election, partitions.clone()).await {
        Ok(response) => response,
        Err(e) => {
            let code = e.code().0;
            let message = Some(e.to_string());
            let Some(partitions) = partitions else {
                return ElectLeadersResponse {
                    error_code: code,
                    ..Default::default()
                };
            };
            let replica_election_results = partitions
                .into_iter()
                .map(|(topic, indexes)| ReplicaElectionResult {
                    topic,
                    partition_result: indexes
                        .into_iter()
                        .map(|partition_id| ElectLeadersPartitionResult {
                            partition_id,
                            error_code: code,
                            error_message: message.clone(),
                        })
                        .collect(),
                })
                .collect();
            ElectLeadersResponse {
                replica_election_results,
                ..Default::default()
            }
        }
    }
}

/// The outcomes on a broker without a quorum: its partitions have one replica, which leads.
async fn alone(
    broker: &Broker,
    partitions: Option<Vec<(String, Vec<i32>)>>,
) -> ElectLeadersResults {
    let Some(partitions) = partitions else {
        // Every partition: none needed an election, and those are left out.
        return Vec::new();
    };
    let mut out = Vec::with_capacity(partitions.len());
    for (topic, indexes) in partitions {
        let known = broker.topics.get(&topic).await;
        let results = indexes
            .into_iter()
            .map(|index| {
                let exists = known
                    .as_ref()
                    .is_some_and(|t| usize::try_from(index).is_ok_and(|i| i < t.partitions.len()));
                let outcome = if exists {
                    Err(ControllerError::ElectionNotNeeded {
                        partition: format!("{topic}-{index}"),
                    })
                } else {
                    Err(ControllerError::UnknownPartition {
                        topic: topic.clone(),
                        partition: index,
                    })
                };
                (index, outcome)
            })
            .collect();
        out.push((topic, results));
    }
    out
}
