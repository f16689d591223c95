//! The last-resort actions of a rule's `then:`: `freeze G`,
//! `thaw G` (`cgroup.freeze`) and `kill in G [prefer PATTERN] [avoid
//! PATTERN] [grace D]`. PATTERN is a comm glob, or `a|b` for either;
//! `grace` (default 5s, 0s–10m) is how long SIGTERM has before SIGKILL.

use super::{error, Action, ParseError, Word};
use crate::knobs::is_valid_name;
use std::fmt;

/// The grace between SIGTERM and SIGKILL when none is given.
pub(crate) const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
/// The longest grace accepted.
pub(crate) const MAX_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// `kill in G prefer … avoid … grace …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillSpec {
    pub(crate) group: String,
    /// Comm globs; a victim is chosen among these first.
    pub(crate) prefer: Vec<String>,
    /// Comm globs never killed.
    pub(crate) avoid: Vec<String>,
    pub(crate) grace: std::time::Duration,
}

impl fmt::Display for KillSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kill in {}", self.group)?;
        if !self.prefer.is_empty() {
            write!(f, " prefer {}", self.prefer.join("|"))?;
        }
        if !self.avoid.is_empty() {
            write!(f, " avoid {}", self.avoid.join("|"))?;
        }
        write!(f, " grace {}", crate::units::Duration(self.grace))
    }
}

fn group_arg(verb: &str, args: &[Word<'_>], total: usize) -> Result<String, ParseError> {
    match args {
        [g] if is_valid_name(g.text) => Ok(g.text.to_string()),
        [g] => Err(error(
            g.pos,
            format!("invalid group name `{}` after `{verb}`", g.text),
        )),
        [] => Err(error(total, format!("expected a group after `{verb}`"))),
        [_, extra, ..] => Err(error(
            extra.pos,
            format!("unexpected `{}` after `{verb} GROUP`", extra.text),
        )),
    }
}

/// `freeze G` / `thaw G`.
pub(super) fn parse_freeze(
    freeze: bool,
    args: &[Word<'_>],
    total: usize,
) -> Result<Action, ParseError> {
    let verb = if freeze { "freeze" } else { "thaw" };
    let g = group_arg(verb, args, total)?;
    Ok(if freeze {
        Action::Freeze(g)
    } else {
        Action::Thaw(g)
    })
}

fn patterns(w: &Word<'_>) -> Result<Vec<String>, ParseError> {
    let mut out = Vec::new();
    // Quoted like running()'s argument: `"batch-*"` or `'a|b'`.
    let text = ['"', '\'']
        .iter()
        .find_map(|q| w.text.strip_prefix(*q).and_then(|t| t.strip_suffix(*q)))
        .unwrap_or(w.text);
    for p in text.split('|') {
        if p.is_empty() {
            return Err(error(w.pos, format!("empty name in `{}`", w.text)));
        }
        if let Err(e) = glob::Pattern::new(p) {
            return Err(error(w.pos, format!("`{p}` is not a valid glob: {e}")));
        }
        if !p.contains(['*', '?', '[']) && p.len() > 15 {
            return Err(error(
                w.pos,
                format!("`{p}` is longer than 15 bytes; the kernel truncates comm, so it would never match"),
            ));
        }
        out.push(p.to_string());
    }
    Ok(out)
}

/// `kill in G [prefer P] [avoid P] [grace D]`, the options in any order.
pub(super) fn parse_kill(args: &[Word<'_>], total: usize) -> Result<Action, ParseError> {
    const FORM: &str = "kill in GROUP [prefer NAMES] [avoid NAMES] [grace DURATION]";
    let Some(first) = args.first() else {
        return Err(error(total, format!("expected `in GROUP`: {FORM}")));
    };
    if first.text != "in" {
        return Err(error(
            first.pos,
            format!("expected `in` after `kill`: {FORM}"),
        ));
    }
    let Some(g) = args.get(1) else {
        return Err(error(
            total,
            format!("expected a group after `kill in`: {FORM}"),
        ));
    };
    if !is_valid_name(g.text) {
        return Err(error(g.pos, format!("invalid group name `{}`", g.text)));
    }
    let mut spec = KillSpec {
        group: g.text.to_string(),
        prefer: Vec::new(),
        avoid: Vec::new(),
        grace: DEFAULT_GRACE,
    };
    let mut seen: Vec<&str> = Vec::new();
    let mut rest = args.get(2..).unwrap_or(&[]).iter();
    while let Some(k) = rest.next() {
        if !matches!(k.text, "prefer" | "avoid" | "grace") {
            return Err(error(k.pos, format!("unexpected `{}`: {FORM}", k.text)));
        }
        if seen.contains(&k.text) {
            return Err(error(k.pos, format!("`{}` given twice", k.text)));
        }
        seen.push(k.text);
        let Some(v) = rest.next() else {
            return Err(error(total, format!("expected a value after `{}`", k.text)));
        };
        match k.text {
            "prefer" => spec.prefer = patterns(v)?,
            "avoid" => spec.avoid = patterns(v)?,
            _ => {
                let d = crate::units::Duration::parse(v.text)
                    .map_err(|e| error(v.pos, format!("grace: {e}")))?
                    .get();
                if d > MAX_GRACE {
                    return Err(error(v.pos, "grace must be at most 10m"));
                }
                spec.grace = d;
            }
        }
    }
    Ok(Action::Kill(spec))
}

#[cfg(test)]
mod tests {
    use super::super::parse_action;
    use super::*;

    #[test]
    fn kill_options_in_any_order_quotes_stripped_and_printed_back() {
        let a =
            parse_action(r#"kill in work prefer "cgwx-batch*|job?" avoid 'hmi' grace 2s"#).unwrap();
        let Action::Kill(k) = &a else { panic!("{a:?}") };
        assert_eq!(k.group, "work");
        assert_eq!(k.prefer, ["cgwx-batch*", "job?"]);
        assert_eq!(k.avoid, ["hmi"]);
        assert_eq!(k.grace, std::time::Duration::from_secs(2));
        assert_eq!(parse_action(&a.to_string()).unwrap(), a);
        let b = parse_action("kill in apps").unwrap();
        assert_eq!(b.to_string(), "kill in apps grace 5s");
        assert_eq!(
            parse_action("freeze rec").unwrap(),
            Action::Freeze("rec".into())
        );
        assert_eq!(
            parse_action("thaw rec").unwrap(),
            Action::Thaw("rec".into())
        );
        for bad in [
            "kill apps",
            "kill in",
            "kill in apps prefer",
            "kill in apps grace 11m",
            "kill in apps avoid a avoid b",
            "kill in apps please",
            "freeze",
            "thaw a b",
        ] {
            assert!(parse_action(bad).is_err(), "{bad}");
        }
    }
}
