//! The seed's load matrix (docs/soak.md): CPU per cluster, a
//! memory flip, an IO writer, a loopback network load. `stress-ng` (CPU)
//! and `fio` (IO) run when they are in PATH; otherwise, and for the memory
//! flip and the network load always, built-in loads run as threads of the
//! soak itself. Built-in because the tools are often not on a device image
//! and each load is a few lines of std; no crate does "burn a CPU".
//!
//! A tool runs in its own process group, so stopping it reaches its
//! workers and nothing else (SIGTERM, SIGKILL after 5 s); it also gets the
//! phase's length as its own timeout, so it ends by itself if the soak is
//! killed. Threads stop at a flag, checked at least every 100 ms.

use crate::kernel::topology::{self, CpuGroup};
use crate::kernel::Root;
use crate::units::CpuList;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The memory flip: this share of MemAvailable, held half a period, freed half.
const MEM_SHARE: f64 = 0.4;
pub(crate) const FLIP_PERIOD: Duration = Duration::from_secs(30);
/// On a fake root MemAvailable is the fake tree's: the flip is kept small.
const FAKE_ROOT_MEM_CAP: u64 = 32 << 20;
/// The built-in IO writer's file wraps at this size.
const IO_FILE_MAX: u64 = 64 << 20;
const IO_BLOCK: usize = 256 << 10;
/// fsync after this many bytes.
const IO_SYNC_EVERY: u64 = 4 << 20;
const NET_CHUNK: usize = 64 << 10;

/// One load of the matrix.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    /// One busy worker pinned to the group's CPUs.
    Cpu(CpuGroup),
    /// Allocate and touch `bytes`, hold, free; every [`FLIP_PERIOD`].
    MemFlip { bytes: u64 },
    /// Write and fsync into this directory.
    Io(PathBuf),
    /// A loopback TCP stream.
    Net,
}

/// A load and what runs it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Spec {
    pub(crate) kind: Kind,
    /// The tool's program (`stress-ng`, `fio`) found in PATH; none: built-in.
    pub(crate) tool: Option<PathBuf>,
}

impl Spec {
    /// One line for the soak's start: `cpu policy4 (cpus 4-7): stress-ng`.
    pub(crate) fn describe(&self) -> String {
        let how = match &self.tool {
            Some(t) => t
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            None => "built-in".into(),
        };
        match &self.kind {
            Kind::Cpu(g) => format!("cpu {} (cpus {}): {how}", g.name, g.cpus),
            Kind::MemFlip { bytes } => format!(
                "memory flip {} MiB every {} s: {how}",
                bytes >> 20,
                FLIP_PERIOD.as_secs()
            ),
            Kind::Io(d) => format!("io writer into {}: {how}", d.display()),
            Kind::Net => format!("network loopback TCP: {how}"),
        }
    }
}

/// The program `name` in PATH, if any.
pub(crate) fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The matrix for this board: `groups` from the topology, memory from
/// MemAvailable (under `root`; `fake`: a fake tree, whose MemAvailable is
/// not this machine's), the IO writer into `dir`.
pub(crate) fn plan(root: &Root, fake: bool, groups: &[CpuGroup], dir: &Path) -> Vec<Spec> {
    let stress = which("stress-ng");
    let fio = which("fio");
    let allowed = topology::allowed_cpus();
    // Pinned only to CPUs the soak may use (a fake root names the fake
    // board's CPUs, a cpuset may hide some); a group with none is left out.
    let mut v: Vec<Spec> = groups
        .iter()
        .filter_map(|g| {
            let cpus = if allowed.0.is_empty() {
                g.cpus.clone()
            } else {
                CpuList(g.cpus.0.intersection(&allowed.0).copied().collect())
            };
            (!cpus.0.is_empty()).then(|| Spec {
                kind: Kind::Cpu(CpuGroup {
                    name: g.name.clone(),
                    cpus,
                }),
                tool: stress.clone(),
            })
        })
        .collect();
    let avail = crate::kernel::meminfo::mem_available(root)
        .ok()
        .flatten()
        .unwrap_or(0);
    let mut bytes = (avail as f64 * MEM_SHARE) as u64;
    if fake {
        bytes = bytes.min(FAKE_ROOT_MEM_CAP);
    }
    if bytes >= 1 << 20 {
        v.push(Spec {
            kind: Kind::MemFlip { bytes },
            tool: None,
        });
    }
    v.push(Spec {
        kind: Kind::Io(dir.to_path_buf()),
        tool: fio,
    });
    v.push(Spec {
        kind: Kind::Net,
        tool: None,
    });
    v
}

/// The loads running; stopped by [`Running::stop`] or when dropped.
pub(crate) struct Running {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    children: Vec<(String, Child)>,
    /// Bytes the built-in IO and network loads moved.
    pub(crate) io_bytes: Arc<AtomicU64>,
    pub(crate) net_bytes: Arc<AtomicU64>,
    /// Problems met starting (said once on stderr by the caller).
    pub(crate) warnings: Vec<String>,
}

impl Running {
    /// Starts every load in `specs`; a tool runs at most `limit`.
    pub(crate) fn start(specs: &[Spec], limit: Duration) -> Running {
        let mut r = Running {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            children: Vec::new(),
            io_bytes: Arc::new(AtomicU64::new(0)),
            net_bytes: Arc::new(AtomicU64::new(0)),
            warnings: Vec::new(),
        };
        let secs = limit.as_secs().max(1);
        for s in specs {
            match (&s.kind, &s.tool) {
                (Kind::Cpu(g), Some(tool)) => {
                    let mut c = Command::new(tool);
                    c.args(["--cpu", "1", "--timeout", &format!("{secs}s"), "--quiet"]);
                    if !g.cpus.0.is_empty() {
                        c.args(["--taskset", &g.cpus.to_string()]);
                    }
                    r.spawn(&format!("stress-ng cpu {}", g.name), c);
                }
                (Kind::Io(dir), Some(tool)) => {
                    let mut c = Command::new(tool);
                    c.args([
                        "--name=cgwarden-soak-io",
                        &format!("--directory={}", dir.display()),
                        "--rw=randwrite",
                        "--bs=64k",
                        "--size=64m",
                        "--fsync=64",
                        "--time_based=1",
                        &format!("--runtime={secs}"),
                        "--rate=8m",
                        "--output=/dev/null",
                    ]);
                    r.spawn("fio", c);
                }
                (Kind::Cpu(g), None) => {
                    let (stop, g) = (r.stop.clone(), g.clone());
                    r.thread(&format!("cpu {}", g.name), move || cpu(&stop, &g.cpus));
                }
                (Kind::MemFlip { bytes }, _) => {
                    let (stop, b) = (r.stop.clone(), *bytes);
                    r.thread("memory flip", move || mem_flip(&stop, b));
                }
                (Kind::Io(dir), None) => {
                    let (stop, d, n) = (r.stop.clone(), dir.clone(), r.io_bytes.clone());
                    r.thread("io writer", move || {
                        if let Err(e) = io_writer(&stop, &d, &n) {
                            say!(
                                "cgwarden: warning: soak: io writer into {}: {e}",
                                d.display()
                            );
                        }
                    });
                }
                (Kind::Net, _) => {
                    let (stop, n) = (r.stop.clone(), r.net_bytes.clone());
                    r.thread("network", move || {
                        if let Err(e) = net(&stop, &n) {
                            say!("cgwarden: warning: soak: loopback network load: {e}");
                        }
                    });
                }
            }
        }
        r
    }

    fn spawn(&mut self, what: &str, mut c: Command) {
        use std::os::unix::process::CommandExt;
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        match c.spawn() {
            Ok(child) => self.children.push((what.to_string(), child)),
            Err(e) => self.warnings.push(format!("{what}: cannot start: {e}")),
        }
    }

    fn thread(&mut self, what: &str, f: impl FnOnce() + Send + 'static) {
        match std::thread::Builder::new()
            .name(format!("soak {what}"))
            .spawn(f)
        {
            Ok(h) => self.threads.push(h),
            Err(e) => self.warnings.push(format!("{what}: cannot start: {e}")),
        }
    }

    /// How many loads run (threads and tools).
    pub(crate) fn count(&self) -> usize {
        self.threads.len() + self.children.len()
    }

    /// Stops every load and waits for it: the flag for threads, SIGTERM to
    /// each tool's process group (SIGKILL after 5 s).
    pub(crate) fn stop(&mut self) {
        use nix::sys::signal::{killpg, Signal};
        use nix::unistd::Pid;
        self.stop.store(true, Ordering::SeqCst);
        for (_, c) in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = killpg(Pid::from_raw(c.id() as i32), Signal::SIGTERM);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (_, c) in &mut self.children {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = killpg(Pid::from_raw(c.id() as i32), Signal::SIGKILL);
                        let _ = c.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
        }
        self.children.clear();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Busy until `stop`, pinned to `cpus` when it can be.
fn cpu(stop: &AtomicBool, cpus: &CpuList) {
    if !cpus.0.is_empty() {
        let _ = topology::pin_current_thread(cpus);
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while !stop.load(Ordering::Relaxed) {
        let until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < until {
            for _ in 0..1000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            std::hint::black_box(x);
        }
    }
}

/// Sleeps `d` in steps, ending early at `stop`; false when stopped.
fn nap(stop: &AtomicBool, d: Duration) -> bool {
    let until = Instant::now() + d;
    while Instant::now() < until {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(100)));
    }
    !stop.load(Ordering::Relaxed)
}

/// Allocates `bytes` in 1 MiB chunks touching every page, holds them half
/// a period, frees them, waits the other half; again until `stop`. An
/// allocation the system refuses ends the cycle early (no abort).
fn mem_flip(stop: &AtomicBool, bytes: u64) {
    const CHUNK: usize = 1 << 20;
    let half = FLIP_PERIOD / 2;
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        let mut held: Vec<Vec<u8>> = Vec::new();
        let mut got = 0u64;
        while got < bytes && !stop.load(Ordering::Relaxed) {
            let mut v: Vec<u8> = Vec::new();
            if v.try_reserve_exact(CHUNK).is_err() {
                break;
            }
            v.resize(CHUNK, 0);
            for i in (0..CHUNK).step_by(4096) {
                v[i] = (i & 0xff) as u8 | 1;
            }
            std::hint::black_box(&v);
            held.push(v);
            got += CHUNK as u64;
        }
        if !nap(stop, half.saturating_sub(t0.elapsed())) {
            return;
        }
        drop(held);
        if !nap(stop, half) {
            return;
        }
    }
}

/// Writes 256 KiB blocks into `dir/cgwarden-soak-io.bin`, fsync every
/// 4 MiB and a 50 ms pause, wrapping at 64 MiB; removes the file at the end.
fn io_writer(stop: &AtomicBool, dir: &Path, moved: &AtomicU64) -> std::io::Result<()> {
    use std::io::{Seek, Write};
    let path = dir.join("cgwarden-soak-io.bin");
    let mut f = std::fs::File::create(&path)?;
    let mut block = vec![0u8; IO_BLOCK];
    let mut seed: u32 = 0x1234_5678;
    let mut pos = 0u64;
    let mut since_sync = 0u64;
    let result = (|| {
        while !stop.load(Ordering::Relaxed) {
            // Not zeros: compressing storage must still write.
            for b in block.iter_mut().step_by(64) {
                seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                *b = (seed >> 24) as u8;
            }
            f.write_all(&block)?;
            pos += IO_BLOCK as u64;
            since_sync += IO_BLOCK as u64;
            moved.fetch_add(IO_BLOCK as u64, Ordering::Relaxed);
            if since_sync >= IO_SYNC_EVERY {
                f.sync_data()?;
                since_sync = 0;
                nap(stop, Duration::from_millis(50));
            }
            if pos >= IO_FILE_MAX {
                f.seek(std::io::SeekFrom::Start(0))?;
                pos = 0;
            }
        }
        Ok(())
    })();
    drop(f);
    let _ = std::fs::remove_file(&path);
    result
}

/// A loopback TCP stream: 64 KiB writes with a 1 ms pause (at most about
/// 64 MB/s), read and dropped by a second thread.
fn net(stop: &AtomicBool, moved: &AtomicU64) -> std::io::Result<()> {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    let addr = l.local_addr()?;
    let reader = std::thread::Builder::new()
        .name("soak network rx".into())
        .spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let mut buf = vec![0u8; NET_CHUNK];
                while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            }
        })?;
    let mut s = std::net::TcpStream::connect(addr)?;
    let chunk = vec![0x5au8; NET_CHUNK];
    let r = (|| {
        while !stop.load(Ordering::Relaxed) {
            s.write_all(&chunk)?;
            moved.fetch_add(NET_CHUNK as u64, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    })();
    drop(s);
    let _ = reader.join();
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_has_one_cpu_load_per_group_a_flip_io_and_net() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("proc")).unwrap();
        std::fs::write(
            root.join("proc/meminfo"),
            "MemTotal: 8000000 kB\nMemAvailable: 4000000 kB\n",
        )
        .unwrap();
        let groups = vec![
            CpuGroup {
                name: "policy0".into(),
                cpus: CpuList([0, 1].into()),
            },
            CpuGroup {
                name: "policy4".into(),
                cpus: CpuList([1, 4, 5].into()),
            },
        ];
        let p = plan(&Root::fake(&root), true, &groups, t.path());
        // Each group pinned to the CPUs this process may use; a group
        // with none of them is left out.
        let allowed = topology::allowed_cpus();
        let cpus: Vec<&CpuGroup> = p
            .iter()
            .filter_map(|s| match &s.kind {
                Kind::Cpu(g) => Some(g),
                _ => None,
            })
            .collect();
        let expect = groups
            .iter()
            .filter(|g| g.cpus.iter().any(|c| allowed.0.contains(&c)))
            .count();
        assert_eq!(cpus.len(), expect);
        assert!(cpus.iter().all(|g| g.cpus.is_subset(&allowed)));
        // The fake root's 40 % of 4 GB is capped.
        assert!(p.contains(&Spec {
            kind: Kind::MemFlip {
                bytes: FAKE_ROOT_MEM_CAP
            },
            tool: None
        }));
        assert!(p.iter().any(|s| matches!(s.kind, Kind::Io(_))));
        assert!(p.iter().any(|s| s.kind == Kind::Net));
        // No meminfo: no flip, no panic.
        std::fs::remove_file(root.join("proc/meminfo")).unwrap();
        let p = plan(&Root::fake(&root), true, &groups, t.path());
        assert!(!p.iter().any(|s| matches!(s.kind, Kind::MemFlip { .. })));
    }

    #[test]
    fn built_in_loads_run_and_stop_promptly() {
        let t = tempfile::tempdir().unwrap();
        let specs = vec![
            Spec {
                kind: Kind::MemFlip { bytes: 4 << 20 },
                tool: None,
            },
            Spec {
                kind: Kind::Io(t.path().to_path_buf()),
                tool: None,
            },
            Spec {
                kind: Kind::Net,
                tool: None,
            },
            Spec {
                kind: Kind::Cpu(CpuGroup {
                    name: "any".into(),
                    cpus: CpuList::default(),
                }),
                tool: None,
            },
        ];
        let mut r = Running::start(&specs, Duration::from_secs(5));
        assert_eq!(r.count(), 4, "{:?}", r.warnings);
        std::thread::sleep(Duration::from_millis(400));
        let t0 = Instant::now();
        r.stop();
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert!(r.io_bytes.load(Ordering::Relaxed) > 0);
        assert!(r.net_bytes.load(Ordering::Relaxed) > 0);
        assert!(!t.path().join("cgwarden-soak-io.bin").exists());
    }
}
