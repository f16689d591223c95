//! When and why the event loop wakes: its one timer ([`LoopTimer`], a
//! timerfd on tokio's reactor), what the periodic tick does ([`TickMode`]),
//! the wake-up counts the stop line reports ([`LoopWakes`]) and, when a
//! benchmark asks, what each kind cost ([`LoopProfile`]).

use std::time::{Duration, Instant};

/// Why the event loop woke (`total` counts every turn, including signals
/// and late-write checks).
#[derive(Debug, Default)]
pub(super) struct LoopWakes {
    pub(super) total: u64,
    pub(super) tick: u64,
    pub(super) event: u64,
    pub(super) write_done: u64,
    pub(super) deadline: u64,
    pub(super) rescan: u64,
    pub(super) watchdog: u64,
    pub(super) control: u64,
}

#[cfg(any(test, feature = "loop-profile"))]
impl LoopWakes {
    /// The counts, in the order [`LoopProfile`] reports them.
    fn kinds(&self) -> [u64; 7] {
        [
            self.tick,
            self.event,
            self.write_done,
            self.deadline,
            self.rescan,
            self.watchdog,
            self.control,
        ]
    }
}

/// The wake kinds [`LoopProfile`] tells apart (as [`LoopWakes::kinds`]),
/// and `other` for a turn none of them counts (signals, late-write checks).
#[cfg(any(test, feature = "loop-profile"))]
const KIND_NAMES: [&str; 8] = [
    "tick",
    "event",
    "write_done",
    "deadline",
    "rescan",
    "watchdog",
    "control",
    "other",
];

/// What each kind of wake-up cost the loop's thread (where a pressure
/// episode's CPU goes), when `CGWARDEN_LOOP_PROFILE` is set (a
/// benchmark's switch: one clock read a turn). A turn's CPU — its handler,
/// then the bookkeeping before the next wait — goes to the kind it counted.
/// Built only with the `loop-profile` feature (2.9 KB of the 6 MB budget);
/// without it [`LoopProfile`] is an empty stand-in.
#[cfg(any(test, feature = "loop-profile"))]
#[derive(Debug)]
pub(super) struct LoopProfile {
    on: bool,
    last_ns: u64,
    last: [u64; 7],
    cpu_ns: [u64; 8],
}

#[cfg(any(test, feature = "loop-profile"))]
impl LoopProfile {
    pub(super) fn from_env() -> LoopProfile {
        LoopProfile::new(std::env::var_os("CGWARDEN_LOOP_PROFILE").is_some())
    }

    fn new(on: bool) -> LoopProfile {
        LoopProfile {
            on,
            last_ns: if on {
                crate::kernel::selfproc::thread_cpu_ns()
            } else {
                0
            },
            last: [0; 7],
            cpu_ns: [0; 8],
        }
    }

    /// At the top of each turn: the CPU since the last call goes to the
    /// kind whose count moved.
    pub(super) fn turn(&mut self, woke: &LoopWakes) {
        if !self.on {
            return;
        }
        let now = crate::kernel::selfproc::thread_cpu_ns();
        let kinds = woke.kinds();
        let i = (0..7).find(|&i| kinds[i] != self.last[i]).unwrap_or(7);
        self.cpu_ns[i] += now.saturating_sub(self.last_ns);
        self.last_ns = now;
        self.last = kinds;
    }

    /// `event 42x1900us=80ms, …`, or `None` when off.
    pub(super) fn summary(&self, woke: &LoopWakes) -> Option<String> {
        if !self.on {
            return None;
        }
        let kinds = woke.kinds();
        let other = woke.total.saturating_sub(kinds.iter().sum());
        Some(
            KIND_NAMES
                .iter()
                .zip(&self.cpu_ns)
                .enumerate()
                .filter(|(_, (_, &ns))| ns > 0)
                .map(|(i, (n, &ns))| {
                    let count = kinds.get(i).copied().unwrap_or(other).max(1);
                    format!("{n} {count}x{}us={}ms", ns / count / 1000, ns / 1_000_000)
                })
                .collect::<Vec<_>>()
                .join(", "),
        )
    }
}

/// The stand-in without the `loop-profile` feature: says nothing.
#[cfg(not(any(test, feature = "loop-profile")))]
#[derive(Debug)]
pub(super) struct LoopProfile;

#[cfg(not(any(test, feature = "loop-profile")))]
impl LoopProfile {
    pub(super) fn from_env() -> LoopProfile {
        LoopProfile
    }

    pub(super) fn turn(&mut self, _: &LoopWakes) {}

    pub(super) fn summary(&self, _: &LoopWakes) -> Option<String> {
        None
    }
}

/// The loop's one timer: a kernel timerfd on tokio's reactor, so
/// setting it from the loop wakes nothing and it fires in one park (see
/// [`crate::kernel::wait::TimerFd`]); tokio's timer where no timerfd can be
/// made.
pub(super) enum LoopTimer {
    Fd(tokio::io::unix::AsyncFd<crate::kernel::wait::TimerFd>),
    Tokio(std::pin::Pin<Box<tokio::time::Sleep>>),
}

impl LoopTimer {
    pub(super) fn new() -> LoopTimer {
        use crate::kernel::wait::{async_fd, TimerFd};
        let fd = TimerFd::new()
            .and_then(|t| async_fd(t, tokio::io::Interest::READABLE).map_err(|(e, _)| e));
        match fd {
            Ok(fd) => LoopTimer::Fd(fd),
            Err(e) => {
                tracing::debug!("no timerfd ({e}): the loop's timer is tokio's");
                LoopTimer::tokio()
            }
        }
    }

    fn tokio() -> LoopTimer {
        LoopTimer::Tokio(Box::pin(tokio::time::sleep(Duration::ZERO)))
    }

    /// Fires at `at` (a time past: at once); `None` disarms it.
    pub(super) fn set(&mut self, at: Option<Instant>) {
        match self {
            LoopTimer::Fd(fd) => {
                let after = at.map(|t| t.saturating_duration_since(Instant::now()));
                if let Err(e) = fd.get_ref().set(after) {
                    tracing::warn!("timerfd_settime: {e}; the loop's timer is tokio's from now on");
                    *self = LoopTimer::tokio();
                    self.set(at);
                }
            }
            LoopTimer::Tokio(s) => {
                if let Some(t) = at {
                    s.as_mut().reset(tokio::time::Instant::from_std(t));
                }
            }
        }
    }

    /// Waits until it fires (or, once in a while, a stale readiness: the
    /// loop looks at its times either way and sets it again).
    pub(super) async fn fired(&mut self) {
        match self {
            LoopTimer::Fd(fd) => {
                // An error only while the runtime shuts down.
                if let Ok(mut ready) = fd.readable().await {
                    ready.get_inner().clear();
                    ready.clear_ready();
                }
            }
            LoopTimer::Tokio(s) => s.as_mut().await,
        }
    }
}

/// What the periodic tick does, decided before each wait of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TickMode {
    /// Every condition is served by a kernel event (armed PSI triggers,
    /// inotify, exec events): no tick. A stall line behind a registered
    /// trigger is read when the trigger fires; its silence answers for the
    /// windows nobody sampled (`engine::stall`).
    Off,
    /// Sample and evaluate every `settings.tick`.
    Full(Duration),
}

impl TickMode {
    pub(super) fn period(self) -> Option<Duration> {
        match self {
            TickMode::Off => None,
            TickMode::Full(p) => Some(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burn(ms: u64) {
        let t0 = crate::kernel::selfproc::thread_cpu_ns();
        let mut x = 0u64;
        while crate::kernel::selfproc::thread_cpu_ns() < t0 + ms * 1_000_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
    }

    #[test]
    fn each_turn_goes_to_the_kind_it_counted() {
        let mut p = LoopProfile::new(true);
        let mut w = LoopWakes::default();
        p.turn(&w);
        // Two event turns of ~20 ms, one write completion of ~5 ms, one
        // turn nothing counts (a signal) of ~5 ms.
        for _ in 0..2 {
            w.total += 1;
            w.event += 1;
            burn(20);
            p.turn(&w);
        }
        w.total += 1;
        w.write_done += 1;
        burn(5);
        p.turn(&w);
        w.total += 1;
        burn(5);
        p.turn(&w);
        let s = p.summary(&w).unwrap();
        assert!(s.starts_with("event 2x"), "{s}");
        assert!(s.contains(", write_done 1x"), "{s}");
        assert!(s.contains(", other 1x"), "{s}");
        let ms = |kind: &str| -> f64 {
            let part = s.split(", ").find(|x| x.starts_with(kind)).unwrap();
            part.rsplit('=')
                .next()
                .unwrap()
                .trim_end_matches("ms")
                .parse()
                .unwrap()
        };
        assert!(
            ms("event") >= 40.0 && ms("event") > ms("write_done") * 3.0,
            "{s}"
        );
        assert!(!s.contains("tick"), "{s}");
    }

    #[test]
    fn off_costs_nothing_and_says_nothing() {
        let mut p = LoopProfile::new(false);
        let w = LoopWakes {
            total: 3,
            event: 3,
            ..LoopWakes::default()
        };
        p.turn(&w);
        assert_eq!(p.summary(&w), None);
        assert_eq!(p.cpu_ns, [0; 8]);
    }
}
