//! Reading a broker's partition logs straight from its data directory, behind its back:
//! which compression codec each stored record batch carries. On a topic with the default
//! `compression.type=producer` batches are stored as the producer sent them, so this tells
//! whether a client really compressed with the codec a test asked for; on a topic that names
//! a codec, whether the broker recompressed to it.
//!
//! Include it with `#[path = "support/segment_files.rs"] mod segment_files;`.
#![allow(dead_code)]

/// The five codecs of `compression.type`, as librdkafka and kcat name them.
pub const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];

/// The codec id in bits 0-2 of a record batch's attributes.
pub fn codec_id(codec: &str) -> i16 {
    match codec {
        "none" => 0,
        "gzip" => 1,
        "snappy" => 2,
        "lz4" => 3,
        "zstd" => 4,
        other => panic!("unknown codec {other}"),
    }
}

/// The codec ids (attribute bits 0-2) of every record batch stored for `topic` under the
/// broker's data directory, read straight from the segment files (`<topic>-<partition>/
/// *.log`, Kafka's layout): the producer's, unless the topic's `compression.type` names one.
pub fn stored_batch_codecs(data_dir: &std::path::Path, topic: &str) -> Vec<i16> {
    let mut codecs = Vec::new();
    let mut stack = vec![data_dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let in_topic = path
                .parent()
                .and_then(|d| d.file_name())
                .and_then(|n| n.to_str())
                .and_then(|n| n.rsplit_once('-'))
                .is_some_and(|(t, p)| t == topic && p.parse::<u32>().is_ok());
            if !in_topic || path.extension().and_then(|x| x.to_str()) != Some("log") {
                continue;
            }
            let bytes = std::fs::read(&path).expect("read a segment file");
            let mut pos = 0usize;
            // Batch header: base offset (8), batch length (4), leader epoch (4), magic (1),
            // CRC (4), attributes (2).
            while pos + 23 <= bytes.len() {
                let len = i32::from_be_bytes(bytes[pos + 8..pos + 12].try_into().expect("4 bytes"));
                if len <= 0 {
                    break; // preallocated or zeroed tail
                }
                let attributes =
                    i16::from_be_bytes(bytes[pos + 21..pos + 23].try_into().expect("2 bytes"));
                codecs.push(attributes & 0x7);
                pos += 12 + len as usize;
            }
        }
    }
    codecs
}
