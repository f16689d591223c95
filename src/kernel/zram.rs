//! zram devices and swap: `/sys/block/zramN/{comp_algorithm,disksize,
//! mem_limit,reset}`, `/sys/class/zram-control/hot_add`,
//! `/proc/swaps`, and the swap syscalls (`mkswap` done in Rust, `swapon`,
//! `swapoff`).
//!
//! File access goes through [`Root`]. The syscall functions
//! ([`write_swap_header`], [`swapon`], [`swapoff`]) act on host paths and
//! just do the syscall: the caller decides fake vs real (on a fake root
//! swapon/mkswap are skipped and logged: a fake root never swaps).
//!
//! Device setup order on a real kernel: `comp_algorithm` must be written
//! while `initstate` is 0 (before `disksize`); a configured device must be
//! swapped off and `reset` (write `1`) before algorithm or size can change.
//! `reset` and `mem_limit` (mode 0200) and `hot_remove` are write-only:
//! reading them fails with EACCES even for root (seen on 6.1). `reset` and
//! `hot_remove` are triggers, written and never read; the current
//! `mem_limit` is the 4th field of `mm_stat` ([`mem_limit`]).
//!
//! Loading the module ([`modprobe`]) runs the system's `modprobe` — the one
//! the kernel itself runs for `request_module` (`/proc/sys/kernel/modprobe`)
//! — as zram-generator and zram-tools do, rather than calling
//! `finit_module(2)` directly: modprobe resolves dependencies (zram needs
//! zsmalloc), reads the board's options from `/etc/modprobe.d` (e.g.
//! `num_devices`), handles compressed and signed modules and blacklists.
//! Reimplementing that would be a second, worse modprobe.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::error::{Error, Result};
use super::root::Root;

/// Device path of `/sys/class/zram-control/hot_add`.
pub(crate) const HOT_ADD: &str = "/sys/class/zram-control/hot_add";
/// Removes the device whose number is written.
pub(crate) const HOT_REMOVE: &str = "/sys/class/zram-control/hot_remove";
/// Device path of the directory that exists while the zram module is loaded.
pub(crate) const CONTROL_DIR: &str = "/sys/class/zram-control";
/// The kernel module that provides zram devices.
pub(crate) const MODULE: &str = "zram";
/// Where the kernel names the modprobe it runs itself.
pub(crate) const KERNEL_MODPROBE: &str = "/proc/sys/kernel/modprobe";
/// How long `modprobe` may take before it is killed.
const MODPROBE_DEADLINE: Duration = Duration::from_secs(30);

/// `SWAP_FLAG_PREFER` from `<sys/swap.h>` (not exported by the libc crate).
pub(crate) const SWAP_FLAG_PREFER: i32 = 0x8000;
/// `SWAP_FLAG_PRIO_MASK` from `<sys/swap.h>` (not exported by the libc crate).
pub(crate) const SWAP_FLAG_PRIO_MASK: i32 = 0x7fff;

pub(crate) use crate::knobs::zram::{
    attr_path, dev_node, device_dir, parse_swaps, SwapEntry, PROC_SWAPS,
};

/// True if `dev` exists.
pub(crate) fn exists(root: &Root, dev: &str) -> bool {
    root.is_dir(&device_dir(dev))
}

/// True while the zram module is loaded (or built in): the control class
/// directory exists.
pub(crate) fn module_loaded(root: &Root) -> bool {
    root.is_dir(Path::new(CONTROL_DIR))
}

/// The modprobe program to run: the kernel's own choice from
/// `/proc/sys/kernel/modprobe` when it names an existing file, else the
/// usual locations. Host paths: only meaningful on the real root.
fn modprobe_program() -> Option<PathBuf> {
    let from_kernel = fs::read_to_string(KERNEL_MODPROBE)
        .ok()
        .map(|s| PathBuf::from(s.trim()))
        .filter(|p| p.is_absolute() && p.is_file());
    from_kernel.or_else(|| {
        ["/sbin/modprobe", "/usr/sbin/modprobe", "/bin/modprobe"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    })
}

/// Loads `module` with `modprobe MODULE`, run with an empty environment
/// (plus a fixed PATH), no stdin, and a deadline. The error names the
/// program and carries modprobe's stderr. Only for the real root.
pub(crate) fn modprobe(module: &str) -> Result<()> {
    let Some(prog) = modprobe_program() else {
        return Err(Error::other(
            KERNEL_MODPROBE,
            format!("cannot load `{module}`: no modprobe program (none named here, none in /sbin, /usr/sbin or /bin)"),
        ));
    };
    let mut child = Command::new(&prog)
        .arg(module)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io("run", &prog, e))?;
    // Drain stderr on a thread so a chatty modprobe cannot block on the pipe.
    let stderr = child.stderr.take();
    // (A sized stack: in the daemon, locked, a thread's stack is resident in full.)
    let reader = std::thread::Builder::new()
        .stack_size(super::residency::STACK)
        .spawn(move || {
            let mut buf = Vec::new();
            if let Some(s) = stderr {
                let _ = s.take(16 * 1024).read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).trim().to_string()
        });
    let reader = match reader {
        Ok(r) => r,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::io("start a thread for", &prog, e));
        }
    };
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if start.elapsed() > MODPROBE_DEADLINE => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(Error::io("wait for", &prog, e)),
        }
    };
    let err_text = reader.join().unwrap_or_default();
    let cmd = format!("{} {module}", prog.display());
    match status {
        Some(st) if st.success() => Ok(()),
        Some(st) => Err(Error::other(
            &prog,
            format!(
                "`{cmd}` failed ({st}){}",
                if err_text.is_empty() {
                    String::new()
                } else {
                    format!(": {err_text}")
                }
            ),
        )),
        None => Err(Error::other(
            &prog,
            format!(
                "`{cmd}` did not finish within {}s and was killed",
                MODPROBE_DEADLINE.as_secs()
            ),
        )),
    }
}

/// Creates a new zram device by reading `hot_add`; returns its name (`zram1`).
/// (On a fake tree this just reads the file.)
pub(crate) fn hot_add(root: &Root) -> Result<String> {
    let p = Path::new(HOT_ADD);
    let s = root.read_trimmed(p)?;
    let n: u32 = s
        .parse()
        .map_err(|_| Error::parse(p, "zram device index", &s))?;
    Ok(format!("zram{n}"))
}

/// Parses `comp_algorithm`: `lzo lzo-rle [lz4] zstd` → (`lz4`, all offered).
/// Without brackets a single token is taken as the active one (a fake tree
/// after cgwarden wrote `lz4`); `None` otherwise.
pub(crate) fn parse_comp_algorithm(text: &str) -> Option<(String, Vec<String>)> {
    let mut active = None;
    let mut all = Vec::new();
    for tok in text.split_whitespace() {
        if let Some(inner) = tok.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            if inner.is_empty() {
                continue;
            }
            active = Some(inner.to_string());
            all.push(inner.to_string());
        } else {
            all.push(tok.to_string());
        }
    }
    match active {
        Some(a) => Some((a, all)),
        None if all.len() == 1 => Some((all[0].clone(), all)),
        None => None,
    }
}

/// Active and offered compression algorithms of `dev`.
pub(crate) fn comp_algorithm(root: &Root, dev: &str) -> Result<(String, Vec<String>)> {
    let p = attr_path(dev, "comp_algorithm");
    let s = root.read_trimmed(&p)?;
    parse_comp_algorithm(&s).ok_or_else(|| Error::parse(&p, "active compression algorithm", &s))
}

fn read_u64(root: &Root, p: &Path, what: &'static str) -> Result<u64> {
    let s = root.read_trimmed(p)?;
    s.parse().map_err(|_| Error::parse(p, what, &s))
}

/// Configured size of `dev` in bytes (0 when not initialized).
pub(crate) fn disksize(root: &Root, dev: &str) -> Result<u64> {
    read_u64(root, &attr_path(dev, "disksize"), "disksize (bytes)")
}

/// `mem_limit` of `dev` in bytes (0 = no limit). The attribute itself is
/// write-only on a real kernel; its value is the 4th field of `mm_stat`
/// (`orig_data_size compr_data_size mem_used_total mem_limit …`, bytes),
/// printed whether or not the device is initialised. A tree without
/// `mm_stat` (a fake one) is read from `mem_limit` itself.
pub(crate) fn mem_limit(root: &Root, dev: &str) -> Result<u64> {
    let stat = attr_path(dev, "mm_stat");
    if !root.exists(&stat) {
        return read_u64(root, &attr_path(dev, "mem_limit"), "mem_limit (bytes)");
    }
    let s = root.read_trimmed(&stat)?;
    s.split_whitespace()
        .nth(3)
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| Error::parse(&stat, "mm_stat with mem_limit as 4th field", &s))
}

/// Whether `path` is a zram attribute that cannot be read (mode 0200):
/// `reset`, `mem_limit`, and the control class's `hot_remove`.
pub(crate) fn is_write_only(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    match name {
        "hot_remove" => path.starts_with(CONTROL_DIR),
        "reset" | "mem_limit" => path.starts_with("/sys/block") && device_of(path).is_some(),
        _ => false,
    }
}

/// The zram device an attribute path belongs to: `/sys/block/zram0/x` → `zram0`.
pub(crate) fn device_of(path: &Path) -> Option<String> {
    let rel = path.strip_prefix("/sys/block").ok()?;
    let dev = rel.components().next()?.as_os_str().to_str()?;
    (dev.starts_with("zram") && rel.components().count() == 2).then(|| dev.to_string())
}

/// The current content of a zram attribute as cgwarden journals it: the
/// file itself, except for write-only `mem_limit`, read through `mm_stat`.
/// `Ok(None)` when absent.
pub(crate) fn current(root: &Root, path: &Path) -> Result<Option<String>> {
    if path.file_name().is_some_and(|n| n == "mem_limit") {
        if let Some(dev) = device_of(path) {
            if !exists(root, &dev) {
                return Ok(None);
            }
            return mem_limit(root, &dev).map(|v| Some(v.to_string()));
        }
    }
    match root.read(path) {
        Ok(c) => Ok(Some(c)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Active swap areas (`/proc/swaps`).
pub(crate) fn swaps(root: &Root) -> Result<Vec<SwapEntry>> {
    Ok(parse_swaps(&root.read(Path::new(PROC_SWAPS))?))
}

/// True if `/dev/<dev>` is listed in `/proc/swaps`.
pub(crate) fn in_use_as_swap(root: &Root, dev: &str) -> Result<bool> {
    let node = dev_node(dev);
    Ok(swaps(root)?.iter().any(|s| Path::new(&s.path) == node))
}

// Layout of `union swap_header` (include/linux/swap.h), `info` member.
const BOOTBITS: usize = 1024;
const OFF_VERSION: usize = BOOTBITS;
const OFF_LAST_PAGE: usize = OFF_VERSION + 4;
const OFF_NR_BADPAGES: usize = OFF_LAST_PAGE + 4;
const OFF_UUID: usize = OFF_NR_BADPAGES + 4;
const OFF_VOLUME: usize = OFF_UUID + 16;
/// End of `info`: volume_name[16], padding[117] u32, badpages[1] u32.
const INFO_END: usize = OFF_VOLUME + 16 + 117 * 4 + 4;
const MAGIC: &[u8; 10] = b"SWAPSPACE2";
/// mkswap refuses areas smaller than this many pages.
const MIN_PAGES: u64 = 10;

/// The first page of a swap area, as `mkswap` writes it: version 1,
/// `last_page = size / page_size - 1`, no bad pages, `uuid`, empty label,
/// `SWAPSPACE2` in the last 10 bytes. Integers are native-endian (the
/// kernel reads them as host `unsigned int`; little-endian on our targets).
/// Errors use the pseudo path `<swap header>`.
pub(crate) fn swap_header(page_size: usize, size_bytes: u64, uuid: [u8; 16]) -> Result<Vec<u8>> {
    let bad = |m: String| Error::other("<swap header>", m);
    if !page_size.is_power_of_two() || page_size < INFO_END + MAGIC.len() {
        return Err(bad(format!("unsupported page size {page_size}")));
    }
    let pages = size_bytes / page_size as u64;
    if pages < MIN_PAGES {
        return Err(bad(format!(
            "swap area of {size_bytes} bytes is too small (need {MIN_PAGES} pages of {page_size})"
        )));
    }
    let last_page = u32::try_from(pages - 1)
        .map_err(|_| bad(format!("swap area of {size_bytes} bytes is too large")))?;
    let mut page = vec![0u8; page_size];
    page[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&1u32.to_ne_bytes());
    page[OFF_LAST_PAGE..OFF_LAST_PAGE + 4].copy_from_slice(&last_page.to_ne_bytes());
    page[OFF_NR_BADPAGES..OFF_NR_BADPAGES + 4].copy_from_slice(&0u32.to_ne_bytes());
    page[OFF_UUID..OFF_UUID + 16].copy_from_slice(&uuid);
    page[page_size - MAGIC.len()..].copy_from_slice(MAGIC);
    Ok(page)
}

/// A random (version 4) UUID from /dev/urandom; zeros if unavailable.
fn random_uuid() -> [u8; 16] {
    let mut u = [0u8; 16];
    match fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut u)) {
        Ok(()) => {
            u[6] = (u[6] & 0x0f) | 0x40;
            u[8] = (u[8] & 0x3f) | 0x80;
        }
        Err(e) => tracing::warn!(error = %e, "no /dev/urandom; swap uuid left zero"),
    }
    u
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as usize
    } else {
        4096
    }
}

/// `mkswap` in Rust: writes [`swap_header`] at offset 0 of the existing
/// block device node `dev_node` (host path; never created) and fsyncs it.
pub(crate) fn write_swap_header(dev_node: &Path, size_bytes: u64) -> Result<()> {
    let page = swap_header(page_size(), size_bytes, random_uuid()).map_err(|e| match e {
        Error::Other { message, .. } => Error::other(dev_node, message),
        e => e,
    })?;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .open(dev_node)
        .map_err(|e| Error::io("open", dev_node, e))?;
    f.write_all_at(&page, 0)
        .map_err(|e| Error::io("write", dev_node, e))?;
    f.flush().map_err(|e| Error::io("write", dev_node, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", dev_node, e))
}

fn cpath(p: &Path) -> Result<std::ffi::CString> {
    std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| Error::other(p, "path contains a NUL byte"))
}

/// The `swapflags` argument of swapon(2) for an optional priority. A
/// negative priority (`swap_priority: -1`) means the kernel's default: no
/// `SWAP_FLAG_PREFER`, so the kernel assigns its own descending negative
/// priority, as swapon(8) does without `-p` (it used to become priority 0
/// with the prefer flag, ranking above every default-priority swap).
pub(crate) fn swap_flags(priority: Option<i32>) -> i32 {
    match priority {
        Some(p) if p >= 0 => SWAP_FLAG_PREFER | (p.min(SWAP_FLAG_PRIO_MASK) & SWAP_FLAG_PRIO_MASK),
        Some(_) | None => 0,
    }
}

/// swapon(2) on `dev_node` with an optional priority (0..=32767; negative is
/// the kernel default, see [`swap_flags`]).
pub(crate) fn swapon(dev_node: &Path, priority: Option<i32>) -> Result<()> {
    let c = cpath(dev_node)?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::swapon(c.as_ptr(), swap_flags(priority)) };
    if rc != 0 {
        return Err(Error::io(
            "swapon",
            dev_node,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// swapoff(2) on `dev_node`.
pub(crate) fn swapoff(dev_node: &Path) -> Result<()> {
    let c = cpath(dev_node)?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let rc = unsafe { libc::swapoff(c.as_ptr()) };
    if rc != 0 {
        return Err(Error::io(
            "swapoff",
            dev_node,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use tempfile::TempDir;

    fn tree() -> (TempDir, Root) {
        let t = TempDir::new().unwrap();
        let z = t.path().join("sys/block/zram0");
        fs::create_dir_all(&z).unwrap();
        fs::write(z.join("comp_algorithm"), "lzo lzo-rle [lz4] zstd \n").unwrap();
        fs::write(z.join("disksize"), "4294967296\n").unwrap();
        fs::write(z.join("mem_limit"), "x\n").unwrap();
        fs::create_dir_all(t.path().join("sys/class/zram-control")).unwrap();
        fs::write(t.path().join("sys/class/zram-control/hot_add"), "1\n").unwrap();
        fs::create_dir_all(t.path().join("proc")).unwrap();
        fs::write(
            t.path().join("proc/swaps"),
            "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
             /dev/zram0                              partition\t4194300\t\t512\t\t100\n\
             /swap\\040file                           file\t\t1048572\t\t0\t\t-2\n",
        )
        .unwrap();
        let r = Root::fake(t.path());
        (t, r)
    }

    #[test]
    fn device_files() {
        let (t, r) = tree();
        assert_eq!(device_dir("zram0"), PathBuf::from("/sys/block/zram0"));
        assert_eq!(dev_node("zram0"), PathBuf::from("/dev/zram0"));
        assert!(exists(&r, "zram0"));
        assert!(!exists(&r, "zram1"));
        assert_eq!(hot_add(&r).unwrap(), "zram1");
        let (a, all) = comp_algorithm(&r, "zram0").unwrap();
        assert_eq!(a, "lz4");
        assert_eq!(all, ["lzo", "lzo-rle", "lz4", "zstd"]);
        assert_eq!(disksize(&r, "zram0").unwrap(), 4 << 30);
        assert!(matches!(
            mem_limit(&r, "zram0").unwrap_err(),
            Error::Parse { .. }
        ));
        // A real kernel: mem_limit is write-only, its value is in mm_stat
        // (6.1 in the guest, after `echo 16M > mem_limit`).
        fs::write(
            t.path().join("sys/block/zram0/mm_stat"),
            "       0        0        0 16777216        0        0        0        0        0\n",
        )
        .unwrap();
        assert_eq!(mem_limit(&r, "zram0").unwrap(), 16 << 20);
        let ml = attr_path("zram0", "mem_limit");
        assert_eq!(current(&r, &ml).unwrap().as_deref(), Some("16777216"));
        assert_eq!(current(&r, &attr_path("zram1", "mem_limit")).unwrap(), None);
        assert_eq!(
            current(&r, &attr_path("zram0", "disksize"))
                .unwrap()
                .as_deref(),
            Some("4294967296\n")
        );
        fs::write(t.path().join("sys/block/zram0/mm_stat"), "0 0 0\n").unwrap();
        assert!(matches!(
            mem_limit(&r, "zram0").unwrap_err(),
            Error::Parse { .. }
        ));
        assert!(is_write_only(&ml));
        assert!(is_write_only(&attr_path("zram0", "reset")));
        assert!(is_write_only(Path::new(
            "/sys/class/zram-control/hot_remove"
        )));
        assert!(!is_write_only(&attr_path("zram0", "disksize")));
        assert!(!is_write_only(Path::new("/sys/fs/cgroup/reset")));
        assert_eq!(device_of(&ml).as_deref(), Some("zram0"));
        assert_eq!(device_of(Path::new("/sys/block/sda/reset")), None);
        assert!(disksize(&r, "zram1").unwrap_err().is_not_found());
        // fake write then read-back normalizes
        r.write(&attr_path("zram0", "comp_algorithm"), "zstd")
            .unwrap();
        assert_eq!(comp_algorithm(&r, "zram0").unwrap().0, "zstd");
        fs::write(t.path().join("sys/class/zram-control/hot_add"), "junk").unwrap();
        assert!(matches!(hot_add(&r).unwrap_err(), Error::Parse { .. }));
    }

    #[test]
    fn comp_algorithm_parsing() {
        assert_eq!(parse_comp_algorithm("[zstd]").unwrap().0, "zstd");
        assert_eq!(parse_comp_algorithm("lz4\n").unwrap().0, "lz4");
        assert!(parse_comp_algorithm("lzo lz4").is_none());
        assert!(parse_comp_algorithm("").is_none());
        assert!(parse_comp_algorithm("[] a b").is_none());
    }

    #[test]
    fn proc_swaps() {
        let (_t, r) = tree();
        let s = swaps(&r).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0],
            SwapEntry {
                path: "/dev/zram0".into(),
                kind: "partition".into(),
                size_kib: 4194300,
                used_kib: 512,
                priority: 100
            }
        );
        assert_eq!(s[1].path, "/swap file");
        assert_eq!(s[1].priority, -2);
        assert!(in_use_as_swap(&r, "zram0").unwrap());
        assert!(!in_use_as_swap(&r, "zram1").unwrap());
        assert!(parse_swaps("").is_empty());
        assert!(parse_swaps("garbage\n/dev/x partition a b c\n").is_empty());
        let d = parse_swaps("/var/swap (deleted) file 10 0 -3\n");
        assert_eq!(d[0].path, "/var/swap (deleted)");
    }

    #[test]
    fn swap_header_bytes() {
        let uuid: [u8; 16] = core::array::from_fn(|i| i as u8 + 1);
        let size = 4u64 << 30;
        let h = swap_header(4096, size, uuid).unwrap();
        assert_eq!(h.len(), 4096);
        assert!(h[..1024].iter().all(|&b| b == 0));
        assert_eq!(&h[1024..1028], &1u32.to_le_bytes());
        let last = (size / 4096 - 1) as u32;
        assert_eq!(last, 1_048_575);
        assert_eq!(&h[1028..1032], &last.to_le_bytes());
        assert_eq!(&h[1032..1036], &[0, 0, 0, 0]);
        assert_eq!(&h[1036..1052], &uuid);
        assert!(h[1052..4086].iter().all(|&b| b == 0));
        assert_eq!(&h[4086..], b"SWAPSPACE2");
        // 64 KiB pages: magic moves to the end of the page
        let h = swap_header(65536, 1 << 30, [0; 16]).unwrap();
        assert_eq!(&h[65526..], b"SWAPSPACE2");
        assert_eq!(&h[1028..1032], &16383u32.to_le_bytes());
        // errors
        assert!(swap_header(4096, 4096 * 9, [0; 16]).is_err());
        assert!(swap_header(1000, 1 << 30, [0; 16]).is_err());
        assert!(swap_header(4096, 4096 * (1u64 << 33), [0; 16]).is_err());
    }

    #[test]
    fn write_header_to_plain_file() {
        // A regular file stands in for the block device node.
        let t = TempDir::new().unwrap();
        let node = t.path().join("zram0");
        fs::write(&node, vec![0xaau8; 8192]).unwrap();
        write_swap_header(&node, 1 << 20).unwrap();
        let data = fs::read(&node).unwrap();
        let ps = page_size();
        assert_eq!(&data[ps - 10..ps], b"SWAPSPACE2");
        assert_eq!(data.len(), 8192.max(ps));
        let u = &data[1036..1052];
        assert_eq!(u[6] >> 4, 4);
        // never creates the node
        let e = write_swap_header(&t.path().join("nope"), 1 << 20).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.path(), t.path().join("nope"));
    }

    #[test]
    fn swapon_flags() {
        assert_eq!(swap_flags(None), 0);
        assert_eq!(swap_flags(Some(100)), 0x8000 | 100);
        assert_eq!(swap_flags(Some(0)), 0x8000);
        assert_eq!(swap_flags(Some(40000)), 0x8000 | 0x7fff);
        assert_eq!(
            swap_flags(Some(-1)),
            0,
            "-1 is the kernel default: no prefer flag"
        );
        assert_eq!(swap_flags(Some(-5)), 0);
    }
}
