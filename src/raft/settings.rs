//! A KRaft controller's settings, under Kafka's names, from a `controller.properties` text and
//! `--override`s: what `samsa controller` runs.
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `process.roles` | `controller` | only `controller` here (combined nodes come with the broker's move onto the quorum) |
//! | `node.id` | required | this voter's id |
//! | `controller.quorum.voters` | required | `id@host:port,...`, the static voter set; must name `node.id` |
//! | `listeners` | the voter's own address | `CONTROLLER://host:port`: the listener named by `controller.listener.names` is bound |
//! | `controller.listener.names` | `CONTROLLER` | which listener serves the quorum |
//! | `metadata.log.dir` | the first of `log.dirs` / `log.dir` | where `__cluster_metadata-0` and `quorum-state` live |
//! | `metadata.log.segment.bytes` | 1 GiB | segment size of the metadata log, at least 8 MiB as in Kafka |
//! | `controller.quorum.election.timeout.ms` | 1000 | |
//! | `controller.quorum.fetch.timeout.ms` | 2000 | |
//! | `controller.quorum.election.backoff.max.ms` | 1000 | |
//! | `controller.quorum.request.timeout.ms` | 2000 | |
//! | `controller.quorum.retry.backoff.ms` | 20 | |
//! | `metadata.log.max.record.bytes.between.snapshots` | 20971520 | bytes appended after which the state machine is asked for a snapshot |
//! | `metadata.log.max.snapshot.interval.ms` | 3600000 | time after which it is asked for one if anything was committed; 0 turns it off |
//! | `metadata.max.retention.bytes` | 104857600 | once the log is larger, its start moves to the latest snapshot's end; -1 keeps everything |
//!
//! Every other key a broker knows is accepted and reported as having no effect on a
//! controller (a stock Kafka `controller.properties` sets several); a key neither knows is an
//! error naming it. `controller.quorum.bootstrap.servers` (KIP-853's dynamic quorum) is
//! refused: the voter set is static for now.

use std::collections::BTreeMap;

use crate::broker::config::{
    merge_settings, parse_endpoint, ConfigError, IGNORED_BROKER_KEYS, RECOGNISED_BROKER_KEYS,
};

use super::core::RaftConfig;
use super::driver::{parse_voters, NodeConfig, SnapshotConfig};
use super::store::{METADATA_LOG_SEGMENT_BYTES_DEFAULT, METADATA_LOG_SEGMENT_BYTES_MIN};

/// The keys a controller acts on.
pub const CONTROLLER_KEYS: &[&str] = &[
    "process.roles",
    "node.id",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "listeners",
    "controller.listener.names",
    "metadata.log.dir",
    "log.dirs",
    "log.dir",
    "metadata.log.segment.bytes",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms",
    "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms",
    "metadata.max.retention.bytes",
];

/// A controller's configuration.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    pub node: NodeConfig,
    /// `host:port` to bind the controller listener to.
    pub listen: String,
    /// The host directory of `metadata.log.dir`.
    pub metadata_log_dir: String,
    /// Keys set that a controller does not act on.
    pub ignored: Vec<String>,
}

struct Values {
    /// key -> (value, line in the file; `None` for an override).
    values: BTreeMap<String, (String, Option<usize>)>,
}

impl Values {
    fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(|(v, _)| v.trim())
    }

    fn invalid(&self, key: &str, allowed: impl Into<String>) -> ConfigError {
        let (value, line) = self
            .values
            .get(key)
            .map_or(("", None), |(v, line)| (v.trim(), *line));
        ConfigError::InvalidValue {
            key: key.to_string(),
            value: value.to_string(),
            allowed: allowed.into(),
            line,
        }
    }

    fn int(&self, key: &str, min: i64, max: i64, default: i64) -> Result<i64, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(value) => match value.parse::<i64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(self.invalid(key, format!("must be an integer in [{min}, {max}]"))),
            },
        }
    }

    fn ms(&self, key: &str, default: u64) -> Result<u64, ConfigError> {
        let value = self.int(key, 1, i64::from(i32::MAX), default as i64)?;
        Ok(value.unsigned_abs())
    }

    fn required(&self, key: &str) -> Result<&str, ConfigError> {
        self.get(key)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ConfigError::InvalidValue {
                key: key.to_string(),
                value: String::new(),
                allowed: "is required for a controller".into(),
                line: None,
            })
    }
}

impl ControllerSettings {
    /// Builds the settings from parsed `(key, value, line)` entries and overrides (which win).
    pub fn from_properties(
        pairs: &[(String, String, usize)],
        overrides: &[(String, String)],
    ) -> Result<ControllerSettings, ConfigError> {
        let values = merge_settings(pairs, overrides);
        let mut ignored = Vec::new();
        for (key, (_, line)) in &values {
            if CONTROLLER_KEYS.contains(&key.as_str()) {
                continue;
            }
            if RECOGNISED_BROKER_KEYS.contains(&key.as_str())
                || IGNORED_BROKER_KEYS.contains(&key.as_str())
            {
                ignored.push(key.clone());
                continue;
            }
            return Err(ConfigError::UnknownKey {
                key: key.clone(),
                line: *line,
            });
        }
        let v = Values { values };
        if let Some(roles) = v.get("process.roles") {
            let roles: Vec<&str> = roles.split(',').map(str::trim).collect();
            if roles != ["controller"] {
                return Err(v.invalid(
                    "process.roles",
                    "must be `controller` for `samsa controller` (a node that is broker and \
                     controller at once comes with the broker's move onto the quorum)",
                ));
            }
        }
        if v.get("controller.quorum.bootstrap.servers").is_some() {
            return Err(v.invalid(
                "controller.quorum.bootstrap.servers",
                "is not supported yet (a dynamic quorum, KIP-853): set controller.quorum.voters",
            ));
        }
        let node_id = i32::try_from(v.int("node.id", 0, i64::from(i32::MAX), -1)?)
            .map_err(|_| v.invalid("node.id", "must be a node id"))?;
        if node_id < 0 {
            v.required("node.id")?;
        }
        let voters_text = v.required("controller.quorum.voters")?;
        let voters = parse_voters(voters_text)
            .map_err(|reason| v.invalid("controller.quorum.voters", reason))?;
        let Some(own_address) = voters.get(&node_id) else {
            return Err(ConfigError::Conflict {
                keys: "node.id, controller.quorum.voters".into(),
                reason: format!(
                    "node {node_id} is not among the voters {:?}",
                    voters.keys().collect::<Vec<_>>()
                ),
            });
        };
        let listener_name = v
            .get("controller.listener.names")
            .and_then(|names| names.split(',').map(str::trim).find(|n| !n.is_empty()))
            .unwrap_or("CONTROLLER")
            .to_ascii_uppercase();
        let listen = match v.get("listeners") {
            None => own_address.clone(),
            Some(text) => {
                let found = text
                    .split(',')
                    .map(str::trim)
                    .filter_map(parse_endpoint)
                    .find(|e| e.name == listener_name);
                match found {
                    // An empty host (`CONTROLLER://:9093`) binds every interface, as in Kafka.
                    Some(endpoint) if endpoint.host.is_empty() => {
                        format!("0.0.0.0:{}", endpoint.port)
                    }
                    Some(endpoint) => format!("{}:{}", endpoint.host, endpoint.port),
                    None => {
                        return Err(v.invalid(
                            "listeners",
                            format!("must hold a {listener_name}://host:port listener"),
                        ))
                    }
                }
            }
        };
        let metadata_log_dir = v
            .get("metadata.log.dir")
            .or_else(|| {
                v.get("log.dirs")
                    .and_then(|dirs| dirs.split(',').map(str::trim).find(|d| !d.is_empty()))
            })
            .or_else(|| v.get("log.dir"))
            .filter(|d| !d.is_empty())
            .ok_or_else(|| v.invalid("metadata.log.dir", "is required (or log.dirs)"))?
            .to_string();
        let segment_bytes = v.int(
            "metadata.log.segment.bytes",
            METADATA_LOG_SEGMENT_BYTES_MIN as i64,
            crate::log::SEGMENT_BYTES_MAX as i64,
            METADATA_LOG_SEGMENT_BYTES_DEFAULT as i64,
        )?;
        let defaults = RaftConfig::DEFAULT;
        let raft = RaftConfig {
            election_timeout_ms: v.ms(
                "controller.quorum.election.timeout.ms",
                defaults.election_timeout_ms,
            )?,
            fetch_timeout_ms: v.ms(
                "controller.quorum.fetch.timeout.ms",
                defaults.fetch_timeout_ms,
            )?,
            election_backoff_max_ms: v.ms(
                "controller.quorum.election.backoff.max.ms",
                defaults.election_backoff_max_ms,
            )?,
            request_timeout_ms: v.ms(
                "controller.quorum.request.timeout.ms",
                defaults.request_timeout_ms,
            )?,
            retry_backoff_ms: v.ms(
                "controller.quorum.retry.backoff.ms",
                defaults.retry_backoff_ms,
            )?,
            ..defaults
        };
        raft.validate().map_err(|reason| ConfigError::Conflict {
            keys: "controller.quorum.*".into(),
            reason,
        })?;
        let snapshot_defaults = SnapshotConfig::DEFAULT;
        let snapshots = SnapshotConfig {
            max_bytes_between_snapshots: v
                .int(
                    "metadata.log.max.record.bytes.between.snapshots",
                    1,
                    i64::MAX,
                    snapshot_defaults.max_bytes_between_snapshots as i64,
                )?
                .unsigned_abs(),
            max_snapshot_interval_ms: v
                .int(
                    "metadata.log.max.snapshot.interval.ms",
                    0,
                    i64::MAX,
                    snapshot_defaults.max_snapshot_interval_ms as i64,
                )?
                .unsigned_abs(),
            retention_bytes: v.int(
                "metadata.max.retention.bytes",
                -1,
                i64::MAX,
                snapshot_defaults.retention_bytes,
            )?,
        };
        Ok(ControllerSettings {
            node: NodeConfig {
                node_id,
                voters,
                // The disk is rooted at the directory itself.
                metadata_log_dir: String::new(),
                segment_bytes: segment_bytes.unsigned_abs(),
                raft,
                cluster_id: None,
                bugs: Default::default(),
                snapshots,
            },
            listen,
            metadata_log_dir,
            ignored,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::config::parse_properties;

    fn load(text: &str) -> Result<ControllerSettings, ConfigError> {
        ControllerSettings::from_properties(&parse_properties(text).expect("properties"), &[])
    }

    #[test]
    fn a_kafka_controller_properties_loads() {
        let settings = load(
            "process.roles=controller\nnode.id=2\n\
             controller.quorum.voters=1@localhost:9093,2@localhost:9094,3@localhost:9095\n\
             listeners=CONTROLLER://0.0.0.0:9094\ncontroller.listener.names=CONTROLLER\n\
             log.dirs=/tmp/kraft-controller-logs\nnum.network.threads=3\n\
             controller.quorum.election.timeout.ms=500\n",
        )
        .expect("loads");
        assert_eq!(settings.node.node_id, 2);
        assert_eq!(settings.node.voters.len(), 3);
        assert_eq!(settings.listen, "0.0.0.0:9094");
        assert_eq!(settings.metadata_log_dir, "/tmp/kraft-controller-logs");
        assert_eq!(settings.node.raft.election_timeout_ms, 500);
        assert_eq!(settings.node.raft.fetch_timeout_ms, 2000);
        assert_eq!(settings.ignored, vec!["num.network.threads".to_string()]);
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let base = "node.id=1\ncontroller.quorum.voters=1@localhost:9093\nlog.dirs=/tmp/x\n";
        assert!(load(base).is_ok());
        let cases = [
            (
                "controller.quorum.voters=1@localhost",
                "controller.quorum.voters",
            ),
            ("node.id=4", "node.id, controller.quorum.voters"),
            (
                "controller.quorum.fetch.timeout.ms=0",
                "controller.quorum.fetch.timeout.ms",
            ),
            (
                "controller.quorum.request.timeout.ms=10",
                "controller.quorum.*",
            ),
            ("process.roles=broker,controller", "process.roles"),
            (
                "metadata.log.segment.bytes=1024",
                "metadata.log.segment.bytes",
            ),
            (
                "controller.quorum.bootstrap.servers=localhost:9093",
                "controller.quorum.bootstrap.servers",
            ),
            ("no.such.key=1", "no.such.key"),
            (
                "metadata.max.retention.bytes=-2",
                "metadata.max.retention.bytes",
            ),
            (
                "metadata.log.max.record.bytes.between.snapshots=0",
                "metadata.log.max.record.bytes.between.snapshots",
            ),
            ("listeners=PLAINTEXT://localhost:9092", "listeners"),
        ];
        for (line, named) in cases {
            let error = load(&format!("{base}{line}\n")).expect_err(line);
            assert!(error.to_string().contains(named), "{line}: {error}");
        }
        let any = load(&format!("{base}listeners=CONTROLLER://:9093\n")).expect("loads");
        assert_eq!(
            any.listen, "0.0.0.0:9093",
            "an empty host binds every interface"
        );
        let missing = load("node.id=1\nlog.dirs=/tmp/x\n").expect_err("no voters");
        assert!(
            missing.to_string().contains("controller.quorum.voters"),
            "{missing}"
        );
    }
}
