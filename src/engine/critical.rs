//! Which live processes are critical (`settings.critical`) and
//! when one exits: pid → (comm, index of the first matching pattern).
//! Fed by exec/rename/exit events and reconciled by scans; pure (the exec
//! thread reads /proc).

use glob::Pattern;
use std::collections::HashMap;

/// A critical process that is gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Gone {
    pub(crate) pid: i32,
    pub(crate) comm: String,
    /// The `settings.critical` entry it matched (the metric's label).
    pub(crate) pattern: String,
}

#[derive(Debug, Default)]
pub(crate) struct Critical {
    patterns: Vec<(String, Option<Pattern>)>,
    live: HashMap<i32, (String, usize)>,
}

/// Live critical processes remembered (a board runs a handful).
const LIVE_MAX: usize = 4096;

impl Critical {
    pub(crate) fn new(patterns: &[String]) -> Critical {
        Critical {
            patterns: patterns
                .iter()
                .map(|p| (p.clone(), Pattern::new(p).ok()))
                .collect(),
            live: HashMap::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The patterns, in policy order.
    pub(crate) fn patterns(&self) -> impl Iterator<Item = &str> {
        self.patterns.iter().map(|(p, _)| p.as_str())
    }

    /// The index of the first pattern `comm` matches.
    pub(crate) fn matches(&self, comm: &str) -> Option<usize> {
        self.patterns.iter().position(|(lit, p)| match p {
            Some(p) => p.matches(comm),
            None => lit == comm,
        })
    }

    /// Process `pid` is alive with `comm` (exec, rename or scan). A
    /// critical process renamed to a name no pattern matches is no longer
    /// watched (its later exit is not a critical exit).
    pub(crate) fn seen(&mut self, pid: i32, comm: &str) {
        match self.matches(comm) {
            Some(i) => {
                if self.live.len() >= LIVE_MAX && !self.live.contains_key(&pid) {
                    return;
                }
                self.live.insert(pid, (comm.to_string(), i));
            }
            None => {
                self.live.remove(&pid);
            }
        }
    }

    /// Process `pid` exited: the critical exit, if it was one.
    pub(crate) fn exited(&mut self, pid: i32) -> Option<Gone> {
        let (comm, i) = self.live.remove(&pid)?;
        Some(Gone {
            pid,
            comm,
            pattern: self
                .patterns
                .get(i)
                .map(|(p, _)| p.clone())
                .unwrap_or_default(),
        })
    }

    /// After a scan: critical processes not alive any more (their exit
    /// events were lost, or there are none on a fake tree).
    pub(crate) fn reconcile(&mut self, alive: &dyn Fn(i32) -> bool) -> Vec<Gone> {
        let gone: Vec<i32> = self.live.keys().copied().filter(|p| !alive(*p)).collect();
        let mut out: Vec<Gone> = gone.into_iter().filter_map(|p| self.exited(p)).collect();
        out.sort_by_key(|g| g.pid);
        out
    }

    #[cfg(test)]
    fn is_critical(&self, pid: i32) -> bool {
        self.live.contains_key(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_critical_exit_is_reported_once_with_its_pattern() {
        let mut c = Critical::new(&["motion_node".into(), "ros2_*".into()]);
        c.seen(10, "motion_node");
        c.seen(11, "ros2_daemon");
        c.seen(12, "bash");
        assert_eq!(c.exited(12), None);
        assert_eq!(
            c.exited(11),
            Some(Gone {
                pid: 11,
                comm: "ros2_daemon".into(),
                pattern: "ros2_*".into()
            })
        );
        assert_eq!(c.exited(11), None, "once");
        // Renamed away: no longer critical.
        c.seen(10, "something");
        assert_eq!(c.exited(10), None);
    }

    #[test]
    fn a_scan_reports_the_critical_processes_it_no_longer_finds() {
        let mut c = Critical::new(&["a*".into()]);
        c.seen(1, "a1");
        c.seen(2, "a2");
        let gone = c.reconcile(&|p| p == 1);
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].pid, 2);
        assert!(c.is_critical(1) && !c.is_critical(2));
    }
}
