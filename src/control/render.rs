//! Text forms of the control replies for a terminal: the `status` screen,
//! the `verify` table and one line per event. Pure functions of the wire
//! types, so they are tested without a daemon.

use super::wire;
use std::fmt::Write as _;

fn size(bytes: Option<i64>) -> String {
    match bytes {
        None => "-".into(),
        Some(b) if b >= 1 << 30 => format!("{:.1}G", b as f64 / f64::from(1u32 << 30)),
        Some(b) if b >= 1 << 20 => format!("{:.1}M", b as f64 / f64::from(1u32 << 20)),
        Some(b) if b >= 1 << 10 => format!("{:.1}K", b as f64 / 1024.0),
        Some(b) => b.to_string(),
    }
}

/// A limit as the kernel prints it (`max` or bytes), shortened.
fn limit(v: &Option<String>) -> String {
    match v.as_deref() {
        None => "-".into(),
        Some(t) => match t.parse::<i64>() {
            Ok(b) => size(Some(b)),
            Err(_) => t.to_string(),
        },
    }
}

fn pct(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}%")).unwrap_or_else(|| "-".into())
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("-")
}

/// A knob's value for people: the socket carries the kernel's exact form,
/// the text shows units (knobs::human; docs/control.md "Values").
fn hv(knob: &str, raw: &str) -> String {
    crate::knobs::human::human_text(knob, raw)
}

/// [`hv`] of an optional value, `-` for none.
fn hvo(knob: &str, raw: &Option<String>) -> String {
    raw.as_deref().map_or_else(|| "-".into(), |r| hv(knob, r))
}

/// The `cgwarden status` screen.
pub(crate) fn status(s: &wire::StatusReply) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}  policy {} ({}) loaded {}",
        s.product,
        s.policy.path,
        crate::show::short(&s.policy.hash),
        s.policy.loaded_at
    );
    let d = &s.daemon;
    let _ = writeln!(
        o,
        "daemon pid {} v{} up {}s  writes {} (rejected {}, late {})  control connections {}",
        d.pid,
        d.version,
        d.uptime_seconds,
        d.knob_writes,
        d.writes_rejected,
        d.writes_late,
        d.control_connections
    );
    for line in &s.policy.board {
        let _ = writeln!(o, "{line}");
    }
    for u in &s.unavailable {
        let _ = writeln!(o, "UNAVAILABLE: {u}");
    }
    if let Some(e) = &s.last_reload_error {
        let _ = writeln!(o, "LAST RELOAD FAILED (old policy still in force):");
        for l in e.lines() {
            let _ = writeln!(o, "  {l}");
        }
    }
    let _ = writeln!(o, "\nGROUPS");
    let _ = writeln!(
        o,
        "  {:<16} {:<8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}  events",
        "name", "cpus", "mem", "high", "max", "cpu", "mem", "io"
    );
    for g in &s.groups {
        let ev: Vec<String> = g
            .memory_events
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k}={n}"))
            .collect();
        let name = if g.exists {
            g.name.clone()
        } else {
            format!("{} (gone)", g.name)
        };
        let _ = writeln!(
            o,
            "  {:<16} {:<8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>6}  {}",
            name,
            opt(&g.cpuset),
            size(g.memory_current),
            limit(&g.memory_high),
            limit(&g.memory_max),
            pct(g.cpu_some_avg10),
            pct(g.memory_some_avg10),
            pct(g.io_some_avg10),
            if ev.is_empty() {
                "-".into()
            } else {
                ev.join(" ")
            }
        );
    }
    let _ = writeln!(o, "\nRULES");
    if s.rules.is_empty() {
        let _ = writeln!(o, "  (none)");
    }
    for r in &s.rules {
        let _ = writeln!(
            o,
            "  {:<32} {:<8} {}",
            r.name,
            r.state,
            r.since
                .as_deref()
                .map(|t| format!("since {t}"))
                .unwrap_or_default()
        );
    }
    if !s.left_alone.is_empty() {
        let _ = writeln!(
            o,
            "\nLEFT ALONE (a placement matches; the cgroup is another manager's)"
        );
        for k in &s.left_alone {
            let _ = writeln!(
                o,
                "  {} ({}) in {}: policy line {} → {}; belongs to {}",
                k.pid, k.comm, k.cgroup, k.policy_line, k.group, k.owner
            );
        }
    }
    let _ = writeln!(o, "\nCLAIMS");
    if s.claims.is_empty() {
        let _ = writeln!(o, "  (none)");
    }
    for c in &s.claims {
        let mut extra = Vec::new();
        if let Some(u) = c.uid {
            extra.push(format!("uid {u}"));
        }
        if let Some(t) = &c.tied_to {
            extra.push(format!("while {t}"));
        }
        if let Some(r) = &c.reason {
            extra.push(format!("\"{r}\""));
        }
        let _ = writeln!(
            o,
            "  {:<20} {:<32} = {:<10} until {}  {}",
            c.owner,
            c.knob,
            hv(&c.knob, &c.value),
            c.expires_at.as_deref().unwrap_or("released"),
            extra.join(", ")
        );
    }
    let contested: Vec<&wire::KnobStatus> = s.knobs.iter().filter(|k| k.winner.is_some()).collect();
    if !contested.is_empty() {
        let _ = writeln!(o, "\nKNOBS HELD BY A CLAIM");
        for k in contested {
            let others: Vec<String> = k
                .contenders
                .iter()
                .skip(1)
                .map(|c| format!("{}={}", c.owner, hv(&k.knob, &c.value)))
                .collect();
            let _ = writeln!(
                o,
                "  {:<32} {} (baseline {}) by {}{}",
                k.knob,
                hvo(&k.knob, &k.effective),
                hvo(&k.knob, &k.baseline),
                opt(&k.winner),
                if others.is_empty() {
                    String::new()
                } else {
                    format!("; also {}", others.join(", "))
                }
            );
        }
    }
    let _ = writeln!(o, "\nLAST ACTIONS");
    if s.actions.is_empty() {
        let _ = writeln!(o, "  (none)");
    }
    for a in s.actions.iter().rev().take(10).rev() {
        let _ = writeln!(
            o,
            "  {} {:<32} {} -> {}  ({})",
            a.time,
            a.knob,
            hvo(&a.knob, &a.old),
            hv(&a.knob, &a.new),
            a.cause
        );
    }
    o
}

/// The `cgwarden verify` table: drifted knobs first.
pub(crate) fn verify(v: &wire::VerifyReply) -> String {
    let mut o = String::new();
    let mut rows: Vec<&wire::KnobCheck> = v.knobs.iter().collect();
    rows.sort_by_key(|k| !k.drift);
    for k in rows {
        let _ = writeln!(
            o,
            "{} {:<32} expected {:<12} actual {:<12} last writer {}",
            match (k.drift, &k.skipped) {
                (true, _) => "DRIFT",
                (false, Some(_)) => "skip ",
                (false, None) => "ok   ",
            },
            k.knob,
            hv(&k.knob, &k.expected),
            hvo(&k.knob, &k.actual),
            opt(&k.last_writer)
        );
        if let Some(why) = &k.skipped {
            let _ = writeln!(o, "      not checked: {why}");
        }
    }
    let drifted = v.knobs.iter().filter(|k| k.drift).count();
    let skipped = v.knobs.iter().filter(|k| k.skipped.is_some()).count();
    let _ = write!(
        o,
        "{}, {drifted} drifted",
        crate::show::count(v.knobs.len(), "knob")
    );
    if skipped > 0 {
        let _ = write!(o, ", {skipped} not checked on this root");
    }
    let _ = writeln!(o);
    o
}

/// One event as a log line.
pub(crate) fn event(e: &wire::Event) -> String {
    let mut parts = vec![e.time.clone(), e.kind.clone()];
    if let Some(r) = &e.rule {
        parts.push(format!("rule={r}"));
    }
    if let Some(s) = &e.state {
        parts.push(format!("state={s}"));
    }
    if let Some(h) = e.handle {
        parts.push(format!("handle={h}"));
    }
    if let Some(k) = &e.knob {
        parts.push(format!("knob={k}"));
    }
    let h = |v: &String| match &e.knob {
        Some(k) => hv(k, v),
        None => v.clone(),
    };
    match (&e.old, &e.new) {
        (Some(o), Some(n)) => parts.push(format!("{} -> {}", h(o), h(n))),
        (None, Some(n)) => parts.push(format!("-> {}", h(n))),
        (Some(o), None) => parts.push(format!("{} -> -", h(o))),
        (None, None) => {}
    }
    if let Some(c) = &e.cause {
        parts.push(format!("cause=\"{c}\""));
    }
    if let Some(m) = &e.message {
        parts.push(m.clone());
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_screen_names_groups_rules_claims_and_a_failed_reload() {
        let s = wire::StatusReply {
            product: "cell".into(),
            last_reload_error: Some("p.yaml:3:1: error: bad".into()),
            groups: vec![wire::GroupStatus {
                name: "vision".into(),
                exists: true,
                memory_current: Some(3 << 20),
                cpu_some_avg10: Some(12.5),
                ..Default::default()
            }],
            rules: vec![wire::RuleStatus {
                name: "hot".into(),
                state: "active".into(),
                since: Some("t".into()),
            }],
            claims: vec![wire::ClaimInfo {
                owner: "boost 3".into(),
                knob: "vision.memory.high".into(),
                value: "4G".into(),
                uid: Some(1000),
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = status(&s);
        assert!(!t.contains("LEFT ALONE"), "an empty section:\n{t}");
        let s = wire::StatusReply {
            left_alone: vec![wire::LeftAlone {
                pid: 1234,
                comm: "talker".into(),
                cgroup: "/system.slice/docker-ab12.scope".into(),
                group: "realtime".into(),
                policy_line: 12,
                owner: "a container runtime (docker)".into(),
            }],
            ..s
        };
        let t = status(&s);
        assert!(
            t.contains(
                "LEFT ALONE (a placement matches; the cgroup is another manager's)\n  \
                 1234 (talker) in /system.slice/docker-ab12.scope: policy line 12 → realtime; \
                 belongs to a container runtime (docker)\n"
            ),
            "{t}"
        );
        for want in [
            "cell",
            "LAST RELOAD FAILED",
            "p.yaml:3:1",
            "vision",
            "3.0M",
            "12.5%",
            "hot",
            "active",
            "boost 3",
            "uid 1000",
        ] {
            assert!(t.contains(want), "{want} missing from\n{t}");
        }
    }

    #[test]
    fn verify_lists_drift_first_and_counts() {
        let k = |n: &str, d: bool| wire::KnobCheck {
            knob: n.into(),
            expected: "1".into(),
            actual: Some("2".into()),
            drift: d,
            ..Default::default()
        };
        let v = wire::VerifyReply {
            drift: true,
            knobs: vec![k("a", false), k("b", true)],
        };
        let t = verify(&v);
        assert!(t.starts_with("DRIFT b"), "{t}");
        assert!(t.ends_with("2 knobs, 1 drifted\n"), "{t}");
        // A knob a fake root cannot show is said, not counted as drift.
        let mut s = k("zram.zram0.swap_priority", false);
        s.actual = None;
        s.skipped = Some("swapon is skipped on a fake root".into());
        let v = wire::VerifyReply {
            drift: false,
            knobs: vec![s],
        };
        let t = verify(&v);
        assert!(t.starts_with("skip  zram.zram0.swap_priority"), "{t}");
        assert!(
            t.contains("not checked: swapon is skipped on a fake root"),
            "{t}"
        );
        assert!(
            t.ends_with("1 knob, 0 drifted, 1 not checked on this root\n"),
            "{t}"
        );
    }

    #[test]
    fn an_event_never_starts_its_parts_with_a_blank() {
        let e = wire::Event {
            time: "t".into(),
            kind: crate::control::wire::EventKind::Drift.into(),
            knob: Some("k".into()),
            old: Some("1".into()),
            message: Some("cannot be read".into()),
            ..Default::default()
        };
        assert_eq!(event(&e), "t drift knob=k 1 -> - cannot be read");
    }
}
