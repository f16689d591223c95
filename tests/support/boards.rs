//! The product line's boards as fake trees: an IQ-9100, an IQ-8275 and a
//! QCS6490, each declared below with where its shape came from, laid out
//! over the standard fake tree (cgroup root, sysctls, zram, IRQs) with its
//! own CPUs, cpufreq policies, capacities and identity. Only what cgwarden
//! reads differs between them; the files follow the kernel's ABI
//! (Documentation/ABI/testing/sysfs-devices-system-cpu for `cpufreq/`,
//! `related_cpus` and `cpu_capacity`; sysfs-devices-soc for
//! `soc0/machine`).
//!
//! Where a value comes from a vendor's device tree it is that value; where
//! the public record does not show it, the value is chosen and said to be.

use cgwarden::testing::FakeTree;
use std::path::Path;

/// One cpufreq policy: name, CPUs, hardware range in kHz.
pub struct Policy {
    pub name: &'static str,
    pub cpus: &'static str,
    pub min_khz: u64,
    pub max_khz: u64,
}

/// A board's shape.
pub struct Shape {
    /// The directory name under `boards/`.
    pub dir: &'static str,
    /// `/sys/devices/soc0/machine`: what the socinfo driver names the SoC.
    pub machine: &'static str,
    /// `/proc/device-tree/compatible`, most specific first.
    pub compatible: &'static [&'static str],
    pub policies: &'static [Policy],
    /// `cpuN/cpu_capacity`, CPU 0 first.
    pub capacity: [u32; 8],
}

/// IQ-9100 (QCS9100, the SA8775P family, "lemans"). Source: Qualcomm's
/// kernel tree, arch/arm64/boot/dts/qcom/lemans.dtsi (qualcomm-linux/kernel):
/// eight Kryo CPUs in two cpufreq domains, CPUs 0-3 (`qcom,freq-domain =
/// <&cpufreq_hw 0>`) and 4-7 (domain 1), both with capacity-dmips-mhz 1024
/// and the same OPP table, 1267.2 MHz to 2553.6 MHz; lemans-evk.dts:
/// compatible "qcom,lemans-evk", "qcom,qcs9100", "qcom,sa8775p"; socinfo
/// names the SoC QCS9100. The two clusters tie on frequency and capacity, so
/// the first CPU orders them: little is 0-3, big 4-7, and there is no prime.
/// The seed article's IQ-9100 (prime CPU 7, gold 4-6, silver 0-3) is not
/// what this device tree describes; the tree follows the kernel.
pub const IQ9100: Shape = Shape {
    dir: "iq-9100",
    machine: "QCS9100",
    compatible: &["qcom,lemans-evk", "qcom,qcs9100", "qcom,sa8775p"],
    policies: &[
        Policy {
            name: "policy0",
            cpus: "0-3",
            min_khz: 1_267_200,
            max_khz: 2_553_600,
        },
        Policy {
            name: "policy4",
            cpus: "4-7",
            min_khz: 1_267_200,
            max_khz: 2_553_600,
        },
    ],
    capacity: [1024; 8],
};

/// IQ-8275 (QCS8275, the QCS8300 family, "monaco"). Source: Qualcomm's
/// kernel tree, arch/arm64/boot/dts/qcom/monaco.dtsi: CPUs 0-1 Cortex-A78C
/// (freq domain 0, 902.4 MHz to 2112 MHz), CPUs 2-3 Cortex-A78C (domain 2,
/// 940.8 MHz to 2361.6 MHz), CPUs 4-7 Cortex-A55 (domain 1, 844.8 MHz to
/// 1958.4 MHz); capacity-dmips-mhz 1946 (A78C) and 1024 (A55);
/// monaco-evk.dts: compatible "qcom,monaco-evk", "qcom,qcs8300"; socinfo
/// names the SoC QCS8275. Its clusters are numbered the other way round:
/// little is 4-7, big 0-1, prime 2-3. The QCS8275 may fuse lower top
/// frequencies than the QCS8300 table (the driver reads them from the
/// hardware); the table's values are used, chosen as plausible.
/// Capacities are derived as the kernel does (dmips × top frequency,
/// scaled to 1024).
pub const IQ8275: Shape = Shape {
    dir: "iq-8275",
    machine: "QCS8275",
    compatible: &["qcom,monaco-evk", "qcom,qcs8300"],
    policies: &[
        Policy {
            name: "policy0",
            cpus: "0-1",
            min_khz: 902_400,
            max_khz: 2_112_000,
        },
        Policy {
            name: "policy2",
            cpus: "2-3",
            min_khz: 940_800,
            max_khz: 2_361_600,
        },
        Policy {
            name: "policy4",
            cpus: "4-7",
            min_khz: 844_800,
            max_khz: 1_958_400,
        },
    ],
    capacity: [915, 915, 1024, 1024, 446, 446, 446, 446],
};

/// QCS6490 (Kryo 670: 4 silver, 3 gold, 1 gold prime; "kodiak", the sc7280
/// family). Source: Qualcomm's kernel tree, arch/arm64/boot/dts/qcom/
/// sc7280.dtsi: CPUs 0-3 freq domain 0 (OPPs 300 MHz to 2016 MHz,
/// capacity-dmips-mhz 1024), CPUs 4-6 domain 1 (691.2 MHz to 2611.2 MHz,
/// 1946), CPU 7 domain 2 (806.4 MHz to 3014.4 MHz, 1985); qcs6490-rb3gen2.dts:
/// compatible "qcom,qcs6490-rb3gen2", "qcom,qcm6490"; socinfo names the SoC
/// QCS6490. The top frequencies are the table's entries nearest the
/// product brief's 1.9 GHz / 2.4 GHz / 2.7 GHz (1958.4, 2400, 2707.2 MHz):
/// the part's fuses, which the driver reads, are not public.
pub const QCS6490: Shape = Shape {
    dir: "qcs6490",
    machine: "QCS6490",
    compatible: &["qcom,qcs6490-rb3gen2", "qcom,qcm6490"],
    policies: &[
        Policy {
            name: "policy0",
            cpus: "0-3",
            min_khz: 300_000,
            max_khz: 1_958_400,
        },
        Policy {
            name: "policy4",
            cpus: "4-6",
            min_khz: 691_200,
            max_khz: 2_400_000,
        },
        Policy {
            name: "policy7",
            cpus: "7",
            min_khz: 806_400,
            max_khz: 2_707_200,
        },
    ],
    capacity: [382, 382, 382, 382, 889, 889, 889, 1024],
};

/// The product line.
pub const ALL: [&Shape; 3] = [&IQ9100, &IQ8275, &QCS6490];

/// Lays out `shape` under `root`: the standard fake tree with this board's
/// CPUs, cpufreq policies, capacities and identity.
pub fn lay_out(root: &Path, shape: &Shape) -> FakeTree {
    let t =
        FakeTree::standard(root).unwrap_or_else(|e| panic!("fake tree at {}: {e}", root.display()));
    let cpufreq = root.join("sys/devices/system/cpu/cpufreq");
    std::fs::remove_dir_all(&cpufreq).unwrap_or_else(|e| panic!("{}: {e}", cpufreq.display()));
    for p in shape.policies {
        t.cpufreq_policy(p.name, p.cpus, p.min_khz, p.max_khz)
            .unwrap_or_else(|e| panic!("{}: {e}", p.name));
    }
    for (cpu, c) in shape.capacity.iter().enumerate() {
        t.file(
            &format!("sys/devices/system/cpu/cpu{cpu}/cpu_capacity"),
            &c.to_string(),
        )
        .unwrap();
    }
    t.file("sys/devices/soc0/machine", shape.machine).unwrap();
    // The property as the kernel shows it: NUL-terminated strings.
    let compatible: String = shape.compatible.iter().map(|c| format!("{c}\0")).collect();
    let dt = root.join("proc/device-tree");
    std::fs::create_dir_all(&dt).unwrap();
    std::fs::write(dt.join("compatible"), compatible).unwrap();
    t
}

/// Every board of the line under `dir/boards/NAME/root`.
pub fn lay_out_all(dir: &Path) {
    for s in ALL {
        lay_out(&dir.join("boards").join(s.dir).join("root"), s);
    }
}
