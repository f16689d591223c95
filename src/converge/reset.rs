//! `reset`: undo everything the journal records, newest first.
//!
//! The journal is checked first ([`Journal::load`]): a damaged one is an
//! error and nothing is touched — unless `--salvage` asks for the way out
//! ([`salvage`]: the trusted lines only, the file set aside). Its recorded `cgroup_root` is used, not the
//! current policy's (a v1 journal has none: the policy's is used, with a
//! warning). Every path it names must be canonical and lie under a kernel
//! interface cgwarden manages ([`super::journal::managed`]), zram devices
//! must be named `zramN`; otherwise the load fails naming the line and
//! nothing is touched. Every write, removal and rmdir then goes through
//! [`Root`], which refuses to follow a symlink out of the tree (see
//! `kernel::root`): a path that does is reported as a failure (exit 1).
//!
//! Groups cgwarden created are emptied (their processes moved to the nearest
//! ancestor it did not create) and removed deepest-first; zram devices it set
//! up are swapped off and reset; every other file gets its original content
//! back. The journal is deleted only when all of that succeeded, so a failed
//! reset can be run again.

use super::journal::{Entry, Journal};
use crate::kernel::cgroupfs::CgroupFs;
use crate::kernel::hook_run::{remove_runs, HOOKS_PARENT};
use crate::kernel::wait::page_size;
use crate::kernel::{zram, Error, Op, Root};
use crate::knobs::normalize::{self, Form};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Default)]
pub(crate) struct ResetReport {
    /// What was done, one line each (`WRITE`, `RMDIR`, `REMOVE`, `SWAPOFF`,
    /// or `# skipped on a fake root: ...`).
    pub(crate) lines: Vec<String>,
    /// What could not be done, with the error.
    pub(crate) failures: Vec<String>,
    /// What the journal check forgave (a torn last line, a v1 journal).
    pub(crate) warnings: Vec<String>,
    /// False when there was no journal: nothing had been changed.
    pub(crate) had_journal: bool,
    /// The cgroup root used (the journal's, else the policy's).
    pub(crate) cgroup_root: PathBuf,
    /// With `--salvage`: what was done with a journal that failed its check.
    pub(crate) salvaged: Option<super::journal::Salvaged>,
}

impl ResetReport {
    /// How many things were restored (lines that are not skip notes).
    pub(crate) fn restored(&self) -> usize {
        self.lines.iter().filter(|l| !l.starts_with('#')).count()
    }

    /// What `--salvage` says on stderr, one line each (without the
    /// `cgwarden: ` prefix): the lines set aside, the notes, where the
    /// damaged file went. Empty when nothing was salvaged.
    pub(crate) fn salvage_messages(&self) -> Vec<String> {
        let Some(s) = &self.salvaged else {
            return Vec::new();
        };
        let mut out: Vec<String> = s.notes.iter().map(|n| format!("note: {n}")).collect();
        out.extend(
            s.set_aside
                .iter()
                .map(|l| format!("warning: set aside, not restored: {l}")),
        );
        out.push(format!(
            "salvage: {} line(s) of the damaged journal may be restored, {} set aside; the \
             damaged file is kept as {}",
            s.kept,
            s.set_aside.len(),
            s.aside.display()
        ));
        out
    }

    /// The summary line, e.g. `reset: 35 restored, 0 failed`.
    pub(crate) fn summary(&self) -> String {
        format!(
            "reset: {} restored, {} failed",
            self.restored(),
            self.failures.len()
        )
    }
}

/// `reset --salvage` (docs/journal-recovery.md): a journal that fails its
/// check is set aside and only its lines that can be trusted are restored
/// ([`Journal::salvage`]); a journal that passes is reset as it is.
pub(crate) fn salvage(
    root: &Root,
    state_dir: &Path,
    policy_cgroup_root: &Path,
) -> Result<ResetReport, Error> {
    super::lock::refuse_managed_group(state_dir, policy_cgroup_root)?;
    let salvaged = Journal::salvage(root, state_dir, policy_cgroup_root)?;
    let mut rep = reset(root, state_dir, policy_cgroup_root)?;
    rep.salvaged = salvaged;
    Ok(rep)
}

/// The cgroup tree a `reset` of `state_dir` writes: the one its journal
/// records, else the policy's (the tree lock is taken on it).
pub(crate) fn journal_cgroup_root(
    root: &Root,
    state_dir: &Path,
    policy_cgroup_root: &Path,
) -> PathBuf {
    Journal::recorded_root(root, state_dir, policy_cgroup_root)
        .unwrap_or_else(|| Root::normalize(policy_cgroup_root))
}

/// Restores what the journal in `state_dir` records. `policy_cgroup_root`
/// is used only for a v1 journal, which does not record its own.
pub(crate) fn reset(
    root: &Root,
    state_dir: &Path,
    policy_cgroup_root: &Path,
) -> Result<ResetReport, Error> {
    super::lock::refuse_managed_group(state_dir, policy_cgroup_root)?;
    // Per-task attributes of processes that outlived cgwarden.
    let tasks = super::tuning::journal::restore(root, state_dir);
    let Some(journal) = Journal::load(root, state_dir, policy_cgroup_root)? else {
        return Ok(ResetReport {
            cgroup_root: policy_cgroup_root.to_path_buf(),
            lines: tasks.lines,
            failures: tasks.failures,
            ..Default::default()
        });
    };
    let mut rep = ResetReport {
        had_journal: true,
        warnings: journal.warnings().to_vec(),
        lines: tasks.lines,
        failures: tasks.failures,
        ..Default::default()
    };
    let cgroup_root = match journal.cgroup_root() {
        Some(r) => r.to_path_buf(),
        None => {
            rep.warnings.push(format!(
                "{}: a v1 journal does not record cgroup_root; using the policy's {}",
                journal.path().display(),
                policy_cgroup_root.display()
            ));
            Root::normalize(policy_cgroup_root)
        }
    };
    let cgroup_root = cgroup_root.as_path();
    rep.cgroup_root = cgroup_root.to_path_buf();
    let entries: Vec<Entry> = journal.entries().to_vec();
    let created: Vec<PathBuf> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Mkdir { path } => Some(path.clone()),
            _ => None,
        })
        .collect();
    let cg = CgroupFs::new(root.clone(), cgroup_root.to_path_buf());

    // 1. Groups, deepest first.
    let mut dirs = created.clone();
    dirs.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for dir in &dirs {
        if !root.is_dir(dir) {
            continue;
        }
        let Ok(rel) = dir
            .strip_prefix(cgroup_root)
            .map(|p| p.to_string_lossy().into_owned())
        else {
            rep.failures.push(format!(
                "{}: not below the cgroup root {}",
                dir.display(),
                cgroup_root.display()
            ));
            continue;
        };
        if rel == HOOKS_PARENT {
            // Runs a killed daemon left: not journalled, killed and removed
            // here so the parent can go.
            for r in remove_runs(&cg, Duration::from_secs(1)) {
                match r {
                    Ok(p) => rep.lines.push(format!("RMDIR {}", p.display())),
                    Err(e) => rep.failures.push(format!("hook run: {e}")),
                }
            }
        }
        let dest = nearest_kept_ancestor(&rel, cgroup_root, &created);
        if let Err(e) = empty_group(&cg, &rel, &dest, &mut rep) {
            rep.failures
                .push(format!("moving processes out of {}: {e}", dir.display()));
            continue;
        }
        match rmdir_retry(root, dir) {
            Ok(()) => rep.lines.push(format!("RMDIR {}", dir.display())),
            Err(e) => rep.failures.push(format!("RMDIR {}: {e}", dir.display())),
        }
    }

    // 2. Swap and zram, then plain files, newest entry first. A device whose
    // disksize cgwarden set is reset through the kernel's `reset` attribute,
    // even if mkswap never ran (ZramInit is recorded at mkswap).
    let mut zram_reset: Vec<String> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::ZramInit { device } => Some(device.clone()),
            Entry::File { path, .. } if path.file_name().is_some_and(|n| n == "disksize") => path
                .parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    zram_reset.sort();
    zram_reset.dedup();
    let mut zram_done: Vec<String> = Vec::new();
    let mut pairs_done: Vec<PathBuf> = Vec::new();
    let mut zram_restored: Vec<String> = Vec::new();
    for e in entries.iter().rev() {
        match e {
            Entry::Swapon { path } => {
                if !root.supports(Op::Swap) {
                    rep.lines.push(format!(
                        "# skipped on a fake root: SWAPOFF {}",
                        path.display()
                    ));
                    continue;
                }
                let dev = path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                if zram::in_use_as_swap(root, &dev).unwrap_or(false) {
                    match zram::swapoff(path) {
                        Ok(()) => rep.lines.push(format!("SWAPOFF {}", path.display())),
                        Err(e) => rep
                            .failures
                            .push(format!("SWAPOFF {}: {e}", path.display())),
                    }
                }
            }
            Entry::ZramInit { device } => {
                if root.supports(Op::ZramControl) {
                    reset_zram(root, device, &mut rep, &mut zram_done);
                }
            }
            Entry::ZramHotAdd { device } => {
                if !root.supports(Op::ZramControl) {
                    continue;
                }
                let id = device.trim_start_matches("zram");
                let p = Path::new(crate::kernel::zram::HOT_REMOVE);
                match root.write(p, id) {
                    Ok(()) => rep.lines.push(format!("WRITE {} {id}", p.display())),
                    Err(e) => rep
                        .failures
                        .push(format!("WRITE {} {id}: {e}", p.display())),
                }
            }
            Entry::File { path, content } => {
                if created.iter().any(|d| path.starts_with(d)) {
                    continue;
                }
                if root.supports(Op::ZramControl) {
                    if let Some(dev) = zram_device_of(path, &zram_reset) {
                        // The kernel's zram `reset` zeroes disksize and mem_limit but
                        // keeps the chosen algorithm, which can only be written while
                        // the device is reset. After the reset the device's journalled
                        // originals go back in the order the kernel accepts:
                        // algorithm, then a non-zero disksize (a device someone else
                        // had initialised), then mem_limit.
                        reset_zram(root, &dev, &mut rep, &mut zram_done);
                        restore_zram_config(root, &dev, &entries, &mut rep, &mut zram_restored);
                        continue;
                    }
                }
                if root.supports(Op::ZramControl) && zram::is_write_only(path) {
                    write_blind(root, path, content.trim(), &mut rep);
                    continue;
                }
                if let Some((amount, ratio)) = crate::knobs::coupled(path) {
                    restore_pair(root, &amount, &ratio, &entries, &mut rep, &mut pairs_done);
                    continue;
                }
                restore_file(root, path, content, &mut rep);
            }
            Entry::Absent { path } => {
                if created.iter().any(|d| path.starts_with(d)) || !root.supports(Op::CreateFile) {
                    continue;
                }
                match root.remove_file(path) {
                    Ok(()) => rep.lines.push(format!("REMOVE {}", path.display())),
                    Err(e) if e.is_not_found() => {}
                    Err(e) => rep.failures.push(format!("REMOVE {}: {e}", path.display())),
                }
            }
            Entry::Mkdir { .. } => {}
            Entry::Kthread {
                pid,
                comm,
                sched,
                cpus,
            } => restore_kthread(root, *pid, comm, sched, cpus, &mut rep),
        }
    }
    if rep.failures.is_empty() {
        journal.remove()?;
    }
    Ok(rep)
}

fn zram_device_of(path: &Path, devices: &[String]) -> Option<String> {
    devices
        .iter()
        .find(|d| path.starts_with(zram::device_dir(d)))
        .cloned()
}

/// Writes back, once per device, the journalled originals of a reset zram
/// device: `comp_algorithm` (its active choice), then `disksize` and
/// `mem_limit` when they were non-zero.
fn restore_zram_config(
    root: &Root,
    dev: &str,
    entries: &[Entry],
    rep: &mut ResetReport,
    done: &mut Vec<String>,
) {
    if done.iter().any(|d| d == dev) {
        return;
    }
    done.push(dev.to_string());
    let original = |attr: &str| {
        let p = zram::attr_path(dev, attr);
        entries.iter().find_map(|e| match e {
            Entry::File { path, content } if *path == p => Some((p.clone(), content.clone())),
            _ => None,
        })
    };
    if let Some((p, content)) = original("comp_algorithm") {
        let alg = normalize::display(Form::Bracketed, &content);
        if !alg.is_empty() {
            restore_file(root, &p, &alg, rep);
        }
    }
    if let Some((p, content)) = original("disksize") {
        let v = content.trim();
        if !v.is_empty() && v != "0" {
            restore_file(root, &p, v, rep);
        }
    }
    if let Some((p, content)) = original("mem_limit") {
        let v = content.trim();
        if !v.is_empty() && v != "0" {
            write_blind(root, &p, v, rep);
        }
    }
}

/// Restores a pair of coupled sysctls ([`crate::knobs::coupled`])
/// once: the amount when its original is not 0 (writing it zeroes the
/// ratio, as it was), else the ratio (writing it zeroes the amount, which the
/// kernel refuses to be written 0 for `dirty_bytes`). A journal of an older
/// cgwarden may lack the ratio's original: then an amount that was 0 cannot
/// be put back, and the failure says what to write by hand.
fn restore_pair(
    root: &Root,
    amount: &Path,
    ratio: &Path,
    entries: &[Entry],
    rep: &mut ResetReport,
    done: &mut Vec<PathBuf>,
) {
    if done.iter().any(|d| d == amount) {
        return;
    }
    done.push(amount.to_path_buf());
    let original = |p: &Path| {
        entries.iter().find_map(|e| match e {
            Entry::File { path, content } if path == p => Some(content.trim().to_string()),
            _ => None,
        })
    };
    let (a0, r0) = (original(amount), original(ratio));
    match (a0.as_deref(), r0.as_deref()) {
        (Some(a), _) if a != "0" => restore_file(root, amount, a, rep),
        (_, Some(r)) => {
            let now = root.read_trimmed(amount).unwrap_or_default();
            if a0.as_deref() == Some("0") && !now.is_empty() && now != "0" {
                // Written even when it already holds `r`: the write is what
                // zeroes the amount.
                write_blind(root, ratio, r, rep);
            } else {
                restore_file(root, ratio, r, rep);
            }
            let left = root.read_trimmed(amount).unwrap_or_default();
            if a0.as_deref() == Some("0") && !left.is_empty() && left != "0" {
                rep.failures.push(format!(
                    "{}: still {left} after writing {} {r} (the kernel zeroes it only when the \
                     ratio changes); write {} to another value and back by hand",
                    amount.display(),
                    ratio.display(),
                    ratio.display()
                ));
            }
        }
        (Some(_), None) => rep.failures.push(format!(
            "{}: its original is 0, which the kernel does not take back (0 means {} is in \
             force), and {}'s original is not journalled (a journal of an older cgwarden); \
             write {} by hand",
            amount.display(),
            ratio.display(),
            ratio.display(),
            ratio.display()
        )),
        (None, None) => {}
    }
}

/// Writes a value without comparing it first (zram's `mem_limit`, mode
/// 0200, cannot be read back; a ratio is written for its side effect).
fn write_blind(root: &Root, path: &Path, value: &str, rep: &mut ResetReport) {
    match root.write(path, value) {
        Ok(()) => rep.lines.push(format!("WRITE {} {value}", path.display())),
        Err(e) => rep
            .failures
            .push(format!("WRITE {} {value}: {e}", path.display())),
    }
}

/// Writes the zram device's `reset` once (after its swap is off).
fn reset_zram(root: &Root, dev: &str, rep: &mut ResetReport, done: &mut Vec<String>) {
    if done.iter().any(|d| d == dev) {
        return;
    }
    done.push(dev.to_string());
    let p = zram::attr_path(dev, "reset");
    match root.write(&p, "1") {
        Ok(()) => rep.lines.push(format!("WRITE {} 1", p.display())),
        Err(e) => rep.failures.push(format!("WRITE {} 1: {e}", p.display())),
    }
}

fn restore_file(root: &Root, path: &Path, original: &str, rep: &mut ResetReport) {
    let is_subtree = path
        .file_name()
        .is_some_and(|n| n == "cgroup.subtree_control");
    let current = match root.read(path) {
        Ok(c) => c,
        Err(e) if e.is_not_found() => return,
        Err(e) => {
            rep.failures.push(format!("{}: {e}", path.display()));
            return;
        }
    };
    if path.file_name().is_some_and(|n| n == "cgroup.type")
        && current.trim() == "threaded"
        && original.trim() != "threaded"
    {
        // The kernel takes only `threaded` here: a threaded group stays
        // threaded until it is removed.
        rep.warnings.push(format!(
            "{}: stays threaded (was {}); the kernel turns no threaded cgroup back into a \
             domain — remove the group to undo it",
            path.display(),
            original.trim()
        ));
        return;
    }
    let value = if is_subtree {
        // Controllers can only be toggled, not assigned: disable what was
        // added, re-enable what was removed.
        let orig: Vec<&str> = original
            .split_whitespace()
            .map(|t| t.trim_start_matches('+'))
            .collect();
        let cur: Vec<&str> = current
            .split_whitespace()
            .map(|t| t.trim_start_matches('+'))
            .collect();
        let mut ops: Vec<String> = cur
            .iter()
            .filter(|c| !orig.contains(c))
            .map(|c| format!("-{c}"))
            .collect();
        ops.extend(
            orig.iter()
                .filter(|c| !cur.contains(c))
                .map(|c| format!("+{c}")),
        );
        if ops.is_empty() {
            return;
        }
        ops.join(" ")
    } else {
        if normalize::same(Form::Text, &current, original, page_size()) {
            return;
        }
        original.trim_end_matches('\n').to_string()
    };
    match root.write(path, &value) {
        Ok(()) => rep
            .lines
            .push(format!("WRITE {} {}", path.display(), value)),
        Err(e) => rep
            .failures
            .push(format!("WRITE {} {value}: {e}", path.display())),
    }
}

/// The closest ancestor of `rel` that cgwarden did not create ("" = the cgroup root).
fn nearest_kept_ancestor(rel: &str, cgroup_root: &Path, created: &[PathBuf]) -> String {
    let mut cur = rel.to_string();
    while let Some((parent, _)) = cur.rsplit_once('/') {
        cur = parent.to_string();
        if !created.contains(&cgroup_root.join(&cur)) {
            return cur;
        }
    }
    String::new()
}

/// Moves every process out of a group; new ones may fork while we do, so a
/// few passes are made.
fn empty_group(cg: &CgroupFs, rel: &str, dest: &str, rep: &mut ResetReport) -> Result<(), Error> {
    for _ in 0..10 {
        let pids = match cg.procs(rel) {
            Ok(p) => p,
            Err(e) if e.is_not_found() => return Ok(()),
            // A threaded group has no cgroup.procs to read: its
            // threads' processes are moved whole (a tid written to
            // cgroup.procs moves its process).
            Err(e) if e.errno() == Some(libc::EOPNOTSUPP) => {
                match cg.root().read(&cg.file(rel, "cgroup.threads")) {
                    Ok(t) => crate::kernel::cgroupfs::parse_pids(&t),
                    Err(e) if e.is_not_found() => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        if pids.is_empty() {
            return Ok(());
        }
        for pid in pids {
            match cg.move_pid(dest, pid) {
                Ok(()) => rep.lines.push(format!(
                    "WRITE {} {pid}",
                    cg.file(dest, "cgroup.procs").display()
                )),
                Err(e) if e.errno() == Some(libc::ESRCH) => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// `rmdir` on a cgroup fails with EBUSY for a moment after its last process
/// left (the kernel frees it asynchronously); retry briefly.
fn rmdir_retry(root: &Root, dir: &Path) -> Result<(), Error> {
    let mut last = None;
    for i in 0..50 {
        match root.rmdir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) if e.errno() == Some(libc::EBUSY) => {
                last = Some(e);
                std::thread::sleep(std::time::Duration::from_millis(10 * (i + 1).min(10)));
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| Error::other(dir, "rmdir kept failing")))
}

/// Puts a kernel thread's journalled scheduling and CPUs back,
/// only while `pid` is still that kernel thread; a thread that is gone (an
/// IRQ freed, a module unloaded) has nothing to restore.
fn restore_kthread(
    root: &Root,
    pid: i32,
    comm: &str,
    sched: &str,
    cpus: &str,
    rep: &mut ResetReport,
) {
    use crate::kernel::irq;
    if !root.supports(Op::Sched) {
        rep.lines.push(format!(
            "# skipped on a fake root: SCHED {pid} {sched} ({comm})"
        ));
        return;
    }
    if !irq::is_kthread(root, pid, comm) {
        return;
    }
    if let Some((policy, prio)) = super::journal::kthread_sched_text(sched) {
        match irq::set_sched(pid, policy, prio) {
            Ok(()) => rep.lines.push(format!("SCHED {pid} {sched} ({comm})")),
            Err(e) if e.errno() == Some(libc::ESRCH) => return,
            Err(e) => rep
                .failures
                .push(format!("SCHED {pid} {sched} ({comm}): {e}")),
        }
    }
    let now = irq::affinity(root, pid).ok().flatten();
    if now.as_deref() == Some(cpus) {
        return;
    }
    let list: Vec<u32> = crate::units::CpuList::parse_kernel(cpus)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    if list.is_empty() {
        return;
    }
    match irq::set_affinity(root, pid, &list) {
        Ok(()) => rep.lines.push(format!("AFFINITY {pid} {cpus} ({comm})")),
        // A per-CPU kthread refuses; it was never moved.
        Err(e) if matches!(e.errno(), Some(libc::ESRCH) | Some(libc::EINVAL)) => {}
        Err(e) => rep
            .failures
            .push(format!("AFFINITY {pid} {cpus} ({comm}): {e}")),
    }
}
