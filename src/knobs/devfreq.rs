//! The devfreq family:
//! `devfreq.NAME.{min,max,governor}` for
//! `/sys/class/devfreq/NAME/{min_freq,max_freq,governor}` — the GPU
//! (`3d00000.qcom,kgsl-3d0` on Adreno boards), the DDR/LLCC bandwidth
//! monitors (`soc:qcom,cpu-cpu-llcc-bw`, `soc:qcom,cpu-llcc-ddr-bw`), UFS
//! (`1d84000.ufshc`). The files are those of
//! Documentation/ABI/testing/sysfs-class-devfreq: `min_freq`/`max_freq` in
//! **Hz** (cpufreq's are kHz), `governor` one of `available_governors`,
//! `cur_freq` and `available_frequencies` read-only.
//!
//! NAME is the device name as the kernel spells it (`dev_name()`), which
//! may hold `.`, `,`, `:` and `-`: the attribute is what follows the last
//! `.`. min/max merge largest wins (as cpufreq's), the governor first wins.
//! The ceiling is a cap target (`cap devfreq.NAME.max at …`).
//!
//! This module is the whole family: the names, the files, the values and
//! their parsing, the board's bounds (`available_frequencies`,
//! `available_governors`) read through [`Files`], the merge, the write
//! order of a device's floor and ceiling, the journal's pattern, the
//! `system.devfreq` baseline section, the device list `doctor` prints and
//! the docs' rows. Nothing outside it names a devfreq file.
//!
//! Decisions: a device name is 1–64 bytes of
//! `[A-Za-z0-9._,:@+-]`, not starting with `.`; a devfreq governor name is
//! 1–15 bytes of `[a-z0-9_-]` (DEVFREQ_NAME_LEN is 16; vendor governors
//! are `msm-adreno-tz`, `bw_hwmon`, `gpubw_mon`).

use super::board::{check_governors, Board, DevfreqBounds};
use super::{
    did_you_mean, suggest, DocRow, Family, Files, Id, Knob, KnobError, KnobValue, MergePolicy,
    Places, Shape, Slot, Tok, ValueKind,
};
use crate::units::UnitError;
use std::fmt;
use std::path::{Path, PathBuf};

/// Device path of the devfreq class directory.
pub(crate) const DEVFREQ_DIR: &str = "/sys/class/devfreq";
pub(crate) const MIN_FREQ: &str = "min_freq";
pub(crate) const MAX_FREQ: &str = "max_freq";
pub(crate) const GOVERNOR: &str = "governor";
pub(crate) const AVAILABLE_GOVERNORS: &str = "available_governors";
pub(crate) const CUR_FREQ: &str = "cur_freq";
/// The device's operating points, space-separated Hz.
const AVAILABLE_FREQUENCIES: &str = "available_frequencies";

/// A devfreq device attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DevfreqAttr {
    Min,
    Max,
    Governor,
}

impl DevfreqAttr {
    pub(crate) fn name(self) -> &'static str {
        match self {
            DevfreqAttr::Min => "min",
            DevfreqAttr::Max => "max",
            DevfreqAttr::Governor => "governor",
        }
    }

    /// The file under `/sys/class/devfreq/NAME/`.
    pub(crate) fn file_name(self) -> &'static str {
        match self {
            DevfreqAttr::Min => MIN_FREQ,
            DevfreqAttr::Max => MAX_FREQ,
            DevfreqAttr::Governor => GOVERNOR,
        }
    }
}

const ATTRS: [&str; 3] = ["min", "max", "governor"];

/// A byte of a devfreq device name.
pub(crate) fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b".,:@+-_".contains(&b)
}

/// Whether `name` can be a devfreq device name (module docs).
pub(crate) fn is_device_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && !name.starts_with('.') && name.bytes().all(name_byte)
}

/// Device path of a devfreq device's directory.
pub(crate) fn device_dir(device: &str) -> PathBuf {
    // Root::host_path clamps `..`; keep a name one component anyway.
    Path::new(DEVFREQ_DIR).join(device.replace('/', "_"))
}

/// Device path of file `file` of `device`.
pub(crate) fn attr_path(device: &str, file: &str) -> PathBuf {
    device_dir(device).join(file)
}

/// A devfreq governor name (module docs).
pub(super) fn parse_devfreq_governor(text: &str) -> Result<String, UnitError> {
    super::value::governor_name(text, b"_-", "expected a devfreq governor name like `simple_ondemand` or `msm-adreno-tz` ([a-z0-9_-], at most 15 characters)")
}

/// A devfreq frequency: `587MHz`, `1.2GHz`, `19200kHz`, `300000000Hz`, or
/// a bare number in the kernel's unit (Hz; a bandwidth monitor's MB/s).
pub(super) fn parse_hz(text: &str) -> Result<u64, UnitError> {
    const REASON: &str = "expected a frequency like `587MHz`, `1.2GHz` or a whole number of Hz";
    let t = text.trim();
    let end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, suffix) = t.split_at(end);
    let scale: u32 = match suffix.to_ascii_lowercase().as_str() {
        "" | "hz" => 0,
        "khz" => 3,
        "mhz" => 6,
        "ghz" => 9,
        _ => return Err(UnitError::new("frequency", text, REASON)),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) || whole.len() > 12 {
        return Err(UnitError::new("frequency", text, REASON));
    }
    if frac.len() > scale as usize {
        return Err(UnitError::new(
            "frequency",
            text,
            "not a whole number of Hz",
        ));
    }
    let mut hz: u64 = whole
        .parse()
        .map_err(|_| UnitError::new("frequency", text, REASON))?;
    hz = hz.saturating_mul(10u64.pow(scale));
    if !frac.is_empty() {
        let f: u64 = frac
            .parse()
            .map_err(|_| UnitError::new("frequency", text, REASON))?;
        hz = hz.saturating_add(f * 10u64.pow(scale - frac.len() as u32));
    }
    if hz == 0 || hz > 1_000_000_000_000 {
        return Err(UnitError::new(
            "frequency",
            text,
            "must be from 1Hz to 1000GHz",
        ));
    }
    Ok(hz)
}

/// `system.devfreq.NAME`: a device's baseline.
#[derive(Clone, Debug, Default)]
pub(crate) struct Baseline {
    /// The device name under /sys/class/devfreq.
    pub(crate) device: String,
    pub(crate) governor: Option<String>,
    /// Hz.
    pub(crate) min: Option<u64>,
    /// Hz.
    pub(crate) max: Option<u64>,
}

impl Baseline {
    /// The knobs it sets: the governor first (a governor switch may reset
    /// the limits' QoS requests on vendor kernels), then min and max (which
    /// the write order puts in the order the kernel accepts).
    pub(crate) fn knobs(&self) -> Vec<(Knob, KnobValue)> {
        let k = |attr| Knob::Devfreq {
            device: self.device.clone(),
            attr,
        };
        let mut out = Vec::new();
        if let Some(g) = &self.governor {
            out.push((k(DevfreqAttr::Governor), KnobValue::Word(g.clone())));
        }
        if let Some(hz) = self.min {
            out.push((k(DevfreqAttr::Min), KnobValue::Hz(hz)));
        }
        if let Some(hz) = self.max {
            out.push((k(DevfreqAttr::Max), KnobValue::Hz(hz)));
        }
        out
    }
}

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
pub(crate) fn exists(files: &dyn Files, device: &str) -> bool {
    files.is_dir(&device_dir(device))
}

/// A file of `device`, trimmed.
fn read(files: &dyn Files, device: &str, file: &str) -> Option<String> {
    files
        .text(&attr_path(device, file))
        .map(|t| t.trim().to_string())
}

fn hz(files: &dyn Files, device: &str, file: &str) -> Option<u64> {
    read(files, device, file)?.parse().ok()
}

/// Governors `device` offers (empty when unreadable).
pub(crate) fn available_governors(files: &dyn Files, device: &str) -> Vec<String> {
    read(files, device, AVAILABLE_GOVERNORS)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// Every device, by name (an absent class directory: none).
pub(crate) fn devices(files: &dyn Files) -> Vec<Device> {
    let mut names = files.names(Path::new(DEVFREQ_DIR));
    names.sort();
    names
        .into_iter()
        .filter(|n| is_device_name(n))
        .map(|name| Device {
            governor: read(files, &name, GOVERNOR),
            available_governors: available_governors(files, &name),
            cur: hz(files, &name, CUR_FREQ),
            min: hz(files, &name, MIN_FREQ),
            max: hz(files, &name, MAX_FREQ),
            name,
        })
        .collect()
}

/// Why a knob cannot be written on this board: its device is absent, or
/// does not offer the governor.
fn unavailable(files: &dyn Files, knob: &Knob, value: &KnobValue) -> Option<String> {
    let Knob::Devfreq { device, attr } = knob else {
        return None;
    };
    if !exists(files, device) {
        return Some(format!(
            "devfreq {device}: {} does not exist (no such devfreq device)",
            device_dir(device).display()
        ));
    }
    if let (DevfreqAttr::Governor, KnobValue::Word(gov)) = (attr, value) {
        let offered = available_governors(files, device);
        if !offered.is_empty() && !offered.iter().any(|o| o == gov) {
            return Some(format!(
                "devfreq {device}: governor `{gov}` is not offered (available: {})",
                offered.join(" ")
            ));
        }
    }
    None
}

/// The devfreq family.
pub(super) struct Devfreq;

/// The devfreq family's registration.
pub(super) static FAMILY: Devfreq = Devfreq;

impl Family for Devfreq {
    fn id(&self) -> Id {
        Id {
            name: "devfreq",
            head: Some("devfreq"),
            grammar: Some("devfreq.NAME.ATTR"),
        }
    }

    fn parse(&self, text: &str, rest: &str) -> Result<Knob, KnobError> {
        parse_devfreq(text, rest)
    }

    fn shapes(&self, _: &[&str]) -> Vec<Shape> {
        ATTRS
            .iter()
            .map(|a| {
                super::shape(
                    "devfreq.",
                    Some(Tok::Run(name_byte, 1, 64)),
                    &format!(".{a}"),
                )
            })
            .collect()
    }

    fn fmt(&self, knob: &Knob, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match knob {
            Knob::Devfreq { device, attr } => write!(f, "devfreq.{device}.{}", attr.name()),
            _ => Ok(()),
        }
    }

    fn kind(&self, knob: &Knob) -> ValueKind {
        match attr(knob) {
            Some(DevfreqAttr::Governor) => ValueKind::Word(parse_devfreq_governor),
            _ => ValueKind::Hz(parse_hz),
        }
    }

    fn merge(&self, knob: &Knob) -> MergePolicy {
        match attr(knob) {
            Some(DevfreqAttr::Governor) => MergePolicy::First,
            _ => MergePolicy::Largest,
        }
    }

    fn is_ceiling(&self, knob: &Knob) -> bool {
        attr(knob) == Some(DevfreqAttr::Max)
    }

    fn ceilings(&self) -> &'static [&'static str] {
        &["devfreq.NAME.max"]
    }

    /// A device's floor and ceiling are a pair (the kernel rejects a floor
    /// above the ceiling it holds).
    fn order<'a>(&self, knob: &'a Knob) -> Option<(&'a str, Slot)> {
        match knob {
            Knob::Devfreq { device, attr } => match attr {
                DevfreqAttr::Min => Some((device, Slot::Floor)),
                DevfreqAttr::Max => Some((device, Slot::Ceiling)),
                DevfreqAttr::Governor => None,
            },
            _ => None,
        }
    }

    fn check(&self, knob: &Knob, value: &KnobValue, board: &Board) -> Result<(), String> {
        let Knob::Devfreq { device, attr } = knob else {
            return Ok(());
        };
        let Some(b) = board.devfreq.get(device) else {
            return Ok(());
        };
        match (attr, value) {
            (DevfreqAttr::Min | DevfreqAttr::Max, KnobValue::Hz(hz)) => {
                if b.frequencies.is_empty() || b.frequencies.contains(hz) {
                    return Ok(());
                }
                let listed: Vec<String> = b
                    .frequencies
                    .iter()
                    .map(|f| super::value::hz_text(*f))
                    .collect();
                Err(format!(
                    "{} is not a frequency {device} offers (available_frequencies: {})",
                    super::value::hz_text(*hz),
                    listed.join(" ")
                ))
            }
            (DevfreqAttr::Governor, KnobValue::Word(g)) => {
                check_governors(g, b.governors.as_deref(), device)
            }
            _ => Ok(()),
        }
    }

    fn read_bounds(&self, files: &dyn Files, board: &mut Board) {
        for d in devices(files) {
            let mut frequencies: Vec<u64> = read(files, &d.name, AVAILABLE_FREQUENCIES)
                .map(|t| {
                    t.split_whitespace()
                        .filter_map(|w| w.parse().ok())
                        .collect()
                })
                .unwrap_or_default();
            frequencies.sort_unstable();
            let governors = Some(d.available_governors).filter(|g| !g.is_empty());
            board.devfreq.insert(
                d.name,
                DevfreqBounds {
                    frequencies,
                    governors,
                },
            );
        }
    }

    fn path(&self, knob: &Knob, _: &Places<'_>) -> Result<PathBuf, String> {
        match knob {
            Knob::Devfreq { device, attr } => Ok(attr_path(device, attr.file_name())),
            _ => Err(format!("{knob} is not a devfreq knob")),
        }
    }

    fn unavailable(&self, knob: &Knob, value: &KnobValue, at: &Places<'_>) -> Option<String> {
        unavailable(at.files, knob, value)
    }

    fn owns(&self, path: &Path, _: &Path) -> bool {
        let Some(c) = super::below(path, DEVFREQ_DIR) else {
            return false;
        };
        matches!(c.as_slice(), [d, f] if is_device_name(d) && [MIN_FREQ, MAX_FREQ, GOVERNOR].contains(f))
    }

    fn doc(&self) -> Vec<DocRow> {
        vec![
            DocRow {
                knob: "`devfreq.NAME.min`, `devfreq.NAME.max`".into(),
                values: "frequency (`300MHz`, `1.2GHz`), written in Hz",
                merge: MergePolicy::Largest,
                file: format!("`{DEVFREQ_DIR}/NAME/{{{MIN_FREQ},{MAX_FREQ}}}`"),
            },
            DocRow {
                knob: "`devfreq.NAME.governor`".into(),
                values: "a governor the device offers (`available_governors`)",
                merge: MergePolicy::First,
                file: format!("`{DEVFREQ_DIR}/NAME/{GOVERNOR}`"),
            },
        ]
    }
}

fn attr(knob: &Knob) -> Option<DevfreqAttr> {
    match knob {
        Knob::Devfreq { attr, .. } => Some(*attr),
        _ => None,
    }
}

fn parse_devfreq(text: &str, rest: &str) -> Result<Knob, KnobError> {
    let (device, attr_text) = rest.rsplit_once('.').ok_or_else(|| {
        KnobError::new(format!(
            "unknown knob `{text}`: expected devfreq.NAME.{{min,max,governor}}"
        ))
    })?;
    if !is_device_name(device) {
        return Err(KnobError::new(format!(
            "invalid devfreq device `{device}` in `{text}`: expected a name from /sys/class/devfreq/ (like `3d00000.qcom,kgsl-3d0`)"
        )));
    }
    let attr = match attr_text {
        "min" => DevfreqAttr::Min,
        "max" => DevfreqAttr::Max,
        "governor" => DevfreqAttr::Governor,
        other => {
            let hint = suggest(other, ATTRS).map(|a| format!("devfreq.{device}.{a}"));
            return Err(KnobError::new(format!(
                "unknown devfreq attribute `{other}` in `{text}`: expected min, max or governor"
            ))
            .with_hint(did_you_mean(hint)));
        }
    };
    Ok(Knob::Devfreq {
        device: device.to_string(),
        attr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Root;
    use std::fs;

    /// The Adreno GPU of a Qualcomm board as its kgsl driver registers it
    /// (name from the device tree node `3d00000.qcom,kgsl-3d0`), and a
    /// bandwidth monitor whose "frequencies" are MB/s.
    #[test]
    fn lists_devices_their_governors_and_bounds() {
        let t = tempfile::tempdir().unwrap();
        let gpu = t.path().join("sys/class/devfreq/3d00000.qcom,kgsl-3d0");
        fs::create_dir_all(&gpu).unwrap();
        fs::write(gpu.join("governor"), "msm-adreno-tz\n").unwrap();
        fs::write(
            gpu.join("available_governors"),
            "msm-adreno-tz performance powersave userspace simple_ondemand\n",
        )
        .unwrap();
        fs::write(gpu.join("available_frequencies"), "900000000 300000000\n").unwrap();
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

        let mut board = Board::default();
        FAMILY.read_bounds(&r, &mut board);
        let b = &board.devfreq["3d00000.qcom,kgsl-3d0"];
        assert_eq!(b.frequencies, [300_000_000, 900_000_000]);
        let knob = Knob::parse("devfreq.3d00000.qcom,kgsl-3d0.min").unwrap();
        assert!(board
            .check_value(&knob, &KnobValue::Hz(300_000_000))
            .is_ok());
        let e = board
            .check_value(&knob, &KnobValue::Hz(587_000_000))
            .unwrap_err();
        assert!(e.contains("587MHz is not a frequency"), "{e}");
        let gov = Knob::parse("devfreq.3d00000.qcom,kgsl-3d0.governor").unwrap();
        assert!(unavailable(&r, &gov, &KnobValue::Word("bw_hwmon".into()))
            .is_some_and(|e| e.contains("is not offered")));
        let absent = Knob::parse("devfreq.gpu.max").unwrap();
        assert!(unavailable(&r, &absent, &KnobValue::Hz(1))
            .is_some_and(|e| e.contains("no such devfreq device")));
    }
}
