//! PM QoS latency requests (`system.latency`, knobs `latency.cpuN` and
//! `latency.global`; docs/latency.md): what an idle state may cost in
//! wake-up time.
//!
//! - **Per-CPU resume latency**,
//!   `/sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us`: a plain
//!   sysfs file, written and journalled like every knob. Its encodings are
//!   the kernel's (drivers/base/power/sysfs.c): `0` means *no constraint*
//!   and reads back `0`; `n/a` means 0 µs tolerated (no idle state at all)
//!   and reads back `n/a`; negative values and `2147483647` are EINVAL.
//!   [`crate::knobs::resume_latency_text`] renders a tolerance.
//! - **The global CPU latency request**, `/dev/cpu_dma_latency`: the kernel
//!   keeps a request only while the file descriptor that made it stays
//!   open, and drops it when the descriptor closes — by `close`, exit, or
//!   SIGKILL alike. [`CpuLatencyRequest`] holds that descriptor: it opens it
//!   on the first value, writes each new value as a 4-byte native-endian
//!   `s32` in µs, and closes it when no value is wanted. Reading the device
//!   returns the aggregate of all requests as 4 bytes (`2000000000`,
//!   `PM_QOS_CPU_LATENCY_DEFAULT_VALUE`, when none is held). Nothing is
//!   journalled: there is nothing to restore.
//!
//! On a fake tree (`--root DIR`) there is no kernel to hold a request: the
//! held value is written as the same 4 bytes to `DIR/dev/cpu_dma_latency`
//! (so tests can read it) and the file is removed when the request closes
//! (also when the daemon stops; a SIGKILLed daemon leaves it behind, where a
//! kernel would have dropped the request).

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use nix::fcntl::OFlag;

use super::error::{Error, Result};
use super::root::Root;

/// The CPU latency QoS device.
pub(crate) use crate::knobs::latency::CPU_DMA_LATENCY;

/// What `/dev/cpu_dma_latency` reads when no request is held
/// (`PM_QOS_CPU_LATENCY_DEFAULT_VALUE`).
#[cfg(test)]
pub(crate) const DEFAULT_CPU_LATENCY_US: i32 = 2_000_000_000;

/// Decodes the 4 bytes `/dev/cpu_dma_latency` reads (native-endian `s32`).
#[cfg(test)]
pub(crate) fn decode_cpu_latency(bytes: &[u8]) -> Option<i32> {
    let b: [u8; 4] = bytes.get(..4)?.try_into().ok()?;
    Some(i32::from_ne_bytes(b))
}

/// The daemon's one request on `/dev/cpu_dma_latency` (module docs).
/// Dropping it closes the request.
#[derive(Debug)]
pub(crate) struct CpuLatencyRequest {
    root: Root,
    held: Option<Held>,
}

#[derive(Debug)]
struct Held {
    /// The open device; `None` on a fake tree (the value is in a file).
    fd: Option<fs::File>,
    us: u64,
}

impl CpuLatencyRequest {
    pub(crate) fn new(root: Root) -> Self {
        CpuLatencyRequest { root, held: None }
    }

    /// The value this request holds, `None` when it holds none.
    pub(crate) fn held(&self) -> Option<u64> {
        self.held.as_ref().map(|h| h.us)
    }

    /// Holds `us` (opening the request if needed), or closes the request
    /// for `None`. Values above `i32::MAX` are clamped (the policy caps them
    /// at 2000000000 anyway). On an error the previous state stays.
    pub(crate) fn set(&mut self, us: Option<u64>) -> Result<()> {
        let path = Path::new(CPU_DMA_LATENCY);
        let Some(us) = us else {
            if let Some(h) = self.held.take() {
                if h.fd.is_none() {
                    match self.root.remove_file(path) {
                        Err(e) if !e.is_not_found() => return Err(e),
                        _ => {}
                    }
                }
                // A real descriptor closes here: the kernel drops the request.
                drop(h);
            }
            return Ok(());
        };
        let value = i32::try_from(us).unwrap_or(i32::MAX);
        let bytes = value.to_ne_bytes();
        match self.root.emulation() {
            Some(fake) => {
                if let Some(dir) = path.parent() {
                    self.root.mkdir_all(dir)?;
                }
                fake.replace_bytes(&self.root, path, &bytes)?;
                self.held = Some(Held { fd: None, us });
            }
            None => {
                let prev = self.held();
                let mut fd = match self.held.take() {
                    Some(Held { fd: Some(fd), .. }) => fd,
                    _ => self.root.open_beneath("open", path, OFlag::O_RDWR, 0)?,
                };
                // One write(2) of exactly 4 bytes: the kernel takes it as a
                // binary s32 (other lengths are parsed as text).
                let done = loop {
                    match fd.write(&bytes) {
                        Ok(n) => break Ok(n),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => break Err(e),
                    }
                };
                let result = match done {
                    Ok(4) => Ok(()),
                    Ok(n) => Err(Error::other(
                        path,
                        format!("short write: {n} of 4 bytes accepted"),
                    )),
                    Err(e) => Err(Error::io("write", path, e)),
                };
                // A descriptor that held a value stays open on a failed
                // write (that value is still in force); a new one that never
                // held any closes again.
                match (&result, prev) {
                    (Ok(()), _) => self.held = Some(Held { fd: Some(fd), us }),
                    (Err(_), Some(p)) => {
                        self.held = Some(Held {
                            fd: Some(fd),
                            us: p,
                        })
                    }
                    (Err(_), None) => drop(fd),
                }
                result?;
            }
        }
        Ok(())
    }
}

impl Drop for CpuLatencyRequest {
    /// A real descriptor closes by itself (the kernel drops the request); on
    /// a fake tree the file that stands for it goes too (best effort: a
    /// failure here only leaves a test's file behind).
    fn drop(&mut self) {
        if self.held.as_ref().is_some_and(|h| h.fd.is_none()) {
            let _ = self.set(None);
        }
    }
}

/// Reads the current aggregate of `/dev/cpu_dma_latency` (4 bytes); on a
/// fake tree the held value, or the kernel default when no file is there.
#[cfg(test)]
pub(crate) fn read_cpu_latency(root: &Root) -> Result<i32> {
    use std::io::Read;
    let path = Path::new(CPU_DMA_LATENCY);
    let mut f = match fs::File::open(root.host_path(path)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound && root.emulation().is_some() => {
            return Ok(DEFAULT_CPU_LATENCY_US)
        }
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let mut buf = [0u8; 4];
    f.read_exact(&mut buf)
        .map_err(|e| Error::io("read", path, e))?;
    Ok(i32::from_ne_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use tempfile::TempDir;

    #[test]
    fn fake_request_writes_four_bytes_and_removes_on_close() {
        let t = TempDir::new().unwrap();
        fs::create_dir_all(t.path().join("sys/fs/cgroup")).unwrap();
        let r = Root::fake(t.path());
        let file = t.path().join("dev/cpu_dma_latency");
        let mut q = CpuLatencyRequest::new(r.clone());
        assert_eq!(read_cpu_latency(&r).unwrap(), DEFAULT_CPU_LATENCY_US);
        q.set(Some(0)).unwrap();
        assert_eq!(fs::read(&file).unwrap(), 0i32.to_ne_bytes());
        assert_eq!(q.held(), Some(0));
        q.set(Some(100)).unwrap();
        assert_eq!(decode_cpu_latency(&fs::read(&file).unwrap()), Some(100));
        assert_eq!(read_cpu_latency(&r).unwrap(), 100);
        q.set(None).unwrap();
        assert!(!file.exists());
        assert_eq!(q.held(), None);
        q.set(None).unwrap();
        assert_eq!(read_cpu_latency(&r).unwrap(), DEFAULT_CPU_LATENCY_US);
    }

    #[test]
    fn real_open_error_names_the_device() {
        let t = TempDir::new().unwrap();
        let mut q = CpuLatencyRequest::new(Root::real_at(t.path()));
        let e = q.set(Some(5)).unwrap_err().to_string();
        assert!(e.contains("/dev/cpu_dma_latency"), "{e}");
        assert_eq!(q.held(), None);
    }

    #[test]
    fn paths_and_decoding() {
        assert_eq!(
            crate::knobs::latency::resume_latency_path(7),
            PathBuf::from("/sys/devices/system/cpu/cpu7/power/pm_qos_resume_latency_us")
        );
        assert_eq!(decode_cpu_latency(&[1, 2]), None);
        assert_eq!(
            decode_cpu_latency(&DEFAULT_CPU_LATENCY_US.to_ne_bytes()),
            Some(2_000_000_000)
        );
    }
}
