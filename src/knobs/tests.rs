//! Tests of the knob registry and its families.

use super::*;
use proptest::prelude::*;
use std::cmp::Ordering;
use std::path::Path;

fn knob(text: &str) -> Knob {
    match Knob::parse(text) {
        Ok(k) => k,
        Err(e) => panic!("{text}: {e}"),
    }
}

fn value(knob_text: &str, value: &str) -> KnobValue {
    match knob(knob_text).parse_value(value) {
        Ok(v) => v,
        Err(e) => panic!("{knob_text} = {value}: {e}"),
    }
}

fn err(text: &str) -> KnobError {
    match Knob::parse(text) {
        Ok(k) => panic!("{text} parsed as {k:?}"),
        Err(e) => e,
    }
}

#[test]
fn every_knob_form_round_trips() {
    let forms = [
        "realtime.cpu.weight",
        "realtime.cpu.max",
        "realtime.uclamp.min",
        "realtime.uclamp.max",
        "inference.memory.min",
        "inference.memory.low",
        "inference.memory.high",
        "inference.memory.max",
        "inference.memory.swap_max",
        "vision.io.weight",
        "vision.pids.max",
        "vision.cpuset.cpus",
        "cpufreq.policy4.min",
        "cpufreq.policy4.max",
        "cpufreq.policy7.governor",
        "sysctl.vm.swappiness",
        "sysctl.vm.min_free_kbytes",
        "sysctl.kernel.sched_rt_runtime_us",
        "sysctl.kernel.timer_migration",
        "zram.zram0.mem_limit",
        "zram.zram0.swap_priority",
        "0.cpu.weight",
        "a-b_c.memory.high",
    ];
    for form in forms {
        assert_eq!(knob(form).to_string(), form);
    }
    assert_eq!(
        knob("inference.memory.high"),
        Knob::Group {
            group: "inference".into(),
            knob: GroupKnob::MemoryHigh
        }
    );
    assert_eq!(
        knob("cpufreq.policy4.min"),
        Knob::Cpufreq {
            policy: "policy4".into(),
            attr: CpufreqAttr::Min
        }
    );
    assert_eq!(
        knob("sysctl.vm.swappiness"),
        Knob::Sysctl("vm.swappiness".into())
    );
    assert_eq!(knob("realtime.cpu.weight").group(), Some("realtime"));
    assert_eq!(GroupKnob::MemorySwapMax.file_name(), "memory.swap.max");
    assert_eq!(GroupKnob::UclampMin.file_name(), "cpu.uclamp.min");
    assert_eq!(GroupKnob::UclampMin.controller(), "cpu");
    assert_eq!(CpufreqAttr::Min.file_name(), "scaling_min_freq");
}

#[test]
fn knob_rejections() {
    for bad in [
        "",
        "inference",
        "inference.",
        "inference.memory",
        "inference.memory.high.x",
        "Inference.memory.high",
        "-x.memory.high",
        ".memory.high",
        "inference.memory.swap.max",
        "inference.cpu.uclamp.min",
        "cpufreq.policy4",
        "cpufreq.cpu4.min",
        "cpufreq.policy.min",
        "cpufreq.policy4.speed",
        "sysctl.net.core.somaxconn",
        "sysctl.kernel.core_pattern",
        "sysctl.kernel.modprobe",
        "sysctl.vm.",
        "sysctl.vm.a.b",
        "sysctl.VM.swappiness",
        "sysctl",
        "zram.zram0",
        "zram.sda.mem_limit",
        "zram.zram0.disksize",
        "../etc.memory.high",
        "a/b.memory.high",
    ] {
        assert!(Knob::parse(bad).is_err(), "{bad:?} should be rejected");
    }
    let long = format!("{}.cpu.weight", "a".repeat(65));
    assert!(Knob::parse(&long).is_err());
    let ok = format!("{}.cpu.weight", "a".repeat(64));
    assert!(Knob::parse(&ok).is_ok());
}

/// `vm.page-cluster` (a dash in its name) and the network buffers of
/// ROS 2 / DDS boards are knobs, each with the kernel's range and file.
#[test]
fn page_cluster_and_network_buffers_are_knobs_with_their_ranges() {
    const INT_MAX: i64 = i32::MAX as i64;
    for (name, lo, hi) in [
        ("vm.page-cluster", 0, 31),
        ("net.core.rmem_max", 2304, INT_MAX),
        ("net.core.wmem_max", 4608, INT_MAX),
        ("net.core.rmem_default", 2304, INT_MAX),
        ("net.core.wmem_default", 4608, INT_MAX),
        ("net.core.netdev_max_backlog", -INT_MAX - 1, INT_MAX),
        ("net.core.busy_read", 0, INT_MAX),
        ("net.core.busy_poll", 0, INT_MAX),
        ("net.ipv4.ipfrag_high_thresh", 0, i64::MAX),
        ("net.ipv4.ipfrag_time", 0, 2_147_483),
    ] {
        let k = knob(&format!("sysctl.{name}"));
        assert_eq!(k, Knob::Sysctl(name.into()));
        assert_eq!(k.to_string(), format!("sysctl.{name}"));
        assert_eq!(sysctl::sysctl_range(name), Some((lo, hi)), "{name}");
        let int = |v: i64| k.parse_value(&v.to_string()).ok();
        assert_eq!(int(lo), Some(KnobValue::Int(lo)), "{name}");
        assert_eq!(int(hi), Some(KnobValue::Int(hi)), "{name}");
        assert!(lo == i64::MIN || int(lo - 1).is_none(), "{name}");
        assert!(hi == i64::MAX || int(hi + 1).is_none(), "{name}");
        let file = sysctl::path(name).unwrap();
        assert!(owns_file(&file, Path::new("/sys/fs/cgroup")), "{name}");
    }
    // The dash stays a dash in the file name.
    assert_eq!(
        sysctl::path("vm.page-cluster").unwrap(),
        Path::new("/proc/sys/vm/page-cluster")
    );
    assert_eq!(
        sysctl::path("net.ipv4.ipfrag_time").unwrap(),
        Path::new("/proc/sys/net/ipv4/ipfrag_time")
    );
}

#[test]
fn hints() {
    let e = err("inference.memory.hgh");
    assert_eq!(
        e.hint.as_deref(),
        Some("did you mean `inference.memory.high`?")
    );
    assert!(e
        .to_string()
        .contains("unknown knob `inference.memory.hgh`"));
    assert_eq!(
        err("inference.memory.swap.max").hint.as_deref(),
        Some("did you mean `inference.memory.swap_max`?")
    );
    let e = err("sysctl.net.core.x");
    assert_eq!(
        e.hint.as_deref(),
        Some("sysctl knobs are limited to the closed table: vm.* memory tuning, kernel.sched_*, kernel.timer_migration, the watchdog set, net.core socket buffers and busy polling, net.ipv4.ipfrag_*")
    );
    assert_eq!(
        err("sysctl.kernel.timer_migraton").hint.as_deref(),
        Some("did you mean `sysctl.kernel.timer_migration`?")
    );
    assert_eq!(
        err("cpufreq.policy4.mn").hint.as_deref(),
        Some("did you mean `cpufreq.policy4.min`?")
    );
    assert_eq!(
        err("cpufrq.policy4.min").hint.as_deref(),
        Some("did you mean `cpufreq.policy4.min`?")
    );
    assert_eq!(
        err("zram.zram0.mem_limt").hint.as_deref(),
        Some("did you mean `zram.zram0.mem_limit`?")
    );
    assert_eq!(err("inference.frobnicate").hint, None);
    assert!(err("cpufreq.cpu4.min").message.contains("`cpu4`"));
}

#[test]
fn merge_policy_table() {
    use MergePolicy::*;
    let cases = [
        ("g.cpu.weight", Largest),
        ("g.cpu.max", Largest),
        ("g.uclamp.min", Largest),
        ("g.uclamp.max", Largest),
        ("g.memory.min", Largest),
        ("g.memory.low", Largest),
        ("g.memory.high", Largest),
        ("g.memory.max", Largest),
        ("g.memory.swap_max", Largest),
        ("g.io.weight", Largest),
        ("g.pids.max", Largest),
        ("g.cpuset.cpus", First),
        ("cpufreq.policy0.min", Largest),
        ("cpufreq.policy0.max", Largest),
        ("cpufreq.policy0.governor", First),
        ("sysctl.vm.swappiness", First),
        ("zram.zram0.mem_limit", First),
        ("zram.zram0.swap_priority", First),
    ];
    for (text, policy) in cases {
        assert_eq!(knob(text).merge_policy(), policy, "{text}");
    }
}

#[test]
fn values_and_kernel_text() {
    let cases = [
        ("g.cpu.weight", "200", "200"),
        ("g.cpu.max", "max", "max 100000"),
        ("g.cpu.max", "50%", "50000 100000"),
        ("g.cpu.max", "12.5%", "12500 100000"),
        ("g.cpu.max", "50ms/100ms", "50000 100000"),
        ("g.cpu.max", "200ms/100ms", "200000 100000"),
        ("g.uclamp.min", "80%", "80.00"),
        ("g.uclamp.max", "12.25%", "12.25"),
        ("g.memory.high", "3584M", "3758096384"),
        ("g.memory.max", "max", "max"),
        ("g.memory.swap_max", "0", "0"),
        ("g.io.weight", "10000", "10000"),
        ("g.pids.max", "512", "512"),
        ("g.pids.max", "max", "max"),
        ("g.cpuset.cpus", "6,7,0-3", "0-3,6-7"),
        ("cpufreq.policy4.min", "1.8GHz", "1800000"),
        ("cpufreq.policy4.max", "1200000", "1200000"),
        ("cpufreq.policy4.governor", "schedutil", "schedutil"),
        ("sysctl.kernel.sched_rt_runtime_us", "-1", "-1"),
        ("sysctl.vm.swappiness", "30", "30"),
        ("zram.zram0.mem_limit", "4G", "4294967296"),
        ("zram.zram0.swap_priority", "-1", "-1"),
        ("zram.zram0.swap_priority", "32767", "32767"),
    ];
    for (k, v, kernel) in cases {
        let parsed = value(k, v);
        assert_eq!(parsed.kernel(), kernel, "{k} = {v}");
        // The policy form reads back to the same value.
        assert_eq!(value(k, &parsed.to_string()), parsed, "{k} = {v}");
    }
    assert_eq!(value("g.pids.max", "max"), KnobValue::Count(None));
    assert_eq!(
        value("g.cpu.max", "50ms/100ms"),
        KnobValue::CpuMax(CpuMax::Quota {
            quota_us: 50_000,
            period_us: 100_000
        })
    );
}

#[test]
fn value_rejections() {
    let cases = [
        ("g.cpu.weight", "0"),
        ("g.cpu.weight", "10001"),
        ("g.cpu.weight", "-1"),
        ("g.cpu.weight", "1.5"),
        ("g.cpu.weight", ""),
        ("g.cpu.max", "0%"),
        ("g.cpu.max", "0.5%"),
        ("g.cpu.max", "150%"),
        ("g.cpu.max", "50"),
        ("g.cpu.max", "50ms"),
        ("g.cpu.max", "50ms/2s"),
        ("g.cpu.max", "500us/100ms"),
        ("g.cpu.max", "50ms/500us"),
        ("g.cpu.max", "1ns/1ms"),
        ("g.cpu.max", "50ms/100ms/1s"),
        ("g.cpu.max", "max 100000"),
        ("g.uclamp.min", "80"),
        ("g.uclamp.min", "12.345%"),
        ("g.uclamp.min", "101%"),
        ("g.memory.high", "4Q"),
        ("g.memory.high", "-1"),
        ("g.pids.max", "-1"),
        ("g.pids.max", "4194305"),
        ("g.pids.max", "MAX"),
        ("g.cpuset.cpus", ""),
        ("g.cpuset.cpus", "3-1"),
        ("cpufreq.policy4.min", "fast"),
        ("cpufreq.policy4.governor", "Performance"),
        ("cpufreq.policy4.governor", "../x"),
        ("cpufreq.policy4.governor", "averyveryverylonggovernor"),
        ("cpufreq.policy4.governor", ""),
        ("sysctl.vm.swappiness", "thirty"),
        ("sysctl.vm.swappiness", "1.5"),
        ("sysctl.vm.swappiness", "99999999999999999999"),
        ("sysctl.vm.swappiness", "-"),
        ("zram.zram0.mem_limit", "max"),
        ("zram.zram0.swap_priority", "-2"),
        ("zram.zram0.swap_priority", "32768"),
    ];
    for (k, v) in cases {
        let result = knob(k).parse_value(v);
        assert!(
            result.is_err(),
            "{k} = {v:?} should be rejected: {result:?}"
        );
    }
    let e = knob("g.cpu.weight").parse_value("0").err();
    assert_eq!(
        e.map(|e| e.to_string()).as_deref(),
        Some("invalid weight `0`: expected a whole number from 1 to 10000")
    );
}

#[test]
fn resource_order() {
    let cmp = |k: &str, a: &str, b: &str| value(k, a).cmp_resource(&value(k, b));
    assert_eq!(cmp("g.memory.high", "max", "1T"), Some(Ordering::Greater));
    assert_eq!(cmp("g.memory.high", "1G", "1024M"), Some(Ordering::Equal));
    assert_eq!(cmp("g.cpu.max", "max", "100%"), Some(Ordering::Greater));
    assert_eq!(cmp("g.cpu.max", "50%", "50ms/100ms"), Some(Ordering::Equal));
    assert_eq!(
        cmp("g.cpu.max", "20ms/10ms", "100%"),
        Some(Ordering::Greater)
    );
    assert_eq!(cmp("g.cpu.max", "10%", "20ms/100ms"), Some(Ordering::Less));
    assert_eq!(cmp("g.pids.max", "max", "100"), Some(Ordering::Greater));
    assert_eq!(cmp("g.uclamp.min", "10%", "20%"), Some(Ordering::Less));
    assert_eq!(
        cmp("cpufreq.policy0.min", "1.8GHz", "1200MHz"),
        Some(Ordering::Greater)
    );
    assert_eq!(cmp("g.cpuset.cpus", "1", "2"), None);
    assert_eq!(KnobValue::Weight(1).cmp_resource(&KnobValue::Int(1)), None);
}

#[test]
fn step_clamping() {
    let size = |t: &str| KnobValue::Size(Size::parse(t).unwrap_or(Size::Max));
    // Raise by 512M up to 10G.
    assert_eq!(
        size("8G").step(&size("512M"), &size("10G"), true),
        Some(size("8704M"))
    );
    assert_eq!(
        size("9800M").step(&size("512M"), &size("10G"), true),
        Some(size("10G"))
    );
    // Already past the limit: a raise leaves it alone.
    assert_eq!(
        size("12G").step(&size("512M"), &size("10G"), true),
        Some(size("12G"))
    );
    assert_eq!(
        size("max").step(&size("512M"), &size("10G"), true),
        Some(size("max"))
    );
    assert_eq!(
        size("1G").step(&size("512M"), &size("max"), true),
        Some(size("1536M"))
    );
    // Lower by 256M down to 2G.
    assert_eq!(
        size("3G").step(&size("256M"), &size("2G"), false),
        Some(size("2816M"))
    );
    assert_eq!(
        size("2100M").step(&size("256M"), &size("2G"), false),
        Some(size("2G"))
    );
    assert_eq!(
        size("1G").step(&size("256M"), &size("2G"), false),
        Some(size("1G"))
    );
    assert_eq!(
        size("100M").step(&size("1G"), &size("0"), false),
        Some(size("0"))
    );
    assert_eq!(size("max").step(&size("256M"), &size("2G"), false), None);
    assert_eq!(size("1G").step(&size("max"), &size("2G"), true), None);
    assert_eq!(size("3G").step(&size("1G"), &size("max"), false), None);
    // Saturation instead of overflow.
    let huge = KnobValue::Size(Size::Bytes(u64::MAX - 1));
    assert_eq!(
        huge.step(&size("1G"), &size("max"), true),
        Some(KnobValue::Size(Size::Bytes(u64::MAX)))
    );

    let w = KnobValue::Weight;
    assert_eq!(w(100).step(&w(50), &w(120), true), Some(w(120)));
    assert_eq!(w(100).step(&w(500), &w(1), false), Some(w(1)));
    let i = KnobValue::Int;
    assert_eq!(
        i(i64::MAX - 1).step(&i(10), &i(i64::MAX), true),
        Some(i(i64::MAX))
    );
    assert_eq!(
        i(i64::MIN + 1).step(&i(10), &i(i64::MIN), false),
        Some(i(i64::MIN))
    );
    assert_eq!(i(5).step(&i(10), &i(-1), false), Some(i(-1)));
    let f = |khz| KnobValue::Frequency(Frequency { khz });
    assert_eq!(
        f(1_200_000).step(&f(200_000), &f(1_800_000), true),
        Some(f(1_400_000))
    );
    assert_eq!(
        f(1_200_000).step(&f(2_000_000), &f(600_000), false),
        Some(f(600_000))
    );
    let p = |v| KnobValue::Percent(Percent(v));
    assert_eq!(p(50.0).step(&p(30.0), &p(70.0), true), Some(p(70.0)));
    assert_eq!(p(50.0).step(&p(30.0), &p(10.0), false), Some(p(20.0)));
    let c = KnobValue::Count;
    assert_eq!(
        c(Some(100)).step(&c(Some(50)), &c(Some(120)), true),
        Some(c(Some(120)))
    );
    assert_eq!(
        c(None).step(&c(Some(50)), &c(Some(120)), true),
        Some(c(None))
    );
    // Mismatched or non-numeric types.
    assert_eq!(w(1).step(&i(1), &w(5), true), None);
    let list = KnobValue::CpuList(CpuList::default());
    assert_eq!(list.step(&list, &list, true), None);
    assert!(knob("g.memory.high").is_numeric());
    assert!(!knob("g.cpu.max").is_numeric());
    assert!(!knob("cpufreq.policy0.governor").is_numeric());
}

#[test]
fn cpu_max_kernel_forms() {
    assert_eq!(CpuMax::parse_kernel("max 100000\n"), Ok(CpuMax::Max));
    assert_eq!(
        CpuMax::parse_kernel("50000 100000"),
        Ok(CpuMax::Quota {
            quota_us: 50_000,
            period_us: 100_000
        })
    );
    assert!(CpuMax::parse_kernel("").is_err());
    assert!(CpuMax::parse_kernel("a b").is_err());
    assert!(CpuMax::parse_kernel("1 2 3").is_err());
    assert_eq!(
        CpuMax::parse("50ms/100ms")
            .map(|c| c.to_string())
            .as_deref(),
        Ok("50ms/100ms")
    );
}

/// Every knob family with a sample name, for the kernel-form tests.
const KERNEL_FORM_KNOBS: [&str; 17] = [
    "g.cpu.weight",
    "g.cpu.max",
    "g.uclamp.min",
    "g.uclamp.max",
    "g.memory.min",
    "g.memory.high",
    "g.memory.swap_max",
    "g.io.weight",
    "g.pids.max",
    "g.cpuset.cpus",
    "cpufreq.policy4.min",
    "cpufreq.policy4.max",
    "cpufreq.policy4.governor",
    "sysctl.vm.swappiness",
    "sysctl.kernel.sched_rt_runtime_us",
    "zram.zram0.mem_limit",
    "zram.zram0.swap_priority",
];

/// What kernel files really hold, as the guest kernel (Debian 6.1) and
/// the kernel's own rendering code print them. Each must read as a value
/// (never `None`), or a claim on the knob could never be released.
#[test]
fn kernel_renderings_parse() {
    let cases: [(&str, &str, &str); 16] = [
        ("g.uclamp.min", "0.00\n", "0.00"),
        ("g.uclamp.max", "max\n", "100.00"),
        ("g.uclamp.min", "80.00\n", "80.00"),
        ("g.cpuset.cpus", "\n", ""),
        ("g.cpuset.cpus", "0-1,3\n", "0-1,3"),
        ("g.io.weight", "default 100\n", "100"),
        ("g.io.weight", "default 300\n8:0 50\n", "300"),
        ("g.cpu.weight", "100\n", "100"),
        ("g.cpu.max", "max 100000\n", "max 100000"),
        ("g.cpu.max", "50000 100000\n", "50000 100000"),
        ("g.memory.high", "max\n", "max"),
        ("g.memory.high", "167772160\n", "167772160"),
        ("g.pids.max", "max\n", "max"),
        ("cpufreq.policy4.min", "691200\n", "691200"),
        ("sysctl.kernel.sched_rt_runtime_us", "-1\n", "-1"),
        ("zram.zram0.mem_limit", "0\n", "0"),
    ];
    for (k, text, want) in cases {
        let knob = knob(k);
        match knob.parse_kernel(text) {
            Ok(v) => assert_eq!(
                knob.render(&v).replace("default ", ""),
                want,
                "{k} {text:?}"
            ),
            Err(e) => panic!("{k}: {text:?} does not read: {e}"),
        }
    }
    // An invalid partition never reads as the mode it names.
    let part = Knob::Group {
        group: "rt".into(),
        knob: GroupKnob::CpusetPartition,
    };
    assert_eq!(
        part.parse_kernel("isolated\n"),
        Ok(KnobValue::Word("isolated".into()))
    );
    let e = part
        .parse_kernel("isolated invalid (Cpu list in cpuset.cpus not exclusive)\n")
        .unwrap_err();
    assert!(e.to_string().contains("not exclusive"), "{e}");
}

/// The kernel's encodings of `pm_qos_resume_latency_us`
/// (drivers/base/power/sysfs.c; checked on the guest kernel by
/// tests/vm/guest/scenarios/94-latency.sh): a policy's `0us` is written
/// `n/a`, no constraint is `0`, and both read back as what they mean.
#[test]
fn resume_latency_encodings() {
    let k = knob("latency.cpu7");
    assert_eq!(k, Knob::LatencyCpu(7));
    let zero = k.parse_value("0us").unwrap();
    assert_eq!(zero, KnobValue::Latency(Some(0)));
    assert_eq!(k.render(&zero), "n/a");
    assert_eq!(k.render(&KnobValue::Latency(None)), "0");
    assert_eq!(k.render(&k.parse_value("100us").unwrap()), "100");
    assert_eq!(k.render(&k.parse_value("2ms").unwrap()), "2000");
    assert_eq!(k.parse_kernel("n/a\n"), Ok(KnobValue::Latency(Some(0))));
    assert_eq!(k.parse_kernel("0\n"), Ok(KnobValue::Latency(None)));
    assert_eq!(k.parse_kernel("250\n"), Ok(KnobValue::Latency(Some(250))));
    assert!(k.parse_kernel("-1").is_err());
    assert_eq!(zero.to_string(), "0us");
    assert_eq!(KnobValue::Latency(None).to_string(), "none");
    // Policy values: whole µs with a unit, never negative or past the cap.
    for bad in ["0", "-5us", "1ns", "1500ns", "2001s", "none", "n/a"] {
        assert!(k.parse_value(bad).is_err(), "{bad}");
    }
    assert!(k.parse_value("2000s").is_ok());
    assert_eq!(knob("latency.global"), Knob::LatencyGlobal);
    assert!(Knob::LatencyGlobal.held_by_daemon());
    assert!(!k.held_by_daemon());
    for bad in [
        "latency.cpu",
        "latency.cpux",
        "latency.globl",
        "latency.cpu123456",
    ] {
        assert!(Knob::parse(bad).is_err(), "{bad}");
    }
    assert!(Knob::parse("latency.globl")
        .unwrap_err()
        .to_string()
        .contains("latency.global"));
    assert_eq!(Knob::LatencyCpu(3).to_string(), "latency.cpu3");
    assert!(!k.is_numeric());
}

#[test]
fn latency_merges_smallest_first() {
    assert_eq!(knob("latency.cpu0").merge_policy(), MergePolicy::Smallest);
    assert_eq!(knob("latency.global").merge_policy(), MergePolicy::Smallest);
    let l = |v| KnobValue::Latency(v);
    assert_eq!(l(Some(0)).cmp_latency(&l(Some(5))), Some(Ordering::Less));
    assert_eq!(l(Some(5)).cmp_latency(&l(None)), Some(Ordering::Less));
    assert_eq!(l(None).cmp_latency(&l(None)), Some(Ordering::Equal));
    assert_eq!(l(None).cmp_latency(&KnobValue::Int(1)), None);
}

proptest! {
    #[test]
    fn knob_parse_never_panics(s in "\\PC{0,40}") {
        let _ = Knob::parse(&s);
    }

    #[test]
    fn values_never_panic(s in "\\PC{0,20}") {
        for k in ["g.cpu.weight", "g.cpu.max", "g.uclamp.min", "g.memory.high", "g.pids.max",
                  "g.cpuset.cpus", "cpufreq.policy0.min", "cpufreq.policy0.governor",
                  "sysctl.vm.x", "zram.zram0.mem_limit", "zram.zram0.swap_priority",
                  "latency.cpu1", "latency.global"] {
            if let Ok(knob) = Knob::parse(k) {
                if let Ok(v) = knob.parse_value(&s) {
                    let _ = v.kernel();
                    prop_assert_eq!(knob.parse_value(&v.to_string()), Ok(v));
                }
            }
        }
    }

    /// A value written to a knob reads back, from the kernel's rendering,
    /// as the same value.
    #[test]
    fn kernel_rendering_round_trips(i in 0usize..17, text in "[0-9]{1,12}(\\.[0-9]{1,2})?%?|max|[0-9]{1,2}(-[0-9]{1,2})?(,[0-9]{1,2})*|[0-9]{1,6}(ms|s|us)/[0-9]{1,3}ms|[0-9]{1,4}[KMG]|schedutil|-?[0-9]{1,9}") {
        let knob = knob(KERNEL_FORM_KNOBS[i]);
        if let Ok(v) = knob.parse_value(&text) {
            let rendered = knob.render(&v);
            let back = knob.parse_kernel(&format!("{rendered}\n"));
            prop_assert!(back.is_ok(), "{} {:?} rendered {:?}: {:?}", knob, text, rendered, back);
            if let Ok(back) = back {
                prop_assert_eq!(knob.render(&back), rendered.clone(), "{} {:?}", knob, text);
                prop_assert_eq!(v.cmp_resource(&back).unwrap_or(Ordering::Equal), Ordering::Equal);
            }
        }
    }

    #[test]
    fn group_knob_roundtrip(group in "[a-z0-9][a-z0-9_-]{0,63}", i in 0usize..12) {
        if !family_heads().any(|h| h == group) {
            let k = Knob::Group { group, knob: GroupKnob::ALL[i] };
            prop_assert_eq!(Knob::parse(&k.to_string()), Ok(k));
        }
    }

    #[test]
    fn step_stays_between_current_and_limit(cur in any::<u64>(), d in any::<u64>(), lim in any::<u64>(), up in any::<bool>()) {
        let v = |b| KnobValue::Size(Size::Bytes(b));
        let next = v(cur).step(&v(d), &v(lim), up);
        let Some(KnobValue::Size(Size::Bytes(n))) = next else {
            return Err(TestCaseError::fail("no step"));
        };
        if up { prop_assert!(n >= cur && (n <= lim || n == cur)); }
        else { prop_assert!(n <= cur && (n >= lim || n == cur)); }
    }
}

/// The text of docs/policy.md between `<!-- NAME -->` and `<!-- end NAME -->`.
fn doc_section(name: &str) -> String {
    let doc = include_str!("../../docs/policy.md");
    let open = format!("<!-- {name}: generated from src/knobs, checked by a test -->\n");
    let close = format!("<!-- end {name} -->");
    let start = doc.find(&open).map(|i| i + open.len());
    let end = doc.find(&close);
    match (start, end) {
        (Some(s), Some(e)) if s <= e => doc[s..e].to_string(),
        _ => panic!("docs/policy.md has no `{open}` … `{close}` section"),
    }
}

#[test]
fn docs_policy_md_holds_the_registry_knob_table() {
    let want = doc_table();
    assert!(want.contains("`G.memory.high`") && want.contains("`latency.global`"));
    assert_eq!(
        doc_section("knob table"),
        want,
        "docs/policy.md's knob table differs from the registry; put this there:\n{want}"
    );
}

#[test]
fn docs_policy_md_holds_the_sysctl_table() {
    let want = sysctl::doc_table();
    assert!(want.contains("`vm.swappiness` | 0..=200"));
    assert_eq!(
        doc_section("sysctl table"),
        want,
        "docs/policy.md's sysctl table differs from the registry; put this there:\n{want}"
    );
}

/// The journal's allow-list is the registry's: every file a family names is
/// owned, and the code-execution sysctls are nobody's.
#[test]
fn every_family_file_is_owned_and_nothing_else() {
    let cg = Path::new("/sys/fs/cgroup");
    for s in sysctl::TABLE {
        let p = sysctl::path(s.name).unwrap();
        assert!(owns_file(&p, cg), "{}", p.display());
    }
    for k in GroupKnob::EVERY {
        assert!(owns_file(&cg.join("app").join(k.file_name()), cg), "{k:?}");
        assert!(!owns_file(&cg.join(k.file_name()), cg), "root's own {k:?}");
    }
    for a in [
        cpufreq::SCALING_MIN_FREQ,
        cpufreq::SCALING_MAX_FREQ,
        cpufreq::SCALING_GOVERNOR,
    ] {
        assert!(owns_file(&cpufreq::attr_path("policy4", a), cg));
    }
    assert!(owns_file(&latency::resume_latency_path(7), cg));
    for a in zram::JOURNALLED_ATTRS {
        assert!(owns_file(&zram::attr_path("zram0", a), cg));
    }
    for p in [
        system::irq_affinity_path(42),
        system::default_affinity_path(),
        system::workqueue_cpumask_path(),
        system::rcu_expedited_path(),
        system::cpuidle_disable_path(7, 2),
    ] {
        assert!(owns_file(&p, cg), "{}", p.display());
    }
    for bad in [
        "/proc/sys/kernel/core_pattern",
        "/proc/sys/kernel/modprobe",
        "/proc/sys/kernel/usermodehelper/bset",
        "/proc/sys/vm/drop_caches",
        "/proc/sys/vm/mmap_min_addr",
        "/sys/fs/cgroup/app/cgroup.procs",
        "/sys/fs/cgroup/release_agent",
        "/sys/fs/cgroup/memory.high",
        "/sys/devices/system/cpu/cpufreq/policy4/scaling_setspeed",
        "/sys/devices/system/cpu/cpu7/online",
        "/sys/block/zram0/hot_remove",
        "/sys/block/sda/queue/scheduler",
        "/dev/cpu_dma_latency",
        "/etc/passwd",
    ] {
        assert!(!owns_file(Path::new(bad), cg), "{bad}");
    }
}

/// The governor tunables, the devfreq family and the ceilings.
#[test]
fn hardware_knobs_parse_render_and_are_owned() {
    for form in [
        "cpufreq.policy7.rate_limit_us",
        "cpufreq.policy7.up_rate_limit_us",
        "cpufreq.policy7.down_rate_limit_us",
        "devfreq.3d00000.qcom,kgsl-3d0.max",
        "devfreq.soc:qcom,cpu-llcc-ddr-bw.min",
        "devfreq.1d84000.ufshc.governor",
    ] {
        assert_eq!(knob(form).to_string(), form);
    }
    assert_eq!(
        knob("devfreq.3d00000.qcom,kgsl-3d0.max"),
        Knob::Devfreq {
            device: "3d00000.qcom,kgsl-3d0".into(),
            attr: DevfreqAttr::Max
        }
    );
    // Fallback lists, kept as written; a single name unchanged.
    assert_eq!(
        value("cpufreq.policy4.governor", "schedutil|ondemand"),
        KnobValue::Word("schedutil|ondemand".into())
    );
    for bad in ["schedutil|", "a|a", "Sched", "a|b|c|d|e|f|g|h|i"] {
        assert!(
            knob("cpufreq.policy4.governor").parse_value(bad).is_err(),
            "{bad}"
        );
    }
    assert_eq!(
        crate::knobs::cpufreq::resolve_governor(
            "walt|schedutil",
            &["performance".into(), "schedutil".into()]
        ),
        Ok("schedutil".to_string())
    );
    assert!(crate::knobs::cpufreq::resolve_governor("walt", &["schedutil".into()]).is_err());
    // Tunables: µs integers.
    assert_eq!(
        value("cpufreq.policy4.rate_limit_us", "500"),
        KnobValue::Int(500)
    );
    assert!(knob("cpufreq.policy4.rate_limit_us")
        .parse_value("-1")
        .is_err());
    // devfreq: Hz, a bare number in the kernel's unit.
    let gpu = knob("devfreq.3d00000.qcom,kgsl-3d0.max");
    assert_eq!(
        value("devfreq.3d00000.qcom,kgsl-3d0.max", "587MHz"),
        KnobValue::Hz(587_000_000)
    );
    assert_eq!(
        value("devfreq.3d00000.qcom,kgsl-3d0.max", "1.2GHz"),
        KnobValue::Hz(1_200_000_000)
    );
    assert_eq!(
        value("devfreq.soc:qcom,cpu-llcc-ddr-bw.min", "4577"),
        KnobValue::Hz(4577)
    );
    assert_eq!(gpu.render(&KnobValue::Hz(587_000_000)), "587000000");
    assert_eq!(
        gpu.parse_kernel("587000000\n"),
        Ok(KnobValue::Hz(587_000_000))
    );
    assert_eq!(KnobValue::Hz(587_000_000).to_string(), "587MHz");
    for bad in ["0", "1.5Hz", "fast", "-3MHz"] {
        assert!(gpu.parse_value(bad).is_err(), "{bad}");
    }
    assert_eq!(
        value("devfreq.3d00000.qcom,kgsl-3d0.governor", "msm-adreno-tz"),
        KnobValue::Word("msm-adreno-tz".into())
    );
    assert_eq!(gpu.merge_policy(), MergePolicy::Largest);
    assert!(err("devfreq.bad/name.max")
        .message
        .contains("invalid devfreq device"));
    assert_eq!(
        err("devfreq.gpu.maxx").hint.as_deref(),
        Some("did you mean `devfreq.gpu.max`?")
    );
    // The journal's allow-list knows the new files, and nothing beside them.
    let cg = Path::new("/sys/fs/cgroup");
    for owned in [
        "/sys/devices/system/cpu/cpufreq/policy4/schedutil/rate_limit_us",
        "/sys/devices/system/cpu/cpufreq/schedutil/rate_limit_us",
        "/sys/devices/system/cpu/cpufreq/policy7/schedutil/up_rate_limit_us",
        "/sys/class/devfreq/3d00000.qcom,kgsl-3d0/max_freq",
        "/sys/class/devfreq/3d00000.qcom,kgsl-3d0/governor",
    ] {
        assert!(owns_file(Path::new(owned), cg), "{owned}");
    }
    for not in [
        "/sys/devices/system/cpu/cpufreq/policy4/schedutil/hispeed_freq",
        "/sys/class/devfreq/3d00000.qcom,kgsl-3d0/polling_interval",
        "/sys/class/devfreq/x/y/max_freq",
    ] {
        assert!(!owns_file(Path::new(not), cg), "{not}");
    }
    // Ceilings (the knobs a cap may hold).
    for c in [
        "cpufreq.policy7.max",
        "devfreq.gpu.max",
        "g.uclamp.max",
        "g.cpu.max",
        "g.memory.high",
        "g.memory.max",
    ] {
        assert!(knob(c).is_ceiling(), "{c}");
    }
    for c in [
        "cpufreq.policy7.min",
        "devfreq.gpu.min",
        "g.memory.low",
        "g.cpu.weight",
        "sysctl.vm.swappiness",
    ] {
        assert!(!knob(c).is_ceiling(), "{c}");
    }
    // A governor write recreates its policy's tunables only.
    let gov = knob("cpufreq.policy4.governor");
    assert!(knob("cpufreq.policy4.rate_limit_us").recreated_by(&gov));
    assert!(!knob("cpufreq.policy0.rate_limit_us").recreated_by(&gov));
    assert!(!knob("cpufreq.policy4.max").recreated_by(&gov));
}
