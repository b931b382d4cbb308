//! Real files under a host directory. Writes go to the page cache with `pwrite`; durability
//! comes only from `fdatasync` (files) and `fsync` of the directory (names), which run on
//! tokio's blocking pool so a slow disk does not stall the async workers.

#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use super::OpenMode;
use bytes::{Bytes, BytesMut};
use std::fs;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub(super) struct RealDisk {
    root: Arc<PathBuf>,
}

#[derive(Clone, Debug)]
pub(super) struct RealFile {
    file: Arc<fs::File>,
}

/// Adds the path to an IO error so that it names what failed.
fn with_path(path: &Path, err: io::Error) -> io::Error {
    io::Error::new(err.kind(), format!("{}: {err}", path.display()))
}

impl RealDisk {
    pub(super) fn new(root: PathBuf) -> io::Result<RealDisk> {
        fs::create_dir_all(&root).map_err(|e| with_path(&root, e))?;
        Ok(RealDisk {
            root: Arc::new(root),
        })
    }

    /// Takes an exclusive `flock` on `path` (created if missing), held while the returned
    /// file stays open. Another process holding it makes this fail at once.
    pub(super) fn lock_exclusive(&self, path: &str) -> io::Result<fs::File> {
        use std::os::unix::io::AsRawFd;
        let full = self.full(path);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&full)
            .map_err(|e| with_path(&full, e))?;
        // SAFETY: flock on a file descriptor this function owns; no memory is shared.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = io::Error::last_os_error();
            return Err(io::Error::new(
                err.kind(),
                format!(
                    "{}: locked by another process (is another broker using this directory?): {err}",
                    full.display()
                ),
            ));
        }
        Ok(file)
    }

    fn full(&self, path: &str) -> PathBuf {
        if path.is_empty() {
            self.root.to_path_buf()
        } else {
            self.root.join(path)
        }
    }

    /// `statvfs(3)` of the root, on the blocking pool (it may touch the disk).
    pub(super) async fn space(&self) -> io::Result<super::DiskSpace> {
        let root = self.root.to_path_buf();
        let result = crate::rt::task::spawn_blocking(move || statvfs(&root)).await;
        result.map_err(io::Error::other)?
    }

    pub(super) fn root_path(&self) -> String {
        std::path::absolute(self.root.as_path())
            .unwrap_or_else(|_| self.root.to_path_buf())
            .display()
            .to_string()
    }

    pub(super) fn create_dir_all(&self, dir: &str) -> io::Result<()> {
        let full = self.full(dir);
        fs::create_dir_all(&full).map_err(|e| with_path(&full, e))
    }

    pub(super) fn open(&self, path: &str, mode: OpenMode) -> io::Result<RealFile> {
        let full = self.full(path);
        let mut options = fs::OpenOptions::new();
        options.read(true).write(true);
        match mode {
            OpenMode::Existing => {}
            OpenMode::Create => {
                options.create(true);
            }
            OpenMode::Truncate => {
                options.create(true).truncate(true);
            }
        }
        let file = options.open(&full).map_err(|e| with_path(&full, e))?;
        Ok(RealFile {
            file: Arc::new(file),
        })
    }

    pub(super) fn exists(&self, path: &str) -> bool {
        self.full(path).exists()
    }

    pub(super) fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let full = self.full(dir);
        let mut names = Vec::new();
        for entry in fs::read_dir(&full).map_err(|e| with_path(&full, e))? {
            let entry = entry.map_err(|e| with_path(&full, e))?;
            // Names that are not UTF-8 cannot be ours; skip them rather than fail the listing.
            if let Ok(name) = entry.file_name().into_string() {
                names.push(name);
            }
        }
        names.sort();
        Ok(names)
    }

    pub(super) fn remove(&self, path: &str) -> io::Result<()> {
        let full = self.full(path);
        if full.is_dir() {
            fs::remove_dir_all(&full)
        } else {
            fs::remove_file(&full)
        }
        .map_err(|e| with_path(&full, e))
    }

    pub(super) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (self.full(from), self.full(to));
        fs::rename(&from, &to).map_err(|e| with_path(&from, e))
    }

    pub(super) async fn sync_dir(&self, dir: &str) -> io::Result<()> {
        let full = self.full(dir);
        let result = crate::rt::task::spawn_blocking(move || {
            fs::File::open(&full)
                .and_then(|d| d.sync_all())
                .map_err(|e| with_path(&full, e))
        })
        .await;
        result.map_err(io::Error::other)?
    }
}

/// The most buffers one `pwritev` is given; a longer list takes several calls. Linux's
/// `IOV_MAX` is 1024; appends write two parts per batch, rarely more than a few batches.
const WRITE_IOVECS_MAX: usize = 64;

impl RealFile {
    pub(super) fn read_at(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let mut buf = BytesMut::zeroed(len);
        let mut filled = 0;
        while filled < len {
            let n = self.file.read_at(&mut buf[filled..], pos + filled as u64)?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        buf.truncate(filled);
        Ok(buf.freeze())
    }

    /// [`RealFile::read_at`] on a blocking thread (see `File::read_at_in_background`).
    pub(super) async fn read_at_blocking(&self, pos: u64, len: usize) -> io::Result<Bytes> {
        let file = self.clone();
        crate::rt::task::spawn_blocking(move || file.read_at(pos, len))
            .await
            .map_err(io::Error::other)?
    }

    pub(super) fn write_at(&self, pos: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, pos)
    }

    /// `pwritev` until every byte of `parts` is written, resuming after a short write.
    pub(super) fn write_vectored_at(&self, mut pos: u64, parts: &[&[u8]]) -> io::Result<()> {
        use std::os::unix::io::AsRawFd;
        // The first part not yet wholly written, and how much of it was.
        let mut part = 0;
        let mut skip = 0;
        while let Some(first) = parts.get(part) {
            let first = first.get(skip..).unwrap_or(&[]);
            if first.is_empty() {
                part += 1;
                skip = 0;
                continue;
            }
            let mut iov = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; WRITE_IOVECS_MAX];
            let mut count = 0;
            for (slot, data) in iov
                .iter_mut()
                .zip(std::iter::once(first).chain(parts.iter().skip(part + 1).copied()))
            {
                // pwritev only reads through the pointer; the cast is what iovec's type asks.
                *slot = libc::iovec {
                    iov_base: data.as_ptr() as *mut libc::c_void,
                    iov_len: data.len(),
                };
                count += 1;
            }
            let offset = libc::off_t::try_from(pos).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "write position beyond off_t")
            })?;
            // SAFETY: the first `count` iovecs point into slices borrowed for this call, with
            // their true lengths; `count` is at most WRITE_IOVECS_MAX, below IOV_MAX.
            let rc = unsafe {
                libc::pwritev(
                    self.file.as_raw_fd(),
                    iov.as_ptr(),
                    count as libc::c_int,
                    offset,
                )
            };
            let mut written = match usize::try_from(rc) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => n,
                Err(_) => {
                    let err = io::Error::last_os_error();
                    if err.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(err);
                }
            };
            pos += written as u64;
            // Step past what was written: whole parts, then into a part on a short write.
            while let Some(data) = parts.get(part) {
                let left = data.len().saturating_sub(skip);
                if written < left {
                    skip += written;
                    break;
                }
                written -= left;
                part += 1;
                skip = 0;
            }
        }
        Ok(())
    }

    pub(super) async fn sync(&self) -> io::Result<()> {
        let file = Arc::clone(&self.file);
        crate::rt::task::spawn_blocking(move || file.sync_data())
            .await
            .map_err(io::Error::other)?
    }

    pub(super) fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    pub(super) fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    #[cfg(all(target_os = "linux", not(feature = "sim")))]
    pub(super) fn raw_fd(&self) -> std::os::unix::io::RawFd {
        use std::os::unix::io::AsRawFd;
        self.file.as_raw_fd()
    }
}

/// The total and available bytes of the file system holding `path`.
// The statvfs field types differ between platforms (u32 on some 32-bit ones).
#[allow(clippy::useless_conversion)]
fn statvfs(path: &Path) -> io::Result<super::DiskSpace> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: path has a NUL byte", path.display()),
        )
    })?;
    // SAFETY: `stat` is a plain C struct that statvfs fills in; zeroed is a valid value of it.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a pointer to a struct this function owns.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    if rc != 0 {
        return Err(with_path(path, io::Error::last_os_error()));
    }
    let fragment = u64::from(stat.f_frsize);
    Ok(super::DiskSpace {
        total_bytes: u64::from(stat.f_blocks).saturating_mul(fragment),
        usable_bytes: u64::from(stat.f_bavail).saturating_mul(fragment),
    })
}
