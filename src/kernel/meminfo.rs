//! `/proc/meminfo`: the `system.memory.available` metric.
//!
//! Format: `Name:   N kB` lines (a few, like `HugePages_Total:`, carry no
//! unit). [`parse_meminfo`] is tolerant: unknown names are kept, lines that
//! do not parse are skipped, values with a `kB` unit are converted to bytes
//! and unit-less values are kept as they are.

use std::collections::BTreeMap;
use std::path::Path;

use super::error::Result;
use super::root::Root;

/// Device path of the meminfo file.
pub(crate) const MEMINFO: &str = "/proc/meminfo";

/// Parses meminfo text into `name -> value`: bytes for `kB` lines, the bare
/// number for unit-less lines. Never fails; junk lines, unknown units and
/// overflowing values are skipped.
pub(crate) fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        let mut fields = rest.split_whitespace();
        let Some(Ok(n)) = fields.next().map(str::parse::<u64>) else {
            continue;
        };
        let value = match fields.next() {
            None => Some(n),
            Some(u) if u.eq_ignore_ascii_case("kB") => n.checked_mul(1024),
            Some(_) => None,
        };
        if let Some(v) = value {
            out.insert(name.to_string(), v);
        }
    }
    out
}

/// `MemAvailable` in bytes; `Ok(None)` if the file lacks the line (kernels
/// before 3.14, or a fake tree without it). A missing file is an error.
pub(crate) fn mem_available(root: &Root) -> Result<Option<u64>> {
    let text = root.read(Path::new(MEMINFO))?;
    Ok(parse_meminfo(&text).get("MemAvailable").copied())
}

/// `MemTotal` in bytes; `Ok(None)` if the file lacks the line. A missing
/// file is an error.
pub(crate) fn mem_total(root: &Root) -> Result<Option<u64>> {
    let text = root.read(Path::new(MEMINFO))?;
    Ok(parse_meminfo(&text).get("MemTotal").copied())
}

/// Memory in use by the whole machine, in bytes: `MemTotal - MemAvailable`
/// (the flight recorder's and metrics' `system` group); `Ok(None)` when a
/// line is missing.
pub(crate) fn mem_used(root: &Root) -> Result<Option<u64>> {
    let m = parse_meminfo(&root.read(Path::new(MEMINFO))?);
    Ok(match (m.get("MemTotal"), m.get("MemAvailable")) {
        (Some(t), Some(a)) => Some(t.saturating_sub(*a)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tempfile::TempDir;

    #[test]
    fn parses_kb_and_unitless() {
        let m = parse_meminfo(
            "MemTotal:        8056920 kB\n\
             MemFree:          123456 kB\n\
             MemAvailable:    4000000 kB\n\
             HugePages_Total:       0\n\
             junk line\n\
             Weird:  12 MB\n\
             Bad:  x kB\n\
             :  5 kB\n\
             Huge: 18446744073709551615 kB\n",
        );
        assert_eq!(m["MemTotal"], 8_056_920 * 1024);
        assert_eq!(m["MemAvailable"], 4_000_000 * 1024);
        assert_eq!(m["HugePages_Total"], 0);
        assert!(!m.contains_key("Weird"));
        assert!(!m.contains_key("Bad"));
        assert!(!m.contains_key("Huge"));
        assert_eq!(m.len(), 4);
        assert!(parse_meminfo("").is_empty());
    }

    #[test]
    fn mem_available_from_fake_root() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        let e = mem_available(&r).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.path(), Path::new(MEMINFO));
        fs::create_dir(t.path().join("proc")).unwrap();
        fs::write(t.path().join("proc/meminfo"), "MemTotal: 100 kB\n").unwrap();
        assert_eq!(mem_available(&r).unwrap(), None);
        fs::write(
            t.path().join("proc/meminfo"),
            "MemTotal: 100 kB\nMemAvailable: 50 kB\n",
        )
        .unwrap();
        assert_eq!(mem_available(&r).unwrap(), Some(50 * 1024));
    }

    #[test]
    fn real_meminfo_has_mem_available() {
        // /proc/meminfo is readable everywhere the tests run (Linux).
        let v = mem_available(&Root::real()).unwrap();
        assert!(v.is_some_and(|b| b > 0), "{v:?}");
    }
}
