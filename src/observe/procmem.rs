//! The memory of the processes the report judges: per
//! process, `VmRSS` every recorder interval and `Pss:` of
//! `/proc/PID/smaps_rollup` at most once per [`PSS_EVERY`], for the
//! processes named in `report.criteria.processes` and those matching a
//! `settings.critical` glob (docs/threads.md). The report's
//! `memory_growth` per process prefers the PSS series (shared pages divided
//! among their sharers, so a library mapped by every process does not count
//! in full for each) and falls back to RSS when no PSS was recorded.
//!
//! Why a slower cadence for PSS: the kernel builds smaps_rollup by walking
//! the process's page tables, so its cost grows with the resident set —
//! measured on the 2-core x86-64 CI host: ~80 µs for `sleep` (43 mappings),
//! ~330 µs for a Python interpreter, ~50 ms for a 2.5 GiB process with
//! 2 100 mappings — where `status` costs ~40 µs. Once a minute keeps a
//! large critical process under a thousandth of a core; growth is judged
//! on hour-long medians, which a minute's resolution does not change.

use crate::kernel::{procfs, Root};
use glob::Pattern;
use std::time::Duration;

/// PSS is read at most this often (the recorder's interval when slower).
pub(crate) const PSS_EVERY: Duration = Duration::from_secs(60);

/// One process row of the recorder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProcRow {
    pub(crate) comm: String,
    pub(crate) pid: i32,
    /// `VmRSS`, bytes.
    pub(crate) rss: u64,
    /// `Pss:` of smaps_rollup, bytes; `None` when not read this interval
    /// or unreadable (older kernel, no permission, a process gone between
    /// the two reads).
    pub(crate) pss: Option<u64>,
}

/// Which processes to read: exact comms and `settings.critical` globs.
#[derive(Clone, Debug, Default)]
pub(crate) struct Selection {
    names: Vec<String>,
    critical: Vec<Pattern>,
}

impl Selection {
    pub(crate) fn new(names: &[String], critical: &[String]) -> Selection {
        Selection {
            names: names.to_vec(),
            critical: crate::engine::resort::compile(critical),
        }
    }

    fn is_empty(&self) -> bool {
        self.names.is_empty() && self.critical.is_empty()
    }

    fn wants(&self, comm: &str) -> bool {
        self.names.iter().any(|n| n == comm) || self.critical.iter().any(|p| p.matches(comm))
    }
}

/// Reads every selected process: RSS always, PSS when `with_pss`. A process
/// whose RSS cannot be read (gone, kernel thread) is left out.
pub(crate) fn read(root: &Root, sel: &Selection, with_pss: bool) -> Vec<ProcRow> {
    if sel.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for pid in procfs::pids(root).unwrap_or_default() {
        let Ok(Some(comm)) = procfs::comm(root, pid) else {
            continue;
        };
        if !sel.wants(&comm) {
            continue;
        }
        let Ok(Some(rss)) = procfs::rss_bytes(root, pid) else {
            continue;
        };
        let pss = if with_pss {
            procfs::pss_bytes(root, pid).ok().flatten()
        } else {
            None
        };
        out.push(ProcRow {
            comm,
            pid,
            rss,
            pss,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::fake_tree::{FakeProcess, FakeTree};

    #[test]
    fn named_and_critical_processes_with_pss_when_due() {
        let t = tempfile::tempdir().unwrap();
        let tree = FakeTree::standard(t.path()).unwrap();
        for (pid, comm) in [(100, "camd"), (101, "npu-infer"), (102, "bash")] {
            tree.add_process(&FakeProcess::new(pid, comm)).unwrap();
            let status = tree.read(&format!("proc/{pid}/status")).unwrap();
            tree.file(
                &format!("proc/{pid}/status"),
                &format!("{status}VmRSS:\t    {} kB\n", 1000 * pid),
            )
            .unwrap();
        }
        tree.set_smaps_rollup(101, 101_000, 40_000).unwrap();
        let root = Root::fake(t.path());
        let sel = Selection::new(&["camd".into()], &["npu-*".into()]);
        let rows = read(&root, &sel, true);
        assert_eq!(
            rows,
            vec![
                ProcRow {
                    comm: "camd".into(),
                    pid: 100,
                    rss: 100_000 * 1024,
                    pss: Some(280 * 1024), // the fake tree's default
                },
                ProcRow {
                    comm: "npu-infer".into(),
                    pid: 101,
                    rss: 101_000 * 1024,
                    pss: Some(40_000 * 1024),
                },
            ]
        );
        // Not due: RSS only.
        assert!(read(&root, &sel, false).iter().all(|r| r.pss.is_none()));
        // An older kernel (no smaps_rollup): RSS, no PSS.
        std::fs::remove_file(t.path().join("proc/100/smaps_rollup")).unwrap();
        let rows = read(&root, &sel, true);
        assert_eq!((rows[0].rss, rows[0].pss), (100_000 * 1024, None));
        assert!(read(&root, &Selection::default(), true).is_empty());
    }

    /// The parser against this kernel's own smaps_rollup (reading our own
    /// /proc only): PSS is there, non-zero and at most the RSS.
    #[test]
    fn this_process_on_the_running_kernel() {
        let root = Root::real();
        let me = std::process::id() as i32;
        let comm = procfs::comm(&root, me).unwrap().unwrap();
        let rows = read(&root, &Selection::new(&[comm], &[]), true);
        let mine = rows.iter().find(|r| r.pid == me).expect("this process");
        let pss = mine.pss.expect("smaps_rollup has Pss: (Linux >= 4.14)");
        assert!(pss > 0 && pss <= mine.rss + (1 << 20), "{mine:?}");
    }
}
