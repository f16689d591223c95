//! Kernel-access layer: every read and write of a kernel interface file
//! (`/sys`, `/proc`, cgroupfs) and every kernel syscall cgwarden makes goes
//! through this module.
//!
//! All file access goes through [`Root`], which maps absolute device paths
//! under a base directory so that the same code runs against the real kernel
//! (`Root::real()`) and against a fake tree of plain files (`--root DIR`,
//! `Root::fake(dir)`). Parsers turn kernel file formats into typed values and
//! tolerate unknown or missing lines. Errors always carry the device path (as
//! the user would see it on the target) and the operation.

pub(crate) mod accounts;
pub(crate) mod board;
pub(crate) mod boot;
pub(crate) mod capture;
pub(crate) mod cgroup_text;
pub(crate) mod cgroupfs;
pub(crate) mod cpufreq;
pub(crate) mod error;
pub(crate) mod fake_tree;
pub(crate) mod hook_run;
pub(crate) mod identity;
pub(crate) mod irq;
pub(crate) mod knob_files;
pub(crate) mod meminfo;
pub(crate) mod memstat;
pub(crate) mod pm_qos;
pub(crate) mod proc_events;
pub mod procfs;
pub(crate) mod psi;
pub mod psi_trigger;
pub(crate) mod realtime;
pub(crate) mod residency;
pub(crate) mod root;
pub(crate) mod runtime; // a named thread with its own tokio runtime
pub(crate) mod sched;
pub(crate) mod selfproc;
#[cfg(feature = "top")]
pub(crate) mod signals;
pub(crate) mod task_attr;
pub(crate) mod thermal;
#[cfg(feature = "report")]
pub(crate) mod topology; // the CPU clusters `soak` loads
pub(crate) mod trust;
pub(crate) mod uevent;
pub(crate) mod wait;
pub(crate) mod xattr;
pub(crate) mod zram;

pub(crate) use error::{Error, Result};
pub(crate) use root::{Op, Root};
