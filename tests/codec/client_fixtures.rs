//! Real clients' request frames, decoded with Samsa's codec and re-encoded to the same bytes.
//!
//! tests/fixtures/clients/<client>-<nn>-<api>-v<version>.hex hold request frames (without the
//! size prefix) that kcat 1.7.1 (librdkafka 2.0.2) and the `rdkafka` crate (librdkafka 2.12)
//! sent to a Samsa broker, captured by tests/codec/capture_client_fixtures.rs. Each must parse with
//! `frame::parse_request` as the API and version its name says, its body must decode with
//! that API's request decoder, and header plus body must
//! re-encode to exactly the captured bytes (less any bytes after the body that
//! `KNOWN_TRAILING_BYTES` lists for that client's API and version). A client's encoding that the codec reads
//! differently, or a field it drops, shows up here without a broker.

#[path = "../support/request_codec.rs"]
mod request_codec;

use bytes::Bytes;
use request_codec::{api_name, check_frame};
use samsa::protocol::frame;
use std::path::{Path, PathBuf};

/// The APIs every client's fixtures must include: the produce and consume round trip.
const REQUIRED_APIS: [&str; 5] = ["ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets"];
const CLIENTS: [&str; 2] = ["kcat", "rdkafka"];

/// Frames known to carry bytes after the request body, as (client, API, version, bytes).
/// librdkafka 2.12's all-topics Metadata v13 (a null topic array) ends with 3 extra zero
/// bytes; Kafka's broker does not check for bytes after the body, so the client works with
/// Kafka, and a broker that requires every byte consumed closes its connection.
const KNOWN_TRAILING_BYTES: [(&str, &str, i16, usize); 1] = [("rdkafka", "Metadata", 13, 3)];

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients")
}

/// A fixture: what its name says and the bytes it holds.
struct Fixture {
    file: String,
    client: String,
    api: String,
    version: i16,
    frame: Bytes,
}

fn parse_hex(file: &str, text: &str) -> Bytes {
    let digits: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.chars().filter(|c| !c.is_whitespace()))
        .collect();
    assert!(digits.len() % 2 == 0, "{file}: odd number of hex digits");
    let bytes: Vec<u8> = (0..digits.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&digits[i..i + 2], 16)
                .unwrap_or_else(|e| panic!("{file}: bad hex at digit {i}: {e}"))
        })
        .collect();
    Bytes::from(bytes)
}

fn load() -> Vec<Fixture> {
    let dir = fixtures_dir();
    let mut out = Vec::new();
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e} (regenerate the fixtures)", dir.display()));
    for e in entries.flatten() {
        let file = e.file_name().to_string_lossy().into_owned();
        let Some(stem) = file.strip_suffix(".hex") else {
            continue;
        };
        // <client>-<nn>-<api>-v<version>
        let parts: Vec<&str> = stem.split('-').collect();
        let [client, nn, api, version] = parts[..] else {
            panic!("{file}: expected <client>-<nn>-<api>-v<version>.hex");
        };
        assert!(nn.parse::<u32>().is_ok(), "{file}: sequence number {nn:?}");
        let version: i16 = version
            .strip_prefix('v')
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{file}: version {version:?}"));
        let text = std::fs::read_to_string(e.path()).expect("read a fixture");
        let (client, api) = (client.to_string(), api.to_string());
        out.push(Fixture {
            frame: parse_hex(&file, &text),
            file,
            client,
            api,
            version,
        });
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

#[test]
fn client_request_fixtures_decode_and_reencode_to_the_same_bytes() {
    let fixtures = load();
    let mut failures = Vec::new();
    for f in &fixtures {
        match frame::parse_request(f.frame.clone()) {
            Err(e) => failures.push(format!("{}: parse_request: {e}", f.file)),
            Ok(request) => {
                let name = api_name(request.api_key()).unwrap_or("?");
                if name != f.api || request.api_version() != f.version {
                    failures.push(format!(
                        "{}: the frame is {name} v{}, the name says {} v{}",
                        f.file,
                        request.api_version(),
                        f.api,
                        f.version
                    ));
                } else {
                    match check_frame(&f.frame) {
                        Err(e) => failures.push(format!("{}: {e}", f.file)),
                        Ok(0) => {}
                        Ok(trailing) => {
                            let known = KNOWN_TRAILING_BYTES.iter().any(|&(c, a, v, n)| {
                                c == f.client && a == f.api && v == f.version && n == trailing
                            });
                            if !known {
                                failures.push(format!(
                                    "{}: {trailing} bytes after the decoded body",
                                    f.file
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_client_has_fixtures_for_the_round_trip_apis() {
    let fixtures = load();
    for client in CLIENTS {
        for api in REQUIRED_APIS {
            assert!(
                fixtures.iter().any(|f| f.client == client && f.api == api),
                "no {client} fixture for {api} in {} (regenerate: cargo test --test codec -- capture_client_fixtures:: --ignored)",
                fixtures_dir().display()
            );
        }
    }
}
