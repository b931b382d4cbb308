//! Shared harness of the `codec_fuzz*` tests: a counting global allocator (per thread, so
//! tests running in parallel do not disturb each other), the allocation bound, and the fuzz
//! driver that decodes an input as every message at every version.
//!
//! Include it with `#[path = "support/fuzz_support.rs"] mod fuzz_support;`. Including it
//! installs the counting allocator as the test binary's global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use samsa::protocol::wire::{DecodeError, DecodeErrorKind};

/// The allocation a decode of `input_len` bytes may reach.
pub fn allocation_max(input_len: usize) -> usize {
    64 * input_len + 64 * 1024
}

pub struct Counting;

thread_local! {
    // Const-initialised and without destructors, so touching them never allocates.
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    let _ = CURRENT.try_with(|c| {
        let now = c.get() + delta;
        c.set(now);
        let _ = PEAK.try_with(|p| {
            if now > p.get() {
                p.set(now)
            }
        });
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the counters only observe sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            // Counted as if old and new existed at once, the worst case of a moving realloc.
            note(new_size as isize);
            note(-(layout.size() as isize));
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f` and returns its result and the peak bytes allocated meanwhile on this thread.
pub fn peak_allocated<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.with(|c| c.get());
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(|p| p.get());
    (out, (peak - base).max(0) as usize)
}

/// Decodes one message at one version, discarding the value.
pub type Decoder = fn(Bytes, i16) -> Result<(), DecodeError>;

/// A covered message: its name, versions, and decoder.
pub type DecoderEntry = (&'static str, (i16, i16), Decoder);

/// Decodes `input` as every message of `decoders` at every version (plus one version beyond each end),
/// checking the allocation bound each time.
pub fn decode_everything(decoders: &[DecoderEntry], input: &Bytes) -> Result<(), TestCaseError> {
    for &(name, (lo, hi), decode) in decoders {
        for v in lo - 1..=hi + 1 {
            let (result, peak) = peak_allocated(|| decode(input.clone(), v));
            prop_assert!(
                peak <= allocation_max(input.len()),
                "{name} v{v}: {peak} bytes allocated for {} input bytes",
                input.len()
            );
            if v < lo || v > hi {
                let is_unsupported = matches!(
                    result,
                    Err(DecodeError {
                        kind: DecodeErrorKind::UnsupportedVersion { .. },
                        ..
                    })
                );
                prop_assert!(is_unsupported, "{name} v{v}");
            }
        }
    }
    Ok(())
}

/// One way to damage a valid encoding.
#[derive(Clone, Debug)]
pub enum Mutation {
    /// Overwrite the byte at (index modulo length).
    Set(usize, u8),
    /// Insert bytes at (index modulo length + 1).
    Insert(usize, Vec<u8>),
    /// Cut the encoding to (index modulo length + 1) bytes.
    Truncate(usize),
    /// Overwrite four bytes with a large count or length.
    BigLength(usize, u32),
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        1 => (any::<usize>(), vec(any::<u8>(), 1..8)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        2 => (any::<usize>(), prop_oneof![Just(0x7fff_ffffu32), Just(0x4000_0000), Just(0xffff_fffe), any::<u32>()])
            .prop_map(|(i, n)| Mutation::BigLength(i, n)),
    ]
}

pub fn mutate(valid: &Bytes, mutations: &[Mutation]) -> Bytes {
    let mut b = valid.to_vec();
    for m in mutations {
        let len = b.len();
        match m {
            Mutation::Set(i, byte) if len > 0 => b[i % len] = *byte,
            Mutation::Insert(i, bytes) => {
                let at = i % (len + 1);
                b.splice(at..at, bytes.iter().copied());
            }
            Mutation::Truncate(i) => b.truncate(i % (len + 1)),
            Mutation::BigLength(i, n) if len >= 4 => {
                let at = i % (len - 3);
                b[at..at + 4].copy_from_slice(&n.to_be_bytes());
            }
            _ => {}
        }
    }
    Bytes::from(b)
}

/// Decodes inputs of 64 KiB as every message of `decoders` at every version, checking the
/// allocation bound each time: an array count claiming one element per `per` bytes of what
/// follows (for each `per` in `pers`), placed at each offset below `offsets`, classic and
/// compact, followed by filler of zeros or ones. Reports the worst case on stderr.
pub fn dense_minimal_elements_stay_within_bound(
    decoders: &[DecoderEntry],
    offsets: usize,
    pers: &[usize],
) {
    const INPUT_LEN: usize = 64 * 1024;
    let mut worst = (0usize, String::new());
    for filler in [0u8, 1] {
        for at in 0..offsets {
            for &per in pers {
                let count = (INPUT_LEN / per) as u32;
                let mut classic = vec![filler; INPUT_LEN];
                classic[at..at + 4].copy_from_slice(&count.to_be_bytes());
                let mut compact = BytesMut::from(&vec![filler; at][..]);
                samsa::protocol::record_batch::write_unsigned_varint(&mut compact, count + 1);
                compact.resize(INPUT_LEN, filler);
                for input in [Bytes::from(classic), compact.freeze()] {
                    for &(name, (lo, hi), decode) in decoders {
                        for v in lo..=hi {
                            let (_, peak) = peak_allocated(|| decode(input.clone(), v));
                            assert!(
                                peak <= allocation_max(input.len()),
                                "{name} v{v}: {peak} bytes allocated for {} input bytes",
                                input.len()
                            );
                            if peak > worst.0 {
                                worst = (peak, format!("{name} v{v} at {at} per {per}"));
                            }
                        }
                    }
                }
            }
        }
    }
    eprintln!(
        "worst: {} bytes ({:.1} x input) by {}",
        worst.0,
        worst.0 as f64 / INPUT_LEN as f64,
        worst.1
    );
}
