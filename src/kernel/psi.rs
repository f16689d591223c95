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
pub(crate) struct PsiLine {
    /// Percent of time stalled, 10 s average.
    pub(crate) avg10: f64,
    /// Percent, 60 s average.
    pub(crate) avg60: f64,
    /// Percent, 300 s average.
    pub(crate) avg300: f64,
    /// Total stall time in microseconds.
    pub(crate) total_us: u64,
}

/// A parsed pressure file.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Psi {
    pub(crate) some: Option<PsiLine>,
    pub(crate) full: Option<PsiLine>,
}

/// Where the system-wide pressure files live (absent with PSI disabled).
pub(crate) const PRESSURE_DIR: &str = "/proc/pressure";

/// Parses a PSI file; never fails (missing parts are `None`). Reads bytes,
/// not `str` (an evaluation parses one pressure file, and Unicode-aware
/// splitting and the general float parser cost about 11,000 instructions
/// for its 110 bytes): fields are split on ASCII whitespace,
/// and an average in the kernel's `%lu.%02lu` shape is read as an integer
/// over a power of ten, which is exactly the value `str::parse` gives (both
/// operands are exact in an `f64`, and one division rounds correctly); any
/// other shape goes through `str::parse`.
pub(crate) fn parse_psi(text: &str) -> Psi {
    parse_bytes(text.as_bytes())
}

fn parse_bytes(text: &[u8]) -> Psi {
    let mut psi = Psi::default();
    for line in text.split(|&b| b == b'\n') {
        let mut fields = line
            .split(u8::is_ascii_whitespace)
            .filter(|f| !f.is_empty());
        match fields.next() {
            Some(b"some") => psi.some = parse_line(fields),
            Some(b"full") => psi.full = parse_line(fields),
            _ => {}
        }
    }
    psi
}

fn parse_line<'a>(fields: impl Iterator<Item = &'a [u8]>) -> Option<PsiLine> {
    let (mut a10, mut a60, mut a300, mut total) = (None, None, None, None);
    for f in fields {
        let Some(eq) = f.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (k, v) = (&f[..eq], &f[eq + 1..]);
        match k {
            b"avg10" => a10 = average(v),
            b"avg60" => a60 = average(v),
            b"avg300" => a300 = average(v),
            b"total" => total = parse_str(v),
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

/// A finite average: `DIGITS[.DIGITS]` (at most 15 digits) exactly, else `str::parse`.
fn average(v: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let (int, frac) = match v.iter().position(|&b| b == b'.') {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, &v[v.len()..]),
    };
    let digits = || int.iter().chain(frac);
    let x = if !int.is_empty() && int.len() + frac.len() <= 15 && digits().all(u8::is_ascii_digit) {
        let m = digits().fold(0u64, |m, &d| m * 10 + u64::from(d - b'0'));
        m as f64 / POW10[frac.len()]
    } else {
        parse_str(v)?
    };
    x.is_finite().then_some(x)
}

/// `str::parse` of bytes that are UTF-8; `None` otherwise.
fn parse_str<T: std::str::FromStr>(v: &[u8]) -> Option<T> {
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// The whole machine's pressure file for `resource` (cpu, memory, io):
/// `/proc/pressure/<resource>`.
pub(crate) fn read_system(root: &super::Root, resource: &str) -> super::Result<Psi> {
    let p = std::path::Path::new("/proc/pressure").join(resource);
    Ok(parse_psi(&root.read_small(&p)?))
}

/// Pressure files kept open, each re-read with one `pread(2)` at offset 0:
/// the daemon reads a stall line at every evaluation, and open + read +
/// close with the path walk through cgroupfs would be three system calls of
/// the few an evaluation makes. The kernel restarts a pressure file's text
/// at offset 0 on every read there. A read that fails (the group was
/// removed: `ENODEV`) drops the file and opens the path again, so a
/// recreated group is read from its new file. A fake root is read afresh each
/// time: its writers replace files by rename, which an open file would not see.
#[derive(Debug, Default)]
pub(crate) struct OpenPressure {
    /// A few files, searched in order (no hashing of a path a read).
    files: Vec<(std::path::PathBuf, std::fs::File)>,
}

impl OpenPressure {
    /// The pressure file at device path `p`, parsed; `None` if unreadable.
    pub(crate) fn read(&mut self, root: &super::Root, p: &std::path::Path) -> Option<Psi> {
        // A kernel's pressure file (one that takes triggers) rereads at 0.
        if !root.supports(super::Op::PsiTrigger) {
            return root.read_small(p).ok().map(|t| parse_psi(&t));
        }
        let mut buf = [0u8; 1024];
        if let Some(i) = self.files.iter().position(|(q, _)| q == p) {
            if let Some(psi) = self.files.get(i).and_then(|(_, f)| pread_psi(f, &mut buf)) {
                return Some(psi);
            }
            self.files.swap_remove(i);
        }
        let f = std::fs::File::open(root.host_path(p)).ok()?;
        let psi = pread_psi(&f, &mut buf)?;
        self.files.push((p.to_path_buf(), f));
        Some(psi)
    }

    /// Closes the files no longer read (a reload).
    pub(crate) fn retain(&mut self, keep: impl Fn(&std::path::Path) -> bool) {
        self.files.retain(|(p, _)| keep(p));
    }

    /// How many files are open.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.files.len()
    }
}

/// One `pread(2)` at offset 0; a pressure file is two short lines, so a
/// full buffer (or an empty read) is not a pressure file.
fn pread_psi(f: &std::fs::File, buf: &mut [u8]) -> Option<Psi> {
    use std::os::unix::fs::FileExt;
    let n = f.read_at(buf, 0).ok()?;
    let text = buf.get(..n).filter(|t| !t.is_empty() && n < buf.len())?;
    Some(parse_bytes(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_pressure_rereads_at_offset_zero_and_reopens_a_replaced_file() {
        let t = tempfile::tempdir().unwrap();
        let root = crate::kernel::Root::real_at(t.path());
        let p = std::path::Path::new("/g/memory.pressure");
        let host = root.host_path(p);
        std::fs::create_dir_all(host.parent().unwrap()).unwrap();
        let text = |total: u64| {
            format!("some avg10=0.00 avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
        };
        let mut open = OpenPressure::default();
        assert_eq!(open.read(&root, p), None, "absent");
        std::fs::write(&host, text(5)).unwrap();
        assert_eq!(
            open.read(&root, p).and_then(|x| x.some).unwrap().total_us,
            5
        );
        assert_eq!(open.len(), 1);
        // Rewritten in place (as the kernel's text changes): the open file shows it.
        std::fs::write(&host, text(1_000_000)).unwrap();
        assert_eq!(
            open.read(&root, p).and_then(|x| x.some).unwrap().total_us,
            1_000_000
        );
        // A read that shows no pressure file (kernfs answers ENODEV once the
        // group is removed; here: an empty read) drops the open file...
        std::fs::write(&host, "").unwrap();
        assert_eq!(open.read(&root, p), None);
        assert_eq!(open.len(), 0);
        // ... and the file at the path now (a recreated group's) is opened afresh.
        std::fs::remove_file(&host).unwrap();
        std::fs::write(&host, text(7)).unwrap();
        assert_eq!(
            open.read(&root, p).and_then(|x| x.some).unwrap().total_us,
            7
        );
        open.retain(|_| false);
        assert_eq!(open.len(), 0);
        // A fake root is read afresh every time, nothing is kept open.
        let fake = crate::kernel::Root::fake(t.path());
        assert_eq!(
            open.read(&fake, p).and_then(|x| x.some).unwrap().total_us,
            7
        );
        assert_eq!(open.len(), 0);
    }

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

    /// A reference parser on `str`: `str` lines, Unicode whitespace,
    /// `str::parse` for every number.
    fn reference(text: &str) -> Psi {
        fn line<'a>(fields: impl Iterator<Item = &'a str>) -> Option<PsiLine> {
            // The last `key=` of a line wins, as in the parser.
            let kv: std::collections::HashMap<&str, &str> =
                fields.filter_map(|f| f.split_once('=')).collect();
            let avg = |k: &str| kv.get(k)?.parse::<f64>().ok().filter(|x| x.is_finite());
            let total_us = kv.get("total")?.parse::<u64>().ok()?;
            Some(PsiLine {
                avg10: avg("avg10")?,
                avg60: avg("avg60")?,
                avg300: avg("avg300")?,
                total_us,
            })
        }
        let mut psi = Psi::default();
        for l in text.lines() {
            let mut fields = l.split_whitespace();
            match fields.next() {
                Some("some") => psi.some = line(fields),
                Some("full") => psi.full = line(fields),
                _ => {}
            }
        }
        psi
    }

    proptest::proptest! {
        /// Kernel-shaped files, and averages in other shapes (the general
        /// parser's path): the same values as the reference, bit for bit.
        #[test]
        fn same_values_as_the_reference(
            ints in proptest::collection::vec(0u64..1_000_000_000_000_000, 6),
            fracs in proptest::collection::vec(0u32..100, 6),
            totals in proptest::collection::vec(proptest::prelude::any::<u64>(), 2),
            odd in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::prelude::Just(String::new()),
                    "[0-9]{0,20}(\\.[0-9]{0,20})?",
                    "[-+]?[0-9]{1,3}(\\.[0-9]{1,3})?(e[-+]?[0-9]{1,3})?",
                    "(inf|NaN|1e400|0x1|1_0|١)",
                ],
                6,
            ),
            use_odd in proptest::collection::vec(proptest::prelude::any::<bool>(), 6),
            sep in "( |  |\t| \r)",
        ) {
            let v = |i: usize| if use_odd[i] {
                odd[i].clone()
            } else {
                format!("{}.{:02}", ints[i], fracs[i])
            };
            let text = format!(
                "some avg10={}{sep}avg60={} avg300={} total={}\nfull avg10={} avg60={} avg300={}{sep}total={}\n",
                v(0), v(1), v(2), totals[0], v(3), v(4), v(5), totals[1]
            );
            let (got, want) = (parse_psi(&text), reference(&text));
            let bits = |p: Option<PsiLine>| {
                p.map(|l| (l.avg10.to_bits(), l.avg60.to_bits(), l.avg300.to_bits(), l.total_us))
            };
            proptest::prop_assert_eq!(bits(got.some), bits(want.some), "{}", text);
            proptest::prop_assert_eq!(bits(got.full), bits(want.full), "{}", text);
        }
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
