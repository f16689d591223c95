//! Thermal zones under `/sys/class/thermal/thermal_zoneN/`: the
//! `thermal.ZONE.temp` metric, where `ZONE` is the zone's `type`
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
pub(crate) const THERMAL_DIR: &str = "/sys/class/thermal";

/// One thermal zone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Zone {
    /// Directory name, `thermal_zoneN`.
    pub(crate) name: String,
    /// Content of the zone's `type` file, trimmed.
    pub(crate) kind: String,
    /// Device path of the zone's `temp` file (it may not exist).
    pub(crate) temp_path: PathBuf,
}

fn zone_number(name: &str) -> Option<u32> {
    name.strip_prefix("thermal_zone")?.parse().ok()
}

/// All zones in numeric order. A missing thermal directory (VMs, containers)
/// gives an empty list; a zone without a readable `type` is skipped
/// (it cannot be named in a policy). A missing `temp` file is not checked
/// here: [`temp_millic`] reports it.
pub(crate) fn zones(root: &Root) -> Result<Vec<Zone>> {
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
pub(crate) fn temp_millic(root: &Root, zone: &Zone) -> Result<i64> {
    let s = root.read_trimmed(&zone.temp_path)?;
    s.parse::<i64>()
        .map_err(|_| Error::parse(&zone.temp_path, "temperature (millidegrees C)", &s))
}

/// The zone's lowest `passive` or `hot` trip point in millidegrees
/// Celsius (`trip_point_N_type` / `trip_point_N_temp`); `None` when it has
/// none (or none readable).
pub(crate) fn lowest_trip(root: &Root, zone: &Zone) -> Option<i64> {
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

/// Trip point `n` of `zone` (`trip_point_N_temp`, m°C).
pub(crate) fn trip_millic(root: &Root, zone: &Zone, n: u32) -> Option<i64> {
    let dir = Path::new(THERMAL_DIR).join(&zone.name);
    root.read_trimmed(&dir.join(format!("trip_point_{n}_temp")))
        .ok()?
        .parse()
        .ok()
}

/// One cooling device (`/sys/class/thermal/cooling_deviceN`,
/// Documentation/driver-api/thermal/sysfs-api.rst): its `type`,
/// `cur_state` and `max_state`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cooling {
    /// Directory name, `cooling_deviceN`.
    pub(crate) name: String,
    /// The `type` (`cpufreq-cpu7`, `thermal-devfreq-0`, `qcom-lmh`…).
    pub(crate) kind: String,
    pub(crate) cur: u64,
    pub(crate) max: u64,
}

/// Every readable cooling device, in numeric order.
pub(crate) fn cooling_devices(root: &Root) -> Vec<Cooling> {
    let dir = Path::new(THERMAL_DIR);
    let mut numbered: Vec<(u32, String)> = root
        .list_dir(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| Some((n.strip_prefix("cooling_device")?.parse().ok()?, n)))
        .collect();
    numbered.sort();
    numbered
        .into_iter()
        .filter_map(|(_, name)| {
            let d = dir.join(&name);
            let num = |f: &str| root.read_trimmed(&d.join(f)).ok()?.parse::<u64>().ok();
            Some(Cooling {
                kind: root.read_trimmed(&d.join("type")).ok()?,
                cur: num("cur_state")?,
                max: num("max_state").unwrap_or(0),
                name,
            })
        })
        .collect()
}

/// The cpufreq policy a cooling device throttles, where the kernel shows
/// it: the cpufreq cooling device is registered as `cpufreq-cpuN` with N
/// the policy's first CPU (drivers/thermal/cpufreq_cooling.c), which is
/// also the `policyN` directory's number.
pub(crate) fn cooling_policy(kind: &str) -> Option<String> {
    let cpu: u32 = kind.strip_prefix("cpufreq-cpu")?.parse().ok()?;
    Some(format!("policy{cpu}"))
}

/// What the kernel lets one cpufreq policy reach now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PolicyLimit {
    /// kHz: `scaling_max_freq` (the aggregate of every max QoS request —
    /// cgwarden's, the cpufreq cooling device's) and, on Qualcomm vendor
    /// kernels, `cpuN/dcvsh_freq_limit` (LMh hardware throttling as
    /// qcom-cpufreq-hw reports it; U32_MAX while unthrottled), the lower.
    pub(crate) limit: u64,
    /// kHz: `scaling_cur_freq`.
    pub(crate) cur: Option<u64>,
    /// kHz: `cpuinfo_max_freq`, the hardware's ceiling.
    pub(crate) hw_max: Option<u64>,
    /// The largest `cur_state` of the cooling devices bound to the policy.
    pub(crate) cooling: u64,
}

/// Reads [`PolicyLimit`] of `policy` (`policyN`); `None` when it has no
/// readable `scaling_max_freq`.
pub(crate) fn policy_limit(root: &Root, policy: &str, cooling: &[Cooling]) -> Option<PolicyLimit> {
    let dir = crate::knobs::cpufreq::policy_dir(policy);
    let khz = |f: &str| -> Option<u64> { root.read_trimmed(&dir.join(f)).ok()?.parse().ok() };
    let mut limit = khz("scaling_max_freq")?;
    // The vendor qcom-cpufreq-hw's LMh limit sits on the first CPU's device.
    if let Some(cpu) = policy.strip_prefix("policy") {
        let p = Path::new("/sys/devices/system/cpu")
            .join(format!("cpu{cpu}"))
            .join("dcvsh_freq_limit");
        if let Some(l) = root
            .read_trimmed(&p)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
            .filter(|l| *l < u64::from(u32::MAX))
        {
            limit = limit.min(l);
        }
    }
    let bound = cooling
        .iter()
        .filter(|c| cooling_policy(&c.kind).as_deref() == Some(policy))
        .map(|c| c.cur)
        .max()
        .unwrap_or(0);
    Some(PolicyLimit {
        limit,
        cur: khz("scaling_cur_freq"),
        hw_max: khz("cpuinfo_max_freq"),
        cooling: bound,
    })
}

impl PolicyLimit {
    /// Throttled while the limit is below the ceiling asked for
    /// (`asked`: what cgwarden or the baseline set for `cpufreq.P.max`; else
    /// the hardware's), or a cooling device bound to the policy is above 0.
    pub(crate) fn throttled(&self, asked: Option<u64>) -> bool {
        let ceiling = asked.or(self.hw_max);
        self.cooling > 0 || ceiling.is_some_and(|c| self.limit < c)
    }
}

/// The cpufreq policies (`policyN`), by number.
pub(crate) fn policies(root: &Root) -> Vec<String> {
    let mut v: Vec<(u32, String)> = root
        .list_dir(Path::new(crate::knobs::cpufreq::CPUFREQ_DIR))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| Some((n.strip_prefix("policy")?.parse().ok()?, n)))
        .collect();
    v.sort();
    v.into_iter().map(|(_, n)| n).collect()
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

#[cfg(test)]
mod limit_tests {
    use super::*;
    use std::fs;

    fn w(t: &tempfile::TempDir, rel: &str, v: &str) {
        let p = t.path().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, format!("{v}\n")).unwrap();
    }

    /// policy7 of a Qualcomm board: mainline cpufreq cooling device
    /// `cpufreq-cpu7` (cur_state 0..max_state), the vendor kernel's
    /// `cpu7/dcvsh_freq_limit` (4294967295 while LMh does not throttle).
    #[test]
    fn limit_cooling_and_throttled() {
        let t = tempfile::tempdir().unwrap();
        let p = "sys/devices/system/cpu/cpufreq/policy7";
        w(&t, &format!("{p}/scaling_max_freq"), "2841600");
        w(&t, &format!("{p}/scaling_cur_freq"), "2419200");
        w(&t, &format!("{p}/cpuinfo_max_freq"), "2841600");
        w(
            &t,
            "sys/devices/system/cpu/cpu7/dcvsh_freq_limit",
            "4294967295",
        );
        w(&t, "sys/class/thermal/cooling_device3/type", "cpufreq-cpu7");
        w(&t, "sys/class/thermal/cooling_device3/cur_state", "0");
        w(&t, "sys/class/thermal/cooling_device3/max_state", "17");
        w(
            &t,
            "sys/class/thermal/cooling_device4/type",
            "thermal-devfreq-0",
        );
        w(&t, "sys/class/thermal/cooling_device4/cur_state", "2");
        let r = Root::fake(t.path());
        let c = cooling_devices(&r);
        assert_eq!(c.len(), 2);
        assert_eq!(cooling_policy(&c[0].kind).as_deref(), Some("policy7"));
        assert_eq!(cooling_policy(&c[1].kind), None);
        let l = policy_limit(&r, "policy7", &c).unwrap();
        assert_eq!((l.limit, l.cur, l.cooling), (2_841_600, Some(2_419_200), 0));
        assert!(!l.throttled(None));
        assert!(!l.throttled(Some(2_841_600)));
        // LMh clips the policy: the limit drops below the ceiling asked for.
        w(
            &t,
            "sys/devices/system/cpu/cpu7/dcvsh_freq_limit",
            "1804800",
        );
        let l = policy_limit(&r, "policy7", &c).unwrap();
        assert_eq!(l.limit, 1_804_800);
        assert!(l.throttled(None));
        // cgwarden asked 1.8 GHz itself: not throttled by that.
        assert!(!l.throttled(Some(1_804_800)));
        // A bound cooling device above 0 is throttling.
        w(
            &t,
            "sys/devices/system/cpu/cpu7/dcvsh_freq_limit",
            "4294967295",
        );
        w(&t, "sys/class/thermal/cooling_device3/cur_state", "3");
        let l = policy_limit(&r, "policy7", &cooling_devices(&r)).unwrap();
        assert!(l.throttled(None));
        assert_eq!(policies(&r), vec!["policy7".to_string()]);
        assert!(policy_limit(&r, "policy0", &[]).is_none());
    }
}
