//! The disk: directories and files addressed by relative, `/`-separated paths under one root.
//!
//! Two implementations behind one API:
//! - [`Disk::real`]: files under a host directory, positional `pread`/`pwrite`, `fdatasync`
//!   for [`File::sync`] and an `fsync` of the directory for [`Disk::sync_dir`].
//! - [`Disk::mem`]: a [`MemDisk`] kept by the simulation harness outside the node, so it
//!   survives kill/restart. It tracks what was written and what was synced, and on
//!   [`MemDisk::crash`] keeps only what the chosen [`CrashMode`] allows.
//!
//! Durability contract (both implementations; the log relies on exactly this):
//! - data written to a file is durable once [`File::sync`] on that file returns `Ok`;
//! - a file's creation, rename or removal is durable once [`Disk::sync_dir`] of its parent
//!   directory returns `Ok`;
//! - after a failed sync nothing about the unsynced data is known: callers must treat the
//!   file as lost beyond its last successful sync (the log goes offline).

mod mem;
mod real;

pub use mem::{CrashMode, CrashReport, DiskStats, MemDisk, SECTOR_BYTES};

use crate::rt::fault::FaultPoint;
use bytes::Bytes;
use std::io;
use std::path::PathBuf;

/// How [`Disk::open`] treats a missing or existing file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// The file must exist.
    Existing,
    /// Create the file if it is missing; keep its contents if it exists.
    Create,
    /// Create the file, emptying it if it exists.
    Truncate,
}

#[derive(Clone, Debug)]
enum DiskKind {
    Real(real::RealDisk),
    Mem(MemDisk),
}

/// Reads a whole file of the host by its own path, outside any [`Disk`]: for the few files a
/// program is pointed at from its command line (a `server.properties`). Never used by code
/// that runs under simulation.
#[allow(clippy::disallowed_methods)]
pub fn read_host_file(path: &str) -> io::Result<String> {
    std::fs::read_to_string(path)
}

/// An exclusive lock from [`Disk::lock`], released when dropped (or when the process dies).
#[derive(Debug)]
pub struct DirLock {
    _file: Option<std::fs::File>,
}

/// The size of the file system holding a disk, as `statvfs(3)` reports it (DescribeLogDirs'
/// `total_bytes` and `usable_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskSpace {
    /// The file system's size in bytes.
    pub total_bytes: u64,
    /// Bytes an unprivileged writer may still use.
    pub usable_bytes: u64,
}

/// What a [`MemDisk`] reports as its size: fixed figures (1 TiB with half free), so a
/// simulated node answers DescribeLogDirs like a real one.
pub const MEM_DISK_SPACE: DiskSpace = DiskSpace {
    total_bytes: 1 << 40,
    usable_bytes: 1 << 39,
};

/// A handle to one disk (a root directory). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Disk {
    kind: DiskKind,
}

#[derive(Clone, Debug)]
enum FileKind {
    Real(real::RealFile),
    Mem(mem::MemFile),
}

/// An open file, readable and writable at any position. Cheap to clone; clones share the
/// underlying file.
#[derive(Clone, Debug)]
pub struct File {
    kind: FileKind,
    path: String,
}

/// Rejects paths that could escape the disk's root or name nothing.
pub(crate) fn check_path(path: &str) -> io::Result<()> {
    let valid = !path.starts_with('/')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..");
    if path.is_empty() || valid {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "invalid disk path {path:?}: must be relative, '/'-separated, without '.' or '..'"
            ),
        ))
    }
}

/// The parent directory of a path ("" for the root).
pub(crate) fn parent_of(path: &str) -> &str {
    path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("")
}

/// Joins a directory and a name.
pub fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl Disk {
    /// A disk rooted at a host directory, created if missing.
    pub fn real(root: impl Into<PathBuf>) -> io::Result<Disk> {
        Ok(Disk {
            kind: DiskKind::Real(real::RealDisk::new(root.into())?),
        })
    }

    /// A simulated disk. The caller keeps a clone of `mem` to crash it and inspect it.
    pub fn mem(mem: MemDisk) -> Disk {
        Disk {
            kind: DiskKind::Mem(mem),
        }
    }

    /// Creates a directory and its missing parents.
    pub async fn create_dir_all(&self, dir: &str) -> io::Result<()> {
        check_path(dir)?;
        match &self.kind {
            DiskKind::Real(d) => d.create_dir_all(dir),
            DiskKind::Mem(d) => d.create_dir_all(dir),
        }
    }

    pub async fn open(&self, path: &str, mode: OpenMode) -> io::Result<File> {
        check_path(path)?;
        let kind = match &self.kind {
            DiskKind::Real(d) => FileKind::Real(d.open(path, mode)?),
            DiskKind::Mem(d) => FileKind::Mem(d.open(path, mode)?),
        };
        Ok(File {
            kind,
            path: path.to_string(),
        })
    }

    pub async fn exists(&self, path: &str) -> io::Result<bool> {
        check_path(path)?;
        match &self.kind {
            DiskKind::Real(d) => Ok(d.exists(path)),
            DiskKind::Mem(d) => d.exists(path),
        }
    }

    /// The names (not paths) of the entries of a directory, sorted.
    pub async fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        check_path(dir)?;
        match &self.kind {
            DiskKind::Real(d) => d.list(dir),
            DiskKind::Mem(d) => d.list(dir),
        }
    }

    pub async fn remove(&self, path: &str) -> io::Result<()> {
        check_path(path)?;
        match &self.kind {
            DiskKind::Real(d) => d.remove(path),
            DiskKind::Mem(d) => d.remove(path),
        }
    }

    /// Renames `from` to `to`, atomically replacing `to` if it exists.
    pub async fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        check_path(from)?;
        check_path(to)?;
        match &self.kind {
            DiskKind::Real(d) => d.rename(from, to),
            DiskKind::Mem(d) => d.rename(from, to),
        }
    }

    /// Makes the creations, renames and removals of `dir`'s entries durable.
    pub async fn sync_dir(&self, dir: &str) -> io::Result<()> {
        check_path(dir)?;
        match &self.kind {
            DiskKind::Real(d) => d.sync_dir(dir).await,
            DiskKind::Mem(d) => d.sync_dir(dir).await,
        }
    }

    /// Locks `path` against other processes for as long as the returned guard lives (Kafka's
    /// `.lock` in each log directory), so two brokers never open one directory. A simulated
    /// disk belongs to one node and needs no lock.
    pub async fn lock(&self, path: &str) -> io::Result<DirLock> {
        check_path(path)?;
        match &self.kind {
            DiskKind::Real(d) => Ok(DirLock {
                _file: Some(d.lock_exclusive(path)?),
            }),
            DiskKind::Mem(_) => Ok(DirLock { _file: None }),
        }
    }

    /// The size and free space of the file system holding the disk's root.
    pub async fn space(&self) -> io::Result<DiskSpace> {
        match &self.kind {
            DiskKind::Real(d) => d.space().await,
            DiskKind::Mem(_) => Ok(MEM_DISK_SPACE),
        }
    }

    /// The root as a host path (absolute when it can be made so), or `None` for a
    /// simulated disk: what DescribeLogDirs names the log directory.
    pub fn root_path(&self) -> Option<String> {
        match &self.kind {
            DiskKind::Real(d) => Some(d.root_path()),
            DiskKind::Mem(_) => None,
        }
    }

    /// A fault point (`rt::fault`): asks the simulation's injector, if this disk has one, what
    /// happens here. A real disk never has one, so in production this is `Ok(())` at once.
    /// `Err` is an injected IO error, to be handled as any IO error of the operation the point
    /// stands for; a halt never returns.
    pub async fn fault(&self, point: FaultPoint) -> io::Result<()> {
        match &self.kind {
            DiskKind::Real(_) => Ok(()),
            DiskKind::Mem(d) => d.fault(point).await,
        }
    }

    /// Whether fault points of this disk can fire (a simulated disk with an injector), so
    /// that a caller can skip gathering what a point needs to know in production.
    pub fn has_fault_injector(&self) -> bool {
        match &self.kind {
            DiskKind::Real(_) => false,
            DiskKind::Mem(d) => d.has_fault_injector(),
        }
    }

    /// Reads a whole file.
    pub async fn read_file(&self, path: &str) -> io::Result<Bytes> {
        let file = self.open(path, OpenMode::Existing).await?;
        let len = file.len().await?;
        let len = usize::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{path}: too large to read whole"),
            )
        })?;
        file.read_at(0, len).await
    }

    /// Replaces a file's contents durably and atomically: writes `path.tmp`, syncs it, renames
    /// it over `path` and syncs the directory. A crash leaves either the old or the new file.
    pub async fn write_file_atomic(&self, path: &str, data: &[u8]) -> io::Result<()> {
        let tmp = format!("{path}.tmp");
        let file = self.open(&tmp, OpenMode::Truncate).await?;
        file.write_at(0, data).await?;
        file.sync().await?;
        drop(file);
        self.fault(FaultPoint::DiskReplaceBeforeRename).await?;
        self.rename(&tmp, path).await?;
        self.sync_dir(parent_of(path)).await
    }
}

impl File {
    /// The path this file was opened with.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Reads up to `len` bytes at `pos`; fewer only at the end of the file.
    pub async fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        match &self.kind {
            FileKind::Real(f) => f.read_at(pos, len),
            FileKind::Mem(f) => f.read_at(pos, len),
        }
    }

    /// [`File::read_at`] for background reads of data that is probably not in the page cache
    /// (the scrubber's): on a real file the read runs on a blocking thread, so a slow disk
    /// never stalls a task worker that serves connections (serving reads stay inline: they
    /// read recent, cached data, where a thread hop would cost more than the read). The same
    /// as `read_at` on a simulated file.
    pub async fn read_at_in_background(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        match &self.kind {
            FileKind::Real(f) => f.read_at_blocking(pos, len).await,
            FileKind::Mem(f) => f.read_at(pos, len),
        }
    }

    /// Writes all of `data` at `pos`, extending the file if needed. Not durable until
    /// [`File::sync`].
    pub async fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        match &self.kind {
            FileKind::Real(f) => f.write_at(pos, data),
            FileKind::Mem(f) => f.write_at(pos, data).await,
        }
    }

    /// Writes `parts`, concatenated, at `pos` as one write (`pwritev` on a real file, one
    /// write for a simulated crash to tear), extending the file if needed. Lets a caller store
    /// a patched header followed by a shared buffer without copying the buffer. Not durable
    /// until [`File::sync`].
    pub async fn write_vectored_at(&self, pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        match &self.kind {
            FileKind::Real(f) => f.write_vectored_at(pos, parts),
            FileKind::Mem(f) => f.write_at(pos, &parts.concat()).await,
        }
    }

    /// Makes every completed write to this file durable (`fdatasync`).
    pub async fn sync(&self) -> io::Result<()> {
        match &self.kind {
            FileKind::Real(f) => f.sync().await,
            FileKind::Mem(f) => f.sync().await,
        }
    }

    /// Asks the OS to drop the file's pages from its page cache (`posix_fadvise` with
    /// `POSIX_FADV_DONTNEED`; dirty pages must be synced first to go), so that a benchmark
    /// can read it cold. A no-op on a simulated file and off Linux.
    pub fn drop_cache(&self) -> io::Result<()> {
        match &self.kind {
            #[cfg(all(target_os = "linux", not(feature = "sim")))]
            FileKind::Real(f) => {
                // SAFETY: the descriptor is open for as long as `f` lives; fadvise only
                // advises the kernel about the file's cached pages.
                let rc =
                    unsafe { libc::posix_fadvise(f.raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(io::Error::from_raw_os_error(rc))
                }
            }
            _ => Ok(()),
        }
    }

    /// Truncates or extends the file to `len` bytes. Not durable until [`File::sync`].
    pub async fn set_len(&self, len: u64) -> io::Result<()> {
        match &self.kind {
            FileKind::Real(f) => f.set_len(len),
            FileKind::Mem(f) => f.set_len(len),
        }
    }

    /// The file's current length, including unsynced writes.
    pub async fn len(&self) -> io::Result<u64> {
        match &self.kind {
            FileKind::Real(f) => f.len(),
            FileKind::Mem(f) => f.len(),
        }
    }

    /// The host file descriptor behind a real file, for `rt::net`'s zero-copy send; `None` for
    /// a simulated file, which has none. The descriptor stays open while this `File` (or any
    /// clone of it) lives, even if the file is removed meanwhile.
    #[cfg(all(target_os = "linux", not(feature = "sim")))]
    pub(crate) fn raw_fd(&self) -> Option<std::os::unix::io::RawFd> {
        match &self.kind {
            FileKind::Real(f) => Some(f.raw_fd()),
            FileKind::Mem(_) => None,
        }
    }
}
