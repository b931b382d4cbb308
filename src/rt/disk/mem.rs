//! The simulated disk: an in-memory file system that knows what was synced.
//!
//! The harness creates one `MemDisk` per simulated node and keeps it outside the node, so it
//! survives kill and restart. Every file has a current image (what reads see: the page cache)
//! and a synced image (what a power loss cannot take), plus the writes made since the last
//! sync, in order. Names have the same split: the current namespace and the one as of the last
//! directory sync. [`MemDisk::crash`] then models what survives, per [`CrashMode`]: all of it
//! (a process crash: the OS page cache survives), only synced data (power loss), or synced data
//! plus a random prefix of each file's unsynced writes with the last one possibly torn
//! (FoundationDB-style), optionally followed by corrupting a sector of synced data. Injected IO
//! errors and latency are drawn from the disk's own generator, seeded by the harness, so a seed
//! reproduces them.
//!
//! Invariants:
//! - `synced` is always a state the file really had (a prefix of the write history applied to
//!   the previous synced state), and `data` == `synced` with `pending` applied in order.
//! - A handle opened before a crash fails every later operation (stale generation): a killed
//!   node can never write into its successor's disk.
//! - Every injected fault's error message starts with "injected", so logs tell them from bugs.

use super::{parent_of, OpenMode};
use crate::rt::fault::{self, FaultInjector, FaultPoint};
use bytes::Bytes;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

/// The unit of a torn write's granularity and of corruption.
pub const SECTOR_BYTES: usize = 512;

/// Probabilities are expressed per million draws.
const PER_MILLION: u32 = 1_000_000;

/// What a crash leaves behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CrashMode {
    /// The process dies; the OS page cache survives, so every completed write survives.
    Process,
    /// Power loss: every unsynced write and unsynced name change is lost.
    PowerLossDropUnsynced,
    /// Power loss: a random prefix of each file's unsynced writes survives and the last
    /// surviving write may be torn; unsynced name changes are lost.
    PowerLossRandomPrefix,
    /// [`CrashMode::PowerLossRandomPrefix`], then one sector of *synced* data is corrupted.
    /// One node cannot survive this without loss; it must detect it.
    PowerLossCorruptSynced,
}

impl CrashMode {
    pub const ALL: [CrashMode; 4] = [
        CrashMode::Process,
        CrashMode::PowerLossDropUnsynced,
        CrashMode::PowerLossRandomPrefix,
        CrashMode::PowerLossCorruptSynced,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CrashMode::Process => "process-crash",
            CrashMode::PowerLossDropUnsynced => "power-loss-drop-unsynced",
            CrashMode::PowerLossRandomPrefix => "power-loss-random-prefix",
            CrashMode::PowerLossCorruptSynced => "power-loss-corrupt-synced",
        }
    }

    pub fn loses_power(self) -> bool {
        self != CrashMode::Process
    }
}

/// What one crash did, for the history and for counting distinct crash points.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashReport {
    /// Unsynced writes (over all files) at the moment of the crash.
    pub unsynced_writes: usize,
    /// How many of them survived.
    pub kept_writes: usize,
    /// Bytes of unsynced writes that were lost.
    pub dropped_bytes: u64,
    /// Whether the last surviving write of some file was torn.
    pub torn: bool,
    /// Name changes (creations, renames, removals) undone because their directory was not
    /// synced.
    pub names_reverted: usize,
    /// The file and byte offset of injected corruption of synced data.
    pub corrupted: Option<(String, u64)>,
    /// A digest of the disk's state at the moment of the crash (synced and unsynced lengths
    /// of every file) and of the survival choices: equal points mean the same crash.
    pub point: u64,
}

/// Counters of what the disk did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskStats {
    pub writes: u64,
    pub bytes_written: u64,
    pub syncs: u64,
    pub dir_syncs: u64,
    pub injected_errors: u64,
    pub crashes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Dir,
    File(u64),
}

#[derive(Clone, Debug)]
enum Pending {
    Write { pos: u64, data: Vec<u8> },
    SetLen(u64),
}

#[derive(Clone, Debug, Default)]
struct Inode {
    data: Vec<u8>,
    synced: Vec<u8>,
    pending: Vec<Pending>,
}

fn apply(image: &mut Vec<u8>, op: &Pending) {
    match op {
        Pending::Write { pos, data } => {
            let pos = *pos as usize;
            let end = pos + data.len();
            if image.len() < end {
                image.resize(end, 0);
            }
            image[pos..end].copy_from_slice(data);
        }
        Pending::SetLen(len) => image.resize(*len as usize, 0),
    }
}

#[derive(Debug)]
struct State {
    generation: u64,
    inodes: BTreeMap<u64, Inode>,
    inode_next: u64,
    names: BTreeMap<String, Entry>,
    synced_names: BTreeMap<String, Entry>,
    rng: SmallRng,
    io_error_per_million: u32,
    write_latency_us_max: u64,
    sync_latency_us: (u64, u64),
    stats: DiskStats,
    /// The simulation's fault points hook (`rt::fault`), if installed.
    faults: Option<Arc<dyn FaultInjector>>,
}

/// A simulated disk; clones share it.
#[derive(Clone, Debug)]
pub struct MemDisk {
    state: Arc<Mutex<State>>,
    /// Whether this handle (and the files opened through it) asks the injector at fault
    /// points; crashes, power loss and random IO errors reach every handle alike.
    fault_points: bool,
}

/// A file handle on a [`MemDisk`], valid until the next crash.
#[derive(Clone, Debug)]
pub(super) struct MemFile {
    disk: MemDisk,
    inode: u64,
    generation: u64,
    path: String,
}

fn not_found(path: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{path}: no such file or directory"),
    )
}

/// The paths of the files (not directories) of a namespace, in its (sorted) order.
fn files_of(names: &BTreeMap<String, Entry>) -> Vec<String> {
    names
        .iter()
        .filter(|(_, e)| matches!(e, Entry::File(_)))
        .map(|(n, _)| n.clone())
        .collect()
}

/// FNV-1a, so digests do not depend on the process's hasher seed.
fn fnv(hash: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *hash ^= u64::from(*b);
        *hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

impl State {
    /// Draws whether to fail this operation with an injected IO error.
    fn inject(&mut self, op: &str, path: &str) -> io::Result<()> {
        if self.io_error_per_million > 0
            && self.rng.gen_range(0..PER_MILLION) < self.io_error_per_million
        {
            self.stats.injected_errors += 1;
            return Err(io::Error::other(format!("injected IO error: {op} {path}")));
        }
        Ok(())
    }

    fn dir_exists(&self, dir: &str) -> bool {
        dir.is_empty() || self.names.get(dir) == Some(&Entry::Dir)
    }
}

impl MemDisk {
    /// An empty disk whose faults and latencies are drawn from a generator seeded by `seed`.
    pub fn new(seed: u64) -> MemDisk {
        MemDisk {
            state: Arc::new(Mutex::new(State {
                generation: 0,
                inodes: BTreeMap::new(),
                inode_next: 1,
                names: BTreeMap::new(),
                synced_names: BTreeMap::new(),
                rng: SmallRng::seed_from_u64(seed),
                io_error_per_million: 0,
                write_latency_us_max: 0,
                sync_latency_us: (0, 0),
                stats: DiskStats::default(),
                faults: None,
            })),
            fault_points: true,
        }
    }

    /// A handle on the same disk whose fault points never fire (the simulation aims its
    /// event-timed faults at the partition logs; the metadata log beside them still meets
    /// every crash, power loss and random IO error of the disk).
    pub fn without_fault_points(&self) -> MemDisk {
        MemDisk {
            state: self.state.clone(),
            fault_points: false,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock is a bug in this module; the state is still the best
        // evidence there is, so keep using it rather than poisoning every later test step.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Every later operation fails with probability `per_million` / 1,000,000.
    pub fn set_io_error_rate(&self, per_million: u32) {
        assert!(
            per_million <= PER_MILLION,
            "io error rate above one million per million"
        );
        self.lock().io_error_per_million = per_million;
    }

    /// Writes take up to `write_us_max` and syncs between `sync_us_min` and `sync_us_max`
    /// microseconds of simulated time.
    pub fn set_latency(&self, write_us_max: u64, sync_us_min: u64, sync_us_max: u64) {
        assert!(sync_us_min <= sync_us_max, "sync latency range is empty");
        let mut state = self.lock();
        state.write_latency_us_max = write_us_max;
        state.sync_latency_us = (sync_us_min, sync_us_max);
    }

    /// Installs (or with `None` removes) the hook asked at every fault point of this disk and
    /// of the node code running on it. The harness removes it at the end of a run: the hook
    /// usually holds a clone of this disk.
    pub fn set_fault_injector(&self, injector: Option<Arc<dyn FaultInjector>>) {
        self.lock().faults = injector;
    }

    /// Whether a fault injector is installed.
    pub fn has_fault_injector(&self) -> bool {
        self.fault_points && self.lock().faults.is_some()
    }

    /// Asks the injector, if any, what happens at `point`, and carries it out. The disk's lock
    /// is not held while the injector runs (it may crash this disk).
    pub(super) async fn fault(&self, point: FaultPoint) -> io::Result<()> {
        if !self.fault_points {
            return Ok(());
        }
        let injector = { self.lock().faults.clone() };
        match injector {
            None => Ok(()),
            Some(injector) => fault::carry_out(injector.as_ref(), point).await,
        }
    }

    pub fn stats(&self) -> DiskStats {
        self.lock().stats
    }

    /// Flips bits (`mask`) of the byte at `at` of a file's synced data, as bit rot at rest
    /// would: the harness aims corruption where a guarantee says what must happen to it.
    /// Returns false if the file has no synced byte there.
    pub fn corrupt_synced_byte(&self, path: &str, at: u64, mask: u8) -> bool {
        let mut state = self.lock();
        let Some(Entry::File(ino)) = state.names.get(path).copied() else {
            return false;
        };
        let Some(inode) = state.inodes.get_mut(&ino) else {
            return false;
        };
        let at = at as usize;
        if at >= inode.synced.len() || at >= inode.data.len() || mask == 0 {
            return false;
        }
        inode.synced[at] ^= mask;
        inode.data[at] ^= mask;
        true
    }

    /// The length of a file's synced data, for offline inspection.
    pub fn synced_len(&self, path: &str) -> Option<u64> {
        let state = self.lock();
        match state.names.get(path) {
            Some(Entry::File(ino)) => state.inodes.get(ino).map(|i| i.synced.len() as u64),
            _ => None,
        }
    }

    /// What a power loss now would keep of a file: its synced contents under its synced name,
    /// for offline inspection.
    pub fn durable_file_image(&self, path: &str) -> Option<Vec<u8>> {
        let state = self.lock();
        match state.synced_names.get(path) {
            Some(Entry::File(ino)) => state.inodes.get(ino).map(|i| i.synced.clone()),
            _ => None,
        }
    }

    /// Every file's path in the synced namespace (what a power loss now would keep), sorted.
    pub fn durable_file_names(&self) -> Vec<String> {
        files_of(&self.lock().synced_names)
    }

    /// Every file's path in the current namespace, sorted, for offline inspection.
    pub fn file_names(&self) -> Vec<String> {
        files_of(&self.lock().names)
    }

    /// The current (page cache) contents of a file, for offline inspection.
    pub fn file_image(&self, path: &str) -> Option<Vec<u8>> {
        let state = self.lock();
        match state.names.get(path) {
            Some(Entry::File(ino)) => state.inodes.get(ino).map(|i| i.data.clone()),
            _ => None,
        }
    }

    /// A digest of every name and every file's current and synced contents.
    pub fn digest(&self) -> u64 {
        let state = self.lock();
        let mut hash = FNV_OFFSET;
        for (name, entry) in &state.names {
            fnv(&mut hash, name.as_bytes());
            if let Entry::File(ino) = entry {
                if let Some(inode) = state.inodes.get(ino) {
                    fnv(&mut hash, &(inode.data.len() as u64).to_le_bytes());
                    fnv(&mut hash, &inode.data);
                    fnv(&mut hash, &(inode.synced.len() as u64).to_le_bytes());
                    fnv(&mut hash, &inode.synced);
                }
            }
        }
        hash
    }

    /// Crashes the disk's node: invalidates every open handle and keeps what `mode` allows.
    /// `rng` chooses what survives; pass the simulation's generator so a seed reproduces it.
    pub fn crash(&self, mode: CrashMode, rng: &mut impl Rng) -> CrashReport {
        let mut state = self.lock();
        state.generation += 1;
        state.stats.crashes += 1;
        let mut report = CrashReport::default();
        let mut point = FNV_OFFSET;
        fnv(&mut point, mode.name().as_bytes());
        for (name, entry) in &state.names {
            if let Entry::File(ino) = entry {
                if let Some(inode) = state.inodes.get(ino) {
                    fnv(&mut point, name.as_bytes());
                    fnv(&mut point, &(inode.synced.len() as u64).to_le_bytes());
                    fnv(&mut point, &(inode.data.len() as u64).to_le_bytes());
                    fnv(&mut point, &(inode.pending.len() as u64).to_le_bytes());
                }
            }
        }
        let inode_ids: Vec<u64> = state.inodes.keys().copied().collect();
        for ino in inode_ids {
            let Some(inode) = state.inodes.get_mut(&ino) else {
                continue;
            };
            report.unsynced_writes += inode.pending.len();
            if !mode.loses_power() {
                continue;
            }
            let pending = std::mem::take(&mut inode.pending);
            let keep = match mode {
                CrashMode::Process => pending.len(),
                CrashMode::PowerLossDropUnsynced => 0,
                CrashMode::PowerLossRandomPrefix | CrashMode::PowerLossCorruptSynced => {
                    rng.gen_range(0..=pending.len())
                }
            };
            let mut image = std::mem::take(&mut inode.synced);
            for (i, op) in pending.iter().enumerate() {
                if i >= keep {
                    if let Pending::Write { data, .. } = op {
                        report.dropped_bytes += data.len() as u64;
                    }
                    continue;
                }
                let last = i + 1 == keep;
                match op {
                    Pending::Write { pos, data } if last && data.len() > 1 && rng.gen_bool(0.5) => {
                        // A torn write: only a prefix reached the platter.
                        let kept = rng.gen_range(0..data.len());
                        apply(
                            &mut image,
                            &Pending::Write {
                                pos: *pos,
                                data: data[..kept].to_vec(),
                            },
                        );
                        report.dropped_bytes += (data.len() - kept) as u64;
                        report.torn = true;
                        fnv(&mut point, &(kept as u64).to_le_bytes());
                    }
                    op => apply(&mut image, op),
                }
            }
            report.kept_writes += keep;
            fnv(&mut point, &(keep as u64).to_le_bytes());
            inode.data = image.clone();
            inode.synced = image;
        }
        if mode.loses_power() {
            let current = std::mem::take(&mut state.names);
            let synced = state.synced_names.clone();
            report.names_reverted = current
                .iter()
                .filter(|(name, entry)| synced.get(*name) != Some(*entry))
                .count()
                + synced
                    .keys()
                    .filter(|name| !current.contains_key(*name))
                    .count();
            state.names = synced;
        }
        // Files that no name refers to, neither in the current namespace nor in the synced one
        // (which a later power loss would bring back), are gone for good.
        let live: std::collections::BTreeSet<u64> = state
            .names
            .values()
            .chain(state.synced_names.values())
            .filter_map(|e| match e {
                Entry::File(ino) => Some(*ino),
                Entry::Dir => None,
            })
            .collect();
        state.inodes.retain(|ino, _| live.contains(ino));
        if mode == CrashMode::PowerLossCorruptSynced {
            let candidates: Vec<(String, u64)> = state
                .names
                .iter()
                .filter_map(|(name, e)| match e {
                    Entry::File(ino) => Some((name.clone(), *ino)),
                    Entry::Dir => None,
                })
                .filter(|(_, ino)| state.inodes.get(ino).is_some_and(|i| !i.synced.is_empty()))
                .collect();
            if !candidates.is_empty() {
                let (name, ino) = candidates[rng.gen_range(0..candidates.len())].clone();
                let mask: u8 = rng.gen_range(1..=255);
                if let Some(inode) = state.inodes.get_mut(&ino) {
                    let sectors = inode.synced.len().div_ceil(SECTOR_BYTES);
                    let sector = rng.gen_range(0..sectors);
                    let start = sector * SECTOR_BYTES;
                    let end = (start + SECTOR_BYTES).min(inode.synced.len());
                    let at = rng.gen_range(start..end);
                    inode.synced[at] ^= mask;
                    inode.data[at] ^= mask;
                    fnv(&mut point, &(at as u64).to_le_bytes());
                    report.corrupted = Some((name, at as u64));
                }
            }
        }
        report.point = point;
        report
    }

    pub(super) fn create_dir_all(&self, dir: &str) -> io::Result<()> {
        let mut state = self.lock();
        state.inject("mkdir", dir)?;
        let mut path = String::new();
        for part in dir.split('/').filter(|p| !p.is_empty()) {
            if !path.is_empty() {
                path.push('/');
            }
            path.push_str(part);
            match state.names.get(&path) {
                Some(Entry::Dir) => {}
                Some(Entry::File(_)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!("{path}: exists and is not a directory"),
                    ))
                }
                None => {
                    state.names.insert(path.clone(), Entry::Dir);
                }
            }
        }
        Ok(())
    }

    pub(super) fn open(&self, path: &str, mode: OpenMode) -> io::Result<MemFile> {
        let mut state = self.lock();
        state.inject("open", path)?;
        if !state.dir_exists(parent_of(path)) {
            return Err(not_found(parent_of(path)));
        }
        let ino = match (state.names.get(path).copied(), mode) {
            (Some(Entry::Dir), _) => {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    format!("{path}: is a directory"),
                ))
            }
            (Some(Entry::File(ino)), OpenMode::Truncate) => {
                if let Some(inode) = state.inodes.get_mut(&ino) {
                    inode.data.clear();
                    inode.pending.push(Pending::SetLen(0));
                }
                ino
            }
            (Some(Entry::File(ino)), _) => ino,
            (None, OpenMode::Existing) => return Err(not_found(path)),
            (None, OpenMode::Create | OpenMode::Truncate) => {
                let ino = state.inode_next;
                state.inode_next += 1;
                state.inodes.insert(ino, Inode::default());
                state.names.insert(path.to_string(), Entry::File(ino));
                ino
            }
        };
        Ok(MemFile {
            disk: self.clone(),
            inode: ino,
            generation: state.generation,
            path: path.to_string(),
        })
    }

    pub(super) fn exists(&self, path: &str) -> io::Result<bool> {
        let mut state = self.lock();
        state.inject("stat", path)?;
        Ok(path.is_empty() || state.names.contains_key(path))
    }

    pub(super) fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let mut state = self.lock();
        state.inject("list", dir)?;
        if !state.dir_exists(dir) {
            return Err(not_found(dir));
        }
        Ok(state
            .names
            .keys()
            .filter(|name| parent_of(name) == dir)
            .map(|name| name.rsplit('/').next().unwrap_or(name).to_string())
            .collect())
    }

    pub(super) fn remove(&self, path: &str) -> io::Result<()> {
        let mut state = self.lock();
        state.inject("remove", path)?;
        match state.names.remove(path) {
            None => Err(not_found(path)),
            Some(Entry::File(_)) => Ok(()),
            Some(Entry::Dir) => {
                let prefix = format!("{path}/");
                state.names.retain(|name, _| !name.starts_with(&prefix));
                Ok(())
            }
        }
    }

    pub(super) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let mut state = self.lock();
        state.inject("rename", from)?;
        if !state.dir_exists(parent_of(to)) {
            return Err(not_found(parent_of(to)));
        }
        match state.names.get(from).copied() {
            None => Err(not_found(from)),
            Some(Entry::Dir) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{from}: renaming directories is not modelled"),
            )),
            Some(entry @ Entry::File(_)) => {
                state.names.remove(from);
                state.names.insert(to.to_string(), entry);
                Ok(())
            }
        }
    }

    pub(super) async fn sync_dir(&self, dir: &str) -> io::Result<()> {
        self.sync_delay().await;
        {
            let mut state = self.lock();
            state.inject("sync_dir", dir)?;
            if !state.dir_exists(dir) {
                return Err(not_found(dir));
            }
            state.stats.dir_syncs += 1;
            let in_dir = |name: &String| parent_of(name) == dir;
            let current: Vec<(String, Entry)> = state
                .names
                .iter()
                .filter(|(n, _)| in_dir(n))
                .map(|(n, e)| (n.clone(), *e))
                .collect();
            state.synced_names.retain(|name, _| !in_dir(name));
            state.synced_names.extend(current);
        }
        self.fault(FaultPoint::DiskSyncDirAfter).await
    }

    async fn sync_delay(&self) {
        let delay_us = {
            let mut state = self.lock();
            let (min, max) = state.sync_latency_us;
            if max == 0 {
                0
            } else {
                state.rng.gen_range(min..=max)
            }
        };
        if delay_us > 0 {
            crate::rt::time::sleep(std::time::Duration::from_micros(delay_us)).await;
        }
    }
}

impl MemFile {
    /// Locks the disk and checks that this handle survived no crash.
    fn live(&self) -> io::Result<MutexGuard<'_, State>> {
        let state = self.disk.lock();
        if state.generation != self.generation {
            return Err(io::Error::other(format!(
                "{}: stale handle from before a crash",
                self.path
            )));
        }
        Ok(state)
    }

    fn inode<'a>(&self, state: &'a mut State) -> io::Result<&'a mut Inode> {
        state
            .inodes
            .get_mut(&self.inode)
            .ok_or_else(|| not_found(&self.path))
    }

    pub(super) fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let mut state = self.live()?;
        state.inject("read", &self.path)?;
        let inode = self.inode(&mut state)?;
        let start = (pos as usize).min(inode.data.len());
        let end = start.saturating_add(len).min(inode.data.len());
        Ok(Bytes::copy_from_slice(&inode.data[start..end]))
    }

    pub(super) async fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        let delay_us = {
            let mut state = self.live()?;
            let max = state.write_latency_us_max;
            if max == 0 {
                0
            } else {
                state.rng.gen_range(0..=max)
            }
        };
        if delay_us > 0 {
            crate::rt::time::sleep(std::time::Duration::from_micros(delay_us)).await;
        }
        {
            let mut state = self.live()?;
            state.inject("write", &self.path)?;
            state.stats.writes += 1;
            state.stats.bytes_written += data.len() as u64;
            let op = Pending::Write {
                pos,
                data: data.to_vec(),
            };
            let inode = self.inode(&mut state)?;
            apply(&mut inode.data, &op);
            inode.pending.push(op);
        }
        self.disk.fault(FaultPoint::DiskWritten).await
    }

    pub(super) async fn sync(&self) -> io::Result<()> {
        self.disk.fault(FaultPoint::DiskSyncBefore).await?;
        self.disk.sync_delay().await;
        {
            let mut state = self.live()?;
            state.inject("sync", &self.path)?;
            state.stats.syncs += 1;
            let inode = self.inode(&mut state)?;
            let pending = std::mem::take(&mut inode.pending);
            for op in &pending {
                apply(&mut inode.synced, op);
            }
            debug_assert_eq!(
                inode.synced, inode.data,
                "synced image diverged from the data"
            );
        }
        self.disk.fault(FaultPoint::DiskSyncAfter).await
    }

    pub(super) fn set_len(&self, len: u64) -> io::Result<()> {
        let mut state = self.live()?;
        state.inject("truncate", &self.path)?;
        let op = Pending::SetLen(len);
        let inode = self.inode(&mut state)?;
        apply(&mut inode.data, &op);
        inode.pending.push(op);
        Ok(())
    }

    pub(super) fn len(&self) -> io::Result<u64> {
        let mut state = self.live()?;
        let inode = self.inode(&mut state)?;
        Ok(inode.data.len() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_sync(file: &MemFile, pos: u64, data: &[u8]) {
        let mut state = file.live().unwrap();
        let op = Pending::Write {
            pos,
            data: data.to_vec(),
        };
        let inode = file.inode(&mut state).unwrap();
        apply(&mut inode.data, &op);
        inode.pending.push(op);
    }

    #[test]
    fn power_loss_keeps_only_synced_data_and_names() {
        let disk = MemDisk::new(1);
        disk.create_dir_all("d").unwrap();
        let f = disk.open("d/a", OpenMode::Create).unwrap();
        write_sync(&f, 0, b"hello");
        {
            let mut state = f.live().unwrap();
            let inode = f.inode(&mut state).unwrap();
            let pending = std::mem::take(&mut inode.pending);
            for op in &pending {
                apply(&mut inode.synced, op);
            }
        }
        write_sync(&f, 5, b" world");
        let mut rng = SmallRng::seed_from_u64(7);
        // The directory was never synced, so the file's name is lost with the power.
        let report = disk.crash(CrashMode::PowerLossDropUnsynced, &mut rng);
        assert_eq!(report.unsynced_writes, 1);
        assert_eq!(report.dropped_bytes, 6);
        assert!(disk.file_image("d/a").is_none());
        assert!(
            f.read_at(0, 5).is_err(),
            "a handle from before the crash must be stale"
        );
    }

    #[test]
    fn process_crash_keeps_everything() {
        let disk = MemDisk::new(1);
        let f = disk.open("a", OpenMode::Create).unwrap();
        write_sync(&f, 0, b"abc");
        let mut rng = SmallRng::seed_from_u64(7);
        let report = disk.crash(CrashMode::Process, &mut rng);
        assert_eq!(report.dropped_bytes, 0);
        assert_eq!(disk.file_image("a").unwrap(), b"abc");
    }

    #[test]
    fn random_prefix_keeps_a_prefix_of_writes() {
        for seed in 0..50 {
            let disk = MemDisk::new(seed);
            let f = disk.open("a", OpenMode::Create).unwrap();
            {
                let mut state = disk.lock();
                state.synced_names = state.names.clone();
            }
            for i in 0..4u8 {
                write_sync(&f, u64::from(i) * 4, &[i + 1; 4]);
            }
            let mut rng = SmallRng::seed_from_u64(seed);
            disk.crash(CrashMode::PowerLossRandomPrefix, &mut rng);
            let image = disk.file_image("a").unwrap();
            // Whatever survived is a prefix of 1111 2222 3333 4444 (the last part maybe torn).
            let full: Vec<u8> = (0..4u8).flat_map(|i| [i + 1; 4]).collect();
            assert_eq!(image[..], full[..image.len()], "seed {seed}");
        }
    }

    /// A rename whose directory sync never happened, then a process crash, then a power
    /// loss: the old name comes back and must still have its data (found by sim seed 638).
    #[test]
    fn a_name_only_the_synced_namespace_holds_survives_a_process_crash() {
        let disk = MemDisk::new(1);
        let old = disk.open("cp", OpenMode::Create).unwrap();
        write_sync(&old, 0, b"old");
        {
            let mut state = disk.lock();
            let inode = old.inode(&mut state).unwrap();
            inode.synced = inode.data.clone();
            inode.pending.clear();
            state.synced_names = state.names.clone();
        }
        let new = disk.open("cp.tmp", OpenMode::Create).unwrap();
        write_sync(&new, 0, b"new");
        disk.rename("cp.tmp", "cp").unwrap();
        let mut rng = SmallRng::seed_from_u64(3);
        disk.crash(CrashMode::Process, &mut rng);
        assert_eq!(disk.file_image("cp").unwrap(), b"new");
        disk.crash(CrashMode::PowerLossDropUnsynced, &mut rng);
        assert_eq!(
            disk.file_image("cp").unwrap(),
            b"old",
            "the synced name's data must survive"
        );
        let reopened = disk.open("cp", OpenMode::Existing).unwrap();
        assert_eq!(&reopened.read_at(0, 3).unwrap()[..], b"old");
    }

    #[test]
    fn injected_errors_are_labelled() {
        let disk = MemDisk::new(3);
        disk.set_io_error_rate(PER_MILLION);
        let err = disk.open("a", OpenMode::Create).unwrap_err();
        assert!(err.to_string().starts_with("injected IO error"), "{err}");
        assert_eq!(disk.stats().injected_errors, 1);
    }
}
