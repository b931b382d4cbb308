//! Model-based test of the partition log: random sequences of appends, reads, truncations,
//! time lookups, clean and unclean reopens (and, on the simulated disk, crashes) are applied
//! both to the real `Log` and to `samsa_spec::model::LogModel`, and after every step the log
//! must hold exactly the model's records.
//!
//! Every record carries a unique id (its value starts with the id as a big-endian u64; the
//! rest of the value, the key and the timestamp are derived from per-id settings kept in the
//! reference state), so a record served at the wrong offset, twice, or with damaged bytes is
//! caught. The reference state also keeps the batch boundaries, because the log truncates to
//! the start of the batch holding the requested offset and reads return whole batches.
#![cfg(not(feature = "sim"))]

use proptest::prelude::*;
use proptest::test_runner::Config;
use proptest_state_machine::{prop_state_machine, ReferenceStateMachine, StateMachineTest};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use samsa::log::{Log, LogConfig, LogError, RecoveryReport};
use samsa::protocol::record_batch::{self, BatchBuilder};
use samsa::rt::clock::Clock;
use samsa::rt::disk::{CrashMode, Disk, MemDisk};
use samsa_spec::history::Value;
use samsa_spec::model::LogModel;
use std::collections::BTreeMap;
use std::sync::Arc;

const DIR: &str = "t-0";

/// Small segments and a dense index, so a few dozen appends roll several segments and index
/// lookups matter.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 2048,
        index_interval_bytes: 256,
        verify_crc_on_read: true,
        ..LogConfig::default()
    }
}

/// How one record was built; its id is the key of the map holding it.
#[derive(Clone, Copy, Debug)]
struct RecordSpec {
    timestamp: i64,
    pad: usize,
    keyed: bool,
}

/// The value of record `id`: the id, then `pad` bytes derived from it.
fn value_bytes(id: u64, pad: usize) -> Vec<u8> {
    let mut value = id.to_be_bytes().to_vec();
    let seed = (id as u8).wrapping_mul(31);
    value.extend((0..pad).map(|j| seed.wrapping_add(j as u8)));
    value
}

fn key_bytes(id: u64) -> Vec<u8> {
    format!("key-{id}").into_bytes()
}

/// One batch of the reference log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BatchInfo {
    base: i64,
    count: i64,
    max_timestamp: i64,
}

impl BatchInfo {
    fn end(&self) -> i64 {
        self.base + self.count
    }
}

#[derive(Clone, Debug, Default)]
struct RefState {
    model: LogModel,
    /// The batches of the log in offset order; they tile `[start, end)`.
    batches: Vec<BatchInfo>,
    /// Every record ever appended (ids are never reused, even after a truncation).
    specs: BTreeMap<u64, RecordSpec>,
    next_id: u64,
}

impl RefState {
    fn start(&self) -> i64 {
        self.model.log_start_offset()
    }

    fn end(&self) -> i64 {
        self.model.log_end_offset()
    }

    fn batch_at(&self, base: i64) -> Option<&BatchInfo> {
        self.batches.iter().find(|b| b.base == base)
    }
}

#[derive(Clone, Debug)]
enum Transition {
    /// One batch of (timestamp, value padding, keyed) records.
    Append(Vec<(i64, usize, bool)>),
    Read {
        from: i64,
        max_bytes: usize,
        max_offset: i64,
    },
    Truncate(i64),
    OffsetForTimestamp(i64),
    ReopenClean,
    ReopenUnclean,
    /// Simulated disk only: crash the disk, then reopen.
    Crash {
        mode: CrashMode,
        seed: u64,
    },
}

/// The reference state machine; `MEM` selects the simulated disk (which adds crashes).
struct LogRef<const MEM: bool>;

impl<const MEM: bool> ReferenceStateMachine for LogRef<MEM> {
    type State = RefState;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<RefState> {
        Just(RefState::default()).boxed()
    }

    fn transitions(state: &RefState) -> BoxedStrategy<Transition> {
        let (start, end) = (state.start(), state.end());
        // Timestamps go backwards as often as forwards, as producer CreateTimes may.
        let append = prop::collection::vec((1_000i64..1_050, 0usize..=300, any::<bool>()), 1..=5)
            .prop_map(Transition::Append);
        let from = prop_oneof![
            9 => start..=end,
            1 => prop_oneof![start - 3..start, end + 1..end + 4],
        ];
        let max_bytes = prop_oneof![Just(1usize), 1usize..1_500, Just(usize::MAX)];
        let max_offset = prop_oneof![3 => Just(i64::MAX), 1 => start..=end + 1];
        let read = (from, max_bytes, max_offset).prop_map(|(from, max_bytes, max_offset)| {
            Transition::Read {
                from,
                max_bytes,
                max_offset,
            }
        });
        let truncate = (start..=end).prop_map(Transition::Truncate);
        let lookup = (990i64..1_060).prop_map(Transition::OffsetForTimestamp);
        let common = prop_oneof![
            6 => append,
            4 => read,
            1 => truncate,
            1 => lookup,
            1 => Just(Transition::ReopenClean),
            1 => Just(Transition::ReopenUnclean),
        ];
        if MEM {
            let mode = prop_oneof![
                Just(CrashMode::Process),
                Just(CrashMode::PowerLossDropUnsynced),
                Just(CrashMode::PowerLossRandomPrefix),
            ];
            let crash =
                (mode, any::<u64>()).prop_map(|(mode, seed)| Transition::Crash { mode, seed });
            prop_oneof![12 => common, 2 => crash].boxed()
        } else {
            common.boxed()
        }
    }

    fn apply(mut state: RefState, transition: &Transition) -> RefState {
        match transition {
            Transition::Append(records) => {
                let mut values = Vec::new();
                let mut max_timestamp = i64::MIN;
                for &(timestamp, pad, keyed) in records {
                    let id = state.next_id;
                    state.next_id += 1;
                    state.specs.insert(
                        id,
                        RecordSpec {
                            timestamp,
                            pad,
                            keyed,
                        },
                    );
                    values.push(Value(id));
                    max_timestamp = max_timestamp.max(timestamp);
                }
                let base = state.model.append(&values);
                state.batches.push(BatchInfo {
                    base,
                    count: values.len() as i64,
                    max_timestamp,
                });
            }
            Transition::Truncate(to) => {
                // Below the start: refused. At or above the end: nothing to do. Otherwise the
                // whole batch holding `to` goes.
                if *to >= state.start() && *to < state.end() {
                    let index = state
                        .batches
                        .iter()
                        .position(|b| b.base <= *to && *to < b.end())
                        .expect("the batches tile the log");
                    let base = state.batches[index].base;
                    state.model.truncate_to(base).expect("base is in range");
                    state.batches.truncate(index);
                }
            }
            Transition::Read { .. }
            | Transition::OffsetForTimestamp(_)
            | Transition::ReopenClean
            | Transition::ReopenUnclean
            | Transition::Crash { .. } => {}
        }
        state
    }
}

/// The system under test: a log, the disk it lives on and a runtime to drive it.
struct Sut {
    rt: tokio::runtime::Runtime,
    disk: Disk,
    mem: Option<MemDisk>,
    _dir: Option<tempfile::TempDir>,
    log: Option<Arc<Log>>,
}

impl Sut {
    fn log(&self) -> &Log {
        self.log.as_ref().expect("the log is open")
    }

    /// Drops the current log (if any) and opens the directory again.
    fn reopen(&mut self) -> RecoveryReport {
        drop(self.log.take());
        let (log, report) = self
            .rt
            .block_on(Log::open(self.disk.clone(), DIR, config(), Clock::new()))
            .unwrap_or_else(|e| panic!("reopening the log failed: {e}"));
        self.log = Some(log);
        report
    }
}

struct LogTest<const MEM: bool>;

impl<const MEM: bool> StateMachineTest for LogTest<MEM> {
    type SystemUnderTest = Sut;
    type Reference = LogRef<MEM>;

    fn init_test(_ref_state: &RefState) -> Sut {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let (disk, mem, dir) = if MEM {
            let mem = MemDisk::new(0);
            (Disk::mem(mem.clone()), Some(mem), None)
        } else {
            let dir = tempfile::tempdir().expect("temporary directory");
            let disk = Disk::real(dir.path()).expect("real disk");
            (disk, None, Some(dir))
        };
        let mut sut = Sut {
            rt,
            disk,
            mem,
            _dir: dir,
            log: None,
        };
        let report = sut.reopen();
        assert_eq!(report.log_end_offset, 0);
        sut
    }

    fn apply(mut sut: Sut, ref_state: &RefState, transition: Transition) -> Sut {
        match transition {
            Transition::Append(records) => {
                let batch = ref_state.batches.last().expect("just appended");
                let first_id = ref_state.next_id - records.len() as u64;
                let mut builder = BatchBuilder::new(0);
                for id in first_id..ref_state.next_id {
                    let spec = ref_state.specs[&id];
                    let key = spec.keyed.then(|| key_bytes(id));
                    builder.push(
                        spec.timestamp,
                        key.as_deref(),
                        Some(&value_bytes(id, spec.pad)),
                        &[],
                    );
                }
                let log = sut.log();
                let info = sut
                    .rt
                    .block_on(log.append(builder.build().freeze()))
                    .unwrap_or_else(|e| panic!("append failed: {e}"));
                assert_eq!(info.base_offset, batch.base, "append base offset");
                assert_eq!(info.last_offset, batch.end() - 1, "append last offset");
                assert_eq!(info.max_timestamp, batch.max_timestamp);
                assert_eq!(
                    log.durable_end_offset(),
                    batch.end(),
                    "SyncBeforeAck: an acknowledged append is durable"
                );
            }
            Transition::Read {
                from,
                max_bytes,
                max_offset,
            } => {
                sut.rt.block_on(check_reads(
                    sut.log(),
                    ref_state,
                    from,
                    max_bytes,
                    max_offset,
                ));
            }
            Transition::Truncate(to) => {
                let result = sut.rt.block_on(sut.log().truncate_to(to));
                if to < ref_state.start() {
                    assert!(
                        matches!(result, Err(LogError::OffsetOutOfRange { offset, .. }) if offset == to),
                        "truncate below the start: {result:?}"
                    );
                } else {
                    let end = result.unwrap_or_else(|e| panic!("truncate failed: {e}"));
                    assert_eq!(
                        end,
                        ref_state.end(),
                        "truncate_to({to}) returned the new end"
                    );
                }
            }
            Transition::OffsetForTimestamp(timestamp) => {
                sut.rt
                    .block_on(check_offset_for_timestamp(sut.log(), ref_state, timestamp));
            }
            Transition::ReopenClean => {
                sut.rt
                    .block_on(sut.log().close())
                    .unwrap_or_else(|e| panic!("close failed: {e}"));
                let report = sut.reopen();
                assert!(report.clean_shutdown, "{report:?}");
                assert_eq!(report.segments_scanned, 0, "{report:?}");
                assert_eq!(report.indexes_rebuilt, 0, "{report:?}");
                check_report(&report, ref_state);
            }
            Transition::ReopenUnclean => {
                let report = sut.reopen();
                assert!(!report.clean_shutdown, "{report:?}");
                check_report(&report, ref_state);
            }
            Transition::Crash { mode, seed } => {
                let mem = sut.mem.clone().expect("crashes only on the simulated disk");
                mem.crash(mode, &mut SmallRng::seed_from_u64(seed));
                let report = sut.reopen();
                check_report(&report, ref_state);
            }
        }
        sut
    }

    fn check_invariants(sut: &Sut, ref_state: &RefState) {
        let log = sut.log();
        assert_eq!(log.log_end_offset(), ref_state.end(), "log end offset");
        assert_eq!(
            log.durable_end_offset(),
            ref_state.end(),
            "durable end offset"
        );
        assert_eq!(
            sut.rt.block_on(log.log_start_offset()),
            ref_state.start(),
            "log start offset"
        );
        sut.rt.block_on(async {
            // Read everything back one batch at a time.
            check_reads(log, ref_state, ref_state.start(), 1, i64::MAX).await;
            for timestamp in [1_000, 1_020, 1_040, 1_049] {
                check_offset_for_timestamp(log, ref_state, timestamp).await;
            }
        });
    }
}

/// The log answers a time lookup with the first batch whose max timestamp is late enough.
async fn check_offset_for_timestamp(log: &Log, r: &RefState, timestamp: i64) {
    let expected = r
        .batches
        .iter()
        .find(|b| b.max_timestamp >= timestamp)
        .map(|b| b.base);
    let found = log
        .offset_for_timestamp(timestamp)
        .await
        .unwrap_or_else(|e| panic!("offset_for_timestamp({timestamp}) failed: {e}"));
    assert_eq!(found, expected, "offset_for_timestamp({timestamp})");
}

/// Nothing acknowledged may be lost by a reopen or a crash: every append was synced.
fn check_report(report: &RecoveryReport, ref_state: &RefState) {
    assert_eq!(report.log_end_offset, ref_state.end(), "{report:?}");
    assert!(report.truncated.is_none(), "{report:?}");
    assert_eq!(report.segments_removed, 0, "{report:?}");
}

/// Reads from `from` until the log has nothing more below `max_offset`, checking each read
/// against the reference state, and checks that together they returned exactly the model's
/// records for the range.
async fn check_reads(log: &Log, r: &RefState, from: i64, max_bytes: usize, max_offset: i64) {
    let (start, end) = (r.start(), r.end());
    if from < start || from > end {
        let result = log.read(from, max_bytes, max_offset).await;
        match result {
            Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset,
                log_end_offset,
            }) => {
                assert_eq!(
                    (offset, log_start_offset, log_end_offset),
                    (from, start, end)
                );
            }
            other => panic!("read({from}) outside [{start}, {end}] gave {other:?}"),
        }
        return;
    }
    let bound = max_offset.min(end);
    // Reads never return a batch that ends above the bound, so they stop at the last batch
    // end at or below it.
    let reach = r
        .batches
        .iter()
        .map(BatchInfo::end)
        .filter(|&e| e > from && e <= bound)
        .max()
        .unwrap_or(from);
    let mut at = from;
    let mut seen = Vec::new();
    loop {
        let result = log
            .read(at, max_bytes, max_offset)
            .await
            .unwrap_or_else(|e| panic!("read({at}, {max_bytes}, {max_offset}) failed: {e}"));
        let got = check_one_read(&result, r, at, max_bytes, bound);
        if got.is_empty() {
            assert_eq!(result.next_offset, at, "an empty read's next offset");
            break;
        }
        assert!(result.next_offset > at, "read({at}) made no progress");
        seen.extend(got);
        at = result.next_offset;
    }
    assert_eq!(
        at, reach,
        "reads from {from} (max_bytes {max_bytes}, max_offset {max_offset}) stopped early or late"
    );
    let expected = r
        .model
        .read(from, (reach - from) as usize)
        .expect("from is in range");
    assert_eq!(
        seen, expected,
        "records read from {from} (max_bytes {max_bytes}, max_offset {max_offset})"
    );
}

/// Checks one read result and returns its records at or above `from`.
fn check_one_read(
    result: &samsa::log::ReadResult,
    r: &RefState,
    from: i64,
    max_bytes: usize,
    bound: i64,
) -> Vec<(i64, Value)> {
    assert_eq!(result.log_start_offset, r.start());
    assert_eq!(result.log_end_offset, r.end());
    let mut out = Vec::new();
    let mut next: Option<i64> = None;
    let mut batches = 0;
    for item in record_batch::batches(result.records.clone()) {
        let (header, batch) = item.unwrap_or_else(|e| panic!("read returned a bad batch: {e}"));
        record_batch::verify(&batch).unwrap_or_else(|e| panic!("read returned a bad batch: {e}"));
        batches += 1;
        match next {
            None => assert!(
                header.base_offset <= from && from < header.next_offset(),
                "the first batch [{}, {}) does not hold offset {from}",
                header.base_offset,
                header.next_offset()
            ),
            Some(n) => assert_eq!(header.base_offset, n, "batches are not contiguous"),
        }
        next = Some(header.next_offset());
        assert!(
            header.next_offset() <= bound,
            "batch ending at {} is above the bound {bound}",
            header.next_offset()
        );
        let info = r.batch_at(header.base_offset).unwrap_or_else(|| {
            panic!(
                "batch at {} is not a batch boundary of the model: {:?}",
                header.base_offset, r.batches
            )
        });
        assert_eq!(header.next_offset(), info.end(), "batch length");
        assert_eq!(i64::from(header.records_count), info.count);
        assert_eq!(header.max_timestamp, info.max_timestamp);
        let mut offset = header.base_offset;
        for record in record_batch::records(&batch).expect("uncompressed batch") {
            let record = record.unwrap_or_else(|e| panic!("bad record: {e}"));
            assert_eq!(record.offset, offset, "record offsets are dense");
            offset += 1;
            if record.offset < from {
                continue;
            }
            let value = record.value.expect("every record has a value");
            let id = u64::from_be_bytes(value[..8].try_into().expect("an 8-byte id"));
            let spec = r
                .specs
                .get(&id)
                .unwrap_or_else(|| panic!("record id {id} was never written"));
            assert_eq!(&value[..], &value_bytes(id, spec.pad)[..], "value of {id}");
            assert_eq!(
                record.key.as_deref(),
                spec.keyed.then(|| key_bytes(id)).as_deref(),
                "key of {id}"
            );
            assert_eq!(record.timestamp, spec.timestamp, "timestamp of {id}");
            out.push((record.offset, Value(id)));
        }
        assert_eq!(offset, header.next_offset(), "record count");
    }
    if batches > 1 {
        assert!(
            result.records.len() <= max_bytes,
            "{} bytes in {batches} batches exceed max_bytes {max_bytes}",
            result.records.len()
        );
    }
    match next {
        Some(n) => assert_eq!(result.next_offset, n, "next offset"),
        None => assert_eq!(result.next_offset, from, "next offset of an empty read"),
    }
    out
}

prop_state_machine! {
    #![proptest_config(Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    })]

    /// Real files in a temporary directory; reopens with and without a clean shutdown.
    #[test]
    fn log_matches_model_on_real_files(sequential 1..30 => LogTest<false>);
}

prop_state_machine! {
    #![proptest_config(Config {
        cases: 512,
        failure_persistence: None,
        ..Config::default()
    })]

    /// The simulated disk, adding process crashes and power losses (dropping all unsynced
    /// writes, or keeping a random, possibly torn, prefix of them).
    #[test]
    fn log_matches_model_on_simulated_disk_with_crashes(sequential 1..30 => LogTest<true>);
}
