//! `memory_growth` per process (per critical process, PSS from
//! smaps_rollup): the processes named in `report.criteria.processes`
//! and every other comm the recorder kept (those matching `settings.critical`),
//! judged on their summed PSS when the recorder read it, else on their summed
//! RSS — the detail says which. The growth definition is the groups' one
//! ([`super::growth`]).

use super::{growth_verdict, Inputs, Point, Verdict};
use crate::policy::model::ReportCriteria;

/// One verdict per process comm, named ones first (in the policy's order),
/// then the other recorded comms (alphabetical).
pub(super) fn growth(c: &ReportCriteria, i: &Inputs) -> Vec<Verdict> {
    let mut names: Vec<&String> = c.processes.iter().collect();
    for n in i.processes.keys().chain(i.pss.keys()) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
        .into_iter()
        .map(|name| one(name, i, c.memory_growth))
        .collect()
}

fn one(name: &str, i: &Inputs, limit: u64) -> Verdict {
    fn get<'a>(m: &'a std::collections::BTreeMap<String, Vec<Point>>, name: &str) -> &'a [Point] {
        m.get(name).map(Vec::as_slice).unwrap_or(&[])
    }
    let subject = format!("process {name}");
    let pss = get(&i.pss, name);
    if super::growth(pss).is_some() {
        let mut v = growth_verdict(subject, pss, limit);
        v.detail = format!("PSS (smaps_rollup): {}", v.detail);
        return v;
    }
    let rss = get(&i.processes, name);
    let mut v = growth_verdict(subject, rss, limit);
    if super::growth(rss).is_some() {
        v.detail = format!(
            "RSS (no PSS recorded: a kernel without smaps_rollup, no permission, \
             or a recorder that kept none): {}",
            v.detail
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::Status;
    use super::*;

    const MIB: f64 = 1048576.0;

    /// Four hours, one sample a minute, from `a` MiB to `b` MiB linearly.
    fn ramp(a: f64, b: f64) -> Vec<Point> {
        (0..=240)
            .map(|m| Point {
                ts: 1e9 + f64::from(m) * 60.0,
                v: (a + (b - a) * f64::from(m) / 240.0) * MIB,
            })
            .collect()
    }

    fn inputs(rss: Option<Vec<Point>>, pss: Option<Vec<Point>>) -> Inputs {
        let mut i = Inputs::default();
        if let Some(r) = rss {
            i.processes.insert("camd".into(), r);
        }
        if let Some(p) = pss {
            i.pss.insert("camd".into(), p);
        }
        i
    }

    fn verdict(i: &Inputs) -> Verdict {
        let c = ReportCriteria::default();
        let v = growth(&c, i);
        assert_eq!(v.len(), 1, "{v:?}");
        v.into_iter().next().unwrap()
    }

    #[test]
    fn pss_judges_when_recorded_rss_otherwise_and_says_which() {
        // RSS grows 200 MiB (shared pages), PSS stays flat: PSS judges, pass.
        let v = verdict(&inputs(Some(ramp(100.0, 300.0)), Some(ramp(40.0, 40.0))));
        assert_eq!(v.subject, "process camd");
        assert_eq!(v.status, Status::Pass, "{v:?}");
        assert!(v.detail.starts_with("PSS"), "{}", v.detail);
        // PSS grows 150 MiB: fail.
        let v = verdict(&inputs(Some(ramp(100.0, 100.0)), Some(ramp(40.0, 190.0))));
        assert_eq!(v.status, Status::Fail, "{v:?}");
        assert!(v.measured.unwrap() > 100.0 * MIB);
        assert!(v.detail.contains("PSS"));
        // No PSS: RSS judges, and the detail says so.
        let v = verdict(&inputs(Some(ramp(100.0, 300.0)), None));
        assert_eq!(v.status, Status::Fail);
        assert!(v.detail.starts_with("RSS (no PSS recorded"), "{}", v.detail);
        // A single PSS sample is not a series: RSS judges.
        let one = vec![ramp(40.0, 40.0)[0]];
        let v = verdict(&inputs(Some(ramp(100.0, 100.0)), Some(one)));
        assert!(v.detail.starts_with("RSS"), "{}", v.detail);
        assert_eq!(v.status, Status::Pass);
        // Nothing at all for a named process: not measured.
        let c = ReportCriteria {
            processes: vec!["ghost".into()],
            ..Default::default()
        };
        let v = growth(&c, &Inputs::default());
        assert_eq!(v[0].status, Status::NotMeasured);
        assert_eq!(v[0].subject, "process ghost");
    }
}
