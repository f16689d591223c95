//! Which processes `running(NAME)` can see: pid → comm of the live
//! processes whose comm matches at least one `running()` pattern of the
//! policy. Updated on exec/comm/exit events and replaced by each full scan;
//! `running(NAME)` is then a lookup, true while any live process matches,
//! and it flips on the event, not on a tick. Pure: callers read `/proc`.

use glob::Pattern;
use std::collections::HashMap;

/// The live processes relevant to `running()`.
#[derive(Debug, Default)]
pub(crate) struct Presence {
    /// Patterns in a fixed order; `None`: not a valid glob, compared literally.
    patterns: Vec<(String, Option<Pattern>)>,
    /// pid → (comm, bit set of matching pattern indices, up to 64 patterns;
    /// patterns past 64 are matched on demand).
    live: HashMap<i32, (String, u64)>,
    /// Live matching processes per pattern index (first 64).
    counts: Vec<u32>,
}

impl Presence {
    /// `patterns`: the `running()` arguments of the policy.
    pub(crate) fn new<'a>(patterns: impl IntoIterator<Item = &'a String>) -> Presence {
        let patterns: Vec<(String, Option<Pattern>)> = patterns
            .into_iter()
            .map(|p| (p.clone(), Pattern::new(p).ok()))
            .collect();
        let n = patterns.len().min(64);
        Presence {
            patterns,
            live: HashMap::new(),
            counts: vec![0; n],
        }
    }

    /// True when no rule uses `running()`: nothing needs tracking.
    pub(crate) fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    fn mask(&self, comm: &str) -> (u64, bool) {
        let mut m = 0u64;
        let mut any = false;
        for (i, (lit, pat)) in self.patterns.iter().enumerate() {
            let hit = match pat {
                Some(p) => p.matches(comm),
                None => lit == comm,
            };
            if hit {
                any = true;
                if i < 64 {
                    m |= 1 << i;
                }
            }
        }
        (m, any)
    }

    fn answers(&self) -> u64 {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .fold(0, |m, (i, _)| m | (1 << i))
    }

    /// A process `pid` now has comm `comm` (exec or rename). Returns true
    /// when some `running()` answer changed.
    pub(crate) fn update(&mut self, pid: i32, comm: &str) -> bool {
        let before = self.answers();
        self.remove_quiet(pid);
        let (m, any) = self.mask(comm);
        if any {
            for (i, c) in self.counts.iter_mut().enumerate() {
                if m & (1 << i) != 0 {
                    *c += 1;
                }
            }
            self.live.insert(pid, (comm.to_string(), m));
        }
        self.answers() != before || (any && self.patterns.len() > 64)
    }

    fn remove_quiet(&mut self, pid: i32) -> bool {
        let Some((_, m)) = self.live.remove(&pid) else {
            return false;
        };
        for (i, c) in self.counts.iter_mut().enumerate() {
            if m & (1 << i) != 0 {
                *c = c.saturating_sub(1);
            }
        }
        true
    }

    /// Process `pid` exited. Returns true when some answer changed.
    pub(crate) fn exit(&mut self, pid: i32) -> bool {
        let before = self.answers();
        let was = self.remove_quiet(pid);
        self.answers() != before || (was && self.patterns.len() > 64)
    }

    /// Replaces everything with a full scan's `(pid, comm)` list. Returns
    /// true when some answer changed.
    pub(crate) fn replace_all(&mut self, procs: impl IntoIterator<Item = (i32, String)>) -> bool {
        let before = self.answers();
        let old: Vec<i32> = self.live.keys().copied().collect();
        self.live.clear();
        self.counts.iter_mut().for_each(|c| *c = 0);
        for (pid, comm) in procs {
            let (m, any) = self.mask(&comm);
            if any {
                for (i, c) in self.counts.iter_mut().enumerate() {
                    if m & (1 << i) != 0 {
                        *c += 1;
                    }
                }
                self.live.insert(pid, (comm, m));
            }
        }
        let mut now: Vec<i32> = self.live.keys().copied().collect();
        let mut old = old;
        old.sort_unstable();
        now.sort_unstable();
        self.answers() != before || (self.patterns.len() > 64 && old != now)
    }

    /// `running(pattern)`: a live process whose comm matches.
    pub(crate) fn running(&self, pattern: &str) -> bool {
        match self.patterns.iter().position(|(p, _)| p == pattern) {
            Some(i) if i < 64 => self.counts[i] > 0,
            Some(i) => {
                let (lit, pat) = &self.patterns[i];
                self.live.values().any(|(c, _)| match pat {
                    Some(p) => p.matches(c),
                    None => c == lit,
                })
            }
            // A pattern the policy never named: answer from what is tracked.
            None => {
                let pat = Pattern::new(pattern).ok();
                self.live.values().any(|(c, _)| match &pat {
                    Some(p) => p.matches(c),
                    None => c == pattern,
                })
            }
        }
    }

    /// Number of live processes tracked (matching some pattern).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.live.len()
    }

    /// The tracked pids, for tests and status.
    pub(crate) fn pids(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self.live.keys().copied().collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pats: &[&str]) -> Presence {
        let v: Vec<String> = pats.iter().map(|s| s.to_string()).collect();
        Presence::new(&v)
    }

    #[test]
    fn flips_on_exec_and_exit() {
        let mut pr = p(&["cyclictest", "stress*"]);
        assert!(!pr.running("cyclictest"));
        assert!(pr.update(100, "cyclictest"));
        assert!(pr.running("cyclictest"));
        assert!(!pr.running("stress*"));
        // a second instance changes no answer
        assert!(!pr.update(101, "cyclictest"));
        assert!(!pr.exit(100));
        assert!(pr.running("cyclictest"));
        assert!(pr.exit(101));
        assert!(!pr.running("cyclictest"));
        // unrelated processes are not tracked
        assert!(!pr.update(5, "bash"));
        assert_eq!(pr.len(), 0);
        assert!(!pr.exit(5));
    }

    #[test]
    fn rename_moves_a_process_between_patterns() {
        let mut pr = p(&["cyclictest", "stress*"]);
        assert!(pr.update(7, "stress-ng"));
        assert!(pr.running("stress*"));
        // prctl(PR_SET_NAME) to another name
        assert!(pr.update(7, "cyclictest"));
        assert!(pr.running("cyclictest"));
        assert!(!pr.running("stress*"));
        assert!(pr.update(7, "idle"));
        assert!(!pr.running("cyclictest"));
        assert_eq!(pr.len(), 0);
    }

    #[test]
    fn full_scan_replaces() {
        let mut pr = p(&["a*"]);
        pr.update(1, "abc");
        assert!(!pr.replace_all(vec![(2, "axe".to_string()), (3, "b".to_string())]));
        assert_eq!(pr.pids(), [2]);
        assert!(pr.replace_all(Vec::new()));
        assert!(!pr.running("a*"));
    }

    #[test]
    fn invalid_glob_is_literal_and_many_patterns_work() {
        let mut pr = p(&["[bad"]);
        assert!(pr.update(1, "[bad"));
        assert!(pr.running("[bad"));
        let names: Vec<String> = (0..70).map(|i| format!("p{i}")).collect();
        let mut pr = Presence::new(&names);
        assert!(pr.update(9, "p69"));
        assert!(pr.running("p69"));
        assert!(!pr.running("p68"));
        assert!(pr.exit(9));
        assert!(!pr.running("p69"));
    }
}
