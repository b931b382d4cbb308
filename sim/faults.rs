//! The fault-point injector (`samsa::rt::fault`): per seed, each named fault point is enabled
//! with probability [`POINT_ENABLED_PROBABILITY`] and, when enabled, fires at a rate drawn for
//! it (log-uniform between [`FIRE_PER_MILLION_MIN`] and [`FIRE_PER_MILLION_MAX`] per pass);
//! a firing crashes the node with one of the run's disk crash modes, injects an IO error (at
//! points that stand for a disk operation) or delays the operation.
//!
//! Invariants:
//! - Every draw comes from the injector's own generator, seeded from the run's, so a seed
//!   replays the same faults at the same passes.
//! - Faults fire only while armed (the safety phase), and at most [`HALTS_MAX`] crashes,
//!   [`IO_ERRORS_MAX`] IO errors and [`DELAYS_MAX`] delays per run: the run must still make
//!   progress between faults.
//! - A halt crashes the disk and kills the node before `at` returns, so not one more
//!   instruction of the node runs between the fault point and the crash.

use crate::harness::{Recorder, NEMESIS_PROCESS};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use samsa::rt::disk::{CrashMode, CrashReport, MemDisk};
use samsa::rt::fault::{Fault, FaultInjector, FaultPoint, FAULT_DELAY_MS_MAX};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Chance that a point is enabled in a seed (FoundationDB enables each buggify site in a
/// quarter of runs; the points here are fewer and each guards a window a bug hides in).
pub const POINT_ENABLED_PROBABILITY: f64 = 0.5;
/// Per-pass firing rates of an enabled point, drawn log-uniformly between these.
pub const FIRE_PER_MILLION_MIN: u32 = 2_000;
pub const FIRE_PER_MILLION_MAX: u32 = 200_000;
/// Crashes, IO errors and delays the points may cause in one run.
pub const HALTS_MAX: u32 = 4;
pub const IO_ERRORS_MAX: u32 = 4;
pub const DELAYS_MAX: u32 = 40;
/// The longest delay a point causes here.
pub const DELAY_MS_MAX: u64 = 40;
/// After an answer, the crash waits up to this long: long enough for the answer to reach the
/// client over the simulated network, short enough that unsynced data usually still is.
pub const ANSWER_HALT_DELAY_MS_MAX: u64 = 12;
const _: () = assert!(ANSWER_HALT_DELAY_MS_MAX <= FAULT_DELAY_MS_MAX);
/// Points enabled only when a test aims at them (`FaultPlanOptions::always`), never by the
/// per-seed draw: added after the draw was fixed, so drawing for them would shift every
/// existing seed's plan.
pub const AIMED_ONLY: [FaultPoint; 2] = [
    FaultPoint::OffsetCommitAnsweredUnsynced,
    FaultPoint::CleanerSwap,
];
/// Points drawn like every other one but reached too rarely for the main suite's default
/// seeds to be sure to fire them (a recovery must find a torn tail to truncate: about one
/// seed in 500 fires it there); a test aimed at each covers it instead.
pub const AIMED_TOO: [FaultPoint; 1] = [FaultPoint::RecoveryTruncate];
const _: () = assert!(DELAY_MS_MAX <= FAULT_DELAY_MS_MAX);
const _: () = assert!(FIRE_PER_MILLION_MIN <= FIRE_PER_MILLION_MAX);
const _: () = assert!(FIRE_PER_MILLION_MAX <= 1_000_000);

/// What the fault points of one run may do.
#[derive(Clone, Debug)]
pub struct FaultPlanOptions {
    /// Crash modes a halt draws from (the run's).
    pub crash_modes: Vec<CrashMode>,
    pub io_errors: bool,
    /// Points enabled in every seed at the highest rate, whatever the draw (a planted bug's
    /// test aims the faults at its window).
    pub always: Vec<FaultPoint>,
    /// Whether the per-seed draw enables points (else only `always` ones fire). The draw is
    /// made either way, so the generator's sequence does not depend on it.
    pub drawn: bool,
}

struct Inner {
    rng: SmallRng,
    disk: Option<MemDisk>,
    node: Option<madsim::task::NodeId>,
    recorder: Recorder,
    /// Fire rate per million passes of each enabled point.
    rates: BTreeMap<FaultPoint, u32>,
    options: FaultPlanOptions,
    armed: bool,
    halts: u32,
    io_errors: u32,
    delays: u32,
    /// Firings per point (any action).
    fired: BTreeMap<FaultPoint, u32>,
    /// Set by a halt; the supervisor takes it and schedules the restart.
    halted: bool,
    /// A halt after an answer is waiting for its delay: no other fault meanwhile.
    pending_halt: bool,
    crashes: Vec<CrashReport>,
    /// One line per firing, for the nemesis log.
    log: Vec<String>,
}

/// The injector of one run, shared by the harness and the node's disk.
pub struct PointInjector {
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for PointInjector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PointInjector").finish_non_exhaustive()
    }
}

impl PointInjector {
    /// Draws the run's plan from `seed`.
    pub fn new(seed: u64, options: FaultPlanOptions, recorder: Recorder) -> PointInjector {
        assert!(
            !options.crash_modes.is_empty(),
            "no crash mode to halt with"
        );
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut rates = BTreeMap::new();
        let (min, max) = (
            f64::from(FIRE_PER_MILLION_MIN).ln(),
            f64::from(FIRE_PER_MILLION_MAX).ln(),
        );
        for point in FaultPoint::ALL {
            if AIMED_ONLY.contains(&point) {
                // No draw: adding the point kept every seed's plan as it was.
                if options.always.contains(&point) {
                    rates.insert(point, FIRE_PER_MILLION_MAX);
                }
                continue;
            }
            // Draw for every point whether or not it is enabled, so that the plan of one
            // point does not shift the draws of the next.
            let enabled = rng.gen_bool(POINT_ENABLED_PROBABILITY);
            let rate = rng.gen_range(min..=max).exp() as u32;
            if options.always.contains(&point) {
                rates.insert(point, FIRE_PER_MILLION_MAX);
            } else if enabled && options.drawn {
                rates.insert(
                    point,
                    rate.clamp(FIRE_PER_MILLION_MIN, FIRE_PER_MILLION_MAX),
                );
            }
        }
        PointInjector {
            inner: Mutex::new(Inner {
                rng,
                disk: None,
                node: None,
                recorder,
                rates,
                options,
                armed: false,
                halts: 0,
                io_errors: 0,
                delays: 0,
                fired: BTreeMap::new(),
                halted: false,
                pending_halt: false,
                crashes: Vec::new(),
                log: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The node and disk a halt crashes.
    pub fn attach(&self, disk: MemDisk, node: madsim::task::NodeId) {
        let mut inner = self.lock();
        inner.disk = Some(disk);
        inner.node = Some(node);
    }

    /// Faults fire only while armed.
    pub fn arm(&self, armed: bool) {
        self.lock().armed = armed;
    }

    /// Whether a halt happened since the last call (the node is down and needs a restart),
    /// with the crash reports and nemesis lines since then.
    pub fn take_events(&self) -> (bool, Vec<CrashReport>, Vec<String>) {
        let mut inner = self.lock();
        let halted = std::mem::take(&mut inner.halted);
        (
            halted,
            std::mem::take(&mut inner.crashes),
            std::mem::take(&mut inner.log),
        )
    }

    /// How often each point fired in this run.
    pub fn fired(&self) -> BTreeMap<FaultPoint, u32> {
        self.lock().fired.clone()
    }

    /// Forgets the disk and node (the disk holds this injector: break the cycle).
    pub fn detach(&self) {
        let mut inner = self.lock();
        inner.disk = None;
        inner.node = None;
    }
}

impl Inner {
    /// Kills the node and crashes its disk with one of the run's modes, in one synchronous
    /// step (nothing of the node runs in between); the nemesis line, or `None` when no node
    /// is attached.
    fn crash_now(&mut self, point: FaultPoint) -> Option<String> {
        let (Some(disk), Some(node)) = (self.disk.clone(), self.node) else {
            return None;
        };
        *self.fired.entry(point).or_insert(0) += 1;
        let modes = &self.options.crash_modes;
        let mode = modes[self.rng.gen_range(0..modes.len())];
        madsim::runtime::Handle::current().kill(node);
        let report = disk.crash(mode, &mut self.rng);
        let text = format!(
            "fault point {point}: kill node ({}): kept {}/{} unsynced writes, dropped {} bytes{}",
            mode.name(),
            report.kept_writes,
            report.unsynced_writes,
            report.dropped_bytes,
            if report.torn { ", torn" } else { "" }
        );
        self.crashes.push(report);
        self.halted = true;
        Some(text)
    }
}

impl FaultInjector for PointInjector {
    fn halt(&self, point: FaultPoint) -> bool {
        let mut inner = self.lock();
        inner.pending_halt = false;
        if !inner.armed {
            // The healing phase began meanwhile: no more faults.
            return false;
        }
        match inner.crash_now(point) {
            Some(text) => {
                inner.recorder.note(NEMESIS_PROCESS, text.clone());
                inner.log.push(text);
                true
            }
            None => false,
        }
    }

    fn at(&self, point: FaultPoint) -> Option<Fault> {
        let mut inner = self.lock();
        let inner = &mut *inner;
        if !inner.armed || inner.halted || inner.pending_halt {
            return None;
        }
        let rate = *inner.rates.get(&point)?;
        if inner.rng.gen_range(0..1_000_000) >= rate {
            return None;
        }
        // Which action: a crash in half the firings, else an IO error where the point
        // allows one, else a delay; each within its budget.
        let roll = inner.rng.gen_range(0..10);
        let fault = if roll < 5 && inner.halts < HALTS_MAX {
            Fault::Halt
        } else if roll < 7
            && point.allows_io_error()
            && inner.options.io_errors
            && inner.io_errors < IO_ERRORS_MAX
        {
            Fault::IoError
        } else if inner.delays < DELAYS_MAX {
            Fault::DelayMs(inner.rng.gen_range(1..=DELAY_MS_MAX))
        } else {
            return None;
        };
        if !matches!(fault, Fault::Halt) {
            *inner.fired.entry(point).or_insert(0) += 1;
        }
        let text = match fault {
            Fault::Halt => {
                let answered = matches!(
                    point,
                    FaultPoint::FetchAnsweredUnsynced
                        | FaultPoint::ProduceAnsweredUnsynced
                        | FaultPoint::OffsetCommitAnsweredUnsynced
                );
                if answered {
                    // After an answer: let it reach the client first (the node runs on
                    // meanwhile), then crash; `halt` does it.
                    inner.halts += 1;
                    let ms = inner.rng.gen_range(1..=ANSWER_HALT_DELAY_MS_MAX);
                    *inner.fired.entry(point).or_insert(0) += 1;
                    inner.pending_halt = true;
                    return Some(Fault::HaltAfterMs(ms));
                }
                let text = inner.crash_now(point)?;
                inner.halts += 1;
                text
            }
            Fault::IoError => {
                inner.io_errors += 1;
                format!("fault point {point}: injected IO error")
            }
            Fault::DelayMs(ms) => {
                inner.delays += 1;
                format!("fault point {point}: delay {ms} ms")
            }
            Fault::HaltAfterMs(_) => unreachable!("chosen only above, and returned there"),
        };
        inner.recorder.note(NEMESIS_PROCESS, text.clone());
        inner.log.push(text);
        Some(fault)
    }
}
