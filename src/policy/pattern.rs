//! Knob patterns of `control:` grants (`cpufreq.*.min`, `vision.memory.high`):
//! globs over the names of the closed knob set (see [`crate::knobs`]).
//!
//! - `*` matches any run of characters, dots included (`vision.*` is every
//!   knob of `vision`, `*` every knob); `?` matches exactly one character;
//!   every other character matches itself. There are no classes or escapes.
//! - [`could_match`] tells whether a pattern can match *some* knob of the
//!   closed set of a policy: its groups' knobs and every family's names, as
//!   the knob registry describes them ([`crate::knobs::shapes`]). The
//!   numbered families are infinite sets, so the check runs the pattern
//!   against each family's name shape instead of a list.

use crate::knobs::{family_heads, shapes, suggest, Tok};

/// The longest pattern accepted; bounds the work of [`could_match`].
pub(crate) const MAX_PATTERN_LEN: usize = 128;

/// Whether glob `pattern` matches all of `text` (`*` any run, `?` one byte;
/// knob names are ASCII, so a byte is a character there).
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was, and where in `text` it started matching.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some(b'*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == b'?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                // Let the last `*` swallow one more byte and retry.
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Whether `pattern` matches at least one name described by `toks`: a search
/// over (pattern position, token, bytes taken by the token so far).
fn meets(pattern: &[u8], toks: &[Tok]) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut todo = vec![(0usize, 0usize, 0usize)];
    while let Some(state) = todo.pop() {
        if !seen.insert(state) {
            continue;
        }
        let (pi, ti, n) = state;
        if pi == pattern.len() && ti == toks.len() {
            return true;
        }
        let p = pattern.get(pi).copied();
        // A `*` may match nothing.
        if p == Some(b'*') {
            todo.push((pi + 1, ti, n));
        }
        let Some(tok) = toks.get(ti) else {
            continue;
        };
        // The next pattern position after taking one byte `b` of the name.
        let after = |b: u8| match p {
            Some(b'*') => Some(pi),
            Some(b'?') => Some(pi + 1),
            Some(c) if c == b => Some(pi + 1),
            _ => None,
        };
        match *tok {
            Tok::Lit(b) => {
                if let Some(next) = after(b) {
                    todo.push((next, ti + 1, 0));
                }
            }
            Tok::Run(class, min, max) => {
                if n >= min {
                    todo.push((pi, ti + 1, 0));
                }
                if n < max {
                    let next = match p {
                        Some(b'*') => Some(pi),
                        Some(b'?') => Some(pi + 1),
                        Some(c) if class(c) => Some(pi + 1),
                        _ => None,
                    };
                    if let Some(next) = next {
                        todo.push((next, ti, n + 1));
                    }
                }
            }
        }
    }
    false
}

/// Whether `pattern` matches some knob of the closed set of a policy whose
/// groups are `groups`.
pub(crate) fn could_match(pattern: &str, groups: &[&str]) -> bool {
    if pattern.len() > MAX_PATTERN_LEN {
        return false;
    }
    shapes(groups).iter().any(|f| meets(pattern.as_bytes(), f))
}

/// A pattern close to `pattern` that does match, for "did you mean": the
/// part before the first dot replaced by the nearest group or family name,
/// else (no wildcard) the knob parser's own suggestion.
pub(crate) fn suggestion(pattern: &str, groups: &[&str]) -> Option<String> {
    if let Some((head, rest)) = pattern.split_once('.') {
        let mut names: Vec<&str> = groups.to_vec();
        for h in family_heads() {
            names.push(h);
        }
        if let Some(near) = suggest(head, names) {
            let candidate = format!("{near}.{rest}");
            if could_match(&candidate, groups) {
                return Some(candidate);
            }
        }
    }
    if pattern.contains(['*', '?']) {
        return None;
    }
    let hint = crate::knobs::Knob::parse(pattern).err()?.hint?;
    // The parser's hints read "did you mean `X`?": keep X if it matches.
    let candidate = hint.strip_prefix("did you mean `")?.strip_suffix("`?")?;
    could_match(candidate, groups).then(|| candidate.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knobs::Knob;
    use proptest::prelude::*;

    #[test]
    fn globs() {
        assert!(glob_match("cpufreq.*.min", "cpufreq.policy4.min"));
        assert!(!glob_match("cpufreq.*.min", "cpufreq.policy4.max"));
        assert!(glob_match("vision.*", "vision.memory.high"));
        assert!(glob_match("*", "sysctl.vm.swappiness"));
        assert!(glob_match("*.memory.*", "a.memory.swap_max"));
        assert!(glob_match("cpufreq.policy?.min", "cpufreq.policy4.min"));
        assert!(!glob_match("cpufreq.policy?.min", "cpufreq.policy14.min"));
        assert!(glob_match("a**b", "ab"));
        assert!(!glob_match("", "a"));
        assert!(glob_match("", ""));
        assert!(!glob_match("vision.memory.high", "vision.memory.highx"));
    }

    #[test]
    fn could_match_knows_the_closed_set() {
        let g = ["vision", "inference"];
        for ok in [
            "vision.memory.high",
            "cpufreq.*.min",
            "cpufreq.policy12345.governor",
            "sysctl.vm.*",
            "sysctl.kernel.sched_*",
            "sysctl.kernel.timer_migration",
            "sysctl.*",
            "zram.*",
            "zram.zram?.mem_limit",
            "latency.*",
            "latency.cpu7",
            "latency.global",
            "sysctl.net.core.*",
            "sysctl.vm.page-cluster",
            "*",
            "*.cpu.weight",
            "*high",
        ] {
            assert!(could_match(ok, &g), "{ok}");
        }
        for bad in [
            "vison.memory.high",
            "/etc/shadow",
            "foo",
            "cpufreq.policy123456.min",
            "cpufreq.cpu0.min",
            "sysctl.net.ipv6.*",
            "sysctl.net.core.somaxconn",
            "sysctl.kernel.core_pattern",
            "sysctl.kernel.modprobe",
            "sysctl.kernel.sched_",
            "sysctl.vm.drop_caches",
            "sysctl.vm.",
            "zram.zram0.size",
            "vision.memory",
            "vision.memory.high.x",
            "?",
            "",
            "VISION.*",
        ] {
            assert!(!could_match(bad, &g), "{bad}");
        }
        assert!(!could_match(&"*".repeat(MAX_PATTERN_LEN + 1), &g));
    }

    #[test]
    fn suggestions() {
        let g = ["vision", "inference"];
        assert_eq!(
            suggestion("vison.memory.high", &g).as_deref(),
            Some("vision.memory.high")
        );
        assert_eq!(
            suggestion("cpufrq.*.min", &g).as_deref(),
            Some("cpufreq.*.min")
        );
        assert_eq!(
            suggestion("vision.memory.hgh", &g).as_deref(),
            Some("vision.memory.high")
        );
        assert_eq!(suggestion("/etc/shadow", &g), None);
        assert_eq!(suggestion("foo", &g), None);
    }

    proptest! {
        /// Every name the knob parser accepts is matched by `could_match` of
        /// itself, and by the family globs.
        #[test]
        fn parsed_knobs_could_match(
            n in 0u32..100_000,
            sysctl in proptest::sample::select(crate::knobs::sysctl::TABLE),
            which in 0usize..4,
        ) {
            let text = match which {
                0 => format!("cpufreq.policy{n}.min"),
                1 => format!("zram.zram{n}.swap_priority"),
                2 => format!("sysctl.{}", sysctl.name),
                _ => format!("g{}.cpu.weight", n % 3),
            };
            prop_assert!(Knob::parse(&text).is_ok());
            prop_assert!(could_match(&text, &["g0", "g1", "g2"]), "{}", text);
        }

        /// A pattern that matches some parsed knob name is never called
        /// hopeless (`could_match` has no false negatives on these shapes).
        #[test]
        fn globbed_knobs_could_match(
            n in 0u32..1000,
            mask in proptest::collection::vec(0u8..4, 40),
            which in 0usize..4,
        ) {
            let text = match which {
                0 => format!("cpufreq.policy{n}.governor"),
                1 => format!("zram.zram{n}.mem_limit"),
                2 => "sysctl.kernel.timer_migration".to_string(),
                _ => "g1.memory.swap_max".to_string(),
            };
            // Replace some bytes by `?`, some by `*`.
            let pattern: String = text
                .chars()
                .zip(mask.iter().cycle())
                .map(|(c, m)| match m { 0 => "?".to_string(), 1 => "*".to_string(), _ => c.to_string() })
                .collect();
            prop_assert!(glob_match(&pattern, &text));
            prop_assert!(could_match(&pattern, &["g0", "g1"]), "{}", pattern);
        }
    }
}
