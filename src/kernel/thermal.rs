//! Thermal zones under `/sys/class/thermal/thermal_zoneN/`: the
//! `thermal.ZONE.temp` metric (SPEC §3), where `ZONE` is the zone's `type`
//! (e.g. `cpu-0-0-usr`, `x86_pkg_temp`), not its `thermal_zoneN` name, which
//! can change between boots.
//!
//! `temp` is in millidegrees Celsius and may be negative. Reading `temp` can
//! fail transiently (EAGAIN/EIO from some sensor drivers, ENODATA while a
//! sensor is off); the error is returned with the device path.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::root::Root;

/// Device path of the thermal class directory.
pub const THERMAL_DIR: &str = "/sys/class/thermal";

/// One thermal zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Zone {
    /// Directory name, `thermal_zoneN`.
    pub name: String,
    /// Content of the zone's `type` file, trimmed.
    pub kind: String,
    /// Device path of the zone's `temp` file (it may not exist).
    pub temp_path: PathBuf,
}

fn zone_number(name: &str) -> Option<u32> {
    name.strip_prefix("thermal_zone")?.parse().ok()
}

/// All zones in numeric order. A missing thermal directory (VMs, containers)
/// gives an empty list; a zone without a readable `type` is skipped
/// (it cannot be named in a policy). A missing `temp` file is not checked
/// here: [`temp_millic`] reports it.
pub fn zones(root: &Root) -> Result<Vec<Zone>> {
    let dir = Path::new(THERMAL_DIR);
    let names = match root.list_dir(dir) {
        Ok(n) => n,
        Err(e) if e.is_not_found() => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut numbered: Vec<(u32, String)> = names
        .into_iter()
        .filter_map(|n| zone_number(&n).map(|k| (k, n)))
        .collect();
    numbered.sort();
    let mut out = Vec::new();
    for (_, name) in numbered {
        let zdir = dir.join(&name);
        let kind = match root.read_trimmed(&zdir.join("type")) {
            Ok(k) if !k.is_empty() => k,
            Ok(_) => continue,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        out.push(Zone {
            name,
            kind,
            temp_path: zdir.join("temp"),
        });
    }
    Ok(out)
}

/// The zone's temperature in millidegrees Celsius.
pub fn temp_millic(root: &Root, zone: &Zone) -> Result<i64> {
    let s = root.read_trimmed(&zone.temp_path)?;
    s.parse::<i64>()
        .map_err(|_| Error::parse(&zone.temp_path, "temperature (millidegrees C)", &s))
}

/// The zone's lowest `passive` or `hot` trip point in millidegrees
/// Celsius (`trip_point_N_type` / `trip_point_N_temp`); `None` when it has
/// none (or none readable).
pub fn lowest_trip(root: &Root, zone: &Zone) -> Option<i64> {
    let dir = Path::new(THERMAL_DIR).join(&zone.name);
    let names = root.list_dir(&dir).ok()?;
    names
        .iter()
        .filter_map(|n| n.strip_prefix("trip_point_")?.strip_suffix("_type"))
        .filter(|i| {
            root.read_trimmed(&dir.join(format!("trip_point_{i}_type")))
                .is_ok_and(|t| t == "passive" || t == "hot")
        })
        .filter_map(|i| {
            root.read_trimmed(&dir.join(format!("trip_point_{i}_temp")))
                .ok()?
                .parse::<i64>()
                .ok()
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tempfile::TempDir;

    fn zone(t: &TempDir, n: u32, kind: Option<&str>, temp: Option<&str>) {
        let d = t.path().join(format!("sys/class/thermal/thermal_zone{n}"));
        fs::create_dir_all(&d).unwrap();
        if let Some(k) = kind {
            fs::write(d.join("type"), format!("{k}\n")).unwrap();
        }
        if let Some(v) = temp {
            fs::write(d.join("temp"), format!("{v}\n")).unwrap();
        }
    }

    #[test]
    fn missing_dir_is_empty() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        assert!(zones(&r).unwrap().is_empty());
    }

    #[test]
    fn zones_sorted_typed_and_read() {
        let t = TempDir::new().unwrap();
        let r = Root::fake(t.path());
        zone(&t, 10, Some("gpu-thermal"), Some("-2500"));
        zone(&t, 2, Some("cpu-0-0-usr"), Some("45000"));
        zone(&t, 3, Some("cpu-0-0-usr"), Some("99000")); // duplicate type: both listed
        zone(&t, 4, None, Some("1")); // no type: skipped
        zone(&t, 5, Some("no-temp"), None); // temp missing
        zone(&t, 6, Some("garbage"), Some("hot"));
        fs::create_dir_all(t.path().join("sys/class/thermal/cooling_device0")).unwrap();

        let zs = zones(&r).unwrap();
        let names: Vec<_> = zs.iter().map(|z| z.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "thermal_zone2",
                "thermal_zone3",
                "thermal_zone5",
                "thermal_zone6",
                "thermal_zone10"
            ]
        );
        let zone = |name: &str| zs.iter().find(|z| z.name == name).unwrap();
        let cpu = zone("thermal_zone2");
        assert_eq!(cpu.kind, "cpu-0-0-usr");
        assert_eq!(zone("thermal_zone3").kind, "cpu-0-0-usr");
        assert_eq!(
            cpu.temp_path,
            Path::new("/sys/class/thermal/thermal_zone2/temp")
        );
        assert_eq!(temp_millic(&r, cpu).unwrap(), 45_000);
        let gpu = zone("thermal_zone10");
        assert_eq!(gpu.kind, "gpu-thermal");
        assert_eq!(temp_millic(&r, gpu).unwrap(), -2_500);

        let nt = zone("thermal_zone5");
        assert_eq!(nt.kind, "no-temp");
        let e = temp_millic(&r, nt).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.path(), Path::new("/sys/class/thermal/thermal_zone5/temp"));

        let g = zone("thermal_zone6");
        let e = temp_millic(&r, g).unwrap_err();
        assert!(matches!(e, Error::Parse { .. }), "{e}");
        assert!(e.to_string().contains("thermal_zone6/temp"), "{e}");
    }
}
