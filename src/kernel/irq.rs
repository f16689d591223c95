//! IRQs by action name and kernel threads by comm: what `system.irqs` and
//! `system.kthreads` act on.
//!
//! - An IRQ's action names (what `/proc/interrupts` shows in its last
//!   column, `request_irq`'s `name`) are read from
//!   `/sys/kernel/irq/N/actions` (comma-separated, kernel 4.14+,
//!   CONFIG_SPARSE_IRQ, which Debian's amd64/arm64 and Qualcomm kernels
//!   have); the `/proc/interrupts` line is parsed only where that directory
//!   is absent, taking the words after the per-CPU counts and the chip's
//!   `hwirq-type` field (x86 and GICv3 lines differ before it, the action
//!   list is always last, `, `-separated).
//! - A threaded handler runs in the kernel thread `irq/N-NAME`
//!   (kernel/irq/manage.c `setup_irq_thread`: `"irq/%d-%s"`), SCHED_FIFO 50
//!   by default. Its comm is the full name on 5.17+ (the 6.1 guest shows
//!   `irq/24-virtio0-config`), 15 bytes before.
//! - A kernel thread is a task with PF_KTHREAD in `/proc/PID/stat` field 9;
//!   one with PF_NO_SETAFFINITY (per-CPU kthreads: `ksoftirqd/N`,
//!   `rcuc/N`, `ktimers/N`, `irq_work/N`, bound IRQ threads) refuses
//!   `sched_setaffinity` with EINVAL, so its affinity is left alone.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::procfs;
use super::root::{Op, Root};

/// `PF_KTHREAD` (include/linux/sched.h).
pub(crate) const PF_KTHREAD: u64 = 0x0020_0000;
/// `PF_NO_SETAFFINITY`: userland may not change the thread's CPUs.
pub(crate) const PF_NO_SETAFFINITY: u64 = 0x0400_0000;

pub(crate) const SYS_KERNEL_IRQ: &str = "/sys/kernel/irq";
pub(crate) const PROC_INTERRUPTS: &str = "/proc/interrupts";

/// One IRQ and the names of its actions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Irq {
    pub(crate) number: u32,
    pub(crate) actions: Vec<String>,
}

/// Every numbered IRQ with at least one action, by number.
pub(crate) fn irqs(root: &Root) -> Result<Vec<Irq>> {
    let dir = Path::new(SYS_KERNEL_IRQ);
    match root.list_dir(dir) {
        Ok(names) => {
            let mut out: Vec<Irq> = names
                .iter()
                .filter_map(|n| n.parse::<u32>().ok())
                .filter_map(|number| {
                    let text = root
                        .read_trimmed(&dir.join(number.to_string()).join("actions"))
                        .ok()?;
                    let actions = split_actions(&text);
                    (!actions.is_empty()).then_some(Irq { number, actions })
                })
                .collect();
            out.sort_by_key(|i| i.number);
            Ok(out)
        }
        Err(e) if e.is_not_found() => match root.read(Path::new(PROC_INTERRUPTS)) {
            Ok(text) => Ok(parse_interrupts(&text)),
            Err(e) if e.is_not_found() => Ok(Vec::new()),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

fn split_actions(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// The numbered lines of `/proc/interrupts`: after `N:` come one count per
/// CPU (the header's column count), the chip, the hwirq/type, then the
/// action list. The action list is what follows the first field ending in
/// `-edge`, `-level`, `-fasteoi` (x86) or `Edge`/`Level` (GIC).
pub(crate) fn parse_interrupts(text: &str) -> Vec<Irq> {
    let mut lines = text.lines();
    let ncpu = lines.next().map_or(0, |h| h.split_whitespace().count());
    let mut out = Vec::new();
    for line in lines {
        let Some((num, rest)) = line.trim_start().split_once(':') else {
            continue;
        };
        let Ok(number) = num.trim().parse::<u32>() else {
            continue;
        };
        let words: Vec<&str> = rest.split_whitespace().skip(ncpu).collect();
        let kind = |w: &str| {
            w.ends_with("-edge")
                || w.ends_with("-level")
                || w.ends_with("-fasteoi")
                || w == "Edge"
                || w == "Level"
        };
        let Some(at) = words.iter().position(|w| kind(w)) else {
            continue;
        };
        let actions = split_actions(&words[at + 1..].join(" "));
        if !actions.is_empty() {
            out.push(Irq { number, actions });
        }
    }
    out
}

/// A kernel thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Kthread {
    pub(crate) pid: i32,
    pub(crate) comm: String,
    /// PF_NO_SETAFFINITY: its CPUs cannot be changed.
    pub(crate) bound: bool,
}

/// Every kernel thread, by pid (PID 2, kthreadd, included).
pub(crate) fn kthreads(root: &Root) -> Result<Vec<Kthread>> {
    let mut out = Vec::new();
    for pid in procfs::pids(root)? {
        let Ok(Some(st)) = procfs::stat(root, pid) else {
            continue;
        };
        let flags = st.flags().unwrap_or(0);
        if flags & PF_KTHREAD == 0 {
            continue;
        }
        out.push(Kthread {
            pid,
            comm: st.comm.clone(),
            bound: flags & PF_NO_SETAFFINITY != 0,
        });
    }
    Ok(out)
}

/// Whether `pid` is still the kernel thread `comm` (a restore acts only
/// on the thread it journalled; a user process cannot be a kthread).
pub(crate) fn is_kthread(root: &Root, pid: i32, comm: &str) -> bool {
    matches!(procfs::stat(root, pid), Ok(Some(st))
        if st.comm == comm && st.flags().unwrap_or(0) & PF_KTHREAD != 0)
}

/// The kernel threads of IRQ `number` (`irq/N-…`) among `threads`.
pub(crate) fn irq_threads(threads: &[Kthread], number: u32) -> Vec<&Kthread> {
    let prefix = format!("irq/{number}-");
    threads
        .iter()
        .filter(|t| t.comm.starts_with(&prefix))
        .collect()
}

/// Device path of `/proc/PID/status` (its `Cpus_allowed_list`).
fn status_path(pid: i32) -> PathBuf {
    super::procfs::proc_file(pid, "status")
}

/// `Cpus_allowed_list` of `pid`, as the kernel prints it (`0-3`).
pub(crate) fn affinity(root: &Root, pid: i32) -> Result<Option<String>> {
    let text = match root.read(&status_path(pid)) {
        Ok(t) => t,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_string()))
}

/// `sched_setaffinity(pid, cpus)`; on a fake tree, rewrites the
/// `Cpus_allowed_list` line of its status file (the emulation).
pub(crate) fn set_affinity(root: &Root, pid: i32, cpus: &[u32]) -> Result<()> {
    let list = cpus
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    if !root.supports(Op::Sched) {
        let path = status_path(pid);
        let text = root.read(&path)?;
        let mut out: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with("Cpus_allowed_list:"))
            .map(str::to_string)
            .collect();
        out.push(format!("Cpus_allowed_list:\t{list}"));
        return root.write(&path, &out.join("\n"));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    for &c in cpus {
        if (c as usize) < max {
            // SAFETY: `c` is below the set's capacity.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
    }
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        return Err(Error::os(
            "sched_setaffinity",
            format!("/proc/{pid}"),
            errno,
            format!("cpus {list}"),
        ));
    }
    Ok(())
}

/// Sets a kernel thread's policy and rt priority (`fifo 50`, `other 0`;
/// nice is left alone).
pub(crate) fn set_sched(pid: i32, policy: &str, priority: u32) -> Result<()> {
    let policy = super::sched::Policy::from_name(policy).ok_or_else(|| {
        Error::other(
            format!("/proc/{pid}"),
            format!("unknown scheduling policy `{policy}`"),
        )
    })?;
    let spec = super::sched::SchedSpec {
        policy,
        priority: policy.is_rt().then_some(priority),
        nice: None,
        deadline: None,
    };
    super::sched::apply(pid, &spec)
}

/// `POLICY PRIORITY` of `pid` as the journal records it (`fifo 50`).
pub(crate) fn sched_text(root: &Root, pid: i32) -> Result<Option<String>> {
    Ok(super::sched::current_policy(root, pid)?.map(|(p, prio)| format!("{} {prio}", p.name())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as the 6.1 x86 guest prints them (QEMU q35, virtio-rng) and
    /// as a GICv3 arm64 board does (the Qualcomm dcvsh IRQ of
    /// qcom-cpufreq-hw is named `dcvsh-irq-N`).
    #[test]
    fn parses_x86_and_gic_interrupt_lines() {
        let x86 = "           CPU0       CPU1       CPU2       CPU3       \n\
  0:         48          0          0          0   IO-APIC   2-edge      timer\n\
  4:          0          0        512          0   IO-APIC   4-edge      ttyS0\n\
 24:          0          0          0          0  PCI-MSIX-0000:00:02.0   0-edge      virtio0-config\n\
 25:          0         12          0          0  PCI-MSIX-0000:00:02.0   1-edge      virtio0-input\n\
 26:          1          0          0          0   IO-APIC  16-fasteoi   i801_smbus, uhci_hcd:usb1\n\
NMI:          0          0          0          0   Non-maskable interrupts\n";
        let v = parse_interrupts(x86);
        let names: Vec<(u32, Vec<&str>)> = v
            .iter()
            .map(|i| (i.number, i.actions.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            names,
            vec![
                (0, vec!["timer"]),
                (4, vec!["ttyS0"]),
                (24, vec!["virtio0-config"]),
                (25, vec!["virtio0-input"]),
                (26, vec!["i801_smbus", "uhci_hcd:usb1"]),
            ]
        );
        let gic = "           CPU0       CPU1\n\
 11:       1234       5678     GICv3  27 Level     arch_timer\n\
 45:          0          0     GICv3  63 Level     dcvsh-irq-4\n\
IPI0:        10         20       Rescheduling interrupts\n";
        let v = parse_interrupts(gic);
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].number, 45);
        assert_eq!(v[1].actions, vec!["dcvsh-irq-4".to_string()]);
    }

    #[test]
    fn actions_from_sys_kernel_irq_and_irq_threads() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("sys/kernel/irq");
        for (n, a) in [(9, "acpi\n"), (24, "virtio0-config\n"), (30, "\n")] {
            std::fs::create_dir_all(d.join(n.to_string())).unwrap();
            std::fs::write(d.join(format!("{n}/actions")), a).unwrap();
        }
        let r = Root::fake(t.path());
        let v = irqs(&r).unwrap();
        assert_eq!(v.iter().map(|i| i.number).collect::<Vec<_>>(), vec![9, 24]);
        let threads = vec![
            Kthread {
                pid: 100,
                comm: "irq/24-virtio0-".into(),
                bound: false,
            },
            Kthread {
                pid: 101,
                comm: "irq/2-x".into(),
                bound: false,
            },
            Kthread {
                pid: 102,
                comm: "ksoftirqd/0".into(),
                bound: true,
            },
        ];
        let it = irq_threads(&threads, 24);
        assert_eq!(it.len(), 1);
        assert_eq!(it[0].pid, 100);
        assert!(irq_threads(&threads, 4).is_empty());
    }
}
