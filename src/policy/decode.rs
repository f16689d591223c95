//! Turns the position-carrying YAML tree into a [`Policy`], collecting every
//! error with its position instead of stopping at the first.
//!
//! Structure (unknown fields, types, units) and meaning (references between
//! groups, hooks and rules; cpuset subsets; limits that contradict each other)
//! are checked in the same walk, so one `check` run shows all of it.

use super::diag::{hint, Diagnostics};
use super::expr::{self, Action};
use super::model::*;
use super::yaml::{Key, Node, Pos, Value};
use crate::knobs::{CpuMax, Knob, KnobValue};
use crate::units::{CpuList, Frequency, Percent, Size};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

mod kpi; // issue 26: report.criteria loop_p99, fps_stddev
mod tuning;

/// The bounds of a `when:` stall window (SPEC §3), enforced by the expression parser.
const TOP_FIELDS: &[&str] = &[
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
pub fn decode(doc: &Node, diags: &mut Diagnostics) -> Option<Policy> {
    let before = diags.items.len();
    let mut d = Decoder { diags };
    let policy = d.policy(doc);
    if d.diags.items.len() > before {
        None
    } else {
        policy
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
pub fn valid_name(name: &str) -> bool {
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
        })
    }

    /// One `control:` entry (SPEC §5 "Identity and grants"): exactly one of
    /// `group:`/`user:`/`uid:`, a non-empty `boost:` list of knob patterns
    /// that can each match some knob of this policy, `max_duration`
    /// (default 1h, at most 24h) and `max_boosts` (default 4, 1..=1000).
    fn control_grant(&mut self, node: &Node, groups: &[&str]) -> Option<ControlGrant> {
        const WHAT: &str = "control entry";
        let f = self.fields(
            node,
            WHAT,
            &[
                "group",
                "user",
                "uid",
                "boost",
                "cap",
                "max_duration",
                "max_boosts",
            ],
        )?;
        let mut given: Vec<&Key> = ["group", "user", "uid"]
            .iter()
            .filter_map(|k| f.key(k))
            .collect();
        given.sort_by_key(|k| k.pos);
        let subject = match given.as_slice() {
            [] => {
                self.err(
                    node.pos,
                    "control entry needs exactly one of `group:`, `user:` or `uid:` (whom it grants to)",
                );
                None
            }
            [_] => self.control_subject(&f),
            [_, second, ..] => {
                let names: Vec<String> = given.iter().map(|k| format!("`{}:`", k.name)).collect();
                self.err(
                    second.pos,
                    format!(
                        "control entry has {}; give exactly one of `group:`, `user:` or `uid:` (one entry per subject)",
                        names.join(" and ")
                    ),
                );
                None
            }
        };

        // `cap:` (issue 24): knob patterns this entry may cap, apart from raises.
        let mut cap = Vec::new();
        if let Some(c) = f.get("cap") {
            for item in self.seq(c, "control.cap") {
                if let Some(p) = self.knob_pattern(item, groups) {
                    cap.push(p);
                }
            }
        }
        let mut boost = Vec::new();
        match f.get("boost") {
            None if f.get("cap").is_some() => {}
            None => self.err(
                node.pos,
                "control entry needs `boost:`, a list of knob patterns such as [\"cpufreq.*.min\", \"vision.memory.high\"]",
            ),
            Some(b) => {
                let items = self.seq(b, "control.boost");
                if items.is_empty() && matches!(b.value, Value::Seq(_) | Value::Null) {
                    self.err(
                        b.pos,
                        "control.boost is empty; list the knob patterns this entry may boost (an entry that grants nothing is a mistake)",
                    );
                }
                for item in items {
                    if let Some(p) = self.knob_pattern(item, groups) {
                        boost.push(p);
                    }
                }
            }
        }

        let max_duration = match f.get("max_duration") {
            None => DEFAULT_CONTROL_MAX_DURATION,
            Some(n) => match self.duration(n, "control.max_duration") {
                Some(d) if d.is_zero() => {
                    self.err(n.pos, "control.max_duration must be longer than 0");
                    DEFAULT_CONTROL_MAX_DURATION
                }
                Some(d) if d > MAX_CONTROL_MAX_DURATION => {
                    self.err(
                        n.pos,
                        format!(
                            "control.max_duration {} is longer than 24h, the most a boost may be granted; a change meant to last belongs in the policy",
                            describe(n)
                        ),
                    );
                    DEFAULT_CONTROL_MAX_DURATION
                }
                Some(d) => d,
                None => DEFAULT_CONTROL_MAX_DURATION,
            },
        };
        let max_boosts = f
            .get("max_boosts")
            .and_then(|n| {
                self.int(
                    n,
                    "control.max_boosts",
                    1,
                    i64::from(MAX_CONTROL_MAX_BOOSTS),
                )
            })
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(DEFAULT_CONTROL_MAX_BOOSTS);

        Some(ControlGrant {
            subject: subject?,
            boost,
            cap,
            max_duration,
            max_boosts,
            pos: node.pos,
        })
    }

    /// The subject of a control entry that has exactly one of group/user/uid.
    fn control_subject(&mut self, f: &Fields) -> Option<ControlSubject> {
        if let Some(n) = f.get("uid") {
            // (uid_t)-1 is "no uid"; 0 is root, which needs no grant.
            return match self.int(n, "control.uid", 0, i64::from(u32::MAX - 1)) {
                Some(0) => {
                    self.err(
                        n.pos,
                        "control.uid 0 is root, which may boost every knob without a grant",
                    );
                    None
                }
                Some(i) => u32::try_from(i).ok().map(ControlSubject::Uid),
                None => None,
            };
        }
        let (key, n, make): (&str, &Node, fn(String) -> ControlSubject) =
            match (f.get("user"), f.get("group")) {
                (Some(n), _) => ("user", n, ControlSubject::User),
                (None, Some(n)) => ("group", n, ControlSubject::Group),
                (None, None) => return None,
            };
        let what = format!("control.{key}");
        let name = self.text(n, &what)?;
        if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()) {
            let fix = if key == "user" {
                format!("; for a uid write `uid: {name}`")
            } else {
                "; give the group's name".to_string()
            };
            self.err(
                n.pos,
                format!("{what} `{name}` is a number, not a name{fix}"),
            );
            return None;
        }
        if !valid_account_name(&name) {
            self.err(
                n.pos,
                format!(
                    "{what} `{name}` is not a valid {key} name (letters, digits, `_`, `-`, `.`, at most 32 characters, not starting with `-`)"
                ),
            );
            return None;
        }
        Some(make(name))
    }

    /// One knob pattern of `control.boost`; must be able to match some knob
    /// of the closed set given this policy's groups.
    fn knob_pattern(&mut self, node: &Node, groups: &[&str]) -> Option<String> {
        use super::pattern;
        let text = self.text(node, "control.boost pattern")?;
        if text.chars().count() > pattern::MAX_PATTERN_LEN {
            self.err(
                node.pos,
                format!(
                    "control.boost pattern is longer than {} characters; no knob name is that long",
                    pattern::MAX_PATTERN_LEN
                ),
            );
            return None;
        }
        if pattern::could_match(&text, groups) {
            return Some(text);
        }
        let why = match pattern::suggestion(&text, groups) {
            Some(s) => format!("; did you mean `{s}`?"),
            None => "; knobs are GROUP.KNOB for this policy's groups, cpufreq.policyN.{min,max,governor}, sysctl.vm.NAME, sysctl.kernel.sched_NAME, sysctl.kernel.timer_migration, zram.zramN.{mem_limit,swap_priority}, latency.cpuN and latency.global (`*` and `?` are the only wildcards)".to_string(),
        };
        self.err(
            node.pos,
            format!("control.boost pattern `{text}`: no knob of the closed set matches{why}"),
        );
        None
    }

    /// `settings.drift` (issue 24): `{ interval: D, on_drift: warn|restore }`;
    /// interval 1s..=1d, default 1m; on_drift default warn.
    fn drift_settings(&mut self, node: &Node) -> Option<DriftSettings> {
        let f = self.fields(node, "settings.drift", &["interval", "on_drift"])?;
        let interval = match f.get("interval") {
            None => Duration::from_secs(60),
            Some(n) => match self.duration(n, "settings.drift.interval") {
                Some(d) if d >= Duration::from_secs(1) && d <= Duration::from_secs(86400) => d,
                Some(_) => {
                    self.err(n.pos, "settings.drift.interval must be from 1s to 1d");
                    return None;
                }
                None => return None,
            },
        };
        let restore = match f.get("on_drift") {
            None => false,
            Some(n) => match self.text(n, "settings.drift.on_drift").as_deref() {
                Some("warn") => false,
                Some("restore") => true,
                Some(other) => {
                    self.err(
                        n.pos,
                        format!("settings.drift.on_drift `{other}`: expected `warn` or `restore`"),
                    );
                    return None;
                }
                None => return None,
            },
        };
        Some(DriftSettings { interval, restore })
    }

    fn settings(&mut self, node: &Node) -> Settings {
        let mut s = Settings::default();
        let Some(f) = self.fields(
            node,
            "settings",
            &[
                "cgroup_root",
                "tick",
                "rescan",
                "state_dir",
                "on_missing",
                "socket_group",
                "metrics",
                "recorder",
                "daemon",
                "drift",
                "critical",
            ],
        ) else {
            return s;
        };
        if let Some(n) = f.get("drift") {
            s.drift = self.drift_settings(n);
        }
        if let Some(n) = f.get("critical") {
            s.critical = self.critical(n);
        }
        if let Some(n) = f.get("cgroup_root") {
            if let Some(p) = self.abs_path(n, "settings.cgroup_root") {
                s.cgroup_root = p;
            }
        }
        if let Some(n) = f.get("state_dir") {
            if let Some(p) = self.abs_path(n, "settings.state_dir") {
                // The journal and lock live here: never the root, a kernel
                // interface or a group cgwarden manages (SPEC §4 "Trust").
                let forbidden = if p == Path::new("/") {
                    Some("the root directory".to_string())
                } else if p.starts_with("/proc") || p.starts_with("/sys") {
                    Some("a kernel interface (/proc, /sys)".to_string())
                } else if p.starts_with(&s.cgroup_root) {
                    Some(format!(
                        "inside the cgroup root {}",
                        s.cgroup_root.display()
                    ))
                } else {
                    None
                };
                match forbidden {
                    Some(why) => self.err(
                        n.pos,
                        format!(
                            "settings.state_dir `{}` is {why}; the journal needs a private directory such as /run/cgwarden or /var/lib/cgwarden",
                            p.display()
                        ),
                    ),
                    None => s.state_dir = p,
                }
            }
        }
        if let Some(n) = f.get("tick") {
            if let Some(d) = self.duration(n, "settings.tick") {
                if d < Duration::from_millis(10) {
                    self.err(n.pos, "settings.tick must be at least 10ms");
                } else {
                    s.tick = d;
                }
            }
        }
        if let Some(n) = f.get("rescan") {
            if let Some(d) = self.duration(n, "settings.rescan") {
                if d < Duration::from_millis(100) {
                    self.err(n.pos, "settings.rescan must be at least 100ms");
                } else {
                    s.rescan = d;
                }
            }
        }
        if let Some(n) = f.get("on_missing") {
            match self.text(n, "settings.on_missing").as_deref() {
                Some("warn") => s.on_missing = OnMissing::Warn,
                Some("fail") => s.on_missing = OnMissing::Fail,
                Some(other) => {
                    let h = hint(other, ["warn", "fail"]);
                    self.err(
                        n.pos,
                        format!("settings.on_missing must be `warn` or `fail`, found `{other}`{h}"),
                    )
                }
                None => {}
            }
        }
        if let Some(v) = self.opt_text(&f, "socket_group", "settings.socket_group") {
            s.socket_group = v;
        }
        if let Some(n) = f.get("daemon") {
            s.daemon = self.daemon_settings(n);
        }
        if let Some(n) = f.get("metrics") {
            s.metrics = self.metrics_settings(n);
        }
        if let Some(n) = f.get("recorder") {
            s.recorder = self.recorder_settings(n);
        }
        s
    }

    /// `settings.metrics`: unix socket, TCP address, textfile, interval.
    fn metrics_settings(&mut self, node: &Node) -> MetricsSettings {
        let mut m = MetricsSettings::default();
        let Some(f) = self.fields(
            node,
            "settings.metrics",
            &["socket", "listen", "allow_remote", "textfile", "interval"],
        ) else {
            return m;
        };
        if let Some(n) = f.get("socket") {
            m.socket = self.abs_path(n, "settings.metrics.socket");
        }
        if let Some(n) = f.get("textfile") {
            m.textfile = self.abs_path(n, "settings.metrics.textfile");
        }
        if let Some(n) = f.get("allow_remote") {
            m.allow_remote = self
                .bool(n, "settings.metrics.allow_remote")
                .unwrap_or(false);
        }
        if let Some(n) = f.get("interval") {
            if let Some(d) = self.duration(n, "settings.metrics.interval") {
                if d < Duration::from_secs(1) {
                    self.err(n.pos, "settings.metrics.interval must be at least 1s");
                } else {
                    m.interval = d;
                }
            }
        }
        if let Some(n) = f.get("listen") {
            if let Some(text) = self.text(n, "settings.metrics.listen") {
                match text.parse::<std::net::SocketAddr>() {
                    Err(_) => self.err(
                        n.pos,
                        format!("settings.metrics.listen `{text}` is not an address:port like 127.0.0.1:9622"),
                    ),
                    // Metrics show the box's workload and limits: they stay
                    // on the box unless the policy says otherwise.
                    Ok(a) if !a.ip().is_loopback() && !m.allow_remote => self.err(
                        n.pos,
                        format!("settings.metrics.listen `{text}` is not a loopback address; set `allow_remote: true` to expose metrics beyond this machine"),
                    ),
                    Ok(a) => m.listen = Some(a),
                }
            }
        }
        m
    }

    /// `settings.recorder`: dir (required), interval, retention, max_size.
    fn recorder_settings(&mut self, node: &Node) -> Option<RecorderSettings> {
        let f = self.fields(
            node,
            "settings.recorder",
            &["dir", "interval", "retention", "max_size"],
        )?;
        let Some(dir_node) = f.get("dir") else {
            self.err(
                node.pos,
                "settings.recorder needs `dir:`, the directory of the database (e.g. /var/lib/cgwarden)",
            );
            return None;
        };
        let mut r = RecorderSettings::new(self.abs_path(dir_node, "settings.recorder.dir")?);
        if let Some(n) = f.get("interval") {
            if let Some(d) = self.duration(n, "settings.recorder.interval") {
                if d < Duration::from_secs(1) {
                    self.err(n.pos, "settings.recorder.interval must be at least 1s");
                } else {
                    r.interval = d;
                }
            }
        }
        if let Some(n) = f.get("retention") {
            if let Some(d) = self.duration(n, "settings.recorder.retention") {
                if d < r.interval {
                    self.err(
                        n.pos,
                        "settings.recorder.retention must be at least one recorder interval",
                    );
                } else {
                    r.retention = d;
                }
            }
        }
        if let Some(n) = f.get("max_size") {
            if let Some(sz) = self.unit(n, "settings.recorder.max_size", Size::parse) {
                match sz.bytes() {
                    Some(b) if b >= 1 << 20 => r.max_size = b,
                    _ => self.err(
                        n.pos,
                        format!("settings.recorder.max_size must be a size of at least 1M, found `{sz}`"),
                    ),
                }
            }
        }
        Some(r)
    }

    /// `report: { criteria: {...} }`: what `cgwarden report` judges.
    fn report(&mut self, node: &Node) -> ReportCriteria {
        let mut c = ReportCriteria::default();
        let Some(top) = self.fields(node, "report", &["criteria"]) else {
            return c;
        };
        let Some(n) = top.get("criteria") else {
            return c;
        };
        let Some(f) = self.fields(
            n,
            "report.criteria",
            &[
                "oom_kills",
                "memory_growth",
                "processes",
                "thermal_zones",
                "thermal_events",
                "restarts",
                "memory_full_avg10",
                "loop_p99",
                "loop_kpi",
                "fps_stddev",
                "fps_kpi",
            ],
        ) else {
            return c;
        };
        self.report_kpi(&f, &mut c); // issue 26, decode/kpi.rs
        let count = |d: &mut Self, name: &str| {
            f.get(name)
                .and_then(|n| d.int(n, &format!("report.criteria.{name}"), 0, i64::MAX))
                .and_then(|i| u64::try_from(i).ok())
        };
        if let Some(v) = count(self, "oom_kills") {
            c.oom_kills = v;
        }
        if let Some(v) = count(self, "thermal_events") {
            c.thermal_events_per_72h = v;
        }
        if let Some(v) = count(self, "restarts") {
            c.restarts = v;
        }
        if let Some(n) = f.get("memory_growth") {
            if let Some(sz) = self.unit(n, "report.criteria.memory_growth", Size::parse) {
                match sz.bytes() {
                    Some(b) => c.memory_growth = b,
                    None => self.err(
                        n.pos,
                        "report.criteria.memory_growth must be a size like 50M, not `max`",
                    ),
                }
            }
        }
        if let Some(n) = f.get("memory_full_avg10") {
            if let Some(p) = self.unit(n, "report.criteria.memory_full_avg10", Percent::parse) {
                c.memory_full_avg10 = p.value();
            }
        }
        for (name, out) in [
            ("processes", &mut c.processes),
            ("thermal_zones", &mut c.thermal_zones),
        ] {
            if let Some(n) = f.get(name) {
                let what = format!("report.criteria.{name}");
                for item in self.seq(n, &what) {
                    if let Some(t) = self.text(item, &what) {
                        if t.is_empty() || t.len() > 64 || t.contains('/') {
                            self.err(
                                item.pos,
                                format!("{what}: `{t}` is not a name (1–64 characters, no `/`)"),
                            );
                        } else {
                            out.push(t);
                        }
                    }
                }
            }
        }
        c
    }

    /// `settings.daemon: { cpus, sched, mlock }`; what is absent or invalid
    /// keeps its default (the errors stop the policy anyway).
    fn daemon_settings(&mut self, node: &Node) -> DaemonSettings {
        let mut d = DaemonSettings::default();
        let Some(f) = self.fields(node, "settings.daemon", &["cpus", "sched", "mlock"]) else {
            return d;
        };
        if let Some(n) = f.get("cpus") {
            d.cpus = self.unit(n, "settings.daemon.cpus", CpuList::parse);
        }
        if let Some(n) = f.get("mlock") {
            if let Some(b) = self.bool(n, "settings.daemon.mlock") {
                d.mlock = b;
            }
        }
        if let Some(n) = f.get("sched") {
            if let Some(s) = self.daemon_sched(n) {
                d.sched = s;
            }
        }
        d
    }

    /// `settings.daemon.sched`: `{ policy: fifo|rr, priority: 1-99 }` or
    /// `{ policy: other, nice: -20..19 }` (batch, idle and deadline make no
    /// sense for threads that must react first).
    fn daemon_sched(&mut self, node: &Node) -> Option<Sched> {
        const WHAT: &str = "settings.daemon.sched";
        let f = self.fields(node, WHAT, &["policy", "priority", "nice"])?;
        let Some(pn) = f.get("policy") else {
            self.err(
                node.pos,
                format!("{WHAT} needs `policy:` (fifo, rr or other)"),
            );
            return None;
        };
        let text = self.text(pn, "settings.daemon.sched.policy")?;
        let policy = match text.as_str() {
            "fifo" => SchedPolicy::Fifo,
            "rr" => SchedPolicy::Rr,
            "other" => SchedPolicy::Other,
            other => {
                let h = hint(other, ["fifo", "rr", "other"]);
                let why = if matches!(other, "batch" | "idle" | "deadline") {
                    " (the daemon's reacting threads must run first: use fifo, rr or other)"
                        .to_string()
                } else if h.is_empty() {
                    " (expected fifo, rr or other)".to_string()
                } else {
                    h
                };
                self.err(
                    pn.pos,
                    format!("settings.daemon.sched.policy `{other}` is not allowed{why}"),
                );
                return None;
            }
        };
        let rt = policy != SchedPolicy::Other;
        let priority = f
            .get("priority")
            .and_then(|n| self.int(n, "settings.daemon.sched.priority", 1, 99))
            .map(|v| v as u32);
        let nice = f
            .get("nice")
            .and_then(|n| self.int(n, "settings.daemon.sched.nice", -20, 19))
            .map(|v| v as i32);
        if rt {
            if let Some(k) = f.key("nice") {
                self.err(
                    k.pos,
                    format!(
                        "settings.daemon.sched.nice does not apply to {text}; give `priority:` (1-99)"
                    ),
                );
                return None;
            }
            if f.get("priority").is_none() {
                self.err(
                    pn.pos,
                    format!("settings.daemon.sched.policy {text} needs `priority:` (1-99; 1 is below every real RT task)"),
                );
                return None;
            }
            priority?;
        } else {
            if let Some(k) = f.key("priority") {
                self.err(
                    k.pos,
                    "settings.daemon.sched.priority applies to fifo and rr only; other takes `nice:` (-20..19)",
                );
                return None;
            }
            if f.get("nice").is_some() && nice.is_none() {
                return None;
            }
        }
        Some(Sched {
            policy,
            priority: if rt { priority } else { None },
            nice: if rt { None } else { Some(nice.unwrap_or(0)) },
            deadline: None,
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

    fn group(&mut self, key: &Key, node: &Node, parent_path: &str) -> Option<Group> {
        if !valid_name(&key.name) {
            self.err(key.pos, name_problem("group", &key.name));
        } else if let Some((_, what)) = crate::knobs::reserved_group_names()
            .into_iter()
            .find(|(n, _)| *n == key.name)
        {
            self.err(
                key.pos,
                format!(
                    "group name `{}` is reserved: rules read `{}.…` as {what}, not a group",
                    key.name, key.name
                ),
            );
        }
        let f = self.fields(
            node,
            &format!("group `{}`", key.name),
            &[
                "cpuset", "cpu", "uclamp", "memory", "io", "pids", "children", "type",
            ],
        )?;
        let path = if parent_path.is_empty() {
            key.name.clone()
        } else {
            format!("{parent_path}/{}", key.name)
        };
        let mut g = Group {
            name: key.name.clone(),
            path: path.clone(),
            pos: key.pos,
            cpuset: CpusetSpec::default(),
            cpu: CpuSpec::default(),
            uclamp: UclampSpec::default(),
            memory: MemorySpec::default(),
            io: IoSpec::default(),
            pids: PidsSpec::default(),
            children: Vec::new(),
            threaded: false,
        };
        let gname = key.name.clone();
        if let Some(n) = f.get("type") {
            g.threaded = self.group_type(n, &gname);
        }
        if let Some(n) = f.get("cpuset") {
            if let Some(c) = self.fields(
                n,
                &format!("{gname}.cpuset"),
                &["cpus", "mems", "partition"],
            ) {
                g.cpuset.cpus = c
                    .get("cpus")
                    .and_then(|n| self.unit(n, &format!("{gname}.cpuset.cpus"), CpuList::parse));
                g.cpuset.cpus_pos = c.get("cpus").map(|n| n.pos);
                g.cpuset.mems = c
                    .get("mems")
                    .and_then(|n| self.unit(n, &format!("{gname}.cpuset.mems"), CpuList::parse));
                if let Some(n) = c.get("partition") {
                    g.cpuset.partition = match self.text(n, "cpuset.partition").as_deref() {
                        Some("member") => Some(Partition::Member),
                        Some("root") => Some(Partition::Root),
                        Some("isolated") => Some(Partition::Isolated),
                        Some(other) => {
                            let h = hint(other, ["member", "root", "isolated"]);
                            self.err(n.pos, format!("{gname}.cpuset.partition must be member, root or isolated, found `{other}`{h}"));
                            None
                        }
                        None => None,
                    };
                    if g.cpuset.partition.is_some_and(|p| p != Partition::Member)
                        && g.cpuset.cpus.is_none()
                    {
                        self.err(n.pos, format!("{gname}.cpuset.partition needs `cpus:`: a partition owns an explicit set of CPUs"));
                    }
                }
            }
        }
        if let Some(n) = f.get("cpu") {
            if let Some(c) = self.fields(n, &format!("{gname}.cpu"), &["weight", "max"]) {
                g.cpu.weight = c
                    .get("weight")
                    .and_then(|n| self.int(n, &format!("{gname}.cpu.weight"), 1, 10000))
                    .map(|v| v as u64);
                g.cpu.max = c
                    .get("max")
                    .and_then(|n| self.unit(n, &format!("{gname}.cpu.max"), CpuMax::parse));
            }
        }
        if let Some(n) = f.get("uclamp") {
            if let Some(c) = self.fields(n, &format!("{gname}.uclamp"), &["min", "max"]) {
                g.uclamp.min = c
                    .get("min")
                    .and_then(|n| self.unit(n, &format!("{gname}.uclamp.min"), Percent::parse));
                g.uclamp.max = c
                    .get("max")
                    .and_then(|n| self.unit(n, &format!("{gname}.uclamp.max"), Percent::parse));
                if let (Some(min), Some(max), Some(node)) =
                    (&g.uclamp.min, &g.uclamp.max, c.get("min"))
                {
                    if min.value() > max.value() {
                        self.err(
                            node.pos,
                            format!("{gname}.uclamp.min {min} is greater than uclamp.max {max}"),
                        );
                    }
                }
            }
        }
        if let Some(n) = f.get("memory") {
            let fields = ["min", "low", "high", "max", "swap_max", "oom_group"];
            if let Some(c) = self.fields(n, &format!("{gname}.memory"), &fields) {
                let sz = |d: &mut Self, k: &str| {
                    c.get(k)
                        .and_then(|n| d.unit(n, &format!("{gname}.memory.{k}"), Size::parse))
                };
                g.memory.min = sz(self, "min");
                g.memory.low = sz(self, "low");
                g.memory.high = sz(self, "high");
                g.memory.max = sz(self, "max");
                g.memory.swap_max = sz(self, "swap_max");
                g.memory.oom_group = c
                    .get("oom_group")
                    .and_then(|n| self.bool(n, &format!("{gname}.memory.oom_group")));
                if let Some(max) = g.memory.max {
                    for (k, v) in [
                        ("min", g.memory.min),
                        ("low", g.memory.low),
                        ("high", g.memory.high),
                    ] {
                        if let (Some(v), Some(node)) = (v, c.get(k)) {
                            if size_gt(v, max) {
                                self.err(
                                    node.pos,
                                    format!(
                                        "{gname}.memory.{k} {v} is greater than memory.max {max}"
                                    ),
                                );
                            }
                        }
                    }
                }
            }
        }
        if let Some(n) = f.get("io") {
            if let Some(c) = self.fields(n, &format!("{gname}.io"), &["weight"]) {
                g.io.weight = c
                    .get("weight")
                    .and_then(|n| self.int(n, &format!("{gname}.io.weight"), 1, 10000))
                    .map(|v| v as u64);
            }
        }
        if let Some(n) = f.get("pids") {
            if let Some(c) = self.fields(n, &format!("{gname}.pids"), &["max"]) {
                if let Some(m) = c.get("max") {
                    g.pids.max = if m.value == Value::Str("max".into()) {
                        Some(PidsMax::Max)
                    } else {
                        self.int(m, &format!("{gname}.pids.max"), 0, i64::from(i32::MAX))
                            .map(|v| PidsMax::Count(v as u64))
                    };
                }
            }
        }
        if let Some(n) = f.get("children") {
            for (k, v) in self.named_map(n, &format!("{gname}.children")) {
                if let Some(child) = self.group(k, v, &path) {
                    g.children.push(child);
                }
            }
        }
        Some(g)
    }

    /// Tree-wide group checks: unique names, child cpusets inside their parent's.
    fn check_groups(&mut self, groups: &[Group]) {
        let mut seen: BTreeMap<String, Pos> = BTreeMap::new();
        for g in groups.iter().flat_map(|g| g.walk()) {
            if let Some(first) = seen.get(&g.name) {
                self.err(
                    g.pos,
                    format!(
                        "duplicate group name `{}` (first defined at line {}); names are unique across the whole tree",
                        g.name, first.line
                    ),
                );
            } else {
                seen.insert(g.name.clone(), g.pos);
            }
        }
        for g in groups {
            self.check_cpuset_subsets(g, None);
        }
        self.check_exclusive_siblings(groups);
    }

    /// A partition (`root` or `isolated`) owns its CPUs exclusively among its
    /// siblings: the kernel accepts an overlapping sibling's `cpuset.cpus` and
    /// turns the partition `isolated invalid (Cpu list in cpuset.cpus not
    /// exclusive)` — the RT core silently loses its isolation. Reported at the
    /// later group's `cpus`.
    fn check_exclusive_siblings(&mut self, siblings: &[Group]) {
        let is_part = |g: &Group| g.cpuset.partition.is_some_and(|p| p != Partition::Member);
        for (i, b) in siblings.iter().enumerate() {
            let Some(bc) = &b.cpuset.cpus else { continue };
            for a in &siblings[..i] {
                let Some(ac) = &a.cpuset.cpus else { continue };
                if !is_part(a) && !is_part(b) {
                    continue;
                }
                let common = CpuList(ac.0.intersection(&bc.0).copied().collect());
                if common.0.is_empty() {
                    continue;
                }
                let what = |g: &Group| match g.cpuset.partition {
                    Some(p) if p != Partition::Member => {
                        format!("the {} partition `{}`", p.as_str(), g.name)
                    }
                    _ => format!("group `{}`", g.name),
                };
                self.err(
                    b.cpuset.cpus_pos.unwrap_or(b.pos),
                    format!(
                        "cpuset.cpus `{bc}` of {} overlaps sibling {} (`{ac}`) on CPUs {common}; a partition's CPUs must be exclusive among its siblings, or the kernel makes it invalid (Cpu list in cpuset.cpus not exclusive)",
                        what(b),
                        what(a)
                    ),
                );
            }
        }
        for g in siblings {
            self.check_exclusive_siblings(&g.children);
        }
    }

    fn check_cpuset_subsets(&mut self, g: &Group, parent: Option<(&str, &CpuList)>) {
        let mut here = parent;
        if let Some(cpus) = &g.cpuset.cpus {
            if let Some((pname, pcpus)) = parent {
                if !cpus.is_subset(pcpus) {
                    self.err(
                        g.cpuset.cpus_pos.unwrap_or(g.pos),
                        format!(
                            "cpuset.cpus `{cpus}` of group `{}` is not a subset of `{pcpus}` of its parent `{pname}`",
                            g.name
                        ),
                    );
                }
            }
            here = Some((g.name.as_str(), cpus));
        }
        for c in &g.children {
            self.check_cpuset_subsets(c, here);
        }
    }

    fn hook(&mut self, key: &Key, node: &Node) -> Option<Hook> {
        if !valid_name(&key.name) {
            self.err(key.pos, name_problem("hook", &key.name));
        }
        let what = format!("hook `{}`", key.name);
        let f = self.fields(node, &what, &["exec", "timeout", "min_interval", "user"])?;
        let mut exec = Vec::new();
        match f.get("exec") {
            None => self.err(key.pos, format!("{what} needs `exec: [program, args…]`")),
            Some(n) => {
                for item in self.seq(n, &format!("{what}.exec")) {
                    if let Some(t) = self.text(item, &format!("{what}.exec item")) {
                        exec.push(t);
                    }
                }
                if exec.is_empty() && matches!(n.value, Value::Seq(_) | Value::Null) {
                    self.err(n.pos, format!("{what}.exec must name a program"));
                } else if let Some(prog) = exec.first() {
                    if !prog.starts_with('/') {
                        let at = match &n.value {
                            Value::Seq(items) => items.first().map(|i| i.pos).unwrap_or(n.pos),
                            _ => n.pos,
                        };
                        self.err(at, format!("{what}.exec program `{prog}` must be an absolute path (hooks run without a shell or PATH search)"));
                    }
                }
            }
        }
        let timeout = f
            .get("timeout")
            .and_then(|n| self.duration(n, &format!("{what}.timeout")))
            .unwrap_or(Duration::from_secs(10));
        let min_interval = f
            .get("min_interval")
            .and_then(|n| self.duration(n, &format!("{what}.min_interval")));
        let user = self.opt_text(&f, "user", &format!("{what}.user"));
        Some(Hook {
            name: key.name.clone(),
            exec,
            timeout,
            min_interval,
            user,
        })
    }

    fn placement(
        &mut self,
        node: &Node,
        groups: &[&str],
        leaf: &BTreeMap<&str, bool>,
    ) -> Option<Placement> {
        let allowed: Vec<&str> = ["match", "group", "sched"]
            .into_iter()
            .chain(tuning::PLACEMENT_FIELDS.iter().copied())
            .collect();
        let f = self.fields(node, "placement entry", &allowed)?;
        let mut matcher = Match::default();
        match f.get("match") {
            None => self.err(node.pos, "placement entry needs `match:`"),
            Some(m) => {
                if let Some(mf) =
                    self.fields(m, "placement match", &["comm", "exe", "cmdline", "user"])
                {
                    matcher.comm = self.glob_field(&mf, "comm");
                    matcher.exe = self.glob_field(&mf, "exe");
                    matcher.cmdline = self.glob_field(&mf, "cmdline");
                    if let Some(u) = mf.get("user") {
                        matcher.user = match &u.value {
                            Value::Int(i) => u32::try_from(*i).ok().map(UserSpec::Uid),
                            _ => self.text(u, "match.user").map(|s| match s.parse::<u32>() {
                                Ok(uid) => UserSpec::Uid(uid),
                                Err(_) => UserSpec::Name(s),
                            }),
                        };
                        if matcher.user.is_none() {
                            self.err(u.pos, "match.user must be a user name or a uid");
                        }
                    }
                    if let (Some(comm), Some(n)) = (&matcher.comm, mf.get("comm")) {
                        let is_glob = comm.contains(['*', '?', '[']);
                        if !is_glob && comm.len() > 15 {
                            self.err(
                                n.pos,
                                format!(
                                    "match.comm `{comm}` is longer than 15 bytes; the kernel truncates comm, so it would never match (use `{}` or match `exe`)",
                                    truncate_bytes(comm, 15)
                                ),
                            );
                        }
                    }
                    if mf.entries.is_empty() {
                        self.err(
                            m.pos,
                            "placement match needs at least one of comm, exe, cmdline, user",
                        );
                    }
                }
            }
        }
        let group = match f.get("group") {
            None => {
                self.err(node.pos, "placement entry needs `group:`");
                String::new()
            }
            Some(n) => {
                let name = self.text(n, "placement group").unwrap_or_default();
                if !groups.contains(&name.as_str()) {
                    let h = hint(&name, groups.iter().copied());
                    self.err(n.pos, format!("placement names unknown group `{name}`{h}"));
                } else if leaf.get(name.as_str()) == Some(&false) {
                    self.err(n.pos, format!("placement group `{name}` has children; processes can only be placed in leaf groups (the kernel forbids processes in a group whose controllers are handed to children)"));
                }
                name
            }
        };
        let sched = f.get("sched").and_then(|n| self.sched(n));
        let tuning = self.tuning(&f);
        Some(Placement {
            matcher,
            group,
            sched,
            pos: node.pos,
            tuning,
        })
    }

    fn glob_field(&mut self, f: &Fields, name: &str) -> Option<String> {
        let n = f.get(name)?;
        let text = self.text(n, &format!("match.{name}"))?;
        if text.is_empty() {
            self.err(n.pos, format!("match.{name} must not be empty"));
            return None;
        }
        if let Err(e) = glob::Pattern::new(&text) {
            self.err(
                n.pos,
                format!("match.{name} `{text}` is not a valid glob: {e}"),
            );
            return None;
        }
        Some(text)
    }

    fn sched(&mut self, node: &Node) -> Option<Sched> {
        let f = self.fields(node, "sched", &["policy", "priority", "nice", "deadline"])?;
        let policy = match f.get("policy") {
            None => {
                self.err(
                    node.pos,
                    "sched needs `policy:` (other, batch, idle, fifo, rr or deadline)",
                );
                return None;
            }
            Some(n) => {
                let text = self.text(n, "sched.policy")?;
                let names = ["other", "batch", "idle", "fifo", "rr", "deadline"];
                let p = match text.as_str() {
                    "other" => SchedPolicy::Other,
                    "batch" => SchedPolicy::Batch,
                    "idle" => SchedPolicy::Idle,
                    "fifo" => SchedPolicy::Fifo,
                    "rr" => SchedPolicy::Rr,
                    "deadline" => SchedPolicy::Deadline,
                    other => {
                        let h = hint(other, names);
                        self.err(n.pos, format!("unknown sched.policy `{other}`{h}"));
                        return None;
                    }
                };
                (p, n.pos)
            }
        };
        let (policy, ppos) = policy;
        let priority = f
            .get("priority")
            .and_then(|n| self.int(n, "sched.priority", 1, 99))
            .map(|v| v as u32);
        let nice = f
            .get("nice")
            .and_then(|n| self.int(n, "sched.nice", -20, 19))
            .map(|v| v as i32);
        let realtime = matches!(policy, SchedPolicy::Fifo | SchedPolicy::Rr);
        if realtime && priority.is_none() && f.get("priority").is_none() {
            self.err(
                ppos,
                format!("sched.policy {} needs `priority:` (1-99)", policy.as_str()),
            );
        }
        if !realtime {
            if let Some(k) = f.key("priority") {
                self.err(
                    k.pos,
                    format!(
                        "sched.priority applies to fifo and rr only, not {}",
                        policy.as_str()
                    ),
                );
            }
        }
        if realtime || policy == SchedPolicy::Deadline {
            if let Some(k) = f.key("nice") {
                self.err(
                    k.pos,
                    format!("sched.nice does not apply to {}", policy.as_str()),
                );
            }
        }
        let mut deadline = None;
        match (policy, f.get("deadline")) {
            (SchedPolicy::Deadline, None) => self.err(
                ppos,
                "sched.policy deadline needs `deadline: { runtime, deadline, period }`",
            ),
            (SchedPolicy::Deadline, Some(n)) => {
                if let Some(d) =
                    self.fields(n, "sched.deadline", &["runtime", "deadline", "period"])
                {
                    let get = |s: &mut Self, k: &str| match d.get(k) {
                        Some(v) => s.duration(v, &format!("sched.deadline.{k}")),
                        None => {
                            s.err(n.pos, format!("sched.deadline needs `{k}:`"));
                            None
                        }
                    };
                    let (r, dl, p) = (
                        get(self, "runtime"),
                        get(self, "deadline"),
                        get(self, "period"),
                    );
                    if let (Some(runtime), Some(dl), Some(period)) = (r, dl, p) {
                        if !(runtime <= dl && dl <= period) || runtime.is_zero() {
                            self.err(
                                n.pos,
                                "sched.deadline needs 0 < runtime <= deadline <= period",
                            );
                        } else {
                            deadline = Some(DeadlineParams {
                                runtime,
                                deadline: dl,
                                period,
                            });
                        }
                    }
                }
            }
            (_, Some(_)) => {
                if let Some(k) = f.key("deadline") {
                    self.err(k.pos, "sched.deadline applies to policy deadline only");
                }
            }
            (_, None) => {}
        }
        Some(Sched {
            policy,
            priority,
            nice,
            deadline,
        })
    }

    /// `system.irqs` / `system.kthreads` (issue 24): a list of
    /// `{ name: GLOB, cpus: LIST, sched: {policy, priority} }`; each entry
    /// sets `cpus`, `sched` or both; sched is fifo/rr with a priority, or
    /// other (no deadline, no nice: kernel threads run at nice 0).
    fn thread_rules(&mut self, node: &Node, what: &str) -> Vec<KthreadRule> {
        let mut out = Vec::new();
        for item in self.seq(node, what) {
            let Some(f) = self.fields(item, &format!("{what} entry"), &["name", "cpus", "sched"])
            else {
                continue;
            };
            let Some(name) = f
                .get("name")
                .and_then(|n| self.text(n, &format!("{what}.name")))
            else {
                self.err(item.pos, format!("{what} entry needs `name:` (a glob)"));
                continue;
            };
            if name.is_empty()
                || name.len() > 64
                || name.chars().any(|c| c.is_whitespace() || c.is_control())
            {
                self.err(
                    item.pos,
                    format!("{what}.name `{name}` must be 1–64 characters without blanks"),
                );
                continue;
            }
            let cpus = f
                .get("cpus")
                .and_then(|n| self.unit(n, &format!("{what}.cpus"), CpuList::parse));
            let sched = f.get("sched").and_then(|n| self.sched(n));
            if let Some(s) = &sched {
                let ok = matches!(
                    s.policy,
                    SchedPolicy::Fifo | SchedPolicy::Rr | SchedPolicy::Other
                ) && s.nice.unwrap_or(0) == 0;
                if !ok {
                    self.err(item.pos, format!("{what} `{name}`: sched is fifo/rr with a priority, or other (kernel threads take no nice and no deadline)"));
                    continue;
                }
            }
            if cpus.is_none() && sched.is_none() {
                self.err(
                    item.pos,
                    format!("{what} `{name}` sets nothing: give `cpus:`, `sched:` or both"),
                );
                continue;
            }
            out.push(KthreadRule { name, cpus, sched });
        }
        out
    }

    /// `system.devfreq` (issue 24): per device `governor`, `min`, `max`,
    /// each checked with its knob's grammar.
    fn devfreq(&mut self, n: &Node) -> Vec<Devfreq> {
        let mut out = Vec::new();
        for (k, v) in self.named_map(n, "system.devfreq") {
            let what = format!("devfreq.{}", k.name);
            if let Err(e) = Knob::parse(&format!("{what}.max")) {
                self.err(k.pos, format!("system.devfreq: {}", knob_error_text(&e)));
                continue;
            }
            let Some(c) = self.fields(v, &what, &["governor", "min", "max"]) else {
                continue;
            };
            let mut d = Devfreq {
                device: k.name.clone(),
                ..Devfreq::default()
            };
            for attr in ["governor", "min", "max"] {
                let Some(node) = c.get(attr) else { continue };
                let text = match &node.value {
                    Value::Str(s) => s.clone(),
                    Value::Int(i) => i.to_string(),
                    _ => {
                        self.err(
                            node.pos,
                            format!("{what}.{attr} must be a value, found {}", describe(node)),
                        );
                        continue;
                    }
                };
                let parsed = Knob::parse(&format!("{what}.{attr}")).map(|k| k.parse_value(&text));
                match parsed {
                    Ok(Ok(KnobValue::Word(g))) => d.governor = Some(g),
                    Ok(Ok(KnobValue::Hz(hz))) if attr == "min" => d.min = Some(hz),
                    Ok(Ok(KnobValue::Hz(hz))) => d.max = Some(hz),
                    Ok(Err(e)) => self.err(node.pos, format!("{what}.{attr}: {e}")),
                    _ => self.err(node.pos, format!("{what}.{attr}: invalid value `{text}`")),
                }
            }
            if let (Some(lo), Some(hi)) = (d.min, d.max) {
                if lo > hi {
                    self.err(
                        k.pos,
                        format!(
                            "{what}.min {} is greater than max {}",
                            KnobValue::Hz(lo),
                            KnobValue::Hz(hi)
                        ),
                    );
                }
            }
            out.push(d);
        }
        out
    }

    fn system(&mut self, node: &Node) -> System {
        let mut sys = System::default();
        let Some(f) = self.fields(
            node,
            "system",
            &[
                "sysctl", "zram", "cpufreq", "realtime", "latency", "devfreq", "irqs", "kthreads",
            ],
        ) else {
            return sys;
        };
        if let Some(n) = f.get("devfreq") {
            sys.devfreq = self.devfreq(n);
        }
        if let Some(n) = f.get("irqs") {
            sys.irqs = self.thread_rules(n, "system.irqs");
        }
        if let Some(n) = f.get("kthreads") {
            sys.kthreads = self.thread_rules(n, "system.kthreads");
        }
        if let Some(n) = f.get("sysctl") {
            for (k, v) in self.named_map(n, "system.sysctl") {
                if let Err(e) = Knob::parse(&format!("sysctl.{}", k.name)) {
                    self.err(
                        k.pos,
                        format!("sysctl `{}`: {}", k.name, knob_error_text(&e)),
                    );
                    continue;
                }
                let value = match &v.value {
                    Value::Int(i) => Some(i.to_string()),
                    Value::Str(s)
                        if !s.trim().is_empty()
                            && s.split_whitespace().all(|w| w.parse::<i64>().is_ok()) =>
                    {
                        Some(s.split_whitespace().collect::<Vec<_>>().join(" "))
                    }
                    _ => None,
                };
                // A sysctl with a kernel range takes one integer in it.
                if let (Some(val), Some((min, max))) = (&value, crate::knobs::sysctl_range(&k.name))
                {
                    if val
                        .parse::<i64>()
                        .map_or(true, |n| !(min..=max).contains(&n))
                    {
                        self.err(
                            v.pos,
                            format!(
                                "sysctl `{}` must be a whole number from {min} to {max}, found {}",
                                k.name,
                                describe(v)
                            ),
                        );
                        continue;
                    }
                }
                match value {
                    Some(val) => sys.sysctl.push((k.name.clone(), val)),
                    None => self.err(v.pos, format!("sysctl `{}` must be an integer (or integers separated by spaces), found {}", k.name, describe(v))),
                }
            }
        }
        if let Some(n) = f.get("zram") {
            for (k, v) in self.named_map(n, "system.zram") {
                if !is_numbered(&k.name, "zram") {
                    self.err(
                        k.pos,
                        format!("zram device `{}` must be named zramN", k.name),
                    );
                    continue;
                }
                let what = format!("zram.{}", k.name);
                let Some(z) = self.fields(
                    v,
                    &what,
                    &["algorithm", "size", "swap_priority", "mem_limit"],
                ) else {
                    continue;
                };
                let algorithm = self.opt_text(&z, "algorithm", &format!("{what}.algorithm"));
                if let (Some(a), Some(n)) = (&algorithm, z.get("algorithm")) {
                    if a.is_empty()
                        || !a
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                    {
                        self.err(n.pos, format!("{what}.algorithm `{a}` is not a compressor name (e.g. lz4, zstd, lzo-rle)"));
                    }
                }
                let size = match z.get("size") {
                    Some(n) => self.unit(n, &format!("{what}.size"), Size::parse),
                    None => {
                        self.err(k.pos, format!("{what} needs `size:`"));
                        None
                    }
                };
                if let (Some(Size::Max), Some(n)) = (size, z.get("size")) {
                    self.err(n.pos, format!("{what}.size must be a size, not max"));
                }
                let swap_priority = z
                    .get("swap_priority")
                    .and_then(|n| self.int(n, &format!("{what}.swap_priority"), -1, 32767))
                    .map(|v| v as i32);
                let mem_limit = z
                    .get("mem_limit")
                    .and_then(|n| self.unit(n, &format!("{what}.mem_limit"), Size::parse));
                if let Some(size) = size {
                    sys.zram.push(Zram {
                        device: k.name.clone(),
                        algorithm,
                        size,
                        swap_priority,
                        mem_limit,
                    });
                }
            }
        }
        if let Some(n) = f.get("cpufreq") {
            for (k, v) in self.named_map(n, "system.cpufreq") {
                if !is_numbered(&k.name, "policy") {
                    self.err(k.pos, format!("cpufreq policy `{}` must be named policyN (as in /sys/devices/system/cpu/cpufreq)", k.name));
                    continue;
                }
                let what = format!("cpufreq.{}", k.name);
                let Some(c) = self.fields(
                    v,
                    &what,
                    &[
                        "governor",
                        "min",
                        "max",
                        "rate_limit_us",
                        "up_rate_limit_us",
                        "down_rate_limit_us",
                    ],
                ) else {
                    continue;
                };
                let mut governor = self.opt_text(&c, "governor", &format!("{what}.governor"));
                if let (Some(g), Some(n)) = (&governor, c.get("governor")) {
                    // One name or a fallback list (issue 24), the knob's grammar.
                    let knob = Knob::parse(&format!("{what}.governor"));
                    match knob.map(|k| k.parse_value(g)) {
                        Ok(Ok(KnobValue::Word(list))) => governor = Some(list),
                        _ => self.err(
                            n.pos,
                            format!("{what}.governor `{g}` is not a governor name or a fallback list like `schedutil|ondemand`"),
                        ),
                    }
                }
                let mut tunables = Vec::new();
                for attr in crate::knobs::cpufreq::TUNABLES {
                    if let Some(n) = c.get(attr.name()) {
                        let max = crate::knobs::cpufreq::RATE_LIMIT_MAX_US;
                        if let Some(us) = self.int(n, &format!("{what}.{}", attr.name()), 0, max) {
                            tunables.push((attr, us as u64));
                        }
                    }
                }
                let min = c
                    .get("min")
                    .and_then(|n| self.unit(n, &format!("{what}.min"), Frequency::parse));
                let max = c
                    .get("max")
                    .and_then(|n| self.unit(n, &format!("{what}.max"), Frequency::parse));
                if let (Some(lo), Some(hi), Some(n)) = (&min, &max, c.get("min")) {
                    if lo.khz() > hi.khz() {
                        self.err(n.pos, format!("{what}.min {lo} is greater than max {hi}"));
                    }
                }
                sys.cpufreq.push(Cpufreq {
                    policy: k.name.clone(),
                    governor,
                    min,
                    max,
                    tunables,
                });
            }
        }
        if let Some(n) = f.get("realtime") {
            if let Some(r) = self.fields(
                n,
                "system.realtime",
                &[
                    "housekeeping_cpus",
                    "timer_migration",
                    "cpuidle_disable",
                    "rcu_expedited",
                ],
            ) {
                let mut rt = Realtime {
                    housekeeping_cpus: r
                        .get("housekeeping_cpus")
                        .and_then(|n| self.unit(n, "realtime.housekeeping_cpus", CpuList::parse)),
                    timer_migration: r
                        .get("timer_migration")
                        .and_then(|n| self.bool(n, "realtime.timer_migration")),
                    cpuidle_disable: None,
                    rcu_expedited: r
                        .get("rcu_expedited")
                        .and_then(|n| self.bool(n, "realtime.rcu_expedited")),
                };
                if let Some(c) = r.get("cpuidle_disable") {
                    if let Some(cf) =
                        self.fields(c, "realtime.cpuidle_disable", &["cpus", "deeper_than"])
                    {
                        let cpus = match cf.get("cpus") {
                            Some(n) => {
                                self.unit(n, "realtime.cpuidle_disable.cpus", CpuList::parse)
                            }
                            None => {
                                self.err(c.pos, "realtime.cpuidle_disable needs `cpus:`");
                                None
                            }
                        };
                        let deeper_than = cf
                            .get("deeper_than")
                            .and_then(|n| {
                                self.int(n, "realtime.cpuidle_disable.deeper_than", 0, 64)
                            })
                            .unwrap_or(0) as u32;
                        rt.cpuidle_disable = cpus.map(|cpus| CpuidleDisable { cpus, deeper_than });
                    }
                }
                sys.realtime = Some(rt);
            }
        }
        if let Some(n) = f.get("latency") {
            sys.latency = self.latency(n);
        }
        sys
    }

    /// `system.latency: { cpus: {"7": 0us}, global: 100us }` (PM QoS).
    fn latency(&mut self, node: &Node) -> Option<Latency> {
        let f = self.fields(node, "system.latency", &["cpus", "global"])?;
        let us = |text: &str| match Knob::LatencyGlobal.parse_value(text) {
            Ok(crate::knobs::KnobValue::Latency(Some(us))) => Ok(us),
            Ok(_) => Err("expected microseconds".to_string()),
            Err(e) => Err(e.to_string()),
        };
        let mut lat = Latency {
            cpus: Vec::new(),
            global: f
                .get("global")
                .and_then(|n| self.unit(n, "latency.global", us)),
        };
        if let Some(c) = f.get("cpus") {
            for (k, v) in self.named_map(c, "system.latency.cpus") {
                let cpus = match CpuList::parse(&k.name) {
                    Ok(l) => l,
                    Err(e) => {
                        self.err(k.pos, format!("system.latency.cpus: `{}`: {e}", k.name));
                        continue;
                    }
                };
                if let Some(v) = self.unit(v, &format!("latency.cpus.{}", k.name), us) {
                    for cpu in cpus.iter() {
                        if lat.cpus.iter().any(|(c, _)| *c == cpu) {
                            self.err(
                                k.pos,
                                format!("system.latency.cpus: CPU {cpu} is named twice"),
                            );
                        } else {
                            lat.cpus.push((cpu, v));
                        }
                    }
                }
            }
        }
        Some(lat)
    }

    fn rule(&mut self, node: &Node, groups: &[&str], hooks: &[&str]) -> Option<(Rule, Pos)> {
        let f = self.fields(
            node,
            "rule",
            &[
                "name",
                "when",
                "for",
                "hold",
                "cooldown",
                "then",
                "while",
                "max_active",
            ],
        )?;
        let (name, name_pos) = match f.get("name") {
            Some(n) => {
                let name = self.text(n, "rule name").unwrap_or_default();
                if !valid_name(&name) {
                    self.err(n.pos, name_problem("rule", &name));
                }
                (name, n.pos)
            }
            None => {
                self.err(node.pos, "rule needs `name:`");
                (String::new(), node.pos)
            }
        };
        let what = format!("rule `{name}`");
        let mut when = None;
        let mut when_text = String::new();
        match f.get("when") {
            None => self.err(node.pos, format!("{what} needs `when:`")),
            Some(n) => {
                if let Some(text) = self.text(n, &format!("{what}.when")) {
                    when_text = text.clone();
                    match expr::parse_expr(&text) {
                        Ok(e) => {
                            for (g, span) in expr::referenced_groups(&e) {
                                if !groups.contains(&g.as_str()) {
                                    let h = hint(&g, groups.iter().copied());
                                    self.err(
                                        n.pos_at(span.start),
                                        format!("{what}: unknown group `{g}`{h}"),
                                    );
                                }
                            }
                            when = Some(e);
                        }
                        Err(e) => self.err(n.pos_at(e.pos), format!("{what}: {}", e.message)),
                    }
                }
            }
        }
        let dur =
            |s: &mut Self, k: &str| f.get(k).and_then(|n| s.duration(n, &format!("{what}.{k}")));
        let for_ = dur(self, "for").unwrap_or_default();
        let hold = dur(self, "hold").unwrap_or_default();
        let cooldown = dur(self, "cooldown");
        let max_active = dur(self, "max_active");
        if let (Some(d), Some(k)) = (max_active, f.key("max_active")) {
            if d.is_zero() {
                self.err(k.pos, format!("{what}: `max_active` must be longer than 0"));
            }
        }
        let then = match f.get("then") {
            Some(n) => {
                let actions = self.actions(n, &what, "then", groups, hooks);
                if matches!(&n.value, Value::Null)
                    || matches!(&n.value, Value::Seq(v) if v.is_empty())
                {
                    self.err(n.pos, format!("{what}: `then:` has no actions"));
                }
                actions
            }
            None => Vec::new(),
        };
        let while_ = match f.get("while") {
            Some(n) => {
                let actions = self.actions(n, &what, "while", groups, hooks);
                if matches!(&n.value, Value::Null)
                    || matches!(&n.value, Value::Seq(v) if v.is_empty())
                {
                    self.err(n.pos, format!("{what}: `while:` has no actions"));
                }
                actions
            }
            None => Vec::new(),
        };
        if f.get("then").is_none() && f.get("while").is_none() {
            self.err(
                node.pos,
                format!("{what} needs `then:` or `while:` actions"),
            );
        }
        if let (Some(_), None, Some(k)) = (cooldown, f.get("then"), f.key("cooldown")) {
            self.err(
                k.pos,
                format!("{what}: `cooldown` repeats `then:` actions, but the rule has none"),
            );
        }
        let when = when?;
        Some((
            Rule {
                name,
                when,
                when_text,
                for_,
                hold,
                cooldown,
                then,
                while_,
                max_active,
            },
            name_pos,
        ))
    }

    fn actions(
        &mut self,
        node: &Node,
        what: &str,
        block: &str,
        groups: &[&str],
        hooks: &[&str],
    ) -> Vec<Action> {
        let mut out = Vec::new();
        for item in self.seq(node, &format!("{what}.{block}")) {
            let Some(text) = self.text(item, &format!("{what}.{block} action")) else {
                continue;
            };
            match expr::parse_action(&text) {
                Ok(a) => {
                    if block == "while" && !a.allowed_in_while() {
                        self.err(
                            item.text_pos,
                            format!("{what}: `{}` is a step action and belongs in `then:`; `while:` holds claims (set) and hooks", first_word(&text)),
                        );
                    }
                    if block == "then" && matches!(a, Action::Cap { .. }) {
                        self.err(
                            item.text_pos,
                            format!("{what}: `cap` holds a ceiling while the rule is active and belongs in `while:`"),
                        );
                    }
                    if let Action::Cap { knob, .. } = &a {
                        let set_too = out.iter().any(
                            |b: &Action| matches!(b, Action::Set { knob: k, .. } if k == knob),
                        );
                        if set_too {
                            self.err(
                                item.text_pos,
                                format!("{what}: `{knob}` is both set and capped by this rule; keep one"),
                            );
                        }
                    }
                    self.check_action_refs(&a, item, &text, what, groups, hooks);
                    out.push(a);
                }
                Err(e) => self.err(item.pos_at(e.pos), format!("{what}: {}", e.message)),
            }
        }
        out
    }

    fn check_action_refs(
        &mut self,
        a: &Action,
        item: &Node,
        text: &str,
        what: &str,
        groups: &[&str],
        hooks: &[&str],
    ) {
        let knob = match a {
            Action::Set { knob, .. }
            | Action::Raise { knob, .. }
            | Action::Lower { knob, .. }
            | Action::Cap { knob, .. } => Some(knob),
            Action::Hook(name) => {
                if !hooks.contains(&name.as_str()) {
                    let h = hint(name, hooks.iter().copied());
                    let col = argument_offset(text);
                    self.err(
                        item.pos_at(col),
                        format!("{what}: unknown hook `{name}`{h}"),
                    );
                }
                None
            }
            _ => None,
        };
        if let Some(group) = a.resort_group() {
            if !groups.contains(&group) {
                let h = hint(group, groups.iter().copied());
                let col = argument_offset(text);
                self.err(
                    item.pos_at(col),
                    format!("{what}: unknown group `{group}`{h}"),
                );
            }
        }
        if let Some(Knob::Group { group, .. }) = knob {
            if !groups.contains(&group.as_str()) {
                let h = hint(group, groups.iter().copied());
                let col = argument_offset(text);
                self.err(
                    item.pos_at(col),
                    format!("{what}: unknown group `{group}`{h}"),
                );
            }
        }
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
pub fn parse_duration(s: &str) -> Result<Duration, crate::units::UnitError> {
    crate::units::Duration::parse(s).map(|d| d.0)
}

/// Issue 13: `settings.metrics`, `settings.recorder`, `report.criteria`.
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
