//! Stall time within a window, from the PSI `total=` counter:
//! `G.memory.some > 150ms/1s` means the stall time within the window exceeds
//! the amount, defined on the PSI `total=` counter so polling and kernel
//! triggers agree.
//!
//! This module owns the history of `(time, total_us)` samples per PSI line
//! ([`StallSeries`], and [`StallHistory`] keyed by target/resource/line) and
//! the answer to "how much stall time accumulated in the last `window`".
//! With a real kernel the daemon also registers a PSI trigger and wakes on
//! it; the series is what polling (and `--root` fake trees) evaluates.
//!
//! Decisions where the SPEC is silent:
//! - The window ends at the newest sample at or before `now` (what happened
//!   after it is not known yet). Its start usually falls between two
//!   samples: the counter there is interpolated linearly, i.e. stall is
//!   assumed uniform between two samples — as the kernel's own trigger
//!   windows do. With samples exactly `window` apart this is exact; with
//!   jittery ticks it neither double-counts the previous tick's stall nor
//!   misses the window; with samples sparser than the window it is the
//!   stall rate over the sampling interval, scaled to the window.
//! - History shorter than the window (daemon just started, or the counter
//!   was reset): the stall since the oldest sample, not scaled up. That is
//!   a lower bound of the stall in the window, so a `>` condition never
//!   fires on a guess. Fewer than two samples, or a newest sample older than
//!   the window (sampling stopped): `None`, the metric is unavailable.
//! - A `total` lower than the previous sample means the counter restarted
//!   (group deleted and recreated): the series restarts from that sample.
//! - A `total` that grew by more than the time between the two samples can
//!   allow (stall time cannot exceed wall time; [`plausible_growth`] leaves
//!   slack for read jitter) is implausible — a corrupt read, a wrapped or
//!   injected counter. It is never acted on: like a reset, the series
//!   restarts from it, so no window ever spans the jump.
//! - A sample with a time before the newest one is ignored (the clock is
//!   monotonic, so that is a caller bug); one at the same time replaces it.
//! - Memory is bounded: samples older than the longest window in use (plus
//!   the one sample before that, for interpolation) are dropped, and a
//!   series never holds more than [`MAX_SAMPLES`] samples (the oldest go
//!   first, shortening the history, if a caller samples absurdly often).

use super::rule_state::Time;
use crate::policy::expr::{Resource, Stall, Target};
use std::collections::VecDeque;
use std::time::Duration;

/// Most samples one series keeps.
pub(crate) const MAX_SAMPLES: usize = 1024;

/// The kernel's largest PSI trigger window; the default retention.
pub(crate) const MAX_WINDOW: Duration = Duration::from_secs(10);

/// What [`StallSeries::record`] did with a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recorded {
    Appended,
    /// The sample had the newest sample's time and replaced it.
    Replaced,
    /// The counter went down: the series restarted from this sample.
    Reset,
    /// The sample was older than the newest one and was dropped.
    Ignored,
    /// The counter grew by more than the elapsed time allows: the series
    /// restarted from this sample, and the jump counts for nothing.
    Implausible,
    /// A kernel trigger's firing stood in for the samples the window lacked
    /// (see [`StallSeries::record_trigger`]).
    Trigger,
}

/// The most a PSI `total=` may grow between samples `elapsed` apart: the
/// elapsed time itself (a line cannot stall longer than the wall clock),
/// doubled, plus a second, for the time between taking `now` and reading
/// the file on a loaded machine.
pub(crate) fn plausible_growth(elapsed: Duration) -> u64 {
    let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
    us.saturating_mul(2).saturating_add(1_000_000)
}

/// How long after a sample an armed trigger's silence says the stall in the
/// window stayed below its amount: a window (the kernel fires at most once a
/// window while the stall goes on) and an eighth (it checks at a tenth of
/// the window, plus slack for the wake-up).
pub(crate) fn silence_after(window: Duration) -> Duration {
    window + window / 8
}

/// The `(time, total_us)` history of one PSI line.
#[derive(Debug, Clone)]
pub(crate) struct StallSeries {
    /// `(time, total + offset)`: differences are the stall.
    samples: VecDeque<(Time, u64)>,
    keep: Duration,
    /// Added to every recorded total, so that the window start a trigger's
    /// firing stands in for ([`StallSeries::record_trigger`]) is never
    /// below zero: the kernel may fire when a fresh group's counter shows
    /// less than the amount (it counts a share of its previous window),
    /// and a start clamped at zero would make its word less than it said.
    offset: u64,
}

impl Default for StallSeries {
    fn default() -> Self {
        StallSeries::new(MAX_WINDOW)
    }
}

impl StallSeries {
    /// A series that keeps `keep` of history (the longest window in use).
    pub(crate) fn new(keep: Duration) -> Self {
        StallSeries {
            samples: VecDeque::new(),
            keep,
            offset: 0,
        }
    }

    /// Changes the retention (after a reload changed the windows in use).
    pub(crate) fn set_keep(&mut self, keep: Duration) {
        self.keep = keep;
        self.prune();
    }

    /// Adds the counter value read at `now`.
    pub(crate) fn record(&mut self, now: Time, total_us: u64) -> Recorded {
        let total_us = total_us.saturating_add(self.offset);
        let result = match self.samples.back_mut() {
            None => {
                self.samples.push_back((now, total_us));
                Recorded::Appended
            }
            Some((_, last_total)) if total_us < *last_total => {
                self.samples.clear();
                self.samples.push_back((now, total_us));
                Recorded::Reset
            }
            Some((last_time, _)) if now < *last_time => Recorded::Ignored,
            Some((last_time, last_total))
                if total_us - *last_total > plausible_growth(now.saturating_sub(*last_time)) =>
            {
                self.samples.clear();
                self.samples.push_back((now, total_us));
                Recorded::Implausible
            }
            Some((last_time, last_total)) if now == *last_time => {
                *last_total = total_us;
                Recorded::Replaced
            }
            Some(_) => {
                self.samples.push_back((now, total_us));
                Recorded::Appended
            }
        };
        self.prune();
        result
    }

    /// The kernel's PSI trigger for `amount`/`window` fired at `now`, when
    /// the counter read `total_us`: the kernel measured at least `amount` of
    /// stall within the last `window` (it fires on growth >= threshold over
    /// its own tracking window, from the same `total`). While the tick samples
    /// the line often enough to span the window — a sample within it, and the
    /// two around its start no more than a window apart — that is just one
    /// more sample: a crossing the samples do not show yet shows at the next
    /// tick. Otherwise — the daemon reads nothing while an armed trigger is
    /// silent (no periodic work no rule needs), and a read some other wake-up
    /// made (a reload's evaluation, a rule's release) is no tick: no read
    /// follows it before the kernel's next event, a window later — the series
    /// restarts from the kernel's word: a sample one window back that makes
    /// the window's stall `amount` + 1 µs, then this one. The kernel counts a
    /// share of its previous window's growth into the current one (its
    /// windows are interpolated too), so it may fire a few ms of stall before
    /// `total=` shows `amount` in the window; a stray read must not turn that
    /// firing into a window's wait. That is a lower bound, like every answer
    /// of this module: `> amount` holds, and a larger stall shows as the tick
    /// samples on while the rule is active.
    pub(crate) fn record_trigger(
        &mut self,
        now: Time,
        total_us: u64,
        amount: Duration,
        window: Duration,
    ) -> Recorded {
        let spans = match (now.checked_sub(window), self.samples.back()) {
            (Some(start), Some(&(last, _))) if now.saturating_sub(last) <= window => {
                // The samples around the window's start: interpolated
                // between two reads a window apart at most, not smeared
                // over a gap nobody sampled.
                let i = self.samples.partition_point(|&(t, _)| t <= start);
                i > 0
                    && self
                        .samples
                        .get(i)
                        .is_some_and(|&(t, _)| t - self.samples[i - 1].0 <= window)
            }
            _ => false,
        };
        if spans || now < window {
            return self.record(now, total_us);
        }
        let word = u64::try_from(amount.as_micros())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        // The samples restart here: the offset may change with them.
        self.offset = self.offset.max(word.saturating_sub(total_us));
        let total = total_us.saturating_add(self.offset);
        self.samples.clear();
        self.samples
            .push_back((now - window, total.saturating_sub(word)));
        self.samples.push_back((now, total));
        Recorded::Trigger
    }

    fn prune(&mut self) {
        let Some(&(newest, _)) = self.samples.back() else {
            return;
        };
        let horizon = newest.checked_sub(self.keep).unwrap_or(Duration::ZERO);
        // Keep the newest sample at or before the horizon: it anchors the
        // interpolation of the longest window.
        while self.samples.get(1).is_some_and(|&(t, _)| t <= horizon) {
            self.samples.pop_front();
        }
        while self.samples.len() > MAX_SAMPLES {
            self.samples.pop_front();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.samples.len()
    }

    /// The newest sample, as the counter read.
    pub(crate) fn latest(&self) -> Option<(Time, u64)> {
        self.samples
            .back()
            .map(|&(t, v)| (t, v.saturating_sub(self.offset)))
    }

    /// Stall time accumulated in the `window` ending at the newest sample
    /// at or before `now` (see the module docs for the exact rules).
    pub(crate) fn stall_in_window(&self, now: Time, window: Duration) -> Option<Duration> {
        // Newest sample at or before `now`.
        let end_idx = self.samples.iter().rposition(|&(t, _)| t <= now)?;
        let (end_time, end_total) = *self.samples.get(end_idx)?;
        if end_idx == 0 {
            return None;
        }
        if now.checked_sub(end_time).is_none_or(|age| age > window) {
            return None;
        }
        let start = end_time.checked_sub(window);
        // Newest sample at or before the window start, if the history reaches.
        let before = start.and_then(|start| {
            self.samples
                .iter()
                .take(end_idx)
                .rposition(|&(t, _)| t <= start)
                .map(|i| (i, start))
        });
        let start_total: u128 = match before {
            None => {
                // History shorter than the window: a lower bound.
                u128::from(self.samples.front()?.1)
            }
            Some((i, start)) => {
                let (t0, v0) = *self.samples.get(i)?;
                let (t1, v1) = *self.samples.get(i + 1)?;
                interpolate(t0, v0, t1, v1, start)
            }
        };
        let stall_us = u128::from(end_total).checked_sub(start_total)?;
        let stall_us = u64::try_from(stall_us).ok()?;
        Some(Duration::from_micros(stall_us))
    }
}

/// The counter at `at` (t0 <= at < t1), assuming a uniform rate between the
/// two samples; rounded down so the stall is never overstated by rounding.
fn interpolate(t0: Time, v0: u64, t1: Time, v1: u64, at: Time) -> u128 {
    let span = t1.saturating_sub(t0).as_nanos();
    let into = at.saturating_sub(t0).as_nanos().min(span);
    let growth = u128::from(v1.saturating_sub(v0));
    if span == 0 {
        return u128::from(v1);
    }
    // growth < 2^64 and into < 2^64 × 10^9 < 2^94: the product fits in u128.
    let part = growth.saturating_mul(into) / span;
    // Rounding `part` down would overstate the stall after it by up to 1µs;
    // round up instead, capped at the later sample.
    let exact = growth.saturating_mul(into) % span != 0;
    (u128::from(v0) + part + u128::from(exact)).min(u128::from(v1))
}

/// A PSI line: whose, which resource, `some` or `full`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct StallKey {
    pub(crate) target: Target,
    pub(crate) resource: Resource,
    pub(crate) stall: Stall,
}

impl StallKey {
    /// The line `stall` of `target`'s `resource` pressure file.
    pub(crate) fn of(target: &Target, resource: Resource, stall: Stall) -> Self {
        StallKey {
            target: target.clone(),
            resource,
            stall,
        }
    }
}

/// The stall series of every PSI line the rules use.
#[derive(Debug, Clone, Default)]
pub struct StallHistory {
    series: super::FastMap<StallKey, StallSeries>,
    /// Lines a registered kernel trigger watches: its silence means the
    /// stall stayed below the trigger's amount.
    armed: super::FastSet<StallKey>,
}

impl StallHistory {
    pub(crate) fn new() -> Self {
        StallHistory::default()
    }

    /// Sets the lines to keep and the longest window of each (from
    /// [`super::condition::Needs::psi_stall`]); drops the others.
    pub(crate) fn configure<'a>(
        &mut self,
        needs: impl IntoIterator<Item = (&'a StallKey, &'a Duration)>,
    ) {
        let mut keep: super::FastMap<StallKey, Duration> = Default::default();
        for (k, w) in needs {
            let e = keep.entry(k.clone()).or_default();
            *e = (*e).max(*w);
        }
        self.series.retain(|k, _| keep.contains_key(k));
        for (k, w) in keep {
            self.series
                .entry(k)
                .and_modify(|s| s.set_keep(w))
                .or_insert_with(|| StallSeries::new(w));
        }
    }

    /// Records a sample of a line; a line not configured is added with the
    /// default retention.
    pub(crate) fn record(&mut self, key: &StallKey, now: Time, total_us: u64) -> Recorded {
        match self.series.get_mut(key) {
            Some(s) => s.record(now, total_us),
            None => {
                let mut s = StallSeries::default();
                let r = s.record(now, total_us);
                self.series.insert(key.clone(), s);
                r
            }
        }
    }

    /// Whether a registered kernel trigger watches `key` (its silence then
    /// answers for windows nobody sampled).
    pub(crate) fn set_armed(&mut self, key: &StallKey, armed: bool) {
        if armed {
            self.armed.insert(key.clone());
        } else {
            self.armed.remove(key);
        }
    }

    pub(crate) fn is_armed(&self, key: &StallKey) -> bool {
        self.armed.contains(key)
    }

    /// [`StallSeries::record_trigger`] of a line.
    pub(crate) fn record_trigger(
        &mut self,
        key: &StallKey,
        now: Time,
        total_us: u64,
        amount: Duration,
        window: Duration,
    ) -> Recorded {
        self.series
            .entry(key.clone())
            .or_default()
            .record_trigger(now, total_us, amount, window)
    }

    /// [`StallSeries::stall_in_window`] of a line; `None` if never sampled.
    pub(crate) fn stall_in_window(
        &self,
        key: &StallKey,
        now: Time,
        window: Duration,
    ) -> Option<Duration> {
        self.series.get(key)?.stall_in_window(now, window)
    }

    /// The stall a rule condition sees over `window`: the recorded stall;
    /// zero when the line is read but one sample is not a window yet (no
    /// stall observed is not "unavailable"), or when nobody sampled the
    /// window but an armed kernel trigger (`armed`: this history's own
    /// registration, or a replay's record of it) watched it and stayed
    /// silent; `None` when nothing is known. The daemon and replay both ask
    /// here.
    pub(crate) fn condition_stall(
        &self,
        key: &StallKey,
        now: Time,
        window: Duration,
        armed: bool,
    ) -> Option<Duration> {
        match self.stall_in_window(key, now, window) {
            Some(d) => Some(d),
            None if self.series(key).is_some_and(|s| s.len() == 1) => Some(Duration::ZERO),
            None if armed => Some(Duration::ZERO),
            None => None,
        }
    }

    pub(crate) fn series(&self, key: &StallKey) -> Option<&StallSeries> {
        self.series.get(key)
    }

    /// When a line whose kernel trigger (`amount`/`window`) is
    /// armed must be read again although the trigger stays silent. A trigger
    /// says when stall rises to its amount, never when it ends: while the
    /// stall in the window ending at the newest sample is at least `amount`,
    /// a condition on the line may hold and only a read shows it end, so the
    /// line is read `period` after that sample — or, with a period of a
    /// window or more, an eighth of a window after the window: while the
    /// stall goes on the kernel fires the trigger again once a window (its
    /// rate limit; it polls at a tenth of the window), and that firing's
    /// read should take this one's place, not come beside it. Below the
    /// amount nothing is due (the trigger speaks if it rises again). A line
    /// whose newest sample is older than that at `now` (its last read
    /// failed) is due once its window has passed, when its silence reads as
    /// no stall; after that, never. The daemon evaluates at this time instead
    /// of ticking while a stall rule is busy.
    pub(crate) fn recheck_at(
        &self,
        key: &StallKey,
        amount: Duration,
        window: Duration,
        period: Duration,
        now: impl FnOnce() -> Time,
    ) -> Option<Time> {
        let (newest, _) = self.series.get(key)?.latest()?;
        let stall = self.stall_in_window(key, newest, window)?;
        if stall < amount {
            return None;
        }
        // Read only here: a loop turn with no stall at an amount reads no clock.
        let now = now();
        let after = if period >= window {
            silence_after(window)
        } else {
            period
        };
        let at = newest + after;
        if at > now {
            return Some(at);
        }
        let cleared = newest + window + Duration::from_millis(1);
        (cleared > now).then_some(cleared)
    }

    /// From when an armed trigger's silence decides a line with
    /// no newer sample: its newest sample plus [`silence_after`] the window.
    /// A condition true on that sample is false from then on unless the
    /// trigger fires (and a firing adds a sample, moving this time). `None`
    /// for a line no armed trigger watches, or never sampled.
    pub(crate) fn silent_from(
        &self,
        key: &StallKey,
        window: Duration,
        armed: bool,
    ) -> Option<Time> {
        if !armed {
            return None;
        }
        let (newest, _) = self.series.get(key)?.latest()?;
        newest.checked_add(silence_after(window))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(m: u64) -> Duration {
        Duration::from_millis(m)
    }

    #[test]
    fn an_armed_line_is_read_again_while_its_stall_is_at_the_amount() {
        let key = StallKey {
            target: Target::Group("g".into()),
            resource: Resource::Memory,
            stall: Stall::Some,
        };
        let (amount, window) = (ms(100), s(1));
        let mut h = StallHistory::new();
        assert_eq!(h.recheck_at(&key, amount, window, s(1), || s(0)), None);
        h.record(&key, s(1), 1_000);
        // The kernel fires at 10 s: read again a period later, or just after
        // the trigger's next firing would come (a window, and an eighth).
        h.record_trigger(&key, s(10), 900_000, amount, window);
        assert_eq!(
            h.recheck_at(&key, amount, window, s(1), || s(10)),
            Some(ms(11_125))
        );
        assert_eq!(
            h.recheck_at(&key, amount, window, s(5), || s(10)),
            Some(ms(11_125))
        );
        assert_eq!(
            h.recheck_at(&key, amount, window, ms(250), || s(10)),
            Some(ms(10_250))
        );
        // The stall ended: 5 ms in the last window, nothing is due.
        h.record(&key, s(11), 905_000);
        assert_eq!(h.recheck_at(&key, amount, window, s(1), || s(11)), None);
        // It went on (395 ms): again a window and an eighth later.
        h.record(&key, s(12), 1_300_000);
        assert_eq!(
            h.recheck_at(&key, amount, window, s(1), || s(12)),
            Some(ms(13_125))
        );
        // That read failed: the window has passed, the line reads as no
        // stall already; nothing more is due.
        assert_eq!(
            h.recheck_at(&key, amount, window, s(1), || ms(13_125)),
            None
        );
        // With a period under the window, a failed read is due once more
        // when the window has passed, then never.
        let p = ms(250);
        assert_eq!(
            h.recheck_at(&key, amount, window, p, || s(12)),
            Some(ms(12_250))
        );
        assert_eq!(
            h.recheck_at(&key, amount, window, p, || ms(12_300)),
            Some(ms(13_001))
        );
        assert_eq!(h.recheck_at(&key, amount, window, p, || ms(13_001)), None);
    }

    #[test]
    fn a_trigger_stands_in_for_a_window_nobody_sampled() {
        let mut sr = StallSeries::new(s(1));
        assert_eq!(sr.record(s(1), 1_000), Recorded::Appended);
        // Silence for 9 s (nothing read), then the kernel says >= 100ms/1s.
        assert_eq!(
            sr.record_trigger(s(10), 900_000, ms(100), s(1)),
            Recorded::Trigger
        );
        let w = sr.stall_in_window(s(10), s(1)).expect("a window");
        assert!(w > ms(100) && w <= ms(101), "{w:?}");
        // The tick samples on: the real stall shows.
        sr.record(s(10) + ms(500), 1_300_000);
        let w = sr.stall_in_window(s(10) + ms(500), s(1)).expect("a window");
        assert!(w > ms(400), "{w:?}");
    }

    #[test]
    fn a_trigger_within_sampled_history_is_one_more_sample() {
        let mut sr = StallSeries::new(s(1));
        for i in 0..=10u64 {
            sr.record(ms(500 * i), 1_000 + 10_000 * i);
        }
        // Sampled every 500 ms: the series is the truth, the trigger adds a point.
        assert_eq!(
            sr.record_trigger(ms(5_200), 120_000, ms(100), s(1)),
            Recorded::Appended
        );
        assert_eq!(sr.latest(), Some((ms(5_200), 120_000)));
        assert!(sr.len() > 2);
    }

    #[test]
    fn a_trigger_after_a_stray_read_is_the_kernels_word() {
        // No tick: a read at the start, one by a reload's evaluation 966 ms
        // before the trigger, and the kernel fires with 94.5 ms of growth in
        // `total=` since (its window counts a share of the previous one's).
        // Without the trigger's word the rule would wait a window for the
        // kernel's next event.
        let mut sr = StallSeries::new(s(1));
        sr.record(s(1), 2_125_724);
        sr.record(ms(91_153), 2_125_724);
        assert_eq!(
            sr.record_trigger(ms(92_119), 2_220_184, ms(100), s(1)),
            Recorded::Trigger
        );
        let w = sr.stall_in_window(ms(92_119), s(1)).expect("a window");
        assert!(w > ms(100), "{w:?}");
    }

    #[test]
    fn a_fresh_groups_first_trigger_under_the_amount_is_still_the_kernels_word() {
        // A guest boot: the group's counter was 0 at the daemon's startup
        // read, and the kernel fired 2.6 s later with `total=` at 93,191 µs
        // (its window counts a share of its previous one). A window start
        // clamped at zero made that 93 ms, under the amount: the rule waited
        // a window for the kernel's next event.
        let mut sr = StallSeries::new(s(1));
        sr.record(ms(1), 0);
        assert_eq!(
            sr.record_trigger(ms(2_648), 93_191, ms(100), s(1)),
            Recorded::Trigger
        );
        let w = sr.stall_in_window(ms(2_648), s(1)).expect("a window");
        assert!(w > ms(100), "{w:?}");
        assert_eq!(
            sr.latest(),
            Some((ms(2_648), 93_191)),
            "the counter as read"
        );
        // Later reads are the counter's growth, as before.
        assert_eq!(sr.record(ms(2_748), 193_191), Recorded::Appended);
        assert_eq!(sr.latest(), Some((ms(2_748), 193_191)));
        let w = sr.stall_in_window(ms(2_748), s(1)).expect("a window");
        assert!(w > ms(100), "{w:?}");
        // A reset (the group recreated) is still seen as one.
        assert_eq!(sr.record(ms(2_848), 5), Recorded::Reset);
    }

    fn s(x: u64) -> Duration {
        Duration::from_secs(x)
    }

    /// Samples every `step_ms` with `stall_ms` of stall each interval.
    fn steady(series: &mut StallSeries, from_ms: u64, n: u64, step_ms: u64, stall_ms: u64) {
        for i in 0..n {
            series.record(ms(from_ms + i * step_ms), i * stall_ms * 1000);
        }
    }

    #[test]
    fn empty_and_single_sample_are_unavailable() {
        let mut ser = StallSeries::new(s(10));
        assert_eq!(ser.stall_in_window(s(1), s(1)), None);
        ser.record(s(1), 500);
        assert_eq!(ser.stall_in_window(s(1), s(1)), None);
        assert_eq!(ser.stall_in_window(s(5), s(1)), None);
    }

    #[test]
    fn aligned_samples_are_exact() {
        let mut ser = StallSeries::new(s(10));
        ser.record(s(10), 1_000_000);
        ser.record(s(11), 1_200_000);
        assert_eq!(ser.stall_in_window(s(11), s(1)), Some(ms(200)));
        ser.record(s(12), 1_250_000);
        assert_eq!(ser.stall_in_window(s(12), s(1)), Some(ms(50)));
        assert_eq!(ser.stall_in_window(s(12), s(2)), Some(ms(250)));
    }

    #[test]
    fn short_history_is_a_lower_bound() {
        let mut ser = StallSeries::new(s(10));
        ser.record(s(10), 0);
        ser.record(ms(10_500), 300_000);
        // Window 1s, history 0.5s: the 300ms seen, not scaled.
        assert_eq!(ser.stall_in_window(ms(10_500), s(1)), Some(ms(300)));
    }

    #[test]
    fn jittered_ticks_do_not_double_count() {
        let mut ser = StallSeries::new(s(10));
        // 400ms stall in the first second, none in the second.
        ser.record(ms(9_000), 0);
        ser.record(ms(10_000), 400_000);
        // The next tick comes 2ms early.
        ser.record(ms(10_998), 400_000);
        let got = ser.stall_in_window(ms(10_998), s(1)).expect("some");
        // Only the 2ms of the first second that fall in the window count.
        assert!(got <= ms(1), "{got:?}");
        // A late tick: the window starts 3ms into the quiet second.
        let mut ser = StallSeries::new(s(10));
        ser.record(ms(9_000), 0);
        ser.record(ms(10_000), 0);
        ser.record(ms(11_003), 150_000);
        let got = ser.stall_in_window(ms(11_003), s(1)).expect("some");
        assert!(got >= ms(149) && got <= ms(150), "{got:?}");
    }

    #[test]
    fn window_shorter_than_sampling_scales_the_rate() {
        let mut ser = StallSeries::new(s(10));
        ser.record(s(1), 0);
        ser.record(s(2), 400_000);
        assert_eq!(ser.stall_in_window(s(2), ms(500)), Some(ms(200)));
    }

    #[test]
    fn window_ends_at_newest_sample_not_after() {
        let mut ser = StallSeries::new(s(10));
        ser.record(s(1), 0);
        ser.record(s(2), 100_000);
        ser.record(s(3), 300_000);
        // Evaluated between samples: the window ends at the sample at 2s.
        assert_eq!(ser.stall_in_window(ms(2_500), s(1)), Some(ms(100)));
        // Samples in the future of `now` are not used.
        assert_eq!(ser.stall_in_window(ms(1_500), s(1)), None);
        // Stale: the newest sample is older than a window.
        assert_eq!(ser.stall_in_window(s(5), s(1)), None);
        assert_eq!(ser.stall_in_window(s(4), s(1)), Some(ms(200)));
    }

    #[test]
    fn counter_reset_restarts_series() {
        let mut ser = StallSeries::new(s(10));
        ser.record(s(1), 5_000_000);
        ser.record(s(2), 5_100_000);
        assert_eq!(ser.record(s(3), 1_000), Recorded::Reset);
        assert_eq!(ser.len(), 1);
        assert_eq!(ser.stall_in_window(s(3), s(1)), None);
        ser.record(s(4), 201_000);
        assert_eq!(ser.stall_in_window(s(4), s(1)), Some(ms(200)));
    }

    /// A `total=` that jumps to 2^64-1 (seen with a corrupt or injected
    /// file) once fired a stall rule; it must count for nothing.
    #[test]
    fn implausible_jumps_are_never_acted_on() {
        let mut ser = StallSeries::new(s(10));
        ser.record(s(1), 5_000_000);
        ser.record(s(2), 5_100_000);
        assert_eq!(ser.record(s(3), u64::MAX), Recorded::Implausible);
        assert_eq!(
            ser.stall_in_window(s(3), s(1)),
            None,
            "no window spans the jump"
        );
        // Growth within wall time from the new value counts again.
        assert_eq!(ser.record(s(4), u64::MAX), Recorded::Appended);
        assert_eq!(ser.stall_in_window(s(4), s(1)), Some(ms(0)));
        // A big but possible stall (900 ms in 1 s) is plausible.
        let mut ser = StallSeries::new(s(10));
        ser.record(s(1), 0);
        assert_eq!(ser.record(s(2), 900_000), Recorded::Appended);
        assert_eq!(ser.stall_in_window(s(2), s(1)), Some(ms(900)));
        // 10 s of stall in 1 s is not.
        assert_eq!(ser.record(s(3), 10_900_000), Recorded::Implausible);
    }

    #[test]
    fn out_of_order_and_same_time_samples() {
        let mut ser = StallSeries::new(s(10));
        assert_eq!(ser.record(s(2), 100), Recorded::Appended);
        assert_eq!(ser.record(s(1), 200), Recorded::Ignored);
        assert_eq!(ser.record(s(2), 300), Recorded::Replaced);
        assert_eq!(ser.latest(), Some((s(2), 300)));
        assert_eq!(ser.len(), 1);
    }

    #[test]
    fn retention_is_bounded_by_keep() {
        let mut ser = StallSeries::new(s(2));
        steady(&mut ser, 0, 100, 100, 10);
        // 2s of 100ms samples, plus the anchor before.
        assert!(ser.len() <= 22, "{}", ser.len());
        assert_eq!(ser.stall_in_window(ms(9_900), s(2)), Some(ms(200)));
        ser.set_keep(ms(500));
        assert!(ser.len() <= 7, "{}", ser.len());
        assert_eq!(ser.keep, ms(500));
    }

    #[test]
    fn retention_is_bounded_by_count() {
        let mut ser = StallSeries::new(s(10));
        steady(&mut ser, 0, 5000, 1, 0);
        assert_eq!(ser.len(), MAX_SAMPLES);
    }

    #[test]
    fn huge_values_do_not_overflow() {
        let mut ser = StallSeries::new(Duration::MAX);
        ser.record(Duration::ZERO, 0);
        ser.record(Duration::MAX, u64::MAX);
        assert!(ser.stall_in_window(Duration::MAX, Duration::MAX).is_some());
        assert!(ser.stall_in_window(Duration::MAX, s(1)).is_some());
    }

    #[test]
    fn history_by_key() {
        let key = StallKey {
            target: Target::Group("g".into()),
            resource: Resource::Memory,
            stall: Stall::Some,
        };
        let other = StallKey {
            target: Target::Host,
            ..key.clone()
        };
        let mut h = StallHistory::new();
        h.configure([(&key, &s(1)), (&key, &s(3))]);
        assert_eq!(h.series(&key).map(|s| s.keep), Some(s(3)));
        h.record(&key, s(1), 0);
        h.record(&key, s(2), 100_000);
        assert_eq!(h.stall_in_window(&key, s(2), s(1)), Some(ms(100)));
        assert_eq!(h.stall_in_window(&other, s(2), s(1)), None);
        h.record(&other, s(1), 0);
        assert!(h.series(&other).is_some());
        h.configure([(&key, &s(1))]);
        assert!(h.series(&other).is_none());
    }

    proptest! {
        /// The stall in a window is never more than the counter grew over
        /// the samples spanning it, never more than the window itself when
        /// the counter grows at most in real time, and never negative.
        #[test]
        fn bounded_by_growth_and_window(
            steps in proptest::collection::vec((1u64..2000, 0u64..2000), 1..60),
            window_ms in 500u64..10_000,
            probe_ms in 0u64..3000,
        ) {
            let mut ser = StallSeries::new(ms(window_ms));
            let (mut t, mut total) = (0u64, 0u64);
            let mut all = vec![(0u64, 0u64)];
            ser.record(ms(0), 0);
            for (dt, stall_frac) in steps {
                t += dt;
                // Stall grows at most as fast as time (one line, one clock).
                total += dt * 1000 * stall_frac / 2000;
                ser.record(ms(t), total);
                all.push((t, total));
            }
            let now = t + probe_ms;
            if let Some(got) = ser.stall_in_window(ms(now), ms(window_ms)) {
                prop_assert!(got <= ms(window_ms) + Duration::from_micros(1), "{got:?}");
                // Never more than the growth since the last sample at or
                // before the window start.
                let end = all.iter().rev().find(|&&(ti, _)| ti <= now).copied().unwrap_or((0, 0));
                let start = end.0.saturating_sub(window_ms);
                let base = all.iter().rev().find(|&&(ti, _)| ti <= start).copied().unwrap_or(all[0]);
                prop_assert!(got <= Duration::from_micros(end.1 - base.1));
            }
            prop_assert!(ser.len() <= MAX_SAMPLES);
        }

        #[test]
        fn never_panics(samples in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..30),
                        now in any::<u64>(), window in any::<u64>()) {
            let mut ser = StallSeries::new(Duration::from_nanos(window));
            for (t, v) in samples {
                ser.record(Duration::from_nanos(t), v);
            }
            let _ = ser.stall_in_window(Duration::from_nanos(now), Duration::from_nanos(window));
            let _ = ser.stall_in_window(Duration::MAX, Duration::MAX);
        }
    }
}
