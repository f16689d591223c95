//! When and why the event loop wakes: its one timer ([`LoopTimer`], a
//! timerfd on tokio's reactor), what the periodic tick does ([`TickMode`]),
//! and the wake-up counts the stop line reports ([`LoopWakes`]).

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

/// The loop's one timer (issue 29): a kernel timerfd on tokio's reactor, so
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
