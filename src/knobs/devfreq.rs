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
//! Decisions where the SPEC is silent: a device name is 1–64 bytes of
//! `[A-Za-z0-9._,:@+-]`, not starting with `.`; a devfreq governor name is
//! 1–15 bytes of `[a-z0-9_-]` (DEVFREQ_NAME_LEN is 16; vendor governors
//! are `msm-adreno-tz`, `bw_hwmon`, `gpubw_mon`).

use super::{did_you_mean, suggest, DocRow, Family, Knob, KnobError, MergePolicy, Shape, Tok};
use crate::units::UnitError;
use std::path::{Path, PathBuf};

/// Device path of the devfreq class directory.
pub(crate) const DEVFREQ_DIR: &str = "/sys/class/devfreq";
pub(crate) const MIN_FREQ: &str = "min_freq";
pub(crate) const MAX_FREQ: &str = "max_freq";
pub(crate) const GOVERNOR: &str = "governor";
pub(crate) const AVAILABLE_GOVERNORS: &str = "available_governors";
pub(crate) const CUR_FREQ: &str = "cur_freq";

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
    let ok = !text.is_empty()
        && text.len() <= 15
        && text
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(text.to_string())
    } else {
        Err(UnitError::new(
            "governor",
            text,
            "expected a devfreq governor name like `simple_ondemand` or `msm-adreno-tz` ([a-z0-9_-], at most 15 characters)",
        ))
    }
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

/// The policy form of a devfreq frequency (parses back with [`parse_hz`]).
pub(crate) fn hz_text(hz: u64) -> String {
    match hz {
        h if h >= 1_000_000_000 && h % 1_000_000_000 == 0 => format!("{}GHz", h / 1_000_000_000),
        h if h >= 1_000_000 && h % 1_000_000 == 0 => format!("{}MHz", h / 1_000_000),
        h => format!("{h}Hz"),
    }
}

/// The devfreq family's registry entry.
pub(super) static FAMILY: Family = Family {
    head: Some("devfreq"),
    parse: Some(parse_devfreq),
    shapes,
    owns,
    doc,
};

fn shapes(_: &[&str]) -> Vec<Shape> {
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

fn owns(path: &Path, _: &Path) -> bool {
    let Some(c) = super::below(path, DEVFREQ_DIR) else {
        return false;
    };
    matches!(c.as_slice(), [d, f] if is_device_name(d) && [MIN_FREQ, MAX_FREQ, GOVERNOR].contains(f))
}

fn doc() -> Vec<DocRow> {
    vec![
        DocRow {
            knob: "`devfreq.NAME.min`, `devfreq.NAME.max`".into(),
            values: "frequency (`300MHz`, `1.2GHz`), written in Hz",
            merge: MergePolicy::LargestWins,
            file: format!("`{DEVFREQ_DIR}/NAME/{{{MIN_FREQ},{MAX_FREQ}}}`"),
        },
        DocRow {
            knob: "`devfreq.NAME.governor`".into(),
            values: "a governor the device offers (`available_governors`)",
            merge: MergePolicy::FirstWins,
            file: format!("`{DEVFREQ_DIR}/NAME/{GOVERNOR}`"),
        },
    ]
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
