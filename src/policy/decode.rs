//! Turns the position-carrying YAML tree into a [`Policy`], collecting every
//! error with its position instead of stopping at the first.
//!
//! Structure (unknown fields, types, units) and meaning (references between
//! groups, hooks and rules; cpuset subsets; limits that contradict each other)
//! are checked in the same walk, so one `check` run shows all of it.

use super::diag::{hint, Diagnostics};
use super::model::*;
use super::yaml::{Key, Node, Pos, Value};
use crate::units::Size;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

mod grants;
mod groups;
mod kpi; // report.criteria loop_p99, fps_stddev
mod placement;
mod rules;
mod settings;
mod system;
mod tuning;

/// The top-level sections (`targets:` is taken out before decoding).
pub(crate) const TOP_FIELDS: &[&str] = &[
    "version",
    "product",
    "settings",
    "groups",
    "placement",
    "system",
    "hooks",
    "rules",
    "control",
    "report",
];

/// Decodes a parsed document. Returns the policy only when there was no error.
pub(crate) fn decode(doc: &Node, diags: &mut Diagnostics) -> Option<Policy> {
    let before = diags.items.len();
    let mut d = Decoder { diags };
    let policy = d.policy(doc);
    if d.diags.items.len() > before {
        None
    } else {
        policy
    }
}

/// The policy's settings alone (defaults where absent or invalid) and
/// nothing else: what reading the board needs before cluster names and
/// targets are resolved on it.
pub(crate) fn settings_only(doc: &Node) -> Policy {
    let mut scratch = Diagnostics::new("");
    let mut d = Decoder {
        diags: &mut scratch,
    };
    let settings = match &doc.value {
        Value::Map(entries) => entries
            .iter()
            .find(|(k, _)| k.name == "settings")
            .map(|(_, n)| d.settings(n)),
        _ => None,
    };
    Policy {
        product: String::new(),
        settings: settings.unwrap_or_default(),
        groups: Vec::new(),
        placement: Vec::new(),
        system: System::default(),
        hooks: Vec::new(),
        rules: Vec::new(),
        control: Vec::new(),
        report: ReportCriteria::default(),
        binding: Default::default(),
    }
}

struct Decoder<'a> {
    diags: &'a mut Diagnostics,
}

/// The entries of a mapping node, with the unknown ones already reported.
struct Fields<'n> {
    entries: &'n [(Key, Node)],
}

impl<'n> Fields<'n> {
    fn get(&self, name: &str) -> Option<&'n Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == name)
            .map(|(_, v)| v)
    }
    fn key(&self, name: &str) -> Option<&'n Key> {
        self.entries
            .iter()
            .find(|(k, _)| k.name == name)
            .map(|(k, _)| k)
    }
}

static EMPTY: [(Key, Node); 0] = [];

/// `[a-z0-9][a-z0-9_-]{0,63}`: group, hook and rule names.
pub(crate) fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'_' || *b == b'-')
}

fn name_problem(kind: &str, name: &str) -> String {
    if name.contains('/') || name.contains("..") {
        format!(
            "{kind} name `{name}` must not contain `/` or `..`{}",
            if kind == "group" {
                "; nest groups with `children:`"
            } else {
                ""
            }
        )
    } else if name.chars().any(|c| c.is_ascii_uppercase()) {
        format!("{kind} name `{name}` must be lowercase ([a-z0-9][a-z0-9_-]{{0,63}})")
    } else {
        format!("{kind} name `{name}` is not valid: use [a-z0-9][a-z0-9_-]{{0,63}}")
    }
}

impl<'a> Decoder<'a> {
    fn err(&mut self, pos: Pos, msg: impl Into<String>) {
        self.diags.error(pos, msg);
    }

    /// A mapping with a closed set of fields. `null` reads as an empty mapping
    /// (`memory:` with nothing under it).
    fn fields<'n>(&mut self, node: &'n Node, what: &str, allowed: &[&str]) -> Option<Fields<'n>> {
        match &node.value {
            Value::Map(entries) => {
                for (k, _) in entries {
                    if !allowed.contains(&k.name.as_str()) {
                        let h = hint(&k.name, allowed.iter().copied());
                        let h = if h.is_empty() {
                            format!(" (expected one of: {})", allowed.join(", "))
                        } else {
                            h
                        };
                        self.err(k.pos, format!("unknown field `{}` in {what}{h}", k.name));
                    }
                }
                Some(Fields { entries })
            }
            Value::Null => Some(Fields { entries: &EMPTY }),
            _ => {
                self.err(
                    node.pos,
                    format!("{what} must be a mapping, found {}", node.kind()),
                );
                None
            }
        }
    }

    /// A mapping whose keys are names chosen by the user (groups, hooks…).
    fn named_map<'n>(&mut self, node: &'n Node, what: &str) -> &'n [(Key, Node)] {
        match &node.value {
            Value::Map(entries) => entries,
            Value::Null => &EMPTY,
            _ => {
                self.err(
                    node.pos,
                    format!("{what} must be a mapping, found {}", node.kind()),
                );
                &EMPTY
            }
        }
    }

    fn seq<'n>(&mut self, node: &'n Node, what: &str) -> &'n [Node] {
        match &node.value {
            Value::Seq(items) => items,
            Value::Null => &[],
            _ => {
                self.err(
                    node.pos,
                    format!("{what} must be a list, found {}", node.kind()),
                );
                &[]
            }
        }
    }

    fn text(&mut self, node: &Node, what: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            Value::Int(_) | Value::Float(_) => node.scalar_text(),
            _ => {
                self.err(
                    node.pos,
                    format!("{what} must be a string, found {}", node.kind()),
                );
                None
            }
        }
    }

    fn opt_text(&mut self, f: &Fields, name: &str, what: &str) -> Option<String> {
        f.get(name).and_then(|n| self.text(n, what))
    }

    fn bool(&mut self, node: &Node, what: &str) -> Option<bool> {
        match node.value {
            Value::Bool(b) => Some(b),
            _ => {
                self.err(
                    node.pos,
                    format!("{what} must be true or false, found {}", node.kind()),
                );
                None
            }
        }
    }

    fn int(&mut self, node: &Node, what: &str, min: i64, max: i64) -> Option<i64> {
        let v = match &node.value {
            Value::Int(i) => Some(*i),
            Value::Str(s) => s.trim().parse::<i64>().ok(),
            _ => None,
        };
        match v {
            Some(i) if (min..=max).contains(&i) => Some(i),
            Some(i) => {
                self.err(
                    node.pos,
                    format!("{what} must be between {min} and {max}, found {i}"),
                );
                None
            }
            None => {
                self.err(
                    node.pos,
                    format!("{what} must be an integer, found {}", describe(node)),
                );
                None
            }
        }
    }

    /// Parses a scalar with a unit parser, reporting its error at the node.
    fn unit<T, E: std::fmt::Display>(
        &mut self,
        node: &Node,
        what: &str,
        parse: impl Fn(&str) -> Result<T, E>,
    ) -> Option<T> {
        let text = match node.scalar_text() {
            Some(t) => t,
            None => {
                self.err(
                    node.pos,
                    format!("{what} must be a scalar value, found {}", node.kind()),
                );
                return None;
            }
        };
        match parse(text.trim()) {
            Ok(v) => Some(v),
            Err(e) => {
                self.err(node.pos, format!("{what}: {e}"));
                None
            }
        }
    }

    fn duration(&mut self, node: &Node, what: &str) -> Option<Duration> {
        self.unit(node, what, parse_duration)
    }

    fn policy(&mut self, doc: &Node) -> Option<Policy> {
        let top = match &doc.value {
            Value::Map(_) => self.fields(doc, "the policy", TOP_FIELDS)?,
            Value::Null => {
                self.err(
                    Pos::new(1, 1),
                    "the policy is empty; expected a mapping starting with `version: 1`",
                );
                return None;
            }
            _ => {
                self.err(
                    doc.pos,
                    format!(
                        "the policy must be a mapping (version, groups, …), found {}",
                        doc.kind()
                    ),
                );
                return None;
            }
        };

        match top.get("version") {
            None => self.err(Pos::new(1, 1), "missing `version: 1`"),
            Some(n) => {
                if n.value != Value::Int(1) {
                    self.err(
                        n.pos,
                        format!(
                            "unsupported policy version {}; only `version: 1` exists",
                            describe(n)
                        ),
                    );
                }
            }
        }
        let product = self
            .opt_text(&top, "product", "product")
            .unwrap_or_default();
        let settings = match top.get("settings") {
            Some(n) => self.settings(n),
            None => Settings::default(),
        };

        let mut groups = Vec::new();
        if let Some(n) = top.get("groups") {
            for (k, v) in self.named_map(n, "groups") {
                if let Some(g) = self.group(k, v, "") {
                    groups.push(g);
                }
            }
        }
        self.check_groups(&groups);
        self.check_threaded(&groups);

        let mut hooks = Vec::new();
        if let Some(n) = top.get("hooks") {
            for (k, v) in self.named_map(n, "hooks") {
                if let Some(h) = self.hook(k, v) {
                    hooks.push(h);
                }
            }
        }

        let all: Vec<&Group> = groups.iter().flat_map(|g| g.walk()).collect();
        let group_names: Vec<&str> = all.iter().map(|g| g.name.as_str()).collect();
        let leaf: BTreeMap<&str, bool> =
            // A threaded domain holds processes beside its threaded children.
            all.iter()
                .map(|g| (g.name.as_str(), g.children.iter().all(|c| c.threaded)))
                .collect();
        let hook_names: Vec<&str> = hooks.iter().map(|h| h.name.as_str()).collect();

        let mut placement = Vec::new();
        if let Some(n) = top.get("placement") {
            for item in self.seq(n, "placement") {
                if let Some(p) = self.placement(item, &group_names, &leaf) {
                    self.check_placement_groups(&p, &groups, item.pos);
                    placement.push(p);
                }
            }
        }

        let system = match top.get("system") {
            Some(n) => self.system(n),
            None => System::default(),
        };

        let mut rules = Vec::new();
        if let Some(n) = top.get("rules") {
            let mut seen: BTreeSet<String> = BTreeSet::new();
            for item in self.seq(n, "rules") {
                if let Some((r, pos)) = self.rule(item, &group_names, &hook_names) {
                    if !seen.insert(r.name.clone()) {
                        self.err(pos, format!("duplicate rule name `{}`", r.name));
                    }
                    rules.push(r);
                }
            }
        }

        let mut control = Vec::new();
        if let Some(n) = top.get("control") {
            for item in self.seq(n, "control") {
                if let Some(c) = self.control_grant(item, &group_names) {
                    control.push(c);
                }
            }
        }

        let report = match top.get("report") {
            Some(n) => self.report(n),
            None => ReportCriteria::default(),
        };

        Some(Policy {
            product,
            settings,
            groups,
            placement,
            system,
            hooks,
            rules,
            control,
            report,
            binding: Default::default(),
        })
    }

    fn abs_path(&mut self, node: &Node, what: &str) -> Option<PathBuf> {
        let text = self.text(node, what)?;
        let p = Path::new(&text);
        if !p.is_absolute() {
            self.err(
                node.pos,
                format!("{what} must be an absolute path, found `{text}`"),
            );
            return None;
        }
        if p.components().any(|c| matches!(c, Component::ParentDir)) {
            self.err(node.pos, format!("{what} must not contain `..`: `{text}`"));
            return None;
        }
        Some(p.to_path_buf())
    }
}

/// Character offset of an action's first argument (the knob or hook name):
/// past the verb and the blanks after it.
fn argument_offset(text: &str) -> usize {
    let lead = text.chars().take_while(|c| c.is_whitespace()).count();
    let verb = text
        .chars()
        .skip(lead)
        .take_while(|c| !c.is_whitespace())
        .count();
    let gap = text
        .chars()
        .skip(lead + verb)
        .take_while(|c| c.is_whitespace())
        .count();
    lead + verb + gap
}

fn first_word(s: &str) -> &str {
    s.split_whitespace().next().unwrap_or(s)
}

/// A user or group name as `useradd`/`groupadd` accept portably: 1–32 of
/// `[A-Za-z0-9._-]`, not starting with `-` (a trailing `$` for machine
/// accounts is allowed).
fn valid_account_name(name: &str) -> bool {
    let body = name.strip_suffix('$').unwrap_or(name);
    !body.is_empty()
        && name.len() <= 32
        && !body.starts_with('-')
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn describe(node: &Node) -> String {
    match (&node.value, &node.raw) {
        // Numbers and booleans as written (`1.0`, not the parsed `1`).
        (Value::Int(_) | Value::Float(_) | Value::Bool(_), Some(raw)) => format!("`{raw}`"),
        _ => match node.scalar_text() {
            Some(t) => format!("`{t}`"),
            None => node.kind().to_string(),
        },
    }
}
fn size_gt(a: Size, b: Size) -> bool {
    match (a, b) {
        (Size::Max, Size::Max) => false,
        (Size::Max, _) => true,
        (_, Size::Max) => false,
        (Size::Bytes(x), Size::Bytes(y)) => x > y,
    }
}

fn is_numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|n| !n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()))
}

fn truncate_bytes(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

fn knob_error_text(e: &crate::knobs::KnobError) -> String {
    e.to_string()
}

/// Durations in policy syntax (`500ms`, `30s`, `2m`).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, crate::units::UnitError> {
    crate::units::Duration::parse(s).map(|d| d.0)
}

/// `settings.metrics`, `settings.recorder`, `report.criteria`.
#[cfg(test)]
mod observe_settings_tests {
    use crate::policy::load_bytes;
    use std::time::Duration;

    fn load(settings: &str, report: &str) -> Result<crate::policy::model::Policy, String> {
        let text = format!("version: 1\nsettings:\n{settings}\ngroups:\n  app: {{}}\n{report}");
        load_bytes("t.yaml", text.as_bytes()).map_err(|d| d.to_string())
    }

    #[test]
    fn metrics_settings_decode_with_defaults() {
        let p = load(
            "  metrics:\n    socket: /run/cgwarden/metrics.sock\n    listen: 127.0.0.1:9622\n    textfile: /var/lib/node_exporter/cgwarden.prom\n    interval: 30s",
            "",
        )
        .unwrap();
        let m = &p.settings.metrics;
        assert_eq!(
            m.socket.as_deref(),
            Some(std::path::Path::new("/run/cgwarden/metrics.sock"))
        );
        assert_eq!(m.listen, Some("127.0.0.1:9622".parse().unwrap()));
        assert_eq!(m.interval, Duration::from_secs(30));
        assert!(m.enabled());
        let p = load("  tick: 1s", "").unwrap();
        assert!(!p.settings.metrics.enabled());
        assert!(p.settings.recorder.is_none());
        assert_eq!(p.settings.metrics.interval, Duration::from_secs(15));
    }

    #[test]
    fn metrics_refuses_remote_addresses_unless_allowed_and_relative_paths() {
        let e = load("  metrics:\n    listen: 0.0.0.0:9622", "").unwrap_err();
        assert!(
            e.contains("not a loopback address") && e.contains("allow_remote"),
            "{e}"
        );
        let p = load(
            "  metrics:\n    listen: 0.0.0.0:9622\n    allow_remote: true",
            "",
        )
        .unwrap();
        assert!(p.settings.metrics.allow_remote);
        let e = load("  metrics:\n    listen: localhost", "").unwrap_err();
        assert!(e.contains("address:port"), "{e}");
        assert!(load("  metrics:\n    socket: run/m.sock", "").is_err());
        let e = load("  metrics:\n    textfile: /x.prom\n    interval: 100ms", "").unwrap_err();
        assert!(e.contains("at least 1s"), "{e}");
        let e = load("  metrics:\n    sockett: /x", "").unwrap_err();
        assert!(e.contains("sockett"), "{e}");
    }

    #[test]
    fn recorder_settings_decode_with_defaults_and_bounds() {
        let p = load("  recorder:\n    dir: /var/lib/cgwarden", "").unwrap();
        let r = p.settings.recorder.unwrap();
        assert_eq!(r.interval, Duration::from_secs(10));
        assert_eq!(r.retention, Duration::from_secs(7 * 86400));
        assert_eq!(r.max_size, 64 << 20);
        let p = load(
            "  recorder:\n    dir: /data/rec\n    interval: 5s\n    retention: 3d\n    max_size: 16M",
            "",
        )
        .unwrap();
        let r = p.settings.recorder.unwrap();
        assert_eq!(
            (r.interval, r.retention, r.max_size),
            (
                Duration::from_secs(5),
                Duration::from_secs(3 * 86400),
                16 << 20
            )
        );
        let e = load("  recorder:\n    interval: 5s", "").unwrap_err();
        assert!(e.contains("needs `dir:`"), "{e}");
        let e = load("  recorder:\n    dir: /d\n    max_size: 100K", "").unwrap_err();
        assert!(e.contains("at least 1M"), "{e}");
        let e = load(
            "  recorder:\n    dir: /d\n    interval: 1m\n    retention: 30s",
            "",
        )
        .unwrap_err();
        assert!(e.contains("at least one recorder interval"), "{e}");
    }

    #[test]
    fn report_criteria_decode_with_defaults() {
        let p = load("  tick: 1s", "").unwrap();
        assert_eq!(p.report, crate::policy::model::ReportCriteria::default());
        let p = load(
            "  tick: 1s",
            "report:\n  criteria:\n    oom_kills: 2\n    memory_growth: 10M\n    processes: [camd, npu]\n    thermal_zones: [cpu-thermal]\n    thermal_events: 3\n    restarts: 1\n    memory_full_avg10: 2.5%\n",
        )
        .unwrap();
        let c = &p.report;
        assert_eq!(c.oom_kills, 2);
        assert_eq!(c.memory_growth, 10 << 20);
        assert_eq!(c.processes, vec!["camd".to_string(), "npu".to_string()]);
        assert_eq!(c.thermal_zones, vec!["cpu-thermal".to_string()]);
        assert_eq!((c.thermal_events_per_72h, c.restarts), (3, 1));
        assert_eq!(c.memory_full_avg10, 2.5);
        let e = load(
            "  tick: 1s",
            "report:\n  criteria:\n    memory_growth: max\n",
        )
        .unwrap_err();
        assert!(e.contains("memory_growth"), "{e}");
        let e = load("  tick: 1s", "report:\n  criterias: {}\n").unwrap_err();
        assert!(e.contains("criterias"), "{e}");
    }
}
