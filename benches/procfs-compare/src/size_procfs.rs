//! The six reads of /proc/PID through the `procfs` crate.
fn main() {
    let pid: i32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::process::id() as i32);
    let Ok(p) = procfs::process::Process::new(pid) else {
        return;
    };
    let stat = p.stat().map(|s| s.comm);
    let status = p.status().map(|s| s.ruid);
    let cmdline = p.cmdline().map(|c| c.len());
    let cgroup = p.cgroups().map(|c| c.0.len());
    let exe = p.exe();
    println!("{stat:?} {status:?} {cmdline:?} {cgroup:?} {exe:?}");
}
