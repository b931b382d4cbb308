//! Finding a group's coordinator (FindCoordinator, key type 0) and opening a connection to
//! it, for the group consumer, the group admin calls and `samsa perf commit`.

use super::super::cluster::Client;
use super::super::connection::Connection;
use super::super::error::ClientError;
use crate::protocol::error::ErrorCode;
use crate::protocol::find_coordinator::{FindCoordinatorRequest, FindCoordinatorResponse};

/// FindCoordinator's key type of a consumer group.
pub const KEY_TYPE_GROUP: i8 = 0;
/// From this version FindCoordinator takes a batch of keys (KIP-699) and answers per key.
pub const FIND_COORDINATOR_BATCH_VERSION_MIN: i16 = 4;

/// Where a group's coordinator is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoordinatorAddress {
    pub node_id: i32,
    /// `host:port`.
    pub addr: String,
}

/// The FindCoordinator request for `group` in `version`: one key before v4, a batch of one
/// from v4 (each field exists only in its versions).
pub fn find_coordinator_request(group: &str, version: i16) -> FindCoordinatorRequest {
    if version >= FIND_COORDINATOR_BATCH_VERSION_MIN {
        FindCoordinatorRequest {
            key_type: KEY_TYPE_GROUP,
            coordinator_keys: vec![group.to_owned()],
            ..Default::default()
        }
    } else {
        FindCoordinatorRequest {
            key: group.to_owned(),
            key_type: KEY_TYPE_GROUP,
            ..Default::default()
        }
    }
}

/// The coordinator a FindCoordinator answer names for `group`, or its error as a
/// [`ClientError::Group`] (COORDINATOR_NOT_AVAILABLE while `__consumer_offsets` is being
/// created: retriable).
pub fn coordinator_of(
    group: &str,
    response: &FindCoordinatorResponse,
) -> Result<CoordinatorAddress, ClientError> {
    let (code, node_id, host, port) = match response.coordinators.first() {
        Some(c) => (c.error_code, c.node_id.get(), c.host.as_str(), c.port),
        None => (
            response.error_code,
            response.node_id.get(),
            response.host.as_str(),
            response.port,
        ),
    };
    if code != 0 {
        return Err(ClientError::Group {
            group: group.to_owned(),
            api: "FindCoordinator",
            code: ErrorCode(code),
        });
    }
    Ok(CoordinatorAddress {
        node_id,
        addr: format!("{host}:{port}"),
    })
}

impl Client {
    /// Asks any broker where `group`'s coordinator is (once; the caller retries retriable
    /// errors, COORDINATOR_NOT_AVAILABLE among them).
    pub async fn find_coordinator(
        &mut self,
        group: &str,
    ) -> Result<CoordinatorAddress, ClientError> {
        let response: FindCoordinatorResponse = self
            .send_any(FindCoordinatorRequest::API_KEY, |version| {
                find_coordinator_request(group, version)
            })
            .await?;
        coordinator_of(group, &response)
    }

    /// A new connection to `addr` with this client's limits and id, apart from the
    /// client's own (a group member's coordinator connection fails and is replaced on its
    /// own). It takes `&mut self` so that its future is `Send` (a `Client` is not `Sync`
    /// under `sim`) and may run in a spawned task.
    pub async fn connect(&mut self, addr: &str) -> Result<Connection, ClientError> {
        Connection::connect(addr, &self.config().client_id, self.limits()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::find_coordinator::Coordinator;
    use crate::protocol::types::NodeId;

    #[test]
    fn the_request_and_the_answer_follow_the_version() {
        let old = find_coordinator_request("g", 3);
        assert_eq!((old.key.as_str(), old.coordinator_keys.len()), ("g", 0));
        let new = find_coordinator_request("g", 4);
        assert_eq!(
            (new.key.as_str(), new.coordinator_keys),
            ("", vec!["g".to_string()])
        );
        let batched = FindCoordinatorResponse {
            coordinators: vec![Coordinator {
                key: "g".into(),
                node_id: NodeId(3),
                host: "h".into(),
                port: 9,
                error_code: 0,
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            coordinator_of("g", &batched).unwrap(),
            CoordinatorAddress {
                node_id: 3,
                addr: "h:9".into()
            }
        );
        let refused = FindCoordinatorResponse {
            error_code: ErrorCode::COORDINATOR_NOT_AVAILABLE.code(),
            ..Default::default()
        };
        let err = coordinator_of("g", &refused).unwrap_err();
        assert!(err.is_retriable(), "{err}");
        assert_eq!(
            err.to_string(),
            "FindCoordinator for group 'g': COORDINATOR_NOT_AVAILABLE (15)"
        );
    }
}
