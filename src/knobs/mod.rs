//! The knob registry: the closed set of knobs rules, boosts and
//! baselines may change, one module per family, and everything the rest of
//! cgwarden needs to know about them. No other module knows what a knob is:
//! policy validation and its did-you-mean, grant patterns, `plan`, the
//! actuator, the journal's allow-list, the fake tree and docs/policy.md's
//! knob tables all iterate [`FAMILIES`] or ask a family.
//!
//! | family | names | module |
//! |---|---|---|
//! | group | `G.cpu.weight`, `G.memory.high`, … | [`group`] |
//! | cpufreq | `cpufreq.policyN.{min,max,governor,…rate_limit_us}` | [`cpufreq`] |
//! | devfreq | `devfreq.NAME.{min,max,governor}` | [`devfreq`] |
//! | sysctl | `sysctl.NAME` from a closed table | [`sysctl`] |
//! | zram | `zram.zramN.{mem_limit,swap_priority}` | [`zram`] |
//! | latency | `latency.cpuN`, `latency.global` | [`latency`] |
//! | realtime switch | no names: `system.realtime`'s files | [`system`] |
//!
//! A family owns its name grammar (its [`Family::parse`]), its files beneath
//! the root (path functions in its module), its rendering and read-back
//! (through [`ValueKind`], shared), its merge direction
//! ([`Knob::merge_policy`]), its range, its journal pattern
//! ([`Family::owns`]: the journal's allow-list is the union, never a second
//! list), its fake-tree default and its rows in the docs ([`doc_table`],
//! checked against docs/policy.md by a test). Adding a knob to a family is a
//! change to that family's module (a sysctl: one row of [`sysctl::TABLE`]).
//!
//! The value types and grammars the families share live in [`value`].
//!
//! Decisions where the SPEC is silent:
//! - `pids.max` values are [`KnobValue::Count`]: `Some(n)` for a number
//!   (0..=4194304, the kernel's PID_MAX_LIMIT), `None` for `max`.
//! - `cpu.max` share `P%` is `P × 1000` µs per 100000 µs period, rounded to
//!   the microsecond; it must be at least 1% (the kernel's minimum quota is
//!   1 ms). The `QUOTA/PERIOD` form needs a period of 1ms..=1s, a quota of at
//!   least 1ms and at most 8192 periods (one per possible CPU).
//! - `uclamp.*` take at most two decimals, as the kernel file does.
//! - `zram.DEV.mem_limit` takes bytes only (`0` lifts the limit; the kernel
//!   does not understand `max`).
//! - cpufreq policies are `policyN`, zram devices `zramN`, governors
//!   `[a-z0-9_]{1,15}`.
//! - A family's head (`cpufreq`, `sysctl`, `zram`, `latency`) as the first
//!   part of a knob always means that family, so a group with one of these
//!   names ([`family_heads`]) cannot be addressed by a knob.
//! - `raise` never lowers a knob and `lower` never raises it: a current value
//!   already past the limit is left alone.
//! - `latency.*` knobs take whole microseconds up to
//!   [`latency::LATENCY_MAX_US`] and merge [`MergePolicy::Smallest`];
//!   `latency.global` is [`Knob::held_by_daemon`].

pub(crate) mod board;
pub(crate) mod clusters;
pub(crate) mod cpufreq;
pub(crate) mod devfreq;
pub(crate) mod group;
pub(crate) mod human;
pub(crate) mod latency;
pub(crate) mod normalize;
pub(crate) mod order;
pub(crate) mod sysctl;
pub(crate) mod system;
pub(crate) mod value;
pub(crate) mod zram;

pub(crate) use cpufreq::CpufreqAttr;
pub(crate) use devfreq::DevfreqAttr;
pub(crate) use group::GroupKnob;

pub(crate) use sysctl::sysctl_range;
pub(crate) use value::{CpuMax, KnobValue};
pub(crate) use zram::ZramAttr;

use crate::units::{CpuList, Frequency, Percent, Size, UnitError};
use latency::{parse_latency_value, parse_resume_latency_kernel};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use value::{parse_count, parse_int, parse_partition, parse_uclamp, parse_weight};

/// How a boost request names a cap (`boost --cap KNOB=VALUE`): the key
/// `cap KNOB` in the Boost call's `knobs` map (no knob name has a blank).
pub(crate) const CAP_KEY_PREFIX: &str = "cap ";

/// Whether `name` follows the naming rule `[a-z0-9][a-z0-9_-]{0,63}`
/// (groups, hooks, rules).
pub(crate) fn is_valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_lowercase() || b.is_ascii_digit() => {}
        _ => return false,
    }
    name.len() <= 64
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// The closest candidate to `input` by edit distance (transpositions count
/// once), if it is close enough to be a plausible typo. Shared with the rule
/// language parser so both suggest alike.
pub(crate) fn suggest<'a>(
    input: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::osa_distance(input, c), c))
        .filter(|(d, c)| *d > 0 && *d <= (c.chars().count() / 3).max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// A knob text that is not one of the closed set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnobError {
    pub(crate) message: String,
    /// A suggestion such as "did you mean `inference.memory.high`?".
    pub(crate) hint: Option<String>,
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.hint {
            Some(hint) => write!(f, "{}, {}", self.message, hint),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for KnobError {}

impl KnobError {
    fn new(message: impl Into<String>) -> Self {
        KnobError {
            message: message.into(),
            hint: None,
        }
    }

    fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

fn did_you_mean(candidate: Option<String>) -> Option<String> {
    candidate.map(|c| format!("did you mean `{c}`?"))
}

/// One knob of the closed set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Knob {
    Group {
        group: String,
        knob: GroupKnob,
    },
    Cpufreq {
        policy: String,
        attr: CpufreqAttr,
    },
    /// `devfreq.NAME.ATTR` (GPU, bandwidth monitors, UFS).
    Devfreq {
        device: String,
        attr: DevfreqAttr,
    },
    /// Dotted sysctl name without the `sysctl.` prefix, e.g. `vm.swappiness`.
    Sysctl(String),
    Zram {
        device: String,
        attr: ZramAttr,
    },
    /// `latency.cpuN`: the resume latency this CPU tolerates,
    /// `/sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us`.
    LatencyCpu(u32),
    /// `latency.global`: the CPU latency QoS request the daemon holds open
    /// on `/dev/cpu_dma_latency` ([`Knob::held_by_daemon`]).
    LatencyGlobal,
}

/// How competing claims on one knob are merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum MergePolicy {
    /// More means more resource or speed: the largest claim wins.
    Largest,
    /// The claim ranked first (boosts, then rules in policy order) wins.
    First,
    /// Less means more performance: the smallest claim wins (`latency.*`:
    /// less tolerated wake-up latency keeps the CPU out of deep idle).
    Smallest,
}

/// The type of value a knob takes, which its family names
/// ([`Family::kind`]); callers go through [`Knob::parse_value`] and
/// [`Knob::parse_kernel`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum ValueKind {
    Size {
        allow_max: bool,
    },
    /// cpufreq's kHz.
    Frequency,
    Weight,
    Int {
        min: i64,
        max: i64,
    },
    Count,
    CpuMax,
    Uclamp,
    CpuList,
    /// A word the family's parser accepts (a governor, a fallback list).
    Word(fn(&str) -> Result<String, UnitError>),
    /// `cpuset.cpus.partition`: member, root or isolated.
    Partition,
    /// `latency.*`: a duration in whole µs up to [`latency::LATENCY_MAX_US`].
    Latency,
    /// A frequency in Hz, in the family's policy spelling.
    Hz(fn(&str) -> Result<u64, UnitError>),
}

impl Knob {
    /// The family this knob belongs to: the registration of each family's
    /// variant, and the one `match` on a knob outside its family's module.
    pub(crate) fn family(&self) -> &'static dyn Family {
        match self {
            Knob::Group { .. } => &group::FAMILY,
            Knob::Cpufreq { .. } => &cpufreq::FAMILY,
            Knob::Devfreq { .. } => &devfreq::FAMILY,
            Knob::Sysctl(_) => &sysctl::FAMILY,
            Knob::Zram { .. } => &zram::FAMILY,
            Knob::LatencyCpu(_) | Knob::LatencyGlobal => &latency::FAMILY,
        }
    }

    /// Parses a knob name such as `inference.memory.high`: the family is
    /// the one whose head the name starts with, else the group family.
    pub(crate) fn parse(text: &str) -> Result<Knob, KnobError> {
        let Some((head, rest)) = text.split_once('.') else {
            let grammars: Vec<&str> = FAMILIES.iter().filter_map(|f| f.grammar()).collect();
            return Err(KnobError::new(format!(
                "unknown knob `{text}`: expected GROUP.KNOB, {}",
                grammars.join(", ")
            )));
        };
        match FAMILIES.iter().find(|f| f.head() == Some(head)) {
            Some(f) => f.parse(text, rest),
            None => group::parse_group_knob(text, head, rest),
        }
    }

    /// The group a group knob belongs to.
    pub(crate) fn group(&self) -> Option<&str> {
        self.group_knob().map(|(group, _)| group)
    }

    /// A group knob's group and the knob of the group.
    pub(crate) fn group_knob(&self) -> Option<(&str, GroupKnob)> {
        match self {
            Knob::Group { group, knob } => Some((group, *knob)),
            _ => None,
        }
    }

    /// Whether the knob is a request only a running daemon can hold (the
    /// kernel drops it when its file descriptor closes): `apply` cannot set
    /// it and writes nothing for it; it is never journalled (there is
    /// nothing to restore).
    pub(crate) fn held_by_daemon(&self) -> bool {
        self.family().held_by_daemon(self)
    }

    /// Whether the knob is a ceiling a `cap` may hold ([`cappable`] lists
    /// them).
    pub(crate) fn is_ceiling(&self) -> bool {
        self.family().is_ceiling(self)
    }

    /// Whether a write of `other` destroys this knob's file and recreates it
    /// with the kernel's default, so this knob must be written again after
    /// it (a cpufreq governor switch recreates its tunables directory).
    pub(crate) fn recreated_by(&self, other: &Knob) -> bool {
        self.family().recreated_by(self, other)
    }

    /// How claims on this knob merge: its family says.
    pub(crate) fn merge_policy(&self) -> MergePolicy {
        self.family().merge(self)
    }

    fn value_kind(&self) -> ValueKind {
        self.family().kind(self)
    }

    /// Whether `raise`/`lower` can step this knob (its value is a number).
    pub(crate) fn is_numeric(&self) -> bool {
        !matches!(
            self.value_kind(),
            ValueKind::CpuMax
                | ValueKind::CpuList
                | ValueKind::Word(_)
                | ValueKind::Partition
                | ValueKind::Latency
        )
    }

    /// Parses a value for this knob into its typed form.
    pub(crate) fn parse_value(&self, text: &str) -> Result<KnobValue, UnitError> {
        match self.value_kind() {
            ValueKind::Size { allow_max } => {
                let size = Size::parse(text)?;
                if !allow_max && size == Size::Max {
                    return Err(UnitError::new(
                        "size",
                        text,
                        format!("`{self}` takes bytes (0 lifts the limit), not `max`"),
                    ));
                }
                Ok(KnobValue::Size(size))
            }
            ValueKind::Frequency => Frequency::parse(text).map(KnobValue::Frequency),
            ValueKind::Weight => parse_weight(text).map(KnobValue::Weight),
            ValueKind::Int { min, max } => parse_int(text, min, max).map(KnobValue::Int),
            ValueKind::Count => parse_count(text).map(KnobValue::Count),
            ValueKind::CpuMax => CpuMax::parse(text).map(KnobValue::CpuMax),
            ValueKind::Uclamp => parse_uclamp(text).map(KnobValue::Percent),
            ValueKind::CpuList => CpuList::parse(text).map(KnobValue::CpuList),
            ValueKind::Word(parse) => parse(text).map(KnobValue::Word),
            ValueKind::Partition => parse_partition(text).map(KnobValue::Word),
            ValueKind::Latency => parse_latency_value(text).map(|us| KnobValue::Latency(Some(us))),
            ValueKind::Hz(parse) => parse(text).map(KnobValue::Hz),
        }
    }

    /// The exact text written to the knob's kernel file for `value`
    /// (`io.weight` takes `default N`; everything else its kernel form).
    pub(crate) fn render(&self, value: &KnobValue) -> String {
        self.family().render(self, value)
    }

    /// Parses what the knob's kernel file holds, in the kernel's rendering
    /// (not the policy's spelling): `max` for a full uclamp, `80.00`, an
    /// empty cpu list, `default 100` for io.weight, `max 100000` for cpu.max,
    /// sizes and frequencies as plain numbers. [`Knob::render`] of a value
    /// parses back to the same value. An invalid partition
    /// (`isolated invalid (reason)`) is an error carrying the kernel's reason.
    pub(crate) fn parse_kernel(&self, text: &str) -> Result<KnobValue, UnitError> {
        let t = text.trim();
        let number = |kind: &'static str| {
            t.parse::<u64>()
                .map_err(|_| UnitError::new(kind, t, "expected the kernel's decimal number"))
        };
        match self.value_kind() {
            ValueKind::Size { .. } => match t {
                "max" => Ok(KnobValue::Size(Size::Max)),
                _ => number("size").map(|b| KnobValue::Size(Size::Bytes(b))),
            },
            ValueKind::Frequency => {
                number("frequency").map(|khz| KnobValue::Frequency(Frequency { khz }))
            }
            ValueKind::Weight => {
                // io.weight: `default N` first, then per-device lines.
                let w = t
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("default "))
                    .unwrap_or(t)
                    .trim();
                w.parse::<u64>()
                    .map(KnobValue::Weight)
                    .map_err(|_| UnitError::new("weight", t, "expected `N` or `default N`"))
            }
            ValueKind::Int { .. } => t
                .parse::<i64>()
                .map(KnobValue::Int)
                .map_err(|_| UnitError::new("integer", t, "expected one whole number")),
            ValueKind::Count => parse_count(t).map(KnobValue::Count),
            ValueKind::CpuMax => CpuMax::parse_kernel(t).map(KnobValue::CpuMax),
            ValueKind::Uclamp => match t {
                "max" => Ok(KnobValue::Percent(Percent(100.0))),
                _ => t
                    .parse::<f64>()
                    .ok()
                    .and_then(Percent::new)
                    .map(KnobValue::Percent)
                    .ok_or_else(|| {
                        UnitError::new("percent", t, "expected `max` or a percentage like `80.00`")
                    }),
            },
            ValueKind::CpuList => CpuList::parse_kernel(t).map(KnobValue::CpuList),
            ValueKind::Word(_) => Ok(KnobValue::Word(t.to_string())),
            ValueKind::Hz(_) => t
                .parse::<u64>()
                .map(KnobValue::Hz)
                .map_err(|_| UnitError::new("frequency", t, "expected the kernel's decimal Hz")),
            ValueKind::Latency => parse_resume_latency_kernel(t).map(KnobValue::Latency),
            ValueKind::Partition => {
                let mut words = t.splitn(2, ' ');
                let mode = words.next().unwrap_or("");
                match words.next() {
                    None => parse_partition(mode).map(KnobValue::Word),
                    Some(rest) => Err(UnitError::new(
                        "partition",
                        t,
                        format!("the kernel reports the partition {mode} as {rest}"),
                    )),
                }
            }
        }
    }
}

impl fmt::Display for Knob {
    /// The policy spelling; parses back to the same knob.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.family().fmt(self, f)
    }
}

impl FromStr for Knob {
    type Err = KnobError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Knob::parse(s)
    }
}

// ---------------------------------------------------------------------------
// The registry

/// One piece of a knob name's shape: a fixed byte, or a run of `min..=max`
/// bytes of a class (grant patterns are matched against these shapes, since
/// the numbered families are infinite sets).
#[derive(Clone, Copy)]
pub(crate) enum Tok {
    Lit(u8),
    Run(fn(u8) -> bool, usize, usize),
}

/// The shape of one set of knob names.
pub(crate) type Shape = Vec<Tok>;

/// `pre`, an optional run, `post`.
pub(crate) fn shape(pre: &str, run: Option<Tok>, post: &str) -> Shape {
    pre.bytes()
        .map(Tok::Lit)
        .chain(run)
        .chain(post.bytes().map(Tok::Lit))
        .collect()
}

/// A decimal digit (the numbered parts of names: `policy4`, `zram0`, `cpu7`).
pub(crate) fn digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// One row of docs/policy.md's knob table.
#[cfg_attr(not(test), allow(dead_code))] // read by the docs test (doc_table)
pub(crate) struct DocRow {
    pub(crate) knob: String,
    pub(crate) values: &'static str,
    pub(crate) merge: MergePolicy,
    pub(crate) file: String,
}

/// Read access to a root's files by device path, which `kernel::Root`
/// gives: the families read a knob's value and the board's bounds through
/// it, so the knowledge stays here and the syscalls in `kernel`.
pub(crate) trait Files {
    /// The file's text; `None` when it cannot be read.
    fn text(&self, path: &Path) -> Option<String>;
    /// The names in a directory (none when it cannot be read).
    fn names(&self, dir: &Path) -> Vec<String>;
    fn exists(&self, path: &Path) -> bool;
    fn is_dir(&self, path: &Path) -> bool;
}

/// What finding a knob's file takes besides the knob.
pub(crate) struct Places<'a> {
    pub(crate) files: &'a dyn Files,
    /// Group name and file name → the file in the group's directory (`Err`:
    /// the group is not in the policy).
    pub(crate) group_file: &'a dyn Fn(&str, &str) -> Result<PathBuf, String>,
    /// cpufreq policy → the governor it will run once the writes queued
    /// (daemon) or planned (`apply`) are made.
    pub(crate) governors: &'a HashMap<String, String>,
}

/// Where a knob stands among the writes it depends on ([`order`]): in the
/// set of its family and owner (a group, a cpufreq policy, a devfreq
/// device), at a rank, or as the floor or ceiling of a frequency pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Rank(usize),
    Floor,
    Ceiling,
}

/// Who a family is: its name, the head of its knob names, their grammar.
pub(crate) struct Id {
    pub(crate) name: &'static str,
    pub(crate) head: Option<&'static str>,
    pub(crate) grammar: Option<&'static str>,
}

/// A knob family: one implementation per family, in the family's module,
/// and one line in [`FAMILIES`] (plus its variant of [`Knob`] and the arm
/// of [`Knob::family`]). Plan, apply, the daemon's writes, verify, the
/// drift guard, boosts, caps, the journal's allow-list, the board's bounds
/// and the docs' knob table ask the family; none of them names one.
pub(crate) trait Family: Sync {
    /// Who the family is.
    fn id(&self) -> Id;
    /// The first part of the family's knob names; `None` for the group
    /// family (`G.…`, the fallback) and the realtime switch (no names).
    fn head(&self) -> Option<&'static str> {
        self.id().head
    }
    /// The family's key in the write order and in messages.
    fn name(&self) -> &'static str {
        self.id().name
    }
    /// `head.…` for messages.
    fn grammar(&self) -> Option<&'static str> {
        self.id().grammar
    }
    /// Parses a knob of the family: the whole text (for messages) and the
    /// part after `head.`.
    fn parse(&self, text: &str, _rest: &str) -> Result<Knob, KnobError> {
        Err(KnobError::new(format!("unknown knob `{text}`")))
    }
    /// The shapes of its knob names, for grant patterns (group knobs are
    /// those of the policy's `groups`).
    fn shapes(&self, groups: &[&str]) -> Vec<Shape>;
    /// The policy spelling of one of its knobs.
    fn fmt(&self, _knob: &Knob, _f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Ok(())
    }
    /// The type of value the knob takes.
    fn kind(&self, _knob: &Knob) -> ValueKind {
        ValueKind::Int {
            min: i64::MIN,
            max: i64::MAX,
        }
    }
    /// How claims on the knob merge.
    fn merge(&self, _knob: &Knob) -> MergePolicy {
        MergePolicy::First
    }
    /// Whether the knob is a ceiling a `cap` may hold.
    fn is_ceiling(&self, _knob: &Knob) -> bool {
        false
    }
    /// The ceilings' names for messages (`cpufreq.POLICY.max`).
    fn ceilings(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether only a running daemon can hold the knob.
    fn held_by_daemon(&self, _knob: &Knob) -> bool {
        false
    }
    /// Whether a write of `other` recreates the knob's file.
    fn recreated_by(&self, _knob: &Knob, _other: &Knob) -> bool {
        false
    }
    /// The cpufreq policy whose governor a write of the knob switches (its
    /// tunables move to that governor's directory).
    fn switches_governor<'a>(&self, _knob: &'a Knob) -> Option<&'a str> {
        None
    }
    /// Why the knob cannot be read back on a root that does not swap (a
    /// fake tree, where `apply` skips `swapon`).
    fn unverifiable_without_swap(&self, _knob: &Knob) -> Option<&'static str> {
        None
    }
    /// The text written to the knob's file for `value`.
    fn render(&self, _knob: &Knob, value: &KnobValue) -> String {
        value.kernel()
    }
    /// The knob's owner and slot among writes made together ([`order`]);
    /// `None`: it depends on no other write.
    fn order<'a>(&self, _knob: &'a Knob) -> Option<(&'a str, Slot)> {
        None
    }
    /// `value` of the knob within what the board offers: why not, if not.
    fn check(&self, _knob: &Knob, _value: &KnobValue, _board: &board::Board) -> Result<(), String> {
        Ok(())
    }
    /// Reads the family's bounds from a board's files into `board`.
    fn read_bounds(&self, _files: &dyn Files, _board: &mut board::Board) {}
    /// The file the knob lives in, for reading and for the journal; `Err`
    /// for a knob without a file.
    fn path(&self, knob: &Knob, at: &Places<'_>) -> Result<PathBuf, String>;
    /// The file the knob is written in and the text written for `value`;
    /// `Err` says why it cannot be written now.
    fn target(
        &self,
        knob: &Knob,
        value: &KnobValue,
        at: &Places<'_>,
    ) -> Result<(PathBuf, String), String> {
        Ok((self.path(knob, at)?, self.render(knob, value)))
    }
    /// Why `apply` cannot write the knob on this board, if it cannot: its
    /// file is absent (the family names what that means), or the value is
    /// one the board refuses.
    fn unavailable(&self, knob: &Knob, value: &KnobValue, at: &Places<'_>) -> Option<String> {
        match self.target(knob, value, at) {
            Err(e) => Some(e),
            Ok((path, _)) if !at.files.exists(&path) => Some(format!(
                "{knob}: {} does not exist on this kernel",
                path.display()
            )),
            Ok(_) => None,
        }
    }
    /// Where `verify` reads the knob.
    fn read_path(&self, knob: &Knob, at: &Places<'_>) -> PathBuf {
        self.path(knob, at).unwrap_or_default()
    }
    /// The knob's value as the kernel holds it; `None` when it cannot be
    /// read or parsed.
    fn read(&self, knob: &Knob, at: &Places<'_>) -> Option<KnobValue> {
        let text = at.files.text(&self.path(knob, at).ok()?)?;
        knob.parse_kernel(&text).ok()
    }
    /// Whether a canonical device path is one of its files: the journal's
    /// allow-list is the union of these.
    fn owns(&self, path: &Path, cgroup_root: &Path) -> bool;
    /// What the journal keeps as the original of one of its files that
    /// reads `read`, where that is not what the file takes back.
    fn restorable(&self, _path: &Path, _cgroup_root: &Path, _read: &str) -> Option<String> {
        None
    }
    /// For a file the kernel couples with another (writing one changes
    /// the other behind it): the pair `(amount, ratio)`, which the journal
    /// records and `reset` restores together.
    fn coupled(&self, _path: &Path) -> Option<(PathBuf, PathBuf)> {
        None
    }
    /// The files a fresh kernel has for the family and what they read,
    /// for the fake tree (device paths).
    fn fake_defaults(&self) -> Vec<(PathBuf, &'static str)> {
        Vec::new()
    }
    /// Its rows of the docs' knob table.
    #[cfg_attr(not(test), allow(dead_code))] // read by the docs test (doc_table)
    fn doc(&self) -> Vec<DocRow>;
}

/// Every knob family.
pub(crate) static FAMILIES: [&dyn Family; 7] = [
    &group::FAMILY,
    &cpufreq::FAMILY,
    &devfreq::FAMILY,
    &sysctl::FAMILY,
    &zram::FAMILY,
    &latency::FAMILY,
    &system::FAMILY,
];

/// Why `knob` cannot be capped: it is no ceiling. The message lists the
/// ceilings the families name (`cpufreq.POLICY.max`, …).
pub(crate) fn not_a_ceiling(knob: &Knob) -> String {
    let ceilings: Vec<&str> = FAMILIES
        .iter()
        .flat_map(|f| f.ceilings().iter().copied())
        .collect();
    format!(
        "`{knob}` cannot be capped: a cap holds a ceiling ({})",
        ceilings.join(", ")
    )
}

/// The heads of the named families (`cpufreq`, `sysctl`, `zram`,
/// `latency`): reserved, so no group may take one of these names.
pub(crate) fn family_heads() -> impl Iterator<Item = &'static str> + Clone {
    FAMILIES.iter().filter_map(|f| f.head())
}

/// The rule language's name for the whole machine: `host.memory.available`,
/// `host.cpu.some.avg10`, `host.vmstat.FIELD`. The recorder's machine row,
/// the report's machine section and the metrics' machine label use it too,
/// so no group may take it.
pub(crate) const MACHINE: &str = "host";

/// Names no group may take, each with what rules read under it: the
/// family heads, `thermal` (zones), `cooling` (cooling devices), `kpi`
/// (application KPIs) and [`MACHINE`]. Every other name is a group's to
/// take, `system` included (the seed's layout partitions a board into
/// `realtime`, `inference`, `vision` and `system`). One list: `check`
/// enforces it, docs/policy.md says it (a test holds it to it).
pub fn reserved_group_names() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> =
        family_heads().map(|h| (h, "a knob family")).collect();
    out.push(("thermal", "thermal zones"));
    out.push(("cooling", "cooling devices"));
    out.push(("kpi", "application KPIs"));
    out.push((MACHINE, "the whole machine"));
    out
}

/// Whether canonical device path `path` is a file some family owns (the
/// journal's allow-list: cgwarden records and `reset` restores only these).
pub(crate) fn owns_file(path: &Path, cgroup_root: &Path) -> bool {
    FAMILIES.iter().any(|f| f.owns(path, cgroup_root))
}

/// What the journal keeps as the original of `path` (a file some family
/// owns) that reads `read`: a value the file takes back. Most files read back
/// what they take; where a family's file does not, the family says what to
/// keep (zram's `comp_algorithm`, the group family's partition and
/// `io.weight`).
pub(crate) fn restorable(path: &Path, cgroup_root: &Path, read: &str) -> String {
    FAMILIES
        .iter()
        .find_map(|f| f.restorable(path, cgroup_root, read))
        .unwrap_or_else(|| read.to_string())
}

/// The pair of files the kernel couples `path` with, if any family's
/// ([`Family::coupled`]).
pub(crate) fn coupled(path: &Path) -> Option<(PathBuf, PathBuf)> {
    FAMILIES.iter().find_map(|f| f.coupled(path))
}

/// The shapes of every knob name of a policy with `groups`.
pub(crate) fn shapes(groups: &[&str]) -> Vec<Shape> {
    FAMILIES.iter().flat_map(|f| f.shapes(groups)).collect()
}

/// docs/policy.md's knob table, generated from the families (a test checks
/// the document holds exactly this).
#[cfg(test)]
pub(crate) fn doc_table() -> String {
    let mut out = String::from("| knob | values | merge | file |\n|---|---|---|---|\n");
    for f in FAMILIES {
        let rows = f.doc();
        // The sysctl family has its own table (one row per sysctl).
        if f.head() == Some("sysctl") {
            out.push_str(
                "| `sysctl.NAME` for each NAME of the sysctl table below | integer | first wins | `/proc/sys/NAME` (dots as slashes) |\n",
            );
            continue;
        }
        for r in rows {
            let merge = match r.merge {
                MergePolicy::Largest => "largest wins",
                MergePolicy::First => "first wins",
                MergePolicy::Smallest => "smallest wins",
            };
            out.push_str(&format!(
                "| {} | {} | {merge} | {} |\n",
                r.knob, r.values, r.file
            ));
        }
    }
    out
}

/// The components of `path` below directory `dir`, or `None` when it is not
/// below it (the families' journal patterns match these).
pub(crate) fn below<'a>(path: &'a Path, dir: &str) -> Option<Vec<&'a str>> {
    let rest = path.strip_prefix(dir).ok()?;
    rest.iter().map(|c| c.to_str()).collect()
}

/// `prefix` followed by a decimal number of 1–5 digits (`policy4`, `zram0`).
pub(crate) fn is_numbered(text: &str, prefix: &str) -> bool {
    text.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.len() <= 5 && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests;
