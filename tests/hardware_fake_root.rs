//! Hardware knobs on a fake tree shaped like a Qualcomm board's sysfs: governor
//! tunables re-applied after a governor switch, devfreq, caps that beat boosts,
//! thermal throttling. The fixtures' layouts come from the kernel's ABI
//! documents (Documentation/ABI/testing/sysfs-class-devfreq,
//! sysfs-class-thermal / thermal sysfs-api.rst, cpu-freq/user-guide) and the
//! qcom-cpufreq-hw and LMh drivers (drivers/cpufreq/qcom-cpufreq-hw.c,
//! drivers/thermal/qcom/lmh.c); each helper says which.

use std::path::Path;
use std::time::Duration;

mod support;
use support::{board, read, Daemon, Start};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(&p, format!("{text}\n")).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
}

/// A thermal zone as `thermal_zone_device_register` lays it out
/// (Documentation/driver-api/thermal/sysfs-api.rst): `type`, `temp` in
/// millidegrees, `trip_point_N_{type,temp}`. Qualcomm's tsens zones are
/// named like `cpu-1-3` (arch/arm64/boot/dts/qcom/sa8775p.dtsi).
fn zone(root: &Path, n: u32, kind: &str, temp_mc: i64, trips: &[(&str, i64)]) {
    let d = format!("sys/class/thermal/thermal_zone{n}");
    write(root, &format!("{d}/type"), kind);
    write(root, &format!("{d}/temp"), &temp_mc.to_string());
    write(root, &format!("{d}/mode"), "enabled");
    for (i, (t, c)) in trips.iter().enumerate() {
        write(root, &format!("{d}/trip_point_{i}_type"), t);
        write(root, &format!("{d}/trip_point_{i}_temp"), &c.to_string());
        write(root, &format!("{d}/trip_point_{i}_hyst"), "2000");
    }
}

/// Mainline schedutil on `policy` (one `rate_limit_us`, default 1000 µs:
/// kernel/sched/cpufreq_schedutil.c, `cpufreq_policy_transition_delay_us`)
/// in place of the standard tree's vendor up/down limits, and the default
/// the fake kernel recreates the directory with at a governor switch.
fn mainline_schedutil(root: &Path, policy: &str) {
    let d = format!("sys/devices/system/cpu/cpufreq/{policy}");
    for dir in [
        format!("{d}/schedutil"),
        format!("{d}/.governor-defaults/schedutil"),
    ] {
        let _ = std::fs::remove_dir_all(root.join(&dir));
        write(root, &format!("{dir}/rate_limit_us"), "1000");
    }
}

fn set_temp(root: &Path, n: u32, temp_mc: i64) {
    write(
        root,
        &format!("sys/class/thermal/thermal_zone{n}/temp"),
        &temp_mc.to_string(),
    );
}

/// Governor tunables: a governor switch recreates the governor's directory
/// with the kernel's defaults (the fake tree emulates it), and cgwarden
/// writes the tunables again after every governor write.
#[test]
fn rate_limit_tunable_is_reapplied_after_a_governor_change() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: tunables
system:
  cpufreq:
    policy4: { governor: "schedutil|ondemand", rate_limit_us: 500 }
rules:
  - name: hot
    when: thermal.cpu-1-0.temp > 90C
    while:
      - set cpufreq.policy4.governor = powersave
"#,
    );
    zone(&root, 0, "cpu-1-0", 40_000, &[("passive", 95_000)]);
    mainline_schedutil(&root, "policy4");
    let gov = "sys/devices/system/cpu/cpufreq/policy4/scaling_governor";
    let rl = "sys/devices/system/cpu/cpufreq/policy4/schedutil/rate_limit_us";
    assert_eq!(read(&root, rl), "1000", "the fake kernel's default");

    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_for("baseline rate limit", Duration::from_secs(10), || {
        read(&root, rl) == "500"
    });
    set_temp(&root, 0, 92_000);
    d.wait_for("powersave", Duration::from_secs(10), || {
        read(&root, gov) == "powersave"
    });
    assert!(
        !root.join(rl).exists(),
        "schedutil's directory went away with it"
    );
    set_temp(&root, 0, 40_000);
    d.wait_for("schedutil again", Duration::from_secs(10), || {
        read(&root, gov) == "schedutil"
    });
    d.wait_for(
        "the tunable written again, not left at the default",
        Duration::from_secs(10),
        || root.join(rl).exists() && read(&root, rl) == "500",
    );
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(!log.contains("ERROR"), "{log}");
}

/// `plan` and `apply` on the same board: the fallback list resolves to the
/// first governor offered, the tunable follows the governor, and a governor
/// without the tunable makes it missing.
#[test]
fn plan_resolves_fallback_lists_and_orders_tunables_after_the_governor() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: tunables
system:
  cpufreq:
    policy0: { governor: "walt|schedutil", rate_limit_us: 2000 }
    policy4: { governor: "schedutil", rate_limit_us: 500 }
    policy7: { governor: performance, up_rate_limit_us: 500 }
"#,
    );
    mainline_schedutil(&root, "policy0");
    mainline_schedutil(&root, "policy4");
    // policy4 runs ondemand: no schedutil directory yet.
    write(
        &root,
        "sys/devices/system/cpu/cpufreq/policy4/scaling_governor",
        "ondemand",
    );
    std::fs::remove_dir_all(root.join("sys/devices/system/cpu/cpufreq/policy4/schedutil")).unwrap();
    let out = support::cgwarden(&[
        "plan",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    let text = format!("{}{}", out.stdout, out.stderr);
    // policy0: walt is not offered, schedutil is and runs: only the tunable.
    assert!(
        text.contains(
            "WRITE /sys/devices/system/cpu/cpufreq/policy0/schedutil/rate_limit_us 2000 (was 1000)"
        ),
        "{text}"
    );
    assert!(!text.contains("policy0/scaling_governor"), "{text}");
    // policy4: the switch first, then the tunable in the new governor's directory.
    let g = text
        .find("WRITE /sys/devices/system/cpu/cpufreq/policy4/scaling_governor schedutil (was ondemand)")
        .unwrap_or_else(|| panic!("{text}"));
    let t = text
        .find("WRITE /sys/devices/system/cpu/cpufreq/policy4/schedutil/rate_limit_us 500 (was -)")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(g < t, "{text}");
    // policy7: performance has no tunables at all.
    assert!(
        text.contains("cpufreq policy7: governor `performance` has no tunables"),
        "{text}"
    );
    // apply carries it out: the fake kernel recreates schedutil's directory
    // at the switch, with its default, then cgwarden writes 500.
    let out = support::cgwarden(&[
        "apply",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(
        read(
            &root,
            "sys/devices/system/cpu/cpufreq/policy4/scaling_governor"
        ),
        "schedutil",
        "{}",
        out.stderr
    );
    assert_eq!(
        read(
            &root,
            "sys/devices/system/cpu/cpufreq/policy4/schedutil/rate_limit_us"
        ),
        "500",
        "{}",
        out.stderr
    );
    assert_eq!(
        read(
            &root,
            "sys/devices/system/cpu/cpufreq/policy0/schedutil/rate_limit_us"
        ),
        "2000"
    );
}

/// The vendor kernel's schedutil (up/down limits) on a policy that keeps
/// its governor: plain writes, journalled and restored by `reset`.
#[test]
fn vendor_up_down_rate_limits_apply_and_reset() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: tunables
system:
  cpufreq:
    policy7: { governor: schedutil, up_rate_limit_us: 500, down_rate_limit_us: 2000 }
"#,
    );
    let v = "sys/devices/system/cpu/cpufreq/policy7/schedutil";
    assert!(
        !root.join(format!("{v}/rate_limit_us")).exists(),
        "the standard tree is a vendor kernel"
    );
    write(&root, &format!("{v}/up_rate_limit_us"), "0");
    write(&root, &format!("{v}/down_rate_limit_us"), "20000");
    let p = policy.to_str().unwrap();
    let r = root.to_str().unwrap();
    let out = support::cgwarden(&["apply", p, "--root", r]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(read(&root, &format!("{v}/up_rate_limit_us")), "500");
    assert_eq!(read(&root, &format!("{v}/down_rate_limit_us")), "2000");
    let out = support::cgwarden(&["reset", p, "--root", r]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(read(&root, &format!("{v}/up_rate_limit_us")), "0");
    assert_eq!(read(&root, &format!("{v}/down_rate_limit_us")), "20000");
}

fn cli(root: &Path, policy: &Path, args: &[&str]) -> support::Run {
    support::run(
        std::process::Command::new(support::BIN)
            .arg(args[0])
            .arg("--policy")
            .arg(policy)
            .arg("--root")
            .arg(root)
            .args(&args[1..]),
    )
}

/// The Adreno GPU's devfreq device as kgsl registers it on a Qualcomm board
/// (Documentation/ABI/testing/sysfs-class-devfreq: min_freq/max_freq/
/// cur_freq in Hz, governor, available_governors, available_frequencies).
/// The name is the device tree node's (`3d00000.qcom,kgsl-3d0`).
const GPU: &str = "sys/class/devfreq/3d00000.qcom,kgsl-3d0";

fn gpu(t: &cgwarden::testing::FakeTree) {
    let mhz = [220, 285, 350, 400, 500, 587, 700, 812].map(|m: u64| m * 1_000_000);
    t.devfreq_device(
        GPU,
        "msm-adreno-tz performance powersave userspace simple_ondemand",
        &mhz,
        285_000_000,
    )
    .unwrap();
}

/// devfreq as baseline and as a boost: the boost raises the GPU's floor,
/// its release puts the baseline back, and `reset` the kernel's original.
#[test]
fn devfreq_baseline_boost_release_and_reset() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: gpu
system:
  devfreq:
    "3d00000.qcom,kgsl-3d0": { governor: msm-adreno-tz, min: 285MHz, max: 700MHz }
"#,
    );
    gpu(&t);
    let min = format!("{GPU}/min_freq");
    let max = format!("{GPU}/max_freq");
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    d.wait_for("baseline", Duration::from_secs(10), || {
        read(&root, &min) == "285000000" && read(&root, &max) == "700000000"
    });
    let b = cli(
        &root,
        &policy,
        &[
            "boost",
            "devfreq.3d00000.qcom,kgsl-3d0.min=587MHz",
            "--for",
            "1h",
        ],
    );
    assert_eq!(b.code, 0, "{}{}", b.stdout, b.stderr);
    d.wait_for("boosted floor", Duration::from_secs(10), || {
        read(&root, &min) == "587000000"
    });
    let r = cli(&root, &policy, &["release", "1"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    d.wait_for("baseline again", Duration::from_secs(10), || {
        read(&root, &min) == "285000000"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    let out = support::cgwarden(&[
        "reset",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(read(&root, &min), "220000000");
    assert_eq!(read(&root, &max), "812000000");
    // doctor lists the device and its governors.
    write(&root, "proc/cmdline", "console=ttyMSM0 psi=1");
    let doc = support::cgwarden(&[
        "doctor",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert!(
        doc.stdout.contains("devfreq 3d00000.qcom,kgsl-3d0: governor msm-adreno-tz (offers msm-adreno-tz performance powersave userspace simple_ondemand), cur 285MHz min 220MHz max 812MHz"),
        "{}{}",
        doc.stdout,
        doc.stderr
    );
}

/// A cap beats a boost: while the RT core's zone
/// is hot, `cap cpufreq.policy7.max at 1.8GHz` holds policy7's ceiling at
/// 1.8 GHz although a boost asks 2.4 GHz; when the zone cools the boost's
/// value takes over, and `status` names the cap as the winner meanwhile.
#[test]
fn a_cap_holds_policy7_max_while_a_boost_asks_more() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: caps
system:
  cpufreq:
    policy7: { max: 2GHz }
rules:
  - name: rt-core-hot
    when: thermal.cpu-1-3.temp > 85C
    while:
      - cap cpufreq.policy7.max at 1.8GHz
"#,
    );
    zone(&root, 3, "cpu-1-3", 60_000, &[("passive", 95_000)]);
    let max = "sys/devices/system/cpu/cpufreq/policy7/scaling_max_freq";
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    d.wait_for("baseline", Duration::from_secs(10), || {
        read(&root, max) == "2000000"
    });
    let b = cli(
        &root,
        &policy,
        &["boost", "cpufreq.policy7.max=2.4GHz", "--for", "1h"],
    );
    assert_eq!(b.code, 0, "{}{}", b.stdout, b.stderr);
    d.wait_for("boost", Duration::from_secs(10), || {
        read(&root, max) == "2400000"
    });
    set_temp(&root, 3, 90_000);
    d.wait_for(
        "the cap wins over the boost",
        Duration::from_secs(10),
        || read(&root, max) == "1800000",
    );
    let st = cli(&root, &policy, &["status"]);
    assert!(
        st.stdout
            .lines()
            .any(|l| l.contains("cap cpufreq.policy7.max")
                && l.contains("1.8GHz")
                && l.contains("rule rt-core-hot")),
        "{}",
        st.stdout
    );
    // Still held a while later: the boost does not win it back.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(read(&root, max), "1800000");
    set_temp(&root, 3, 60_000);
    d.wait_for("the boost again", Duration::from_secs(10), || {
        read(&root, max) == "2400000"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

/// `boost --cap`: an operator's cap beats a rule's raise and a
/// boost's; a non-root caller needs a `control.cap` grant for it, which a
/// `boost:` grant of the same knob does not give.
#[test]
fn boost_cap_beats_raises_and_needs_a_cap_grant() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: caps
settings: { socket_group: vision }
system:
  cpufreq:
    policy7: { max: 2GHz }
control:
  - group: vision
    boost: ["cpufreq.policy7.max"]
  - uid: 1002
    cap: ["cpufreq.*.max"]
"#,
    );
    let max = "sys/devices/system/cpu/cpufreq/policy7/scaling_max_freq";
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_log("control socket listening", Duration::from_secs(10));
    d.wait_for("baseline", Duration::from_secs(10), || {
        read(&root, max) == "2000000"
    });
    let b = cli(
        &root,
        &policy,
        &["boost", "cpufreq.policy7.max=2.4GHz", "--for", "1h"],
    );
    assert_eq!(b.code, 0, "{}{}", b.stdout, b.stderr);
    d.wait_for("boost", Duration::from_secs(10), || {
        read(&root, max) == "2400000"
    });
    let c = cli(
        &root,
        &policy,
        &[
            "boost",
            "--cap",
            "cpufreq.policy7.max=1.8GHz",
            "--for",
            "1h",
        ],
    );
    assert_eq!(c.code, 0, "{}{}", c.stdout, c.stderr);
    d.wait_for("the cap wins", Duration::from_secs(10), || {
        read(&root, max) == "1800000"
    });
    let st = cli(&root, &policy, &["status"]);
    assert!(
        st.stdout.contains("cap cpufreq.policy7.max"),
        "the cap listed as such: {}",
        st.stdout
    );
    // A cap on a knob that is no ceiling is rejected.
    let bad = cli(
        &root,
        &policy,
        &["boost", "--cap", "cpufreq.policy7.min=1GHz", "--for", "1h"],
    );
    assert_ne!(bad.code, 0, "{}{}", bad.stdout, bad.stderr);
    assert!(bad.stderr.contains("cannot be capped"), "{}", bad.stderr);
    let r = cli(&root, &policy, &["release", "2"]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    d.wait_for("the boost again", Duration::from_secs(10), || {
        read(&root, max) == "2400000"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}

/// `system.irqs` on a fake tree shaped like a Qualcomm board's
/// `/sys/kernel/irq/N/actions` (the LMh/dcvsh IRQ of qcom-cpufreq-hw is
/// `dcvsh-irq-N`, the CAN controller's `can0`): `apply` pins the matched
/// IRQs, `housekeeping_cpus` leaves them alone, `reset` restores them, and
/// the daemon pins an IRQ that appears later (on a fake tree at the
/// rescan: it has no device events).
#[test]
fn irqs_by_action_name_apply_reset_and_appear_later() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: irqs
settings: { rescan: 200ms }
system:
  realtime: { housekeeping_cpus: "0-6" }
  irqs:
    - name: "can*"          # the CAN IRQ goes to the RT core
      cpus: "7"
    - name: "dcvsh-irq-*"   # LMh throttle IRQs stay off the RT core
      cpus: "0-3"
    - name: "wlan*"         # no such IRQ on this board: said once
      cpus: "0-3"
"#,
    );
    for (n, a) in [
        (24, "can0"),
        (25, "dcvsh-irq-0"),
        (26, "dcvsh-irq-4"),
        (9, "acpi"),
    ] {
        write(&root, &format!("sys/kernel/irq/{n}/actions"), a);
    }
    let aff = |n: u32| read(&root, &format!("proc/irq/{n}/smp_affinity_list"));
    let p = policy.to_str().unwrap();
    let r = root.to_str().unwrap();
    let unmatched = "system.irqs `wlan*`: no IRQ in /proc/interrupts matches";
    let plan = support::cgwarden(&["plan", p, "--root", r]);
    assert_eq!(plan.stderr.matches(unmatched).count(), 1, "{}", plan.stderr);
    assert!(!plan.stderr.contains("`can*`"), "{}", plan.stderr);
    let out = support::cgwarden(&["apply", p, "--root", r]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert_eq!(out.stderr.matches(unmatched).count(), 1, "{}", out.stderr);
    assert_eq!(aff(24), "7");
    assert_eq!(aff(25), "0-3");
    assert_eq!(aff(26), "0-3");
    assert_eq!(aff(9), "0-6", "housekeeping for the rest");
    let plan = support::cgwarden(&["plan", p, "--root", r]);
    assert!(plan.stdout.contains("0 changes"), "{}", plan.stdout);
    let out = support::cgwarden(&["reset", p, "--root", r]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for n in [24, 25, 26, 9] {
        assert_eq!(aff(n), "0-7", "irq {n}");
    }
    // The daemon: a CAN IRQ that appears later is pinned at the next rescan.
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_for("startup", Duration::from_secs(10), || aff(24) == "7");
    write(&root, "proc/irq/40/smp_affinity_list", "0-7");
    write(&root, "sys/kernel/irq/40/actions", "can1");
    d.wait_for("the new CAN IRQ pinned", Duration::from_secs(10), || {
        aff(40) == "7"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("cause=\"rescan\""), "{log}");
    let out = support::cgwarden(&["reset", p, "--root", r]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(aff(40), "0-7");
    assert_eq!(aff(24), "0-7");
}

/// Thermal throttling: `throttled(policy7)` as a condition and
/// the episodes it counts — one per rising edge — as the metric
/// `cgwarden_throttle_episodes_total{policy}`, `throttle` events in the
/// recorder and the report's thermal criterion. The fixtures: policy7 of
/// the standard tree (2.8416 GHz), the vendor qcom-cpufreq-hw LMh limit
/// `cpu7/dcvsh_freq_limit` (4294967295 = U32_MAX while unthrottled), and
/// the mainline cpufreq cooling device `cpufreq-cpu7` (cur_state 0..17).
#[test]
fn a_throttle_episode_is_counted_once_per_rising_edge() {
    let dir = tempfile::tempdir().unwrap();
    let (_t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: throttle
settings:
  metrics: { textfile: /var/lib/node_exporter/cgwarden.prom, interval: 1s }
  recorder: { dir: /var/lib/cgwarden, interval: 1s }
rules:
  - name: rt-core-clipped
    when: throttled(policy7) and cpufreq.policy7.limit < 2GHz
    while:
      - set sysctl.vm.swappiness = 10
"#,
    );
    let lmh = "sys/devices/system/cpu/cpu7/dcvsh_freq_limit";
    write(&root, lmh, "4294967295");
    write(
        &root,
        "sys/devices/system/cpu/cpufreq/policy7/scaling_cur_freq",
        "2419200",
    );
    let cdev = "sys/class/thermal/cooling_device3";
    write(&root, &format!("{cdev}/type"), "cpufreq-cpu7");
    write(&root, &format!("{cdev}/cur_state"), "0");
    write(&root, &format!("{cdev}/max_state"), "17");
    let sw = "proc/sys/vm/swappiness";
    let prom = "var/lib/node_exporter/cgwarden.prom";
    let episodes = |root: &Path| -> Option<String> {
        std::fs::read_to_string(root.join(prom)).ok().and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("cgwarden_throttle_episodes_total{policy=\"policy7\"}"))
                .map(|l| l.rsplit(' ').next().unwrap_or("").to_string())
        })
    };
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_for("the counter at 0", Duration::from_secs(10), || {
        episodes(&root).as_deref() == Some("0")
    });
    assert_ne!(read(&root, sw), "10");
    // LMh clips policy7 to 1.8 GHz: an episode, and the rule fires.
    write(&root, lmh, "1804800");
    d.wait_for("the rule on throttled()", Duration::from_secs(10), || {
        read(&root, sw) == "10"
    });
    d.wait_for("one episode", Duration::from_secs(10), || {
        episodes(&root).as_deref() == Some("1")
    });
    d.wait_for(
        "the limit and throttled gauges",
        Duration::from_secs(10),
        || {
            std::fs::read_to_string(root.join(prom)).is_ok_and(|t| {
                t.contains("cgwarden_cpufreq_limit_hertz{policy=\"policy7\"} 1804800000")
                    && t.contains("cgwarden_cpufreq_throttled{policy=\"policy7\"} 1")
            })
        },
    );
    // Held for many ticks: still one.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(episodes(&root).as_deref(), Some("1"));
    // Released, then the cooling device steps in: a second episode (the
    // rule's frequency test stays false: the limit is the ceiling again).
    write(&root, lmh, "4294967295");
    d.wait_for("the rule clears", Duration::from_secs(10), || {
        read(&root, sw) != "10"
    });
    write(&root, &format!("{cdev}/cur_state"), "3");
    d.wait_for("two episodes", Duration::from_secs(10), || {
        episodes(&root).as_deref() == Some("2")
    });
    write(&root, &format!("{cdev}/cur_state"), "0");
    std::thread::sleep(Duration::from_millis(1500));
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert_eq!(log.matches("throttle episode").count(), 2, "{log}");
    // The report counts the recorder's throttle events.
    let rep = support::cgwarden(&[
        "report",
        "--policy",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&rep.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", rep.stdout, rep.stderr));
    let t: Vec<&serde_json::Value> = v["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == "thermal_throttling")
        .collect();
    assert_eq!(t.len(), 1, "{v:#}");
    assert_eq!(t[0]["subject"], "cpufreq policy7", "{v:#}");
    assert_eq!(t[0]["measured"], 2.0, "{v:#}");
}

/// `settings.drift`: a knob written behind the
/// daemon's back is seen at the next check — a `drift` warning and the
/// `cgwarden_drift_total{knob}` counter — and with `on_drift: restore` put
/// back, the journal keeping the original from before the daemon.
/// `doctor` names a tuner that writes the same knobs (tuned here).
#[test]
fn drift_is_seen_and_restored_and_other_tuners_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let (t, policy, root) = board(
        dir.path(),
        r#"version: 1
product: drift
settings:
  drift: { interval: 1s, on_drift: restore }
  metrics: { textfile: /var/lib/node_exporter/cgwarden.prom, interval: 1s }
system:
  sysctl: { vm.swappiness: 33 }
  cpufreq:
    policy4: { governor: "schedutil|ondemand", up_rate_limit_us: 500 }
"#,
    );
    t.add_process(&cgwarden::testing::FakeProcess::new(321, "tuned"))
        .unwrap();
    let sw = "proc/sys/vm/swappiness";
    let journal = "run/cgwarden/originals";
    let d = Daemon::start(&policy, &root, Start::default());
    d.wait_for("baseline", Duration::from_secs(10), || {
        read(&root, sw) == "33"
    });
    let before = std::fs::read_to_string(root.join(journal)).unwrap();
    // A fallback list resolved to schedutil is not a drift.
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!d.log().contains("drift:"), "{}", d.log());
    write(&root, sw, "77");
    d.wait_for("restored", Duration::from_secs(10), || {
        read(&root, sw) == "33"
    });
    d.wait_for("counted", Duration::from_secs(10), || {
        std::fs::read_to_string(root.join("var/lib/node_exporter/cgwarden.prom"))
            .is_ok_and(|t| t.contains("cgwarden_drift_total{knob=\"sysctl.vm.swappiness\"} 1"))
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
    assert!(
        log.contains("drift: written behind cgwarden's back"),
        "{log}"
    );
    assert!(log.contains("tuned is running and writes"), "{log}");
    assert_eq!(
        std::fs::read_to_string(root.join(journal)).unwrap(),
        before,
        "the journal is untouched"
    );
    write(&root, "proc/cmdline", "console=ttyMSM0");
    let doc = support::cgwarden(&[
        "doctor",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    assert!(
        doc.stdout
            .contains("coexistence: tuned is running and writes sysctls, cpufreq governors")
            && doc
                .stdout
                .contains("sysctl.vm.swappiness, cpufreq.policy4.governor"),
        "{}{}",
        doc.stdout,
        doc.stderr
    );
}

/// A reload that brings the first `system.irqs` rule places the IRQs at
/// once (the watcher starts with the reload; startup placed nothing).
#[test]
fn a_reload_that_adds_irq_rules_places_them() {
    let dir = tempfile::tempdir().unwrap();
    let base = "version: 1\nproduct: irqs-reload\nsettings: { rescan: 10m }\nsystem:\n  sysctl: { vm.swappiness: 33 }\n";
    let (_t, policy, root) = board(dir.path(), base);
    write(&root, "sys/kernel/irq/24/actions", "can0");
    let d = Daemon::start(&policy, &root, Start::default());
    std::fs::write(
        &policy,
        format!("{base}  irqs:\n    - name: can0\n      cpus: \"7\"\n"),
    )
    .unwrap();
    d.wait_for("placed after the reload", Duration::from_secs(10), || {
        read(&root, "proc/irq/24/smp_affinity_list") == "7"
    });
    let (code, log) = d.stop();
    assert_eq!(code, 0, "{log}");
}
