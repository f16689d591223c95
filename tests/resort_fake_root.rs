//! Last resorts on a fake root, the daemon end to end: a rule's `freeze` writes
//! the group's `cgroup.freeze`, its `kill in … prefer … avoid …` chooses the
//! largest preferred process (never the critical or avoided one, larger as
//! they are) and reports it without signalling (fake pids are not
//! processes); a critical process found gone by a scan is a
//! `critical_exit`; the memory telemetry scraped over the metrics socket
//! equals the fake tree's files.

use cgwarden::testing::FakeProcess;
use std::process::Command;
use std::time::Duration;

mod support;
use support::{board, memory_events, read, run, Daemon, Start};

const POLICY: &str = r#"
version: 1
settings:
  critical: [crit]
  metrics:
    socket: /run/cgwarden/metrics.sock
groups:
  work: { memory: { max: 2G } }
  rec: { cpu: { weight: 50 } }
placement:
  - match: { comm: "batch*" }
    group: work
  - match: { comm: crit }
    group: work
  - match: { comm: avoidme }
    group: work
  - match: { comm: bystander }
    group: work
  - match: { comm: recorder }
    group: rec
rules:
  - name: squeeze
    when: work.memory.events.oom_kill > 0
    then:
      - freeze rec
      - kill in work prefer "batch*" avoid avoidme grace 1s
"#;

#[test]
fn freeze_then_kill_the_largest_preferred_and_a_critical_exit() {
    let tmp = tempfile::tempdir().unwrap();
    let (t, policy, root) = board(tmp.path(), POLICY);
    let procs = [
        (410, "crit", 900_000),
        (411, "avoidme", 800_000),
        (412, "bystander", 500_000),
        (413, "batch1", 100_000),
        (414, "batch2", 300_000),
        (415, "recorder", 1_000),
    ];
    for (pid, comm, rss_kib) in procs {
        t.add_process(&FakeProcess::new(pid, comm)).unwrap();
        let status = root.join(format!("proc/{pid}/status"));
        let mut s = std::fs::read_to_string(&status).unwrap();
        s.push_str(&format!("VmRSS:\t{rss_kib} kB\n"));
        std::fs::write(&status, s).unwrap();
    }
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_for("placement", Duration::from_secs(20), || {
        read(&root, "sys/fs/cgroup/work/cgroup.procs")
            .lines()
            .count()
            == 5
    });
    // Seen at 0 first (the baseline), then one OOM kill.
    memory_events(&root, "work", 0);
    std::thread::sleep(Duration::from_millis(600));
    memory_events(&root, "work", 1);
    d.wait_log("kill in work: would kill", Duration::from_secs(20));
    let log = d.log();
    assert!(
        log.contains("would kill batch2 (pid 414, RSS 300000 KiB, preferred)")
            && log.contains("not signalled: fake root")
            && log.contains("work.memory.events.oom_kill"),
        "{log}"
    );
    assert_eq!(read(&root, "sys/fs/cgroup/rec/cgroup.freeze").trim(), "1");
    let freeze_at = log.find("freeze rec:").expect("a freeze line");
    assert!(freeze_at < log.find("would kill").unwrap(), "{log}");

    // The critical process is gone (its /proc entry with it): the next
    // scan reports it.
    std::fs::remove_dir_all(root.join("proc/410")).unwrap();
    d.wait_log(
        "critical process crit (pid 410) found gone by a scan",
        Duration::from_secs(20),
    );

    // Telemetry and counters over the metrics socket.
    let sock = root.join("run/cgwarden/metrics.sock");
    d.wait_for("the metrics socket", Duration::from_secs(10), || {
        sock.exists()
    });
    let o = run(Command::new("curl").args([
        "-s",
        "--unix-socket",
        sock.to_str().unwrap(),
        "http://localhost/metrics",
    ]));
    let text = o.stdout;
    for want in [
        "cgwarden_vmstat_total{field=\"pgfault\"} 4021137",
        "cgwarden_vmstat_total{field=\"allocstall\"} 3",
        "cgwarden_zram_mm_stat_bytes{device=\"zram0\",field=\"orig_data_size\"} 0",
        "cgwarden_critical_exits_total{name=\"crit\"} 1",
        "cgwarden_freezes_total{group=\"rec\"} 1",
        "cgwarden_cgroup_memory_events_total{group=\"host\",event=\"oom_kill\"} 0",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // The fragmentation index of order 3 from the fake buddyinfo: free
    // pages in blocks below 8 pages over all free pages.
    let b: Vec<Vec<u64>> = read(&root, "proc/buddyinfo")
        .lines()
        .map(|l| {
            l.split_whitespace()
                .skip(4)
                .map(|n| n.parse().unwrap())
                .collect()
        })
        .collect();
    let pages = |o: usize| -> u64 { b.iter().map(|z| z[o] << o).sum() };
    let total: u64 = (0..11).map(pages).sum();
    let small: u64 = (0..3).map(pages).sum();
    let want = small as f64 / total as f64;
    let got: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("cgwarden_memory_fragmentation_index{order=\"3\"} "))
        .expect("order 3 exported")
        .parse()
        .unwrap();
    assert!((got - want).abs() < 1e-9, "{got} vs {want}");
    let (code, _) = d.stop();
    assert_eq!(code, 0);
}
