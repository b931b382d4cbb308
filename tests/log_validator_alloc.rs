//! The log validator reads an uncompressed batch's records in place: validating 1 MiB of
//! 100-byte records makes no heap allocation at all, and a compressed batch costs a number of
//! allocations set by its decompressed size, not by its record count. Counted by a global
//! allocator that counts calls per thread, so tests running in parallel do not disturb each
//! other.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use samsa::log::validator::{validate_produce, TimestampType, ValidatorConfig};
use samsa::protocol::record_batch::{BatchBuilder, Compression};

struct CountingCalls;

thread_local! {
    // Const-initialised and without a destructor, so touching it never allocates.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded to `System` unchanged; the counter only observes calls.
unsafe impl GlobalAlloc for CountingCalls {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: CountingCalls = CountingCalls;

fn allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = ALLOCATIONS.with(|c| c.get());
    let out = f();
    (out, ALLOCATIONS.with(|c| c.get()) - before)
}

const NOW_MS: i64 = 1_700_000_000_000;
const RECORD_COUNT: usize = (1 << 20) / 108;

fn one_mib_batch(codec: Compression) -> Vec<u8> {
    let value = [7u8; 100];
    let mut b = BatchBuilder::new(0).compression(codec);
    for i in 0..RECORD_COUNT {
        b.push(
            NOW_MS + i as i64,
            Some(b"key"),
            Some(&value),
            &[("h", None)],
        );
    }
    b.build().to_vec()
}

fn cfg() -> ValidatorConfig<'static> {
    ValidatorConfig {
        topic: "alloc",
        partition: 0,
        produce_version: 9,
        max_message_bytes: 4 << 20,
        timestamp_type: TimestampType::CreateTime,
        timestamp_before_max_ms: i64::MAX,
        timestamp_after_max_ms: i64::MAX,
        compacted: true,
        now_ms: NOW_MS,
        decompressed_bytes_max: 64 << 20,
        compression: None,
    }
}

#[test]
fn log_validator_uncompressed_batch_allocates_nothing() {
    let mut records = one_mib_batch(Compression::None);
    let cfg = cfg();
    let (result, count) = allocations(|| validate_produce(&mut records, &cfg));
    let validated = result.expect("valid batch");
    assert_eq!(validated.record_count, RECORD_COUNT as u64);
    assert_eq!(
        count, 0,
        "{count} allocations validating {RECORD_COUNT} records"
    );
}

#[test]
fn log_validator_compressed_batch_allocations_do_not_grow_with_records() {
    for codec in [
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let mut records = one_mib_batch(codec);
        let cfg = cfg();
        let (result, count) = allocations(|| validate_produce(&mut records, &cfg));
        result.unwrap_or_else(|e| panic!("{codec}: {e}"));
        // The decompression buffer grows in 64 KiB chunks (about 20 for 1.2 MiB), plus the
        // codec's own state: far below one allocation per 100 records.
        assert!(
            count < (RECORD_COUNT / 100) as u64,
            "{codec}: {count} allocations for {RECORD_COUNT} records"
        );
    }
}
