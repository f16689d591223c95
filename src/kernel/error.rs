//! The error type of the kernel-access layer.
//!
//! Every error names the *device* path (the path as it is on the target, e.g.
//! `/sys/fs/cgroup/x/cpu.weight`, never the `--root` host path) and, for I/O,
//! the operation that failed. The kernel's errno stays reachable through
//! [`Error::errno`] so callers can tell EINVAL/EBUSY/ENOENT/ESRCH apart.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// An error from the kernel-access layer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A failed system call / file operation on `path`.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation, e.g. `"read"`, `"write"`, `"mkdir"`, `"sched_setattr"`.
        op: &'static str,
        /// Device path as on the target, e.g. `/sys/fs/cgroup/x/cpu.weight`.
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A kernel file held content that could not be parsed into the expected value.
    #[error("{path}: cannot parse {what} from {content:?}")]
    Parse {
        path: PathBuf,
        what: &'static str,
        content: String,
    },
    /// Anything else (refused operation, invalid argument), with the path it concerns.
    #[error("{path}: {message}")]
    Other { path: PathBuf, message: String },
}

/// An OS error plus free-text context, stored inside an [`io::Error`] so that
/// [`Error::errno`] still finds the errno. Built by [`Error::os`].
#[derive(Debug)]
struct OsErrorWithContext {
    errno: i32,
    context: String,
}

impl fmt::Display for OsErrorWithContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({})",
            io::Error::from_raw_os_error(self.errno),
            self.context
        )
    }
}

impl std::error::Error for OsErrorWithContext {}

impl Error {
    /// An I/O error on `path` (device path) during `op`.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// An I/O error from a raw errno with extra context text (e.g. the
    /// scheduling spec that was refused). [`Error::errno`] returns `errno`.
    pub(crate) fn os(
        op: &'static str,
        path: impl Into<PathBuf>,
        errno: i32,
        context: impl Into<String>,
    ) -> Error {
        let kind = io::Error::from_raw_os_error(errno).kind();
        Error::Io {
            op,
            path: path.into(),
            source: io::Error::new(
                kind,
                OsErrorWithContext {
                    errno,
                    context: context.into(),
                },
            ),
        }
    }

    /// A parse error; `content` is truncated to keep messages readable.
    pub(crate) fn parse(path: impl Into<PathBuf>, what: &'static str, content: &str) -> Error {
        const MAX: usize = 200;
        let content = if content.len() > MAX {
            let mut end = MAX;
            while !content.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}...", &content[..end])
        } else {
            content.to_string()
        };
        Error::Parse {
            path: path.into(),
            what,
            content,
        }
    }

    /// Any other error concerning `path`.
    pub(crate) fn other(path: impl Into<PathBuf>, message: impl Into<String>) -> Error {
        Error::Other {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The errno of an I/O error, if there is one.
    pub(crate) fn errno(&self) -> Option<i32> {
        match self {
            Error::Io { source, .. } => source.raw_os_error().or_else(|| {
                source
                    .get_ref()
                    .and_then(|e| e.downcast_ref::<OsErrorWithContext>())
                    .map(|c| c.errno)
            }),
            _ => None,
        }
    }

    /// True for ENOENT (the file or directory does not exist).
    pub(crate) fn is_not_found(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                self.errno() == Some(libc::ENOENT)
                    || (self.errno().is_none() && source.kind() == io::ErrorKind::NotFound)
            }
            _ => false,
        }
    }

    /// True when the error means "the process/file went away": ENOENT or ESRCH.
    /// A process that exits while we look at it is never an error for cgwarden.
    pub(crate) fn is_gone(&self) -> bool {
        self.is_not_found() || self.errno() == Some(libc::ESRCH)
    }

    /// The device path the error concerns (what the tests check).
    #[cfg(test)]
    pub(crate) fn path(&self) -> &std::path::Path {
        match self {
            Error::Io { path, .. } | Error::Parse { path, .. } | Error::Other { path, .. } => path,
        }
    }
}

/// Result type of the kernel-access layer.
pub(crate) type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn errno_and_not_found() {
        let e = Error::io("read", "/sys/x", io::Error::from_raw_os_error(libc::ENOENT));
        assert_eq!(e.errno(), Some(libc::ENOENT));
        assert!(e.is_not_found());
        assert!(e.is_gone());
        assert_eq!(e.path(), Path::new("/sys/x"));
        assert!(e.to_string().starts_with("read /sys/x: "));

        let e = Error::io(
            "read",
            "/x",
            io::Error::new(io::ErrorKind::NotFound, "gone"),
        );
        assert!(e.is_not_found());
        assert_eq!(e.errno(), None);
    }

    #[test]
    fn os_error_keeps_errno_and_context() {
        let e = Error::os(
            "sched_setattr",
            "/proc/12",
            libc::EPERM,
            "policy=fifo prio=99",
        );
        assert_eq!(e.errno(), Some(libc::EPERM));
        assert!(!e.is_not_found());
        let s = e.to_string();
        assert!(s.contains("sched_setattr /proc/12"), "{s}");
        assert!(s.contains("policy=fifo prio=99"), "{s}");
        let e = Error::os("kill", "/proc/12", libc::ESRCH, "x");
        assert!(e.is_gone());
    }

    #[test]
    fn parse_truncates_content() {
        let long = "é".repeat(300);
        let e = Error::parse("/p", "number", &long);
        match &e {
            Error::Parse { content, .. } => assert!(content.len() < 220),
            _ => unreachable!(),
        }
        assert_eq!(e.errno(), None);
        assert!(!e.is_not_found());
    }
}
