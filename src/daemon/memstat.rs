//! Sampling the memory telemetry the rules read:
//! `/proc/vmstat` counters turned into rates per second, `/proc/meminfo`
//! lines, zram `mm_stat` and the `/proc/buddyinfo` fragmentation index.
//! Each file is read once per sample, and only when a rule needs it.
//!
//! A rate is measured over at least [`RATE_WINDOW`]: the counter now minus
//! its value at the latest sample at least that old, over the time between
//! them (so a sample taken right after another, on some other wake-up,
//! does not divide a handful of events by a few milliseconds). Until a
//! sample that old exists the rate is unavailable; a counter that went
//! down (it cannot, short of a reboot) restarts the history.

use crate::kernel::{meminfo, memstat, Root};
use crate::policy::expr::MemMetric;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::path::Path;
use std::time::{Duration, Instant};

/// The shortest span a rate is measured over.
pub(crate) const RATE_WINDOW: Duration = Duration::from_secs(1);
/// Samples kept per counter (a tick of 10 ms keeps 1 s of them).
const HISTORY_MAX: usize = 128;

#[derive(Debug, Default)]
pub(crate) struct MemSampler {
    history: HashMap<String, VecDeque<(Instant, u64)>>,
}

impl MemSampler {
    /// Reads what `needs` names; rates from the history kept here.
    pub(crate) fn sample(
        &mut self,
        root: &Root,
        needs: &BTreeSet<MemMetric>,
        now: Instant,
    ) -> HashMap<MemMetric, f64> {
        let mut out = HashMap::new();
        if needs.is_empty() {
            return out;
        }
        let wants = |f: fn(&MemMetric) -> bool| needs.iter().any(f);
        let vm = if wants(|m| matches!(m, MemMetric::Vmstat(_))) {
            memstat::vmstat(root).ok()
        } else {
            None
        };
        let mi = if wants(|m| matches!(m, MemMetric::Meminfo(_))) {
            root.read(Path::new(meminfo::MEMINFO))
                .ok()
                .map(|t| meminfo::parse_meminfo(&t))
        } else {
            None
        };
        let buddy = if wants(|m| matches!(m, MemMetric::Fragmentation(_))) {
            memstat::buddyinfo(root).ok()
        } else {
            None
        };
        let mut zram: HashMap<&str, Option<[u64; 3]>> = HashMap::new();
        for m in needs {
            let v = match m {
                MemMetric::Vmstat(f) => vm
                    .as_ref()
                    .and_then(|vm| memstat::vmstat_value(vm, f))
                    .and_then(|v| self.rate(f, now, v)),
                MemMetric::Meminfo(f) => mi.as_ref().and_then(|m| m.get(f)).map(|v| *v as f64),
                MemMetric::Fragmentation(o) => buddy
                    .as_ref()
                    .and_then(|b| memstat::unusable_index(b, *o as usize)),
                MemMetric::Zram { device, field } => zram
                    .entry(device.as_str())
                    .or_insert_with(|| memstat::mm_stat(root, device).ok().flatten())
                    .and_then(|s| s.get(*field).map(|v| *v as f64)),
            };
            if let Some(v) = v {
                out.insert(m.clone(), v);
            }
        }
        out
    }

    /// Records counter `name` = `v` at `now`; its rate per second over at
    /// least [`RATE_WINDOW`], once there is a sample that old.
    fn rate(&mut self, name: &str, now: Instant, v: u64) -> Option<f64> {
        let h = self.history.entry(name.to_string()).or_default();
        if h.back().is_some_and(|(_, last)| v < *last) {
            h.clear(); // a counter does not go down: start over
        }
        h.push_back((now, v));
        // Keep one sample at least RATE_WINDOW old (the reference), drop older.
        while h.len() > 2
            && h.get(1)
                .is_some_and(|(t, _)| now.saturating_duration_since(*t) >= RATE_WINDOW)
        {
            h.pop_front();
        }
        while h.len() > HISTORY_MAX {
            h.pop_front();
        }
        let (t0, v0) = *h.front()?;
        let dt = now.saturating_duration_since(t0);
        if dt < RATE_WINDOW {
            return None;
        }
        Some(v.saturating_sub(v0) as f64 / dt.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_needs_a_sample_a_window_old_and_ignores_close_samples() {
        let mut m = MemSampler::default();
        let t0 = Instant::now();
        assert_eq!(m.rate("x", t0, 100), None);
        assert_eq!(m.rate("x", t0 + Duration::from_millis(500), 150), None);
        assert_eq!(m.rate("x", t0 + Duration::from_secs(2), 300), Some(100.0));
        // A sample 10 ms later is still measured over >= 1 s.
        let r = m.rate("x", t0 + Duration::from_millis(2010), 301).unwrap();
        assert!((r - 1.0 / 1.51 * 151.0).abs() < 1.0, "{r}");
        // Going down starts over.
        assert_eq!(m.rate("x", t0 + Duration::from_secs(3), 5), None);
    }

    #[test]
    fn allocstall_sums_the_per_zone_lines() {
        let vm = memstat::parse_vmstat(
            "allocstall_dma 0\nallocstall_dma32 3\nallocstall_normal 4\noom_kill 1\n",
        );
        assert_eq!(memstat::vmstat_value(&vm, "allocstall"), Some(7));
        assert_eq!(memstat::vmstat_value(&vm, "oom_kill"), Some(1));
        assert_eq!(memstat::vmstat_value(&vm, "compact_stall"), None);
    }

    #[test]
    fn samples_what_the_rules_name_from_a_fake_tree() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::fake(t.path());
        root.mkdir_all(Path::new("/proc")).unwrap();
        root.mkdir_all(Path::new("/sys/block/zram0")).unwrap();
        root.write(Path::new("/proc/vmstat"), "oom_kill 4\n")
            .unwrap();
        root.write(Path::new("/proc/meminfo"), "Slab:  100 kB\n")
            .unwrap();
        root.write(
            Path::new("/proc/buddyinfo"),
            "Node 0, zone   Normal   4   0   1\n",
        )
        .unwrap();
        root.write(Path::new("/sys/block/zram0/mm_stat"), "4096 74 12288 0\n")
            .unwrap();
        let needs: BTreeSet<MemMetric> = [
            MemMetric::Vmstat("oom_kill".into()),
            MemMetric::Meminfo("Slab".into()),
            MemMetric::Fragmentation(1),
            MemMetric::Zram {
                device: "zram0".into(),
                field: 1,
            },
        ]
        .into();
        let mut m = MemSampler::default();
        let s = m.sample(&root, &needs, Instant::now());
        assert_eq!(s.get(&MemMetric::Meminfo("Slab".into())), Some(&102400.0));
        assert_eq!(s.get(&MemMetric::Fragmentation(1)), Some(&0.5));
        assert_eq!(
            s.get(&MemMetric::Zram {
                device: "zram0".into(),
                field: 1
            }),
            Some(&74.0)
        );
        assert_eq!(
            s.get(&MemMetric::Vmstat("oom_kill".into())),
            None,
            "no rate yet"
        );
    }
}
