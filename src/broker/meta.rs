//! The node's identity on disk: Kafka's `meta.properties` in the log directory, in its KRaft
//! form (`version=1`, `cluster.id`, `node.id`, `directory.id`).
//!
//! Owns: generating Kafka-style UUIDs (16 random bytes shown as 22 characters of unpadded
//! base64url), writing `meta.properties` on first start and checking it on every later one.
//!
//! Invariants:
//! - An existing `meta.properties` is never overwritten: a file that cannot be read, has the
//!   wrong version, lacks or garbles `cluster.id`/`node.id`, or names another node is an error
//!   naming the file and the key, and the operator decides.
//! - The file is created with [`Disk::write_file_atomic`], so a crash leaves either no file
//!   (the next start creates one) or a complete one.
//! - Randomness comes from [`crate::rt::rand`], so a simulation seed reproduces the ids.

use crate::broker::config::{parse_properties, ConfigError};
use crate::protocol::wire::Uuid;
use crate::rt::disk::{join, Disk};
use std::fmt;
use std::io;

/// The file's name inside the log directory (Kafka's).
pub const META_PROPERTIES_FILE: &str = "meta.properties";
/// The only `version` Samsa reads and writes: KRaft's (version 0 is ZooKeeper-era).
pub const META_PROPERTIES_VERSION: u32 = 1;
/// The largest `meta.properties` read: the real file is a few hundred bytes, so anything
/// bigger is not one.
pub const META_PROPERTIES_BYTES_MAX: u64 = 64 * 1024;

/// What `meta.properties` says about this node and its directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetaProperties {
    /// `version` (always [`META_PROPERTIES_VERSION`]).
    pub version: u32,
    /// `cluster.id`: a Kafka UUID, the cluster this directory belongs to.
    pub cluster_id: String,
    /// `node.id`: must match the configured `node.id`.
    pub node_id: i32,
    /// `directory.id`: a Kafka UUID naming this log directory; files written by Kafka before
    /// 3.7 may lack it.
    pub directory_id: Option<String>,
}

/// Why `meta.properties` cannot be used. Every variant names the file.
#[derive(Debug)]
pub enum MetaError {
    /// Reading, creating or writing the file or its directory failed.
    Io { file: String, source: io::Error },
    /// The file is not properties text (or is too large to be `meta.properties`).
    Unparseable { file: String, reason: String },
    /// A required key is absent.
    MissingKey { file: String, key: &'static str },
    /// A key's value is not what it must be.
    InvalidValue {
        file: String,
        key: &'static str,
        value: String,
        expected: String,
    },
    /// The directory belongs to another node.
    NodeIdMismatch {
        file: String,
        found: i32,
        configured: i32,
    },
}

impl fmt::Display for MetaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetaError::Io { file, source } => write!(f, "{file}: {source}"),
            MetaError::Unparseable { file, reason } => {
                write!(f, "{file}: not a valid meta.properties: {reason}")
            }
            MetaError::MissingKey { file, key } => write!(f, "{file}: '{key}' is missing"),
            MetaError::InvalidValue {
                file,
                key,
                value,
                expected,
            } => write!(f, "{file}: invalid '{key}' value '{value}': {expected}"),
            MetaError::NodeIdMismatch {
                file,
                found,
                configured,
            } => write!(
                f,
                "{file}: 'node.id' is {found} but this node is configured with node.id \
                 {configured}: the directory belongs to another node"
            ),
        }
    }
}

impl std::error::Error for MetaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            MetaError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Decodes a Kafka UUID string as `meta.properties` holds it; `None` unless it is a UUID in
/// Kafka's text form ([`Uuid::from_base64`]) and not one of Kafka's reserved ids (all zeros,
/// or 1).
pub fn uuid_from_str(text: &str) -> Option<[u8; 16]> {
    let id = Uuid::from_base64(text)?;
    if u128::from_be_bytes(id.0) <= 1 {
        return None;
    }
    Some(id.0)
}

/// A random Kafka UUID string: random version-4 bytes as Java's `UUID.randomUUID`, never
/// starting with `-` ([`Uuid::v4_from`]).
pub fn random_uuid() -> String {
    Uuid::v4_from([crate::rt::rand::random_u64(), crate::rt::rand::random_u64()]).to_base64()
}

impl MetaProperties {
    /// A new identity for a fresh directory: random cluster and directory ids.
    pub fn generate(node_id: i32) -> MetaProperties {
        MetaProperties {
            version: META_PROPERTIES_VERSION,
            cluster_id: random_uuid(),
            node_id,
            directory_id: Some(random_uuid()),
        }
    }

    /// The file's text: a comment header, then the keys in a fixed order.
    pub fn encode(&self) -> String {
        let mut text = String::from(
            "#\n# Written by Samsa: Kafka's KRaft meta.properties. Do not edit; the node refuses\n\
             # to start if the ids here do not match.\n",
        );
        text.push_str(&format!("cluster.id={}\n", self.cluster_id));
        if let Some(directory_id) = &self.directory_id {
            text.push_str(&format!("directory.id={directory_id}\n"));
        }
        text.push_str(&format!("node.id={}\n", self.node_id));
        text.push_str(&format!("version={}\n", self.version));
        text
    }

    /// Parses the text of `file` (named in errors). Unknown keys are tolerated, as in Kafka.
    pub fn parse(text: &str, file: &str) -> Result<MetaProperties, MetaError> {
        let entries = parse_properties(text).map_err(|e: ConfigError| MetaError::Unparseable {
            file: file.to_string(),
            reason: e.to_string(),
        })?;
        let get = |key: &'static str| -> Result<String, MetaError> {
            entries
                .iter()
                .rev()
                .find(|(k, _, _)| k == key)
                .map(|(_, v, _)| v.trim().to_string())
                .ok_or(MetaError::MissingKey {
                    file: file.to_string(),
                    key,
                })
        };
        let invalid = |key: &'static str, value: String, expected: &str| MetaError::InvalidValue {
            file: file.to_string(),
            key,
            value,
            expected: expected.to_string(),
        };
        let version = get("version")?;
        if version.parse::<u32>().ok() != Some(META_PROPERTIES_VERSION) {
            return Err(invalid(
                "version",
                version,
                "must be 1 (KRaft); version 0 is a ZooKeeper-era directory",
            ));
        }
        let cluster_id = get("cluster.id")?;
        if uuid_from_str(&cluster_id).is_none() {
            return Err(invalid(
                "cluster.id",
                cluster_id,
                "must be a Kafka UUID (22 base64url characters)",
            ));
        }
        let node_id_text = get("node.id")?;
        let node_id = match node_id_text.parse::<i32>() {
            Ok(id) if id >= 0 => id,
            _ => {
                return Err(invalid(
                    "node.id",
                    node_id_text,
                    "must be an integer in [0, 2147483647]",
                ))
            }
        };
        let directory_id = match get("directory.id") {
            Ok(id) if uuid_from_str(&id).is_some() => Some(id),
            Ok(id) => {
                return Err(invalid(
                    "directory.id",
                    id,
                    "must be a Kafka UUID (22 base64url characters)",
                ))
            }
            Err(_) => None,
        };
        Ok(MetaProperties {
            version: META_PROPERTIES_VERSION,
            cluster_id,
            node_id,
            directory_id,
        })
    }
}

/// Reads `dir/meta.properties`, or creates it (and `dir`) on first start. An existing file
/// must be valid and name `node_id`; it is never rewritten.
pub async fn load_or_create(
    disk: &Disk,
    dir: &str,
    node_id: i32,
) -> Result<MetaProperties, MetaError> {
    let file = join(dir, META_PROPERTIES_FILE);
    let io_err = |source: io::Error| MetaError::Io {
        file: file.clone(),
        source,
    };
    if !dir.is_empty() {
        disk.create_dir_all(dir).await.map_err(io_err)?;
    }
    if !disk.exists(&file).await.map_err(io_err)? {
        let meta = MetaProperties::generate(node_id);
        disk.write_file_atomic(&file, meta.encode().as_bytes())
            .await
            .map_err(io_err)?;
        return Ok(meta);
    }
    let handle = disk
        .open(&file, crate::rt::disk::OpenMode::Existing)
        .await
        .map_err(io_err)?;
    let len = handle.len().await.map_err(io_err)?;
    if len > META_PROPERTIES_BYTES_MAX {
        return Err(MetaError::Unparseable {
            file,
            reason: format!("{len} bytes, more than {META_PROPERTIES_BYTES_MAX}"),
        });
    }
    let bytes = handle
        .read_at(0, usize::try_from(len).unwrap_or(0))
        .await
        .map_err(io_err)?;
    let text = std::str::from_utf8(&bytes).map_err(|e| MetaError::Unparseable {
        file: file.clone(),
        reason: format!("not UTF-8 text: {e}"),
    })?;
    let meta = MetaProperties::parse(text, &file)?;
    if meta.node_id != node_id {
        return Err(MetaError::NodeIdMismatch {
            file,
            found: meta.node_id,
            configured: node_id,
        });
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rt::disk::MemDisk;

    use crate::rt::block_on;

    const VALID: &str = "version=1\ncluster.id=J8dKmBaHRJa3cVcYM8VxWQ\nnode.id=3\n\
                         directory.id=7vXuE5ZlTtqyPeeHuIMfZA\n";

    #[test]
    fn uuid_strings_round_trip_and_are_canonical() {
        let ids = block_on(async { (0..200).map(|_| random_uuid()).collect::<Vec<_>>() });
        for id in ids {
            assert_eq!(id.len(), crate::protocol::wire::UUID_BASE64_LEN);
            assert!(!id.starts_with('-'), "{id}");
            let bytes = uuid_from_str(&id).expect("valid");
            assert_eq!(Uuid(bytes).to_base64(), id);
            assert_eq!(bytes[6] >> 4, 4, "version 4");
        }
        // Bits whose first base64 digit would be '-' (62): v4_from moves them to 'e'.
        let fixed = Uuid::v4_from([0xf800_0000_0000_0000, 9]).to_base64();
        assert!(fixed.starts_with('e'), "{fixed}");
        assert_eq!(
            uuid_from_str("AAAAAAAAAAAAAAAAAAAAAA"),
            None,
            "reserved zero id"
        );
        assert_eq!(
            uuid_from_str("AAAAAAAAAAAAAAAAAAAAAQ"),
            None,
            "reserved id 1"
        );
        let mut two = [0u8; 16];
        two[15] = 2;
        assert_eq!(uuid_from_str("AAAAAAAAAAAAAAAAAAAAAg"), Some(two));
        assert_eq!(
            uuid_from_str("AAAAAAAAAAAAAAAAAAAAAB"),
            None,
            "padding bits set"
        );
        assert_eq!(uuid_from_str("short"), None);
        assert_eq!(
            uuid_from_str("AAAAAAAAAAAAAAAAAAAA+A"),
            None,
            "not base64url"
        );
    }

    #[test]
    fn parse_reads_kafka_files_and_names_bad_keys() {
        let meta = MetaProperties::parse(
            &format!("#\n#Thu Jan 01 00:00:00 UTC 2026\n{VALID}"),
            "d/meta.properties",
        )
        .unwrap();
        assert_eq!(meta.node_id, 3);
        assert_eq!(meta.cluster_id, "J8dKmBaHRJa3cVcYM8VxWQ");
        assert_eq!(meta.directory_id.as_deref(), Some("7vXuE5ZlTtqyPeeHuIMfZA"));
        assert_eq!(MetaProperties::parse(&meta.encode(), "f").unwrap(), meta);
        let without_dir = VALID.replace("directory.id=7vXuE5ZlTtqyPeeHuIMfZA\n", "");
        assert_eq!(
            MetaProperties::parse(&without_dir, "f")
                .unwrap()
                .directory_id,
            None
        );
        let cases = [
            (
                VALID.replace("cluster.id=J8dKmBaHRJa3cVcYM8VxWQ\n", ""),
                "f: 'cluster.id' is missing",
            ),
            (
                VALID.replace("J8dKmBaHRJa3cVcYM8VxWQ", "not-a-uuid"),
                "f: invalid 'cluster.id' value 'not-a-uuid'",
            ),
            (
                VALID.replace("node.id=3", "node.id=x"),
                "f: invalid 'node.id' value 'x'",
            ),
            (VALID.replace("node.id=3\n", ""), "f: 'node.id' is missing"),
            (
                VALID.replace("version=1", "version=0"),
                "f: invalid 'version' value '0'",
            ),
            (
                VALID.replace("7vXuE5ZlTtqyPeeHuIMfZA", "zz"),
                "f: invalid 'directory.id' value 'zz'",
            ),
            (
                "version=1\nbad=\\u12".to_string(),
                "f: not a valid meta.properties: line 2",
            ),
        ];
        for (text, want) in cases {
            let e = MetaProperties::parse(&text, "f").unwrap_err().to_string();
            assert!(e.starts_with(want), "got {e:?}, want {want:?}");
        }
    }

    /// The real disk is the production path only (under `sim` every disk is a `MemDisk`).
    #[cfg(not(feature = "sim"))]
    #[test]
    fn create_then_reload_on_a_real_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let disk = Disk::real(tmp.path()).unwrap();
        let created = block_on(load_or_create(&disk, "logs", 5)).unwrap();
        assert_eq!(created.node_id, 5);
        assert_eq!(created.version, 1);
        let on_disk = String::from_utf8(
            block_on(disk.read_file("logs/meta.properties"))
                .unwrap()
                .to_vec(),
        )
        .unwrap();
        assert!(on_disk.starts_with('#'));
        assert!(on_disk.contains(&format!("cluster.id={}\n", created.cluster_id)));
        assert!(on_disk.contains("node.id=5\n") && on_disk.contains("version=1\n"));
        let reloaded = block_on(load_or_create(&disk, "logs", 5)).unwrap();
        assert_eq!(reloaded, created);
        let e = block_on(load_or_create(&disk, "logs", 6))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "logs/meta.properties: 'node.id' is 5 but this node is configured with node.id 6: \
             the directory belongs to another node"
        );
        let after = String::from_utf8(
            block_on(disk.read_file("logs/meta.properties"))
                .unwrap()
                .to_vec(),
        )
        .unwrap();
        assert_eq!(after, on_disk, "a mismatch never rewrites the file");
    }

    #[test]
    fn create_then_reload_on_a_mem_disk_and_invalid_files_are_kept() {
        let mem = MemDisk::new(1);
        let disk = Disk::mem(mem.clone());
        let created = block_on(load_or_create(&disk, "", 0)).unwrap();
        // A restart of the node sees the same disk.
        let disk = Disk::mem(mem.clone());
        assert_eq!(block_on(load_or_create(&disk, "", 0)).unwrap(), created);

        let garbage = b"version=1\nnode.id=0\n";
        block_on(disk.create_dir_all("d")).unwrap();
        block_on(disk.create_dir_all("e")).unwrap();
        block_on(disk.write_file_atomic("d/meta.properties", garbage)).unwrap();
        let e = block_on(load_or_create(&disk, "d", 0))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "d/meta.properties: 'cluster.id' is missing");
        assert_eq!(mem.file_image("d/meta.properties").unwrap(), garbage);

        block_on(disk.write_file_atomic("e/meta.properties", &[0xff, 0xfe])).unwrap();
        let e = block_on(load_or_create(&disk, "e", 0))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("e/meta.properties: not a valid meta.properties: not UTF-8"),
            "{e}"
        );
    }
}
