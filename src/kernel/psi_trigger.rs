//! PSI triggers (Documentation/accounting/psi.rst, "Monitoring for pressure
//! thresholds"): the kernel side of `G.memory.some > 150ms/1s`.
//!
//! A trigger is registered by writing `"<some|full> <stall µs> <window µs>"`
//! to an open pressure file (`/proc/pressure/{cpu,memory,io}` or a group's
//! `{cpu,memory,io}.pressure`); the same fd then reports `POLLPRI` whenever
//! the stall time within the window exceeds the amount (at most once per
//! window). The trigger lives exactly as long as the fd: closing it (dropping
//! [`PsiTrigger`]) unregisters it. One fd holds at most one trigger (a second
//! write fails with EBUSY), so cgwarden opens one fd per trigger.
//!
//! This module only registers; `daemon::watch` waits on the fd.
//!
//! # Kernel rules this module relies on
//! - The window must be 500 ms – 10 s and the amount 1 µs – window (EINVAL
//!   otherwise); [`open`] checks this before writing.
//! - Without `CAP_SYS_RESOURCE` (checked by the kernel against the opener's
//!   credentials), kernels ≥ 6.4 accept only windows that are a multiple of
//!   2 s (EINVAL otherwise); older kernels refuse unprivileged triggers
//!   outright (EPERM). Both become [`TriggerError::Unsupported`]: the caller
//!   evaluates the condition by polling the `total=` counter instead.
//! - `/proc/pressure/*` writes: the kernel overwrites the *last byte* of the
//!   written buffer with NUL, so the spec must end with `\n` (the newline is
//!   sacrificed, not the last digit of the window). cgroup files accept the
//!   same text. The spec is written in one `write(2)`.
//! - When the group is removed while the fd is open, the kernel destroys the
//!   trigger and wakes the poller; from then on `poll` reports
//!   `POLLERR | POLLPRI` and reads fail with ENODEV. Callers treat that as
//!   "gone" (the group was deleted: it is recreated at the next tick and the
//!   trigger registered again).

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::statfs::{fstatfs, CGROUP2_SUPER_MAGIC, CGROUP_SUPER_MAGIC, PROC_SUPER_MAGIC};

use super::error::Error;
use super::root::{Op, Root};

/// Shortest window the kernel accepts.
pub(crate) const WINDOW_MIN: Duration = Duration::from_millis(500);
/// Longest window the kernel accepts.
pub(crate) const WINDOW_MAX: Duration = Duration::from_secs(10);
/// Unprivileged triggers need a window that is a multiple of this.
pub(crate) const UNPRIVILEGED_WINDOW_UNIT: Duration = Duration::from_secs(2);

const CAP_SYS_RESOURCE: u32 = 24;

/// Device path of a pressure file: `/proc/pressure/<resource>` for the whole
/// system (`cgroup_dir == None`), `<cgroup_dir>/<resource>.pressure` for a
/// group. `resource` is `cpu`, `memory` or `io` (not checked here).
#[cfg(test)]
pub(crate) fn pressure_path(cgroup_dir: Option<&Path>, resource: &str) -> PathBuf {
    match cgroup_dir {
        None => Path::new("/proc/pressure").join(resource),
        Some(dir) => dir.join(format!("{resource}.pressure")),
    }
}

/// Why a trigger could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum TriggerError {
    /// A fake tree (`--root`): there is no kernel to register with. Poll instead.
    #[error("{path}: PSI triggers need a real kernel (fake root); polling instead")]
    NotKernel { path: PathBuf },
    /// The kernel (or this file) does not support this trigger; poll instead.
    #[error("{path}: PSI trigger {spec:?} not supported: {reason}")]
    Unsupported {
        path: PathBuf,
        spec: String,
        reason: String,
    },
    /// The pressure file (its group) does not exist or was removed meanwhile.
    #[error("{path}: pressure file gone (group removed?)")]
    Gone { path: PathBuf },
    /// Arguments the kernel would reject; a caller bug (the policy validator
    /// already restricts windows to 500ms–10s).
    #[error("{path}: invalid PSI trigger {spec:?}: {reason}")]
    Invalid {
        path: PathBuf,
        spec: String,
        reason: String,
    },
    /// Any other failure (the error names the device path and operation).
    #[error(transparent)]
    Io(#[from] Error),
}

/// A registered PSI trigger: an open pressure file whose fd reports
/// `POLLPRI` on each threshold crossing. Dropping it closes the fd, which
/// unregisters the trigger.
#[derive(Debug)]
pub struct PsiTrigger {
    fd: OwnedFd,
    path: PathBuf,
    spec: String,
}

impl PsiTrigger {
    /// Device path of the pressure file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The spec as written, without the trailing newline, e.g. `some 150000 1000000`.
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// Wraps an arbitrary fd (tests of the waiting side).
    #[cfg(test)]
    pub(crate) fn from_fd_for_test(fd: OwnedFd, path: impl Into<PathBuf>) -> PsiTrigger {
        PsiTrigger {
            fd,
            path: path.into(),
            spec: "test".into(),
        }
    }
}

impl AsFd for PsiTrigger {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for PsiTrigger {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The trigger text (without newline) for `stall` (`some`/`full`), stall
/// `amount` and `window`, both in whole microseconds.
pub(crate) fn trigger_spec(stall: &str, amount: Duration, window: Duration) -> String {
    format!("{stall} {} {}", amount.as_micros(), window.as_micros())
}

fn validate(stall: &str, amount: Duration, window: Duration) -> Result<(), String> {
    if stall != "some" && stall != "full" {
        return Err(format!("stall must be \"some\" or \"full\", not {stall:?}"));
    }
    if window < WINDOW_MIN || window > WINDOW_MAX {
        return Err(format!(
            "window {window:?} outside {WINDOW_MIN:?}..={WINDOW_MAX:?}"
        ));
    }
    if amount.as_micros() == 0 || amount > window {
        return Err(format!(
            "stall amount {amount:?} must be at least 1µs and at most the window {window:?}"
        ));
    }
    Ok(())
}

/// True if the window is a multiple of 2 s (what unprivileged triggers need).
pub(crate) fn unprivileged_window_ok(window: Duration) -> bool {
    window
        .as_micros()
        .is_multiple_of(UNPRIVILEGED_WINDOW_UNIT.as_micros())
}

/// Whether this process has `CAP_SYS_RESOURCE` in its effective set
/// (`CapEff` bit 24 of `/proc/self/status`); `None` if unknown.
pub fn has_cap_sys_resource(root: &Root) -> Option<bool> {
    let status = root.read(Path::new("/proc/self/status")).ok()?;
    parse_cap_eff(&status).map(|caps| caps & (1u64 << CAP_SYS_RESOURCE) != 0)
}

fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// Registers a trigger on `pressure_file` (a device path, see
/// [`pressure_path`]): stall `stall` (`"some"`/`"full"`) for more than
/// `amount` within `window`.
///
/// Refuses on a fake root ([`TriggerError::NotKernel`]) and on a file that is
/// not on procfs or cgroupfs ([`TriggerError::Unsupported`]: writing the spec
/// to a plain file would just store it, and a plain file never reports
/// `POLLPRI`). Never blocks: the file is opened `O_NONBLOCK`.
pub fn open(
    root: &Root,
    pressure_file: &Path,
    stall: &str,
    amount: Duration,
    window: Duration,
) -> Result<PsiTrigger, TriggerError> {
    let path = Root::normalize(pressure_file);
    let spec = trigger_spec(stall, amount, window);
    if let Err(reason) = validate(stall, amount, window) {
        return Err(TriggerError::Invalid { path, spec, reason });
    }
    if !root.supports(Op::PsiTrigger) {
        return Err(TriggerError::NotKernel { path });
    }
    let unsupported = |reason: String| TriggerError::Unsupported {
        path: path.clone(),
        spec: spec.clone(),
        reason,
    };

    let mut file = match fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(root.host_path(&path))
    {
        Ok(f) => f,
        Err(e) => {
            return Err(match e.raw_os_error() {
                Some(libc::ENOENT) | Some(libc::ENODEV) => TriggerError::Gone { path },
                Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => unsupported(format!(
                    "cannot open for writing ({e}); PSI triggers need write access"
                )),
                _ => TriggerError::Io(Error::io("open", path, e)),
            })
        }
    };

    match fstatfs(&file) {
        Ok(st) => {
            let magic = st.filesystem_type();
            if magic != PROC_SUPER_MAGIC
                && magic != CGROUP2_SUPER_MAGIC
                && magic != CGROUP_SUPER_MAGIC
            {
                return Err(unsupported(format!(
                    "not a kernel pressure file (filesystem magic {:#x}, not procfs or cgroupfs)",
                    magic.0
                )));
            }
        }
        Err(errno) => {
            return Err(TriggerError::Io(Error::io(
                "fstatfs",
                path,
                io::Error::from(errno),
            )))
        }
    }

    let text = format!("{spec}\n");
    let written = loop {
        match file.write(text.as_bytes()) {
            Ok(n) => break n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(classify_write_error(root, path, spec, window, e)),
        }
    };
    if written != text.len() {
        return Err(TriggerError::Io(Error::other(
            path,
            format!(
                "short write of PSI trigger {spec:?}: {written} of {} bytes",
                text.len()
            ),
        )));
    }
    Ok(PsiTrigger {
        fd: file.into(),
        path,
        spec,
    })
}

fn classify_write_error(
    root: &Root,
    path: PathBuf,
    spec: String,
    window: Duration,
    e: io::Error,
) -> TriggerError {
    let errno = e.raw_os_error().unwrap_or(0);
    let privileged = has_cap_sys_resource(root);
    let reason = match errno {
        libc::EINVAL | libc::EPERM
            if privileged != Some(true) && !unprivileged_window_ok(window) =>
        {
            format!(
                "{e}: without CAP_SYS_RESOURCE the kernel accepts only windows that are a \
                 multiple of 2s (kernel >= 6.4)"
            )
        }
        libc::EPERM => {
            format!("{e}: this kernel (< 6.4) allows PSI triggers only with CAP_SYS_RESOURCE")
        }
        libc::EINVAL => format!("{e}: the kernel rejected the trigger"),
        libc::EOPNOTSUPP => format!("{e}: pressure accounting is disabled for this group"),
        libc::ENOENT | libc::ENODEV => return TriggerError::Gone { path },
        libc::EBUSY => {
            return TriggerError::Io(Error::os(
                "write",
                path,
                errno,
                format!(
                    "PSI trigger {spec:?}: the fd already holds a trigger (a second trigger \
                     on the same fd); cgwarden opens one fd per trigger, so this is a bug"
                ),
            ))
        }
        _ => {
            return TriggerError::Io(Error::os(
                "write",
                path,
                errno,
                format!("PSI trigger {spec:?}"),
            ))
        }
    };
    TriggerError::Unsupported { path, spec, reason }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn pressure_paths() {
        assert_eq!(
            pressure_path(None, "memory"),
            Path::new("/proc/pressure/memory")
        );
        assert_eq!(
            pressure_path(Some(Path::new("/sys/fs/cgroup/rt")), "cpu"),
            Path::new("/sys/fs/cgroup/rt/cpu.pressure")
        );
    }

    #[test]
    fn spec_text_and_validation() {
        assert_eq!(
            trigger_spec("some", MS(150), MS(1000)),
            "some 150000 1000000"
        );
        assert!(validate("some", MS(150), MS(1000)).is_ok());
        assert!(validate("full", MS(10_000), MS(10_000)).is_ok());
        assert!(validate("both", MS(150), MS(1000)).is_err());
        assert!(validate("some", MS(150), MS(499)).is_err());
        assert!(validate("some", MS(150), MS(10_001)).is_err());
        assert!(validate("some", Duration::ZERO, MS(1000)).is_err());
        assert!(validate("some", MS(1001), MS(1000)).is_err());
        assert!(unprivileged_window_ok(MS(2000)));
        assert!(unprivileged_window_ok(MS(4000)));
        assert!(!unprivileged_window_ok(MS(1000)));
        assert!(!unprivileged_window_ok(MS(2500)));
    }

    #[test]
    fn cap_eff() {
        assert_eq!(
            parse_cap_eff("Name:\tx\nCapEff:\t000001ffffffffff\n"),
            Some(0x1ff_ffff_ffff)
        );
        assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
        assert_eq!(parse_cap_eff(""), None);
        let no_sys_resource = parse_cap_eff("CapEff:\t000001fffeffffff\n").unwrap();
        assert_eq!(no_sys_resource & (1 << CAP_SYS_RESOURCE), 0);
    }

    #[test]
    fn fake_root_is_not_kernel() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        fs::create_dir_all(t.path().join("proc/pressure")).unwrap();
        fs::write(
            t.path().join("proc/pressure/memory"),
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        let p = pressure_path(None, "memory");
        let e = open(&r, &p, "some", MS(150), MS(1000)).unwrap_err();
        assert!(
            matches!(&e, TriggerError::NotKernel { path } if path == &p),
            "{e}"
        );
        assert!(e.to_string().starts_with("/proc/pressure/memory: "), "{e}");
        // The fake file is untouched.
        assert!(fs::read_to_string(t.path().join("proc/pressure/memory"))
            .unwrap()
            .starts_with("some avg10"));
        // Invalid arguments are reported before anything else.
        let e = open(&r, &p, "any", MS(150), MS(1000)).unwrap_err();
        assert!(matches!(e, TriggerError::Invalid { .. }), "{e}");
    }

    #[test]
    fn plain_file_on_real_root_is_unsupported_and_untouched() {
        let t = TempDir::new().unwrap();
        let r = Root::real_at(t.path());
        fs::create_dir_all(t.path().join("g")).unwrap();
        fs::write(t.path().join("g/memory.pressure"), "x\n").unwrap();
        let p = pressure_path(Some(Path::new("/g")), "memory");
        let e = open(&r, &p, "some", MS(150), MS(1000)).unwrap_err();
        match &e {
            TriggerError::Unsupported { path, reason, .. } => {
                assert_eq!(path, Path::new("/g/memory.pressure"));
                assert!(reason.contains("not a kernel pressure file"), "{reason}");
            }
            other => panic!("{other}"),
        }
        assert_eq!(
            fs::read_to_string(t.path().join("g/memory.pressure")).unwrap(),
            "x\n"
        );
        // Missing file (group removed): Gone, with the device path.
        let p = pressure_path(Some(Path::new("/nope")), "memory");
        let e = open(&r, &p, "some", MS(150), MS(1000)).unwrap_err();
        assert!(
            matches!(&e, TriggerError::Gone { path } if path == Path::new("/nope/memory.pressure")),
            "{e}"
        );
    }
}
