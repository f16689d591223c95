//! `cgwarden replay`'s command: loading, the exit status and the text
//! output (the JSON is the [`Outcome`] and [`RuleDiff`]s, serialized).

use super::{diff, simulate, sweep, Outcome, Recording, RuleDiff};
use crate::exit;
use rusqlite::{Connection, OpenFlags};
use std::time::Duration;

/// What `cgwarden replay` was asked.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    pub(crate) policy: std::path::PathBuf,
    pub(crate) recording: std::path::PathBuf,
    /// Only the last `since` of the recording (before its last evaluation).
    pub(crate) since: Option<Duration>,
    /// `RULE.THRESHOLD=LO..HI/STEP`.
    pub(crate) sweep: Option<String>,
    pub(crate) json: bool,
    /// Also write the charts page here.
    pub(crate) html: Option<std::path::PathBuf>,
}

/// `cgwarden replay`: prints the replay (or the sweep table), and writes
/// the charts page with `--html`; the exit status: 0 done, 1 the policy or
/// `--sweep` is invalid or the recording holds no tape, 4 no recording at
/// the path, 75 it cannot be read or the page cannot be written.
pub(crate) fn run(o: &Options) -> u8 {
    let policy = match crate::policy::load(&o.policy) {
        Ok(p) => p,
        Err(d) => {
            eprint!("{d}");
            return exit::REFUSED;
        }
    };
    if !o.recording.exists() {
        eprintln!(
            "cgwarden: error: replay: no recording at {}",
            o.recording.display()
        );
        return exit::UNREACHABLE;
    }
    let rec = match Connection::open_with_flags(
        &o.recording,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|db| {
        db.busy_timeout(Duration::from_secs(5))?;
        Recording::read(&db, o.since)
    }) {
        Ok(r) => r,
        Err(e) => {
            eprintln!(
                "cgwarden: error: replay: cannot read {}: {e}",
                o.recording.display()
            );
            return exit::TEMPFAIL;
        }
    };
    if rec.rows.is_empty() {
        eprintln!(
            "cgwarden: error: replay: {} holds no input tape{} (the recorder was off, or a cgwarden that keeps no tape wrote it); nothing can be replayed",
            o.recording.display(),
            if rec.damaged.is_empty() { String::new() } else { format!(" that can be read ({} damaged rows)", rec.damaged.len()) }
        );
        return exit::REFUSED;
    }
    if let Some(spec) = &o.sweep {
        return match sweep::Sweep::parse(&policy, spec) {
            Ok(s) => {
                let table = s.run(&policy, &rec);
                let text = if o.json {
                    sweep::json(&s, &table)
                } else {
                    sweep::text(&s, &table)
                };
                crate::outln!("{text}");
                exit::OK
            }
            Err(e) => {
                eprintln!("cgwarden: error: --sweep {spec}: {e}");
                exit::REFUSED
            }
        };
    }
    let out = simulate(&policy, &rec);
    let d = diff(&out, &rec);
    if let Some(path) = &o.html {
        if let Err(e) = std::fs::write(path, super::html::page(&policy, &out, &d, &rec)) {
            eprintln!(
                "cgwarden: error: replay: cannot write {}: {e}",
                path.display()
            );
            return exit::TEMPFAIL;
        }
    }
    if o.json {
        let v = serde_json::json!({ "policy": o.policy, "recording": o.recording, "interval": rec.interval(), "replay": out, "diff": d });
        crate::outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        crate::outln!("{}", text(&o.policy, &out, &d));
    }
    exit::OK
}

/// RFC 3339 of Unix seconds.
pub(crate) fn when(ts: f64) -> String {
    let d = Duration::try_from_secs_f64(ts.max(0.0)).unwrap_or_default();
    let t = std::time::UNIX_EPOCH
        .checked_add(d)
        .unwrap_or(std::time::UNIX_EPOCH);
    crate::show::rfc3339_millis(t)
}

/// Seconds as `1h2m3s`.
pub(crate) fn span(s: f64) -> String {
    crate::units::Duration(Duration::try_from_secs_f64(s.max(0.0).round()).unwrap_or(Duration::MAX))
        .to_string()
}

/// The text report.
pub(crate) fn text(policy: &std::path::Path, out: &Outcome, diff: &[RuleDiff]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "replay of {} over {} .. {} ({}, {} evaluations)",
        policy.display(),
        when(out.from),
        when(out.to),
        span(out.to - out.from),
        out.evaluations
    );
    for r in &out.rules {
        let _ = writeln!(
            s,
            "\nrule {}: {} firing(s), active {}, {} write(s), {} hook run(s)",
            r.name,
            r.firings(),
            span(r.active_seconds),
            r.writes,
            r.hooks
        );
        for e in &r.episodes {
            let end = e.end.map_or("(still active)".to_string(), when);
            let _ = writeln!(s, "  {} .. {}  {}", when(e.start), end, e.why);
        }
        for g in out.gaps.iter().filter(|g| g.rule == r.name) {
            let _ = writeln!(
                s,
                "  GAP: {} is not in the recording from {} to {} ({}): firings then are unknown",
                g.input,
                when(g.from),
                when(g.to),
                span(g.to - g.from)
            );
        }
        for (_, m) in out.unavailable.iter().filter(|u| u.0 == r.name) {
            let _ = writeln!(
                s,
                "  note: {m} was unavailable when recorded (the daemon could not read it either)"
            );
        }
    }
    for (a, b) in &out.damaged {
        let _ = writeln!(
            s,
            "\nDAMAGED tape from {} to {}: not replayed",
            when(*a),
            when(*b)
        );
    }
    let _ = writeln!(
        s,
        "\ndiff against the recording (episodes matched within one recorder interval):"
    );
    for d in diff {
        let verdict =
            if d.only_replay.is_empty() && d.only_recording.is_empty() && d.ends_apart.is_empty() {
                "same"
            } else {
                "differs"
            };
        let _ = writeln!(
            s,
            "  {}: recorded {} firing(s), replayed {} ({} matched) — {verdict}; writes recorded {}, replayed {}",
            d.rule, d.recorded, d.replayed, d.matched, d.recorded_writes, d.replayed_writes
        );
        for t in &d.only_replay {
            let _ = writeln!(
                s,
                "    + {} would fire (did not in the recording)",
                when(*t)
            );
        }
        for (t, delta) in &d.ends_apart {
            let how = match delta {
                Some(x) if *x > 0.0 => format!("ends {x:.1}s later than in the recording"),
                Some(x) => format!("ends {:.1}s earlier than in the recording", -x),
                None => "ends otherwise: one of the two is still active at the end".to_string(),
            };
            let _ = writeln!(s, "    ~ {} {how}", when(*t));
        }
        for t in &d.only_recording {
            let _ = writeln!(
                s,
                "    - {} fired in the recording (not in the replay)",
                when(*t)
            );
        }
    }
    if !out.knobs.is_empty() {
        let _ = writeln!(s, "\nknob timelines (value from then on):");
        for (knob, points) in &out.knobs {
            let shown: Vec<String> = points
                .iter()
                .take(8)
                .map(|(t, v)| format!("{v} at {}", when(*t)))
                .collect();
            let more = match points.len().saturating_sub(8) {
                0 => String::new(),
                n => format!(", … {n} more"),
            };
            let _ = writeln!(s, "  {knob}: {}{more}", shown.join(", "));
        }
    }
    if !out.actions.is_empty() {
        let _ = writeln!(s, "\nwould-be actions:");
        for a in &out.actions {
            let _ = writeln!(
                s,
                "  {} {} {}: {}",
                when(a.ts),
                a.rule.as_deref().unwrap_or("-"),
                a.kind,
                a.what
            );
        }
    }
    s.trim_end().to_string()
}
