//! Counters and histograms the daemon's threads bump and the metrics thread
//! reads at scrape time (a leaf: the hooks, the observer state and the
//! metrics encoder share these types without reaching into each other).
//! Atomics only: lock-free, no allocation on the hot path.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

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
    /// Runs whose program exited 0 in time.
    pub(crate) succeeded: AtomicU64,
    /// How long finished runs took, start to reaped.
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

/// The last resorts' counters: critical process exits by `settings.critical`
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

/// The exec watcher's counters, for status and metrics (`daemon::exec`
/// bumps them; `observe` reads them).
#[derive(Debug, Default)]
pub(crate) struct ExecCounters {
    /// Processes moved, per group (exec path and scans; descendants included).
    pub(crate) placed: Mutex<BTreeMap<String, u64>>,
    /// Processes a safety-net rescan had to move (exec events missed them).
    pub(crate) misses: AtomicU64,
    /// Socket overruns (ENOBUFS / NLMSG_OVERRUN).
    pub(crate) overruns: AtomicU64,
    /// Per-CPU sequence gaps seen (events lost without an overrun).
    pub(crate) gaps: AtomicU64,
    /// EXEC and COMM events handled.
    pub(crate) events: AtomicU64,
    /// Moves or sched changes the kernel refused.
    pub(crate) refused: AtomicU64,
    /// Full /proc scans done.
    pub(crate) scans: AtomicU64,
    /// Processes that exited (or whose pid was reused) between the /proc
    /// reads and the move or sched change: nothing was done to them.
    pub(crate) gone: AtomicU64,
    /// Exec event received → process moved (exec path only).
    pub(crate) to_placed: Latency,
    /// Of that, the placement itself: /proc reads, the `cgroup.procs`
    /// write (where the kernel may wait for an RCU grace period), sched —
    /// per process, its share of its batch's time.
    pub(crate) placing: Latency,
}

/// Upper bounds of the latency buckets, in µs (the last is open).
const BUCKETS_US: [u64; 17] = [
    50, 100, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 7_500, 10_000, 15_000, 20_000,
    30_000, 50_000,
];

/// A fixed-bucket latency histogram: lock-free, no allocation.
#[derive(Debug, Default)]
pub(crate) struct Latency {
    buckets: [AtomicU64; BUCKETS_US.len() + 1],
    max_us: AtomicU64,
    /// Sum of all samples (the metrics' histogram `_sum`).
    sum_us: AtomicU64,
}

impl Latency {
    pub(crate) fn record(&self, d: std::time::Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = BUCKETS_US
            .iter()
            .position(|&b| us <= b)
            .unwrap_or(BUCKETS_US.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// (sum in seconds, count, per-bucket (upper bound in seconds, count)
    /// with `f64::MAX` for the open bucket), for the metrics.
    pub(crate) fn histogram(&self) -> (f64, u64, Vec<(f64, u64)>) {
        let out: Vec<(f64, u64)> = self
            .buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let bound = BUCKETS_US.get(i).map_or(f64::MAX, |us| *us as f64 / 1e6);
                (bound, b.load(Ordering::Relaxed))
            })
            .collect();
        let n = out.iter().map(|(_, c)| c).sum();
        (self.sum_us.load(Ordering::Relaxed) as f64 / 1e6, n, out)
    }

    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().map(|b| b.load(Ordering::Relaxed)).sum()
    }

    /// The bucket bound at or under which `q` (0..1) of the samples fall,
    /// in µs; `None` without samples; the max for the open bucket.
    pub(crate) fn quantile_us(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let want = ((n as f64) * q).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            acc += b.load(Ordering::Relaxed);
            if acc >= want {
                return Some(
                    BUCKETS_US
                        .get(i)
                        .copied()
                        .unwrap_or_else(|| self.max_us.load(Ordering::Relaxed)),
                );
            }
        }
        Some(self.max_us.load(Ordering::Relaxed))
    }

    /// `n=…, p50≤…ms p90≤…ms p99≤…ms max …ms`.
    pub(crate) fn summary(&self) -> String {
        let ms = |us: Option<u64>| us.map_or(0.0, |u| u as f64 / 1000.0);
        format!(
            "n={} p50≤{}ms p90≤{}ms p99≤{}ms max {}ms",
            self.count(),
            ms(self.quantile_us(0.5)),
            ms(self.quantile_us(0.9)),
            ms(self.quantile_us(0.99)),
            ms(Some(self.max_us.load(Ordering::Relaxed)))
        )
    }
}

impl ExecCounters {
    pub(crate) fn placed_in(&self, group: &str, n: u64) {
        if n == 0 {
            return;
        }
        let mut m = self.placed.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(group.to_string()).or_default() += n;
    }

    /// One line for logs.
    pub(crate) fn summary(&self) -> String {
        let placed = self.placed.lock().unwrap_or_else(|e| e.into_inner());
        format!(
            "placed {:?}, misses {}, overruns {}, gaps {}, events {}, refused {}, scans {}, \
             gone {}; exec→placed {}; placing {}",
            *placed,
            self.misses.load(Ordering::Relaxed),
            self.overruns.load(Ordering::Relaxed),
            self.gaps.load(Ordering::Relaxed),
            self.events.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
            self.scans.load(Ordering::Relaxed),
            self.gone.load(Ordering::Relaxed),
            self.to_placed.summary(),
            self.placing.summary(),
        )
    }
}

/// What the metrics read of the exec watcher (`daemon::exec::Shared`
/// holds the same `Arc`s): its counters and the last-resort actions'.
#[derive(Clone, Debug)]
pub(crate) struct ExecStats {
    pub(crate) counters: std::sync::Arc<ExecCounters>,
    pub(crate) last_resort: std::sync::Arc<LastResortStats>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn latency_quantiles_come_from_the_buckets() {
        let l = Latency::default();
        assert_eq!(l.quantile_us(0.5), None);
        for _ in 0..98 {
            l.record(Duration::from_micros(80));
        }
        l.record(Duration::from_millis(4));
        l.record(Duration::from_millis(90));
        assert_eq!(l.count(), 100);
        assert_eq!(l.quantile_us(0.5), Some(100));
        assert_eq!(l.quantile_us(0.98), Some(100));
        assert_eq!(l.quantile_us(0.99), Some(5_000));
        // The open bucket reports the max seen.
        assert_eq!(l.quantile_us(1.0), Some(90_000));
        assert!(
            l.summary().starts_with("n=100 p50≤0.1ms"),
            "{}",
            l.summary()
        );
    }
}
