//! Memory telemetry for the metrics exposition and the flight recorder: the
//! vmstat counters rules can read, a set of meminfo lines, every zram device's
//! `mm_stat` and the fragmentation index of each page order — one reading,
//! carried by the `system` sample ([`super::sample::read_host`]). The same
//! files the rules read (`daemon::memstat`); nothing here is kept between
//! readings.

use crate::kernel::{meminfo, memstat, Root};
use crate::policy::expr::mem::{VMSTAT_FIELDS, ZRAM_FIELDS};
use std::collections::BTreeMap;
use std::path::Path;

/// The meminfo lines exported (bytes). A rule may read any line; these are
/// what a memory investigation on an embedded board looks at first.
pub(crate) const MEMINFO_FIELDS: [&str; 14] = [
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Cached",
    "SwapTotal",
    "SwapFree",
    "Slab",
    "SReclaimable",
    "SUnreclaim",
    "KernelStack",
    "PageTables",
    "CmaTotal",
    "CmaFree",
    "AnonPages",
];

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct MemTelemetry {
    /// vmstat counters by the names rules use (as read, cumulative).
    pub(crate) vmstat: BTreeMap<String, u64>,
    pub(crate) meminfo: BTreeMap<String, u64>,
    /// zram device → `mm_stat` (orig_data_size, compr_data_size, mem_used_total).
    pub(crate) zram: BTreeMap<String, [u64; 3]>,
    /// The unusable free space index per order (index = order).
    pub(crate) fragmentation: Vec<f64>,
}

impl MemTelemetry {
    pub(crate) fn read(root: &Root) -> MemTelemetry {
        let mut t = MemTelemetry::default();
        if let Ok(vm) = memstat::vmstat(root) {
            for f in VMSTAT_FIELDS {
                if let Some(v) = memstat::vmstat_value(&vm, f) {
                    t.vmstat.insert(f.to_string(), v);
                }
            }
        }
        if let Ok(text) = root.read(Path::new(meminfo::MEMINFO)) {
            let m = meminfo::parse_meminfo(&text);
            for f in MEMINFO_FIELDS {
                if let Some(v) = m.get(f) {
                    t.meminfo.insert(f.to_string(), *v);
                }
            }
        }
        for d in memstat::zram_devices(root) {
            if let Ok(Some(s)) = memstat::mm_stat(root, &d) {
                t.zram.insert(d, s);
            }
        }
        if let Ok(b) = memstat::buddyinfo(root) {
            t.fragmentation = (0..b.len())
                .filter_map(|o| memstat::unusable_index(&b, o))
                .collect();
        }
        t
    }

    /// `(name, value)` rows as the recorder's `memstat` table holds them:
    /// `vmstat.FIELD`, `meminfo.FIELD`, `zram.DEV.FIELD`, `fragmentation.ORDER`.
    pub(crate) fn rows(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        for (k, v) in &self.vmstat {
            out.push((format!("vmstat.{k}"), *v as f64));
        }
        for (k, v) in &self.meminfo {
            out.push((format!("meminfo.{k}"), *v as f64));
        }
        for (d, s) in &self.zram {
            for (f, v) in ZRAM_FIELDS.iter().zip(s) {
                out.push((format!("zram.{d}.{f}"), *v as f64));
            }
        }
        for (o, v) in self.fragmentation.iter().enumerate() {
            out.push((format!("fragmentation.{o}"), *v));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_file_and_names_the_rows() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        root.mkdir_all(Path::new("/proc")).unwrap();
        root.mkdir_all(Path::new("/sys/block/zram0")).unwrap();
        root.mkdir_all(Path::new("/sys/block/sda")).unwrap();
        root.write(
            Path::new("/proc/vmstat"),
            "oom_kill 2\nallocstall_normal 5\npgfault 9\n",
        )
        .unwrap();
        root.write(
            Path::new("/proc/meminfo"),
            "Slab: 1 kB\nCmaFree: 2 kB\nFoo: 3 kB\n",
        )
        .unwrap();
        root.write(Path::new("/proc/buddyinfo"), "Node 0, zone Normal 4 0 1\n")
            .unwrap();
        root.write(Path::new("/sys/block/zram0/mm_stat"), "10 5 8 0 8\n")
            .unwrap();
        let m = MemTelemetry::read(&root);
        assert_eq!(m.vmstat.get("allocstall"), Some(&5));
        assert_eq!(m.vmstat.get("oom_kill"), Some(&2));
        assert_eq!(m.meminfo.get("CmaFree"), Some(&2048));
        assert!(!m.meminfo.contains_key("Foo"));
        assert_eq!(m.zram.get("zram0"), Some(&[10, 5, 8]));
        assert_eq!(m.fragmentation, vec![0.0, 0.5, 0.5]);
        let rows = m.rows();
        assert!(rows.contains(&("zram.zram0.compr_data_size".into(), 5.0)));
        assert!(rows.contains(&("fragmentation.1".into(), 0.5)));
        assert!(rows.contains(&("vmstat.oom_kill".into(), 2.0)));
    }
}
