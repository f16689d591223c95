//! `DIR/soak.json`: what a soak must remember to resume after a daemon
//! restart, its own restart or a reboot (docs/soak.md). Times are wall
//! clock (Unix seconds), so a reboot in between costs nothing: the soak
//! ends at `started + duration` whatever happened on the way. Pure except
//! [`load`] and [`save`] (an atomic replace: a crash mid-write leaves the
//! old file).

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

pub(crate) const FILE: &str = "soak.json";
const VERSION: u32 = 1;
/// A soak longer than a year is a typo.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);
/// Warm-up and cool-down: a tenth of the soak each, at most this long.
const EDGE_MAX: f64 = 300.0;

/// The load a soak runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Load {
    /// The seed's matrix (docs/soak.md).
    Seed,
    /// None: the soak only records and judges.
    None,
}

impl Load {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Load::Seed => "seed",
            Load::None => "none",
        }
    }
}

/// Where in its time a soak is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The first tenth (≤ 5 min) without load: the baseline.
    WarmUp,
    /// The load matrix runs.
    Load,
    /// The last tenth (≤ 5 min) without load: does the device recover?
    CoolDown,
    /// `--load none`: recording only, the whole time.
    Record,
    /// The time is up: the report.
    Done,
}

impl Phase {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Phase::WarmUp => "warm-up",
            Phase::Load => "load",
            Phase::CoolDown => "cool-down",
            Phase::Record => "record",
            Phase::Done => "done",
        }
    }
}

/// A run of `soak` that found the file unfinished and went on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Resume {
    pub(crate) at: f64,
    pub(crate) boot_id: String,
    /// The boot id differs from the previous run's.
    pub(crate) reboot: bool,
}

/// How a soak ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Finished {
    pub(crate) at: f64,
    pub(crate) exit_code: u8,
    pub(crate) passed: bool,
}

/// The file's content.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    pub(crate) version: u32,
    /// Wall clock, Unix seconds.
    pub(crate) started: f64,
    /// The same, RFC 3339, for people.
    #[serde(default)]
    pub(crate) started_at: String,
    pub(crate) boot_id: String,
    pub(crate) duration_seconds: f64,
    pub(crate) load: Load,
    /// The phase last entered (informative; [`phase_at`] decides).
    pub(crate) phase: String,
    #[serde(default)]
    pub(crate) resumes: Vec<Resume>,
    #[serde(default)]
    pub(crate) finished: Option<Finished>,
}

impl State {
    pub(crate) fn new(now: f64, boot_id: &str, duration: Duration, load: Load) -> State {
        State {
            version: VERSION,
            started: now,
            started_at: crate::observe::report::when(now),
            boot_id: boot_id.to_string(),
            duration_seconds: duration.as_secs_f64(),
            load,
            phase: phase_at(0.0, duration.as_secs_f64(), load).as_str().into(),
            resumes: Vec::new(),
            finished: None,
        }
    }

    /// Seconds since the start (0 when the clock says before it).
    pub(crate) fn elapsed(&self, now: f64) -> f64 {
        (now - self.started).clamp(0.0, self.duration_seconds)
    }

    /// Seconds left (0 when the time is up).
    pub(crate) fn remaining(&self, now: f64) -> f64 {
        self.duration_seconds - self.elapsed(now)
    }

    pub(crate) fn phase(&self, now: f64) -> Phase {
        phase_at(self.elapsed(now), self.duration_seconds, self.load)
    }

    /// Notes a resume on the boot `boot_id`; returns whether it is a reboot.
    pub(crate) fn resumed(&mut self, now: f64, boot_id: &str) -> bool {
        let last = self
            .resumes
            .last()
            .map(|r| r.boot_id.as_str())
            .unwrap_or(&self.boot_id);
        let reboot = last != boot_id;
        self.resumes.push(Resume {
            at: now,
            boot_id: boot_id.to_string(),
            reboot,
        });
        reboot
    }

    /// The file's checks: a damaged or odd file is refused with the reason.
    fn validate(&self) -> Result<(), String> {
        if self.version != VERSION {
            return Err(format!(
                "version {} (this cgwarden writes {VERSION})",
                self.version
            ));
        }
        if !self.started.is_finite() || !(1.0..4e11).contains(&self.started) {
            return Err(format!("started {} is not a time", self.started));
        }
        if !self.duration_seconds.is_finite()
            || self.duration_seconds <= 0.0
            || self.duration_seconds > MAX_DURATION.as_secs_f64()
        {
            return Err(format!(
                "duration_seconds {} is not between 0 and a year",
                self.duration_seconds
            ));
        }
        Ok(())
    }
}

/// The phase `elapsed` seconds into a soak of `duration` seconds: warm-up
/// and cool-down a tenth each (at most 5 min), the load between.
pub(crate) fn phase_at(elapsed: f64, duration: f64, load: Load) -> Phase {
    if !elapsed.is_finite() || !duration.is_finite() || elapsed >= duration {
        return Phase::Done;
    }
    if load == Load::None {
        return Phase::Record;
    }
    let edge = (duration / 10.0).min(EDGE_MAX);
    if elapsed < edge {
        Phase::WarmUp
    } else if elapsed < duration - edge {
        Phase::Load
    } else {
        Phase::CoolDown
    }
}

/// When the phase after the one at `elapsed` begins (seconds since start).
pub(crate) fn phase_end(elapsed: f64, duration: f64, load: Load) -> f64 {
    let edge = (duration / 10.0).min(EDGE_MAX);
    match phase_at(elapsed, duration, load) {
        Phase::WarmUp => edge,
        Phase::Load => duration - edge,
        Phase::CoolDown | Phase::Record | Phase::Done => duration,
    }
}

/// Reads `DIR/soak.json`: none when absent; an error naming the file and
/// what is wrong otherwise.
pub(crate) fn load(dir: &Path) -> Result<Option<State>, String> {
    let path = dir.join(FILE);
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let s: State = serde_json::from_slice(&text)
        .map_err(|e| format!("{}: not a soak state: {e}", path.display()))?;
    s.validate()
        .map_err(|e| format!("{}: not a soak state: {e}", path.display()))?;
    Ok(Some(s))
}

/// Writes `DIR/soak.json` atomically (a temporary file, fsync, rename).
pub(crate) fn save(dir: &Path, s: &State) -> Result<(), String> {
    use std::io::Write;
    let path = dir.join(FILE);
    let tmp = dir.join(format!(".{FILE}.tmp"));
    let text = serde_json::to_string_pretty(s).map_err(|e| e.to_string())? + "\n";
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: f64 = 1_764_000_000.0;

    #[test]
    fn resume_counts_from_the_original_start() {
        let s = State::new(T0, "boot-a", Duration::from_secs(3600), Load::Seed);
        assert_eq!(s.remaining(T0), 3600.0);
        assert_eq!(s.remaining(T0 + 600.0), 3000.0);
        // Much later (a long reboot): nothing left, the report is due.
        assert_eq!(s.remaining(T0 + 7200.0), 0.0);
        assert_eq!(s.phase(T0 + 7200.0), Phase::Done);
        // A clock that went back before the start: the whole time is left.
        assert_eq!(s.remaining(T0 - 50.0), 3600.0);
    }

    #[test]
    fn phases_are_a_tenth_each_side_at_most_five_minutes() {
        let d = 100.0;
        assert_eq!(phase_at(0.0, d, Load::Seed), Phase::WarmUp);
        assert_eq!(phase_at(9.9, d, Load::Seed), Phase::WarmUp);
        assert_eq!(phase_at(10.0, d, Load::Seed), Phase::Load);
        assert_eq!(phase_at(89.9, d, Load::Seed), Phase::Load);
        assert_eq!(phase_at(90.0, d, Load::Seed), Phase::CoolDown);
        assert_eq!(phase_at(100.0, d, Load::Seed), Phase::Done);
        assert_eq!(phase_end(5.0, d, Load::Seed), 10.0);
        assert_eq!(phase_end(50.0, d, Load::Seed), 90.0);
        assert_eq!(phase_end(95.0, d, Load::Seed), 100.0);
        let h72 = 72.0 * 3600.0;
        assert_eq!(phase_at(299.0, h72, Load::Seed), Phase::WarmUp);
        assert_eq!(phase_at(301.0, h72, Load::Seed), Phase::Load);
        assert_eq!(phase_at(h72 - 299.0, h72, Load::Seed), Phase::CoolDown);
        assert_eq!(phase_at(0.0, d, Load::None), Phase::Record);
        assert_eq!(phase_at(f64::NAN, d, Load::Seed), Phase::Done);
    }

    #[test]
    fn reboots_are_boot_id_changes_along_the_resumes() {
        let mut s = State::new(T0, "a", Duration::from_secs(60), Load::None);
        assert!(!s.resumed(T0 + 1.0, "a"));
        assert!(s.resumed(T0 + 2.0, "b"));
        assert!(!s.resumed(T0 + 3.0, "b"));
        assert_eq!(s.resumes.len(), 3);
    }

    #[test]
    fn the_file_round_trips_and_odd_files_are_refused_not_panicked_on() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(load(t.path()), Ok(None));
        let mut s = State::new(T0, "a", Duration::from_secs(90), Load::Seed);
        s.resumed(T0 + 5.0, "b");
        s.finished = Some(Finished {
            at: T0 + 90.0,
            exit_code: 1,
            passed: false,
        });
        save(t.path(), &s).unwrap();
        assert_eq!(load(t.path()), Ok(Some(s.clone())));
        let p = t.path().join(FILE);
        let good = serde_json::to_value(&s).unwrap();
        let mut bad: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"{".to_vec(),
            b"null".to_vec(),
            b"[]".to_vec(),
            vec![0xff, 0xfe, 0x00],
            b"{\"version\": 1}".to_vec(),
        ];
        for (k, v) in [
            ("version", serde_json::json!(2)),
            ("started", serde_json::json!(-1)),
            ("started", serde_json::json!(1e300)),
            ("started", serde_json::json!("yesterday")),
            ("duration_seconds", serde_json::json!(0)),
            ("duration_seconds", serde_json::json!(-5)),
            ("duration_seconds", serde_json::json!(1e12)),
            ("load", serde_json::json!("heavy")),
            ("resumes", serde_json::json!([{"at": "x"}])),
            (
                "finished",
                serde_json::json!({"at": 1, "exit_code": 300, "passed": true}),
            ),
        ] {
            let mut g = good.clone();
            g[k] = v;
            bad.push(serde_json::to_vec(&g).unwrap());
        }
        for b in bad {
            std::fs::write(&p, &b).unwrap();
            let e = load(t.path()).expect_err(&String::from_utf8_lossy(&b));
            assert!(e.contains("soak.json"), "{e}");
        }
        // A directory where the file should be: an error, no panic.
        std::fs::remove_file(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert!(load(t.path()).is_err());
    }
}
