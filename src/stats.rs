//! Counters and histograms the daemon's threads bump and the metrics thread
//! reads at scrape time (a leaf: the hooks, the observer state and the
//! metrics encoder share these types without reaching into each other).
//! Atomics only: lock-free, no allocation on the hot path.

use std::sync::atomic::AtomicU64;

/// Per-hook counters (atomics: the metrics thread reads them at scrape time).
#[derive(Debug, Default)]
pub(crate) struct HookCounters {
    pub(crate) started: AtomicU64,
    pub(crate) rate_limited: AtomicU64,
    pub(crate) at_capacity: AtomicU64,
    pub(crate) queued: AtomicU64,
    pub(crate) unpaired: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) timed_out: AtomicU64,
    pub(crate) exited_nonzero: AtomicU64,
    pub(crate) output_truncated: AtomicU64,
    /// Runs whose program exited 0 in time (issue 13).
    pub(crate) succeeded: AtomicU64,
    /// How long finished runs took, start to reaped (issue 13).
    pub(crate) duration: Histogram,
}

/// Upper bounds of [`Histogram`]'s buckets, in seconds (the last is open):
/// hook runs take milliseconds to their timeout (minutes).
pub(crate) const HOOK_BUCKETS: [f64; 10] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0];

/// A fixed-bucket histogram of durations: lock-free, no allocation.
#[derive(Debug, Default)]
pub(crate) struct Histogram {
    buckets: [std::sync::atomic::AtomicU64; HOOK_BUCKETS.len() + 1],
    sum_us: std::sync::atomic::AtomicU64,
}

impl Histogram {
    pub(crate) fn record(&self, d: std::time::Duration) {
        use std::sync::atomic::Ordering::Relaxed;
        let s = d.as_secs_f64();
        let i = HOOK_BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(HOOK_BUCKETS.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_us
            .fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Relaxed);
    }

    /// (sum in seconds, count, per-bucket (upper bound, count) with
    /// `f64::MAX` for the open bucket, as prometheus-client encodes them).
    pub(crate) fn snapshot(&self) -> (f64, u64, Vec<(f64, u64)>) {
        use std::sync::atomic::Ordering::Relaxed;
        let out: Vec<(f64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                (
                    HOOK_BUCKETS.get(i).copied().unwrap_or(f64::MAX),
                    b.load(Relaxed),
                )
            })
            .collect();
        let n = out.iter().map(|(_, c)| c).sum();
        (self.sum_us.load(Relaxed) as f64 / 1e6, n, out)
    }
}

/// Issue 25's counters: critical process exits by `settings.critical`
/// entry, last-resort kills by (group, rule), freezes by group. Bumped by
/// the exec thread and the event loop, read at scrape time.
#[derive(Debug, Default)]
pub(crate) struct LastResortStats {
    pub(crate) critical_exits: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    pub(crate) kills: std::sync::Mutex<std::collections::BTreeMap<(String, String), u64>>,
    pub(crate) freezes: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

impl LastResortStats {
    /// Adds one to `map[key]` (a poisoned lock is taken over: counters
    /// stay counters).
    pub(crate) fn bump<K: Ord>(map: &std::sync::Mutex<std::collections::BTreeMap<K, u64>>, key: K) {
        let mut m = map.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(key).or_default() += 1;
    }

    /// A copy of `map` for a scrape.
    pub(crate) fn read<K: Ord + Clone>(
        map: &std::sync::Mutex<std::collections::BTreeMap<K, u64>>,
    ) -> std::collections::BTreeMap<K, u64> {
        map.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
