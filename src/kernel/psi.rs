//! Typed parser for pressure-stall-information files (`/proc/pressure/*`,
//! `<group>/{cpu,memory,io}.pressure`).
//!
//! Format: `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and a `full ...`
//! line. Averages are percentages, `total` is cumulative stall time in µs.
//! Tolerant: a missing `full` line (cpu on older kernels), extra fields,
//! fields in any order, and junk lines are accepted; a line missing one of the
//! four values is treated as absent.

/// One `some`/`full` line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PsiLine {
    /// Percent of time stalled, 10 s average.
    pub avg10: f64,
    /// Percent, 60 s average.
    pub avg60: f64,
    /// Percent, 300 s average.
    pub avg300: f64,
    /// Total stall time in microseconds.
    pub total_us: u64,
}

/// A parsed pressure file.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Psi {
    pub some: Option<PsiLine>,
    pub full: Option<PsiLine>,
}

fn parse_line<'a>(fields: impl Iterator<Item = &'a str>) -> Option<PsiLine> {
    let (mut a10, mut a60, mut a300, mut total) = (None, None, None, None);
    for f in fields {
        let Some((k, v)) = f.split_once('=') else {
            continue;
        };
        match k {
            "avg10" => a10 = v.parse::<f64>().ok().filter(|x| x.is_finite()),
            "avg60" => a60 = v.parse::<f64>().ok().filter(|x| x.is_finite()),
            "avg300" => a300 = v.parse::<f64>().ok().filter(|x| x.is_finite()),
            "total" => total = v.parse::<u64>().ok(),
            _ => {}
        }
    }
    Some(PsiLine {
        avg10: a10?,
        avg60: a60?,
        avg300: a300?,
        total_us: total?,
    })
}

/// Parses a PSI file; never fails (missing parts are `None`).
/// Where the system-wide pressure files live (absent with PSI disabled).
pub const PRESSURE_DIR: &str = "/proc/pressure";

pub fn parse_psi(text: &str) -> Psi {
    let mut psi = Psi::default();
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("some") => psi.some = parse_line(fields),
            Some("full") => psi.full = parse_line(fields),
            _ => {}
        }
    }
    psi
}

/// The whole machine's pressure file for `resource` (cpu, memory, io):
/// `/proc/pressure/<resource>`.
pub fn read_system(root: &super::Root, resource: &str) -> super::Result<Psi> {
    let p = std::path::Path::new("/proc/pressure").join(resource);
    Ok(parse_psi(&root.read_small(&p)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_file() {
        let p = parse_psi(
            "some avg10=1.50 avg60=0.25 avg300=0.00 total=123456\n\
             full avg10=0.10 avg60=0.00 avg300=0.00 total=99\n",
        );
        let s = p.some.unwrap();
        assert_eq!(s.avg10, 1.5);
        assert_eq!(s.avg60, 0.25);
        assert_eq!(s.total_us, 123456);
        assert_eq!(p.full.unwrap().total_us, 99);
    }

    #[test]
    fn missing_full_and_extra_fields() {
        let p = parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0 future=7 x\n");
        assert_eq!(p.some.unwrap(), PsiLine::default());
        assert!(p.full.is_none());
    }

    #[test]
    fn garbage() {
        assert_eq!(parse_psi(""), Psi::default());
        assert_eq!(
            parse_psi("\u{0}\u{1}junk\nsome\nfull avg10=x"),
            Psi::default()
        );
        let p = parse_psi("some avg10=1 avg60=2 total=3\n"); // avg300 missing
        assert!(p.some.is_none());
        let p = parse_psi("some total=5 avg300=3 avg60=2 avg10=NaN\n");
        assert!(p.some.is_none());
        let p = parse_psi("some total=5 avg300=3 avg60=2 avg10=1\n");
        assert_eq!(p.some.unwrap().avg300, 3.0);
    }
}
