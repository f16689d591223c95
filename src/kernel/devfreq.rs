//! devfreq devices under `/sys/class/devfreq/NAME/`: what
//! `plan` and `doctor` read. Files as Documentation/ABI/testing/
//! sysfs-class-devfreq describes them: `governor`, `available_governors`
//! (space-separated), `min_freq`/`max_freq`/`cur_freq` in Hz,
//! `available_frequencies` (space-separated Hz, ascending).

use super::error::Result;
use super::root::Root;
pub(crate) use crate::knobs::devfreq::{
    attr_path, device_dir, AVAILABLE_GOVERNORS, CUR_FREQ, DEVFREQ_DIR, GOVERNOR, MAX_FREQ, MIN_FREQ,
};
use std::path::Path;

/// One device as `doctor` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Device {
    pub(crate) name: String,
    pub(crate) governor: Option<String>,
    pub(crate) available_governors: Vec<String>,
    /// Hz.
    pub(crate) cur: Option<u64>,
    pub(crate) min: Option<u64>,
    pub(crate) max: Option<u64>,
}

/// True if `device` exists.
pub(crate) fn exists(root: &Root, device: &str) -> bool {
    root.is_dir(&device_dir(device))
}

/// Reads a file of `device`, trimmed.
pub(crate) fn read(root: &Root, device: &str, file: &str) -> Result<String> {
    root.read_trimmed(&attr_path(device, file))
}

fn hz(root: &Root, device: &str, file: &str) -> Option<u64> {
    read(root, device, file).ok()?.parse().ok()
}

/// Governors `device` offers (empty when unreadable).
pub(crate) fn available_governors(root: &Root, device: &str) -> Vec<String> {
    read(root, device, AVAILABLE_GOVERNORS)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Every device, by name (an absent class directory: none).
pub(crate) fn devices(root: &Root) -> Vec<Device> {
    let names = root.list_dir(Path::new(DEVFREQ_DIR)).unwrap_or_default();
    names
        .into_iter()
        .filter(|n| crate::knobs::devfreq::is_device_name(n))
        .map(|name| Device {
            governor: read(root, &name, GOVERNOR).ok(),
            available_governors: available_governors(root, &name),
            cur: hz(root, &name, CUR_FREQ),
            min: hz(root, &name, MIN_FREQ),
            max: hz(root, &name, MAX_FREQ),
            name,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// The Adreno GPU of a Qualcomm board as its kgsl driver registers it
    /// (name from the device tree node `3d00000.qcom,kgsl-3d0`), and a
    /// bandwidth monitor whose "frequencies" are MB/s.
    #[test]
    fn lists_devices_and_their_governors() {
        let t = tempfile::tempdir().unwrap();
        let gpu = t.path().join("sys/class/devfreq/3d00000.qcom,kgsl-3d0");
        fs::create_dir_all(&gpu).unwrap();
        fs::write(gpu.join("governor"), "msm-adreno-tz\n").unwrap();
        fs::write(
            gpu.join("available_governors"),
            "msm-adreno-tz performance powersave userspace simple_ondemand\n",
        )
        .unwrap();
        fs::write(gpu.join("cur_freq"), "300000000\n").unwrap();
        fs::write(gpu.join("min_freq"), "300000000\n").unwrap();
        fs::write(gpu.join("max_freq"), "900000000\n").unwrap();
        let bw = t.path().join("sys/class/devfreq/soc:qcom,cpu-llcc-ddr-bw");
        fs::create_dir_all(&bw).unwrap();
        fs::write(bw.join("governor"), "bw_hwmon\n").unwrap();
        let r = Root::fake(t.path());
        let d = devices(&r);
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, "3d00000.qcom,kgsl-3d0");
        assert_eq!(d[0].governor.as_deref(), Some("msm-adreno-tz"));
        assert_eq!(d[0].available_governors.len(), 5);
        assert_eq!(
            (d[0].cur, d[0].min, d[0].max),
            (Some(300_000_000), Some(300_000_000), Some(900_000_000))
        );
        assert_eq!(d[1].governor.as_deref(), Some("bw_hwmon"));
        assert_eq!(d[1].max, None);
        assert!(exists(&r, "3d00000.qcom,kgsl-3d0"));
        assert!(!exists(&r, "nope"));
        assert!(devices(&Root::fake(t.path().join("none"))).is_empty());
    }
}
