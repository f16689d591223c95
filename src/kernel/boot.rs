//! What the running kernel was booted with, for `cgwarden doctor`
//! (docs/realtime.md): read only, nothing here is ever written.
//!
//! - `/proc/cmdline`, split as the kernel's `next_arg()` does: blanks
//!   separate parameters, double quotes group blanks (`a="b c"` and
//!   `"a=b c"` are both `a` = `b c`), and a later instance of a parameter
//!   wins. The CPU-list parameters cgwarden compares are parsed here:
//!   `isolcpus=[flag,...,]LIST` (flags `nohz`, `domain`, `managed_irq`),
//!   `nohz_full=LIST`, `rcu_nocbs=LIST`, `irqaffinity=LIST`.
//! - `/sys/devices/system/cpu/{isolated,nohz_full,possible}`: what the
//!   kernel made of them (`nohz_full` reads `(null)` when empty; the file is
//!   absent without CONFIG_NO_HZ_FULL).
//! - `/sys/kernel/realtime`: present (and `1`) only on a PREEMPT_RT kernel.
//! - CONFIG_RT_GROUP_SCHED: the cgroup root's `cpu.rt_runtime_us` (present
//!   when the cpu controller has RT group scheduling: cgroup v1 always, v2
//!   on kernels that expose it), else `/boot/config-RELEASE` (plain text,
//!   RELEASE from `/proc/sys/kernel/osrelease`). `/proc/config.gz` is
//!   gzip-compressed and not decoded (no decompressor in the daemon for one
//!   line); without either the answer is unknown and says how to look.
//!
//! CPU lists accept the kernel's `N`-`M` ranges and single CPUs; the
//! `N-M:used/group` form and `N` (the last CPU) are reported as
//! unparseable rather than guessed.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::root::Root;

/// A set of CPU numbers.
pub(crate) type CpuSet = BTreeSet<u32>;

/// The kernel command line, as parameters in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cmdline {
    /// `(name, value)`; `value` is `None` for a bare flag (`quiet`).
    pub(crate) params: Vec<(String, Option<String>)>,
}

impl Cmdline {
    /// Splits a command line like the kernel's `next_arg()` (module docs).
    pub(crate) fn parse(text: &str) -> Cmdline {
        let mut params = Vec::new();
        let mut cur = String::new();
        let mut in_quote = false;
        let mut any = false;
        let push = |cur: &mut String, params: &mut Vec<(String, Option<String>)>| {
            let p = std::mem::take(cur);
            match p.split_once('=') {
                Some((k, v)) => params.push((k.to_string(), Some(v.to_string()))),
                None => params.push((p, None)),
            }
        };
        for ch in text.chars() {
            match ch {
                '"' => {
                    in_quote = !in_quote;
                    any = true;
                }
                c if c.is_whitespace() && !in_quote => {
                    if any {
                        push(&mut cur, &mut params);
                        any = false;
                    }
                }
                c => {
                    cur.push(c);
                    any = true;
                }
            }
        }
        if any {
            push(&mut cur, &mut params);
        }
        params.retain(|(k, _)| !k.is_empty());
        Cmdline { params }
    }

    /// The value of the last instance of `name` (the kernel's later setting
    /// wins); `Some(None)` for a bare flag, `None` when absent.
    pub(crate) fn get(&self, name: &str) -> Option<Option<&str>> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_deref())
    }

    /// A CPU-list parameter: `None` when absent, `Some(Err(text))` when its
    /// value is not a list this module reads.
    pub(crate) fn cpus(&self, name: &str) -> Option<std::result::Result<CpuSet, String>> {
        let v = self.get(name)?.unwrap_or("");
        Some(parse_cpus(v).ok_or_else(|| v.to_string()))
    }

    /// `isolcpus=[flags,]LIST`: the flags and the CPUs.
    pub(crate) fn isolcpus(&self) -> Option<std::result::Result<(Vec<String>, CpuSet), String>> {
        let v = self.get("isolcpus")?.unwrap_or("");
        let mut flags = Vec::new();
        let mut rest = v;
        while let Some((head, tail)) = rest.split_once(',') {
            if head.starts_with(|c: char| c.is_ascii_alphabetic()) {
                flags.push(head.to_string());
                rest = tail;
            } else {
                break;
            }
        }
        Some(
            parse_cpus(rest)
                .map(|c| (flags, c))
                .ok_or_else(|| v.to_string()),
        )
    }
}

/// Parses `0-3,7` (and the empty list); `None` for anything else.
pub(crate) fn parse_cpus(text: &str) -> Option<CpuSet> {
    let t = text.trim();
    let mut out = CpuSet::new();
    if t.is_empty() || t == "(null)" {
        return Some(out);
    }
    for part in t.split(',') {
        let num = |s: &str| -> Option<u32> {
            if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            s.parse().ok()
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => {
                out.insert(num(part)?);
            }
        }
    }
    Some(out)
}

/// Formats CPUs as a kernel list with ranges (`2-3,7`).
pub(crate) fn format_cpus(cpus: &CpuSet) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut it = cpus.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end += 1;
            it.next();
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

/// Whether the kernel has CONFIG_RT_GROUP_SCHED, and how that was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RtGroupSched {
    /// Seen in this file.
    On(PathBuf),
    Off(PathBuf),
    /// Neither source could tell.
    Unknown,
}

/// Everything `doctor` compares, read once.
#[derive(Clone, Debug)]
pub(crate) struct BootState {
    pub(crate) cmdline: Cmdline,
    /// `/proc/cmdline` is absent (a fake board): its path on this root;
    /// `cmdline` is then empty.
    pub(crate) cmdline_absent: Option<PathBuf>,
    /// `/sys/devices/system/cpu/possible`.
    pub(crate) possible: CpuSet,
    /// `/sys/devices/system/cpu/isolated` (`None`: absent).
    pub(crate) isolated: Option<CpuSet>,
    /// `/sys/devices/system/cpu/nohz_full` (`None`: absent, no NO_HZ_FULL).
    pub(crate) nohz_full: Option<CpuSet>,
    /// `/sys/kernel/realtime` reads `1`.
    pub(crate) preempt_rt: bool,
    pub(crate) rt_group_sched: RtGroupSched,
    /// The build configuration, where the kernel shows it.
    pub(crate) config: KernelConfig,
    /// `cgroup.controllers` of the policy's cgroup root (`None`: absent,
    /// no cgroup2 there).
    pub(crate) controllers: Option<BTreeSet<String>>,
    /// `/proc/pressure/memory` exists (CONFIG_PSI built and not disabled).
    pub(crate) psi: bool,
    /// Mount options of the cgroup2 mount holding the cgroup root.
    pub(crate) cgroup2_options: Option<String>,
    /// The zram module is loaded or zram-control exists.
    pub(crate) zram_loaded: bool,
}

/// The kernel's build configuration: `/proc/config.gz`
/// (CONFIG_IKCONFIG_PROC), else `/boot/config-RELEASE`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct KernelConfig {
    /// Where it was read; `None`: neither source exists.
    pub(crate) source: Option<PathBuf>,
    options: HashMap<String, String>,
}

impl KernelConfig {
    /// Parses `CONFIG_X=y` lines (`# CONFIG_X is not set` means off).
    pub(crate) fn parse(source: PathBuf, text: &str) -> KernelConfig {
        let options = text
            .lines()
            .filter_map(|l| l.trim().split_once('='))
            .filter(|(k, _)| k.starts_with("CONFIG_"))
            .map(|(k, v)| (k.to_string(), v.trim_matches('"').to_string()))
            .collect();
        KernelConfig {
            source: Some(source),
            options,
        }
    }

    /// Whether `name` is built in or a module; `None` when the
    /// configuration could not be read at all.
    pub(crate) fn enabled(&self, name: &str) -> Option<bool> {
        self.source.as_ref()?;
        Some(matches!(
            self.options.get(name).map(String::as_str),
            Some("y" | "m")
        ))
    }

    /// Whether `name` is built in (`=y`).
    pub(crate) fn built_in(&self, name: &str) -> Option<bool> {
        self.source.as_ref()?;
        Some(self.options.get(name).is_some_and(|v| v == "y"))
    }
}

/// The files read here (module docs).
pub(crate) const CMDLINE: &str = "/proc/cmdline";
pub(crate) const CONFIG_GZ: &str = "/proc/config.gz";
pub(crate) const OSRELEASE: &str = "/proc/sys/kernel/osrelease";
pub(crate) const REALTIME: &str = "/sys/kernel/realtime";
pub(crate) const MOUNTS: &str = "/proc/self/mounts";
pub(crate) const ZRAM_MODULE: &str = "/sys/module/zram";

/// `/boot/config-RELEASE`, the configuration a distribution installs.
pub(crate) fn config_path(release: &str) -> PathBuf {
    PathBuf::from(format!("/boot/config-{release}"))
}

/// Largest `/proc/config.gz` inflated (a distribution config is ~300 KiB).
const CONFIG_MAX: u64 = 8 << 20;

/// Reads the configuration from the sources of [`KernelConfig`].
fn kernel_config(root: &Root) -> KernelConfig {
    let gz = Path::new(CONFIG_GZ);
    if let Ok(bytes) = root.read_bytes(gz) {
        use std::io::Read;
        let mut text = String::new();
        let inflated = flate2::read::GzDecoder::new(bytes.as_slice())
            .take(CONFIG_MAX)
            .read_to_string(&mut text);
        if inflated.is_ok() {
            return KernelConfig::parse(gz.to_path_buf(), &text);
        }
    }
    let Ok(release) = root.read_trimmed(Path::new(OSRELEASE)) else {
        return KernelConfig::default();
    };
    if release.is_empty() || release.contains('/') {
        return KernelConfig::default();
    }
    let path = config_path(&release);
    match root.read(&path) {
        Ok(text) => KernelConfig::parse(path, &text),
        Err(_) => KernelConfig::default(),
    }
}

/// The options of the cgroup2 mount whose mount point holds `cgroup_root`
/// (the longest such mount point), from `/proc/self/mounts`.
fn cgroup2_options(root: &Root, cgroup_root: &Path) -> Option<String> {
    let mounts = root.read_small(Path::new(MOUNTS)).ok()?;
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[2] == "cgroup2").then(|| (f[1].to_string(), f[3].to_string()))
        })
        .filter(|(mp, _)| cgroup_root.starts_with(mp))
        .max_by_key(|(mp, _)| mp.len())
        .map(|(_, opts)| opts)
}

const CPU_DIR: &str = "/sys/devices/system/cpu";

/// Reads a CPU-list file; `None` when absent, an error naming the path
/// when unreadable or not a list.
fn cpu_file(root: &Root, path: &Path) -> Result<Option<CpuSet>> {
    match root.read_trimmed(path) {
        Ok(t) => parse_cpus(&t)
            .map(Some)
            .ok_or_else(|| Error::other(path, format!("not a CPU list: {t:?}"))),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

impl BootState {
    /// Reads the boot state under `root`; `cgroup_root` is the policy's.
    pub(crate) fn read(root: &Root, cgroup_root: &Path) -> Result<BootState> {
        let cmdline_path = Path::new(CMDLINE);
        let (cmdline, cmdline_absent) = match root.read_small(cmdline_path) {
            Ok(t) => (Cmdline::parse(&t), None),
            // A finding for doctor, not a failure.
            Err(e) if e.is_not_found() => (Cmdline::parse(""), Some(root.host_path(cmdline_path))),
            Err(e) => return Err(e),
        };
        let possible = cpu_file(root, &Path::new(CPU_DIR).join("possible"))?.unwrap_or_default();
        let isolated = cpu_file(root, &Path::new(CPU_DIR).join("isolated"))?;
        let nohz_full = cpu_file(root, &Path::new(CPU_DIR).join("nohz_full"))?;
        let preempt_rt = root
            .read_trimmed(Path::new(REALTIME))
            .is_ok_and(|t| t == "1");
        let config = kernel_config(root);
        let controllers = root
            .read_trimmed(&cgroup_root.join("cgroup.controllers"))
            .ok()
            .map(|t| t.split_whitespace().map(String::from).collect());
        Ok(BootState {
            cmdline,
            cmdline_absent,
            possible,
            isolated,
            nohz_full,
            preempt_rt,
            rt_group_sched: rt_group_sched(root, cgroup_root, &config),
            controllers,
            psi: root.exists(Path::new("/proc/pressure/memory")),
            cgroup2_options: cgroup2_options(root, cgroup_root),
            zram_loaded: root.exists(Path::new("/sys/class/zram-control"))
                || root.exists(Path::new(ZRAM_MODULE)),
            config,
        })
    }
}

/// CONFIG_RT_GROUP_SCHED, from the sources in the module docs.
fn rt_group_sched(root: &Root, cgroup_root: &Path, config: &KernelConfig) -> RtGroupSched {
    let rt_file = cgroup_root.join("cpu.rt_runtime_us");
    if root.exists(&rt_file) {
        return RtGroupSched::On(rt_file);
    }
    match (config.built_in("CONFIG_RT_GROUP_SCHED"), &config.source) {
        (Some(true), Some(src)) => RtGroupSched::On(src.clone()),
        (Some(false), Some(src)) => RtGroupSched::Off(src.clone()),
        _ => RtGroupSched::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(v: &[u32]) -> CpuSet {
        v.iter().copied().collect()
    }

    #[test]
    fn cmdline_quotes_flags_and_last_wins() {
        let c = Cmdline::parse(
            "BOOT_IMAGE=/vmlinuz root=UUID=ab-cd ro quiet \"dyndbg=file x.c +p\" a=\"b c\" nohz_full=1 nohz_full=2-3,7\n",
        );
        assert_eq!(c.get("quiet"), Some(None));
        assert_eq!(c.get("root"), Some(Some("UUID=ab-cd")));
        assert_eq!(c.get("dyndbg"), Some(Some("file x.c +p")));
        assert_eq!(c.get("a"), Some(Some("b c")));
        assert_eq!(c.get("missing"), None);
        assert_eq!(c.cpus("nohz_full"), Some(Ok(set(&[2, 3, 7]))));
        assert_eq!(c.cpus("rcu_nocbs"), None);
    }

    #[test]
    fn isolcpus_flags_then_list() {
        let c = Cmdline::parse("isolcpus=managed_irq,domain,7 irqaffinity=0-6");
        assert_eq!(
            c.isolcpus(),
            Some(Ok((vec!["managed_irq".into(), "domain".into()], set(&[7]))))
        );
        assert_eq!(c.cpus("irqaffinity"), Some(Ok(set(&[0, 1, 2, 3, 4, 5, 6]))));
        let c = Cmdline::parse("isolcpus=2-3,6");
        assert_eq!(c.isolcpus(), Some(Ok((vec![], set(&[2, 3, 6])))));
        let c = Cmdline::parse("isolcpus=nohz,domain,1-3:1/2");
        assert_eq!(c.isolcpus(), Some(Err("nohz,domain,1-3:1/2".into())));
        assert_eq!(
            Cmdline::parse("rcu_nocbs").cpus("rcu_nocbs"),
            Some(Ok(set(&[])))
        );
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("(null)\n"), Some(set(&[])));
        assert_eq!(parse_cpus(""), Some(set(&[])));
        assert_eq!(parse_cpus("0-2,4"), Some(set(&[0, 1, 2, 4])));
        for bad in ["3-1", "x", "1,", "N", "1-3:1/2", "-1"] {
            assert_eq!(parse_cpus(bad), None, "{bad}");
        }
        assert_eq!(format_cpus(&set(&[0, 1, 2, 4, 6, 7])), "0-2,4,6-7");
        assert_eq!(format_cpus(&set(&[])), "");
    }

    #[test]
    fn reads_a_fake_tree_and_names_bad_files() {
        let t = tempfile::TempDir::new().unwrap();
        let w = |rel: &str, s: &str| {
            let p = t.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("proc/cmdline", "console=ttyS0 nohz_full=3\n");
        w("sys/devices/system/cpu/possible", "0-7\n");
        w("sys/devices/system/cpu/nohz_full", "(null)\n");
        w("proc/sys/kernel/osrelease", "6.1.0-rt\n");
        w(
            "boot/config-6.1.0-rt",
            "CONFIG_PREEMPT_RT=y\nCONFIG_RT_GROUP_SCHED=y\n",
        );
        let r = Root::fake(t.path());
        let b = BootState::read(&r, Path::new("/sys/fs/cgroup")).unwrap();
        assert_eq!(b.cmdline.cpus("nohz_full"), Some(Ok(set(&[3]))));
        assert_eq!(b.possible, (0..8).collect());
        assert_eq!(b.isolated, None);
        assert_eq!(b.nohz_full, Some(set(&[])));
        assert!(!b.preempt_rt);
        assert_eq!(
            b.rt_group_sched,
            RtGroupSched::On(PathBuf::from("/boot/config-6.1.0-rt"))
        );
        w("sys/devices/system/cpu/isolated", "garbage\n");
        let e = BootState::read(&r, Path::new("/sys/fs/cgroup"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/sys/devices/system/cpu/isolated"), "{e}");
        w("sys/devices/system/cpu/isolated", "3\n");
        std::fs::remove_file(t.path().join("proc/cmdline")).unwrap();
        let b = BootState::read(&r, Path::new("/sys/fs/cgroup")).unwrap();
        assert_eq!(b.cmdline_absent, Some(t.path().join("proc/cmdline")));
        assert_eq!(b.cmdline.cpus("nohz_full"), None);
    }

    proptest! {
        #[test]
        fn cmdline_never_panics(s in "\\PC{0,80}") {
            let c = Cmdline::parse(&s);
            let _ = c.isolcpus();
            let _ = c.cpus("nohz_full");
        }

        #[test]
        fn cpu_list_round_trips(v in proptest::collection::btree_set(0u32..64, 0..20)) {
            prop_assert_eq!(parse_cpus(&format_cpus(&v)), Some(v));
        }
    }
}
