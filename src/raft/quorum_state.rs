//! The `quorum-state` file: a KRaft replica's [`ElectionState`], durable before the replica
//! acts on it (a vote is written before it is granted, a candidacy before votes are asked).
//!
//! Format (Kafka's `FileQuorumStateStore`, data version 1, one JSON object):
//! `{"leaderId":L,"leaderEpoch":E,"votedId":V,"votedDirectoryId":"D","data_version":1}` with
//! -1 for "none" and D the voted replica's directory id in Kafka's UUID text form (16 bytes,
//! URL-safe base64 without padding), left out when it has none. Version 0 files (Kafka
//! before KIP-853: `clusterId`, `appliedOffset`, `currentVoters` too) are read; the fields
//! that version 1 dropped are ignored. Replaced atomically (written aside, synced, renamed,
//! the directory synced).
//!
//! A file that cannot be read is an error naming the problem, never a fresh state: forgetting
//! a vote would let the replica vote twice in one epoch.

use super::election::{ElectionState, ReplicaKey};
use crate::protocol::wire::Uuid;
use crate::rt::disk::{join, Disk};
use std::fmt;

/// Name of the file in the metadata log's directory (Kafka's name).
pub const QUORUM_STATE_FILE: &str = "quorum-state";
/// The data version this code writes.
pub const QUORUM_STATE_VERSION: i64 = 1;
/// A larger file is not a quorum state (a version 0 file lists the voters: a few hundred
/// bytes).
pub const QUORUM_STATE_BYTES_MAX: usize = 64 * 1024;
/// Nesting of JSON values skipped in ignored fields.
const JSON_DEPTH_MAX: usize = 16;

#[derive(Debug)]
pub enum QuorumStateError {
    Io {
        op: &'static str,
        path: String,
        source: std::io::Error,
    },
    Invalid {
        path: String,
        reason: String,
    },
}

impl fmt::Display for QuorumStateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuorumStateError::Io { op, path, source } => write!(f, "{op} {path}: {source}"),
            QuorumStateError::Invalid { path, reason } => {
                write!(f, "unusable quorum state {path}: {reason}")
            }
        }
    }
}

impl std::error::Error for QuorumStateError {}

/// The file's bytes for `state`.
pub fn encode(state: &ElectionState) -> String {
    let voted = state.voted.map_or(-1, |v| v.id);
    let mut out = format!(
        "{{\"leaderId\":{},\"leaderEpoch\":{},\"votedId\":{voted}",
        state.leader_id.unwrap_or(-1),
        state.epoch
    );
    if let Some(directory) = state.voted.and_then(|v| v.directory_id) {
        out.push_str(&format!(
            ",\"votedDirectoryId\":\"{}\"",
            uuid_text(&directory)
        ));
    }
    out.push_str(&format!(",\"data_version\":{QUORUM_STATE_VERSION}}}"));
    out
}

/// Parses the file; `Err` says what is wrong.
pub fn decode(bytes: &[u8]) -> Result<ElectionState, String> {
    if bytes.len() > QUORUM_STATE_BYTES_MAX {
        return Err(format!(
            "{} bytes exceed the limit {QUORUM_STATE_BYTES_MAX}",
            bytes.len()
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8".to_string())?;
    let fields = parse_object(text)?;
    let int = |name: &str| -> Result<Option<i64>, String> {
        match fields.iter().find(|(k, _)| k == name) {
            None => Ok(None),
            Some((_, Value::Int(n))) => Ok(Some(*n)),
            Some(_) => Err(format!("{name} is not an integer")),
        }
    };
    let version = int("data_version")?.ok_or("no data_version")?;
    if !(0..=QUORUM_STATE_VERSION).contains(&version) {
        return Err(format!("unknown data_version {version}"));
    }
    let as_i32 =
        |name: &str, n: i64| i32::try_from(n).map_err(|_| format!("{name} {n} is out of range"));
    let epoch = as_i32("leaderEpoch", int("leaderEpoch")?.ok_or("no leaderEpoch")?)?;
    let leader = as_i32("leaderId", int("leaderId")?.unwrap_or(-1))?;
    let voted = as_i32("votedId", int("votedId")?.unwrap_or(-1))?;
    if epoch < -1 || leader < -1 || voted < -1 {
        return Err("a negative id or epoch other than -1".to_string());
    }
    let directory_id = match fields.iter().find(|(k, _)| k == "votedDirectoryId") {
        None => None,
        Some((_, Value::Str(s))) => {
            let id = parse_uuid(s)?;
            // Kafka writes the zero UUID for "no directory".
            (id != [0; 16]).then_some(id)
        }
        Some(_) => return Err("votedDirectoryId is not a string".to_string()),
    };
    Ok(ElectionState {
        // An epoch of -1 (none yet) is the initial epoch 0.
        epoch: epoch.max(0),
        leader_id: (leader >= 0).then_some(leader),
        voted: (voted >= 0).then_some(ReplicaKey {
            id: voted,
            directory_id,
        }),
    })
}

/// Writes the state durably and atomically into `dir`.
pub async fn write(disk: &Disk, dir: &str, state: &ElectionState) -> Result<(), QuorumStateError> {
    let path = join(dir, QUORUM_STATE_FILE);
    disk.write_file_atomic(&path, encode(state).as_bytes())
        .await
        .map_err(|source| QuorumStateError::Io {
            op: "write",
            path,
            source,
        })
}

/// Reads the state of `dir`: [`ElectionState::INITIAL`] when there is no file.
pub async fn load(disk: &Disk, dir: &str) -> Result<ElectionState, QuorumStateError> {
    let path = join(dir, QUORUM_STATE_FILE);
    let io = |op: &'static str, path: &str| {
        let path = path.to_string();
        move |source| QuorumStateError::Io { op, path, source }
    };
    if !disk.exists(&path).await.map_err(io("look for", &path))? {
        return Ok(ElectionState::INITIAL);
    }
    let bytes = disk.read_file(&path).await.map_err(io("read", &path))?;
    decode(&bytes).map_err(|reason| QuorumStateError::Invalid { path, reason })
}

#[derive(Debug, PartialEq)]
enum Value {
    Int(i64),
    Str(String),
    /// A value of a field this code ignores (an array, an object, a boolean, null).
    Other,
}

/// The fields of one flat JSON object; nested values are skipped as [`Value::Other`].
fn parse_object(text: &str) -> Result<Vec<(String, Value)>, String> {
    let mut p = Parser {
        bytes: text.as_bytes(),
        at: 0,
    };
    p.expect(b'{')?;
    let mut fields = Vec::new();
    p.space();
    if p.peek() == Some(b'}') {
        p.at += 1;
    } else {
        loop {
            p.space();
            let key = p.string()?;
            p.space();
            p.expect(b':')?;
            p.space();
            let value = p.value()?;
            if fields.iter().any(|(k, _)| *k == key) {
                return Err(format!("field {key} appears twice"));
            }
            fields.push((key, value));
            p.space();
            match p.next() {
                Some(b',') => continue,
                Some(b'}') => break,
                _ => return Err(format!("expected , or }} at byte {}", p.at)),
            }
        }
    }
    p.space();
    if p.at != p.bytes.len() {
        return Err(format!("text after the object at byte {}", p.at));
    }
    Ok(fields)
}

struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek();
        self.at += usize::from(b.is_some());
        b
    }

    fn space(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    fn expect(&mut self, want: u8) -> Result<(), String> {
        match self.next() {
            Some(b) if b == want => Ok(()),
            _ => Err(format!("expected {:?} at byte {}", want as char, self.at)),
        }
    }

    /// A string without escapes (ids and UUID text need none).
    fn string(&mut self) -> Result<String, String> {
        self.expect(b'"')?;
        let start = self.at;
        loop {
            match self.next() {
                Some(b'"') => break,
                Some(b'\\') => return Err(format!("an escape at byte {}", self.at - 1)),
                Some(_) => {}
                None => return Err("an unterminated string".to_string()),
            }
        }
        let s = std::str::from_utf8(&self.bytes[start..self.at - 1])
            .map_err(|_| "a string that is not UTF-8".to_string())?;
        Ok(s.to_string())
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(b'"') => Ok(Value::Str(self.string()?)),
            Some(b'-' | b'0'..=b'9') => {
                let start = self.at;
                self.at += 1;
                while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    self.at += 1;
                }
                let digits = std::str::from_utf8(&self.bytes[start..self.at])
                    .map_err(|_| "a bad number".to_string())?;
                digits
                    .parse()
                    .map(Value::Int)
                    .map_err(|e| format!("bad integer {digits:?}: {e}"))
            }
            Some(_) => {
                self.skip(0)?;
                Ok(Value::Other)
            }
            None => Err("a missing value".to_string()),
        }
    }

    /// Skips one value of an ignored field.
    fn skip(&mut self, depth: usize) -> Result<(), String> {
        if depth > JSON_DEPTH_MAX {
            return Err(format!("values nested deeper than {JSON_DEPTH_MAX}"));
        }
        self.space();
        match self.peek() {
            Some(b'"') => self.string().map(drop),
            Some(open @ (b'[' | b'{')) => {
                let close = if open == b'[' { b']' } else { b'}' };
                self.at += 1;
                self.space();
                if self.peek() == Some(close) {
                    self.at += 1;
                    return Ok(());
                }
                loop {
                    if open == b'{' {
                        self.space();
                        self.string()?;
                        self.space();
                        self.expect(b':')?;
                    }
                    self.skip(depth + 1)?;
                    self.space();
                    match self.next() {
                        Some(b',') => continue,
                        Some(b) if b == close => return Ok(()),
                        _ => return Err(format!("a bad nested value at byte {}", self.at)),
                    }
                }
            }
            Some(_) => {
                let start = self.at;
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
                {
                    self.at += 1;
                }
                if self.at == start {
                    return Err(format!("an unexpected byte at {start}"));
                }
                Ok(())
            }
            None => Err("a missing value".to_string()),
        }
    }
}

/// Kafka's UUID text of a directory id ([`Uuid::to_base64`]).
pub fn uuid_text(id: &[u8; 16]) -> String {
    Uuid(*id).to_base64()
}

fn parse_uuid(text: &str) -> Result<[u8; 16], String> {
    Uuid::from_base64(text)
        .map(|id| id.0)
        .ok_or_else(|| format!("a directory id that is not 22 base64url characters: {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_round_trips_in_kafkas_form() {
        let directory = [7u8; 16];
        let state = ElectionState {
            epoch: 5,
            leader_id: None,
            voted: Some(ReplicaKey {
                id: 2,
                directory_id: Some(directory),
            }),
        };
        let text = encode(&state);
        assert_eq!(
            text,
            format!(
                "{{\"leaderId\":-1,\"leaderEpoch\":5,\"votedId\":2,\"votedDirectoryId\":\"{}\",\"data_version\":1}}",
                uuid_text(&directory)
            )
        );
        assert_eq!(decode(text.as_bytes()), Ok(state));
        let led = ElectionState {
            epoch: 9,
            leader_id: Some(1),
            voted: None,
        };
        assert_eq!(decode(encode(&led).as_bytes()), Ok(led));
        // Kafka's zero UUID is "no directory".
        assert_eq!(uuid_text(&[0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        let zero = "{\"leaderId\":-1,\"leaderEpoch\":2,\"votedId\":3,\"votedDirectoryId\":\"AAAAAAAAAAAAAAAAAAAAAA\",\"data_version\":1}";
        assert_eq!(
            decode(zero.as_bytes()).map(|s| s.voted),
            Ok(Some(ReplicaKey {
                id: 3,
                directory_id: None
            }))
        );
    }

    #[test]
    fn uuid_text_is_base64_url_without_padding() {
        // 0xff.. encodes to 21 '_' and a final sextet with its 4 low bits zero ('w').
        assert_eq!(uuid_text(&[0xff; 16]), "_____________________w");
        for seed in 0u8..50 {
            let id: [u8; 16] =
                std::array::from_fn(|i| seed.wrapping_mul(31).wrapping_add(i as u8 * 17));
            assert_eq!(parse_uuid(&uuid_text(&id)), Ok(id));
        }
    }

    #[test]
    fn a_version_0_file_is_read_and_bad_files_say_why() {
        let v0 = br#"{"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":-1,"appliedOffset":0,"currentVoters":[{"voterId":1},{"voterId":2}],"data_version":0}"#;
        assert_eq!(
            decode(v0),
            Ok(ElectionState {
                epoch: 3,
                leader_id: Some(1),
                voted: None
            })
        );
        let bad: [(&[u8], &str); 8] = [
            (b"", "expected '{'"),
            (b"{\"leaderEpoch\":1}", "no data_version"),
            (
                b"{\"leaderEpoch\":1,\"data_version\":2}",
                "unknown data_version 2",
            ),
            (b"{\"data_version\":1}", "no leaderEpoch"),
            (
                b"{\"leaderEpoch\":\"x\",\"data_version\":1}",
                "not an integer",
            ),
            (
                b"{\"leaderEpoch\":1,\"leaderEpoch\":2,\"data_version\":1}",
                "appears twice",
            ),
            (
                b"{\"leaderEpoch\":1,\"data_version\":1} x",
                "text after the object",
            ),
            (
                b"{\"leaderEpoch\":99999999999,\"data_version\":1}",
                "out of range",
            ),
        ];
        for (bytes, why) in bad {
            let err = decode(bytes).expect_err("a bad file");
            assert!(err.contains(why), "{err:?} should say {why:?}");
        }
    }

    #[cfg(not(feature = "sim"))]
    #[tokio::test]
    async fn the_file_survives_power_loss_and_a_damaged_one_is_named() {
        use crate::rt::disk::{CrashMode, MemDisk};
        use rand::SeedableRng;
        let mem = MemDisk::new(3);
        let disk = Disk::mem(mem.clone());
        disk.create_dir_all("meta").await.expect("dir");
        // The directory's own name must be durable too (the log's open does this for the
        // metadata log's directory).
        disk.sync_dir("").await.expect("sync");
        assert_eq!(
            load(&disk, "meta").await.expect("load"),
            ElectionState::INITIAL
        );
        let voted = ElectionState {
            epoch: 7,
            leader_id: None,
            voted: Some(ReplicaKey {
                id: 3,
                directory_id: None,
            }),
        };
        write(&disk, "meta", &voted).await.expect("write");
        mem.crash(
            CrashMode::PowerLossDropUnsynced,
            &mut rand::rngs::SmallRng::seed_from_u64(1),
        );
        assert_eq!(
            load(&disk, "meta").await.expect("load"),
            voted,
            "a vote is durable"
        );
        disk.write_file_atomic("meta/quorum-state", b"{\"leaderEpoch\":")
            .await
            .expect("write");
        let err = load(&disk, "meta").await.expect_err("a damaged file");
        assert!(err.to_string().contains("meta/quorum-state"), "{err}");
    }
}
