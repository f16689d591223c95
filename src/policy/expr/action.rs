//! Parsing a rule action (`set`, `raise`/`lower`, `cap`, `hook`, `compact
//! memory`, `freeze`/`thaw`, `kill in`) into an [`Action`].

use super::{cap, error, resort, Action, ParseError, MAX_CHARS};
use crate::knobs::{is_valid_name, suggest, Knob, KnobValue};
use crate::units::Size;

/// A blank-separated word of an action and its character offset.
#[derive(Debug, Clone, Copy)]
pub(super) struct Word<'a> {
    pub(super) text: &'a str,
    pub(super) pos: usize,
}

fn split_words(src: &str) -> Vec<Word<'_>> {
    let mut words = Vec::new();
    let mut current: Option<(usize, usize)> = None; // (byte start, char pos)
    for (char_pos, (byte, c)) in src.char_indices().enumerate() {
        match (c.is_whitespace(), current) {
            (false, None) => current = Some((byte, char_pos)),
            (true, Some((b, p))) => {
                words.push(Word {
                    text: src.get(b..byte).unwrap_or(""),
                    pos: p,
                });
                current = None;
            }
            _ => {}
        }
    }
    if let Some((b, p)) = current {
        words.push(Word {
            text: src.get(b..).unwrap_or(""),
            pos: p,
        });
    }
    words
}

const ACTION_FORMS: &str = "set KNOB = VALUE, raise KNOB by DELTA up to LIMIT, lower KNOB by DELTA down to LIMIT, cap KNOB at VALUE, hook NAME, compact memory, freeze GROUP, thaw GROUP or kill in GROUP [prefer NAMES] [avoid NAMES] [grace D]";

/// Parses one action of a rule's `then:` or `while:` list.
pub(crate) fn parse_action(src: &str) -> Result<Action, ParseError> {
    let total = src.chars().count();
    if total > MAX_CHARS {
        return Err(error(
            MAX_CHARS,
            format!("longer than {MAX_CHARS} characters"),
        ));
    }
    let words = split_words(src);
    let Some(verb) = words.first() else {
        return Err(error(0, format!("empty action: expected {ACTION_FORMS}")));
    };
    let args = words.get(1..).unwrap_or(&[]);
    match verb.text {
        "set" => parse_set(src, verb),
        "raise" => parse_step(args, verb, total, true),
        "lower" => parse_step(args, verb, total, false),
        "hook" => match args {
            [name] if is_valid_name(name.text) => Ok(Action::Hook(name.text.to_string())),
            [name] => Err(error(
                name.pos,
                format!(
                    "invalid hook name `{}`: expected [a-z0-9][a-z0-9_-]{{0,63}}",
                    name.text
                ),
            )),
            [] => Err(error(total, "expected a hook name after `hook`")),
            [_, extra, ..] => Err(error(
                extra.pos,
                format!("unexpected `{}` after the hook name", extra.text),
            )),
        },
        "compact" => match args {
            [] => Err(error(total, "expected `memory` after `compact`")),
            [what, ..] if what.text != "memory" => Err(error(
                what.pos,
                format!("expected `compact memory`, found `compact {}`", what.text),
            )),
            [_, extra, ..] => Err(error(
                extra.pos,
                format!("unexpected `{}` after `compact memory`", extra.text),
            )),
            [_] => Ok(Action::CompactMemory),
        },
        "cap" => cap::parse_cap(args, total),
        "freeze" => resort::parse_freeze(true, args, total),
        "thaw" => resort::parse_freeze(false, args, total),
        "kill" => resort::parse_kill(args, total),
        other => {
            let hint = suggest(
                other,
                [
                    "set", "raise", "lower", "cap", "hook", "compact", "freeze", "thaw", "kill",
                ],
            )
            .map(|v| format!(", did you mean `{v}`?"))
            .unwrap_or_default();
            Err(error(
                verb.pos,
                format!("unknown action `{other}`: expected {ACTION_FORMS}{hint}"),
            ))
        }
    }
}

pub(super) fn knob_at(text: &str, pos: usize) -> Result<Knob, ParseError> {
    Knob::parse(text).map_err(|e| error(pos, e.to_string()))
}

pub(super) fn value_at(knob: &Knob, text: &str, pos: usize) -> Result<KnobValue, ParseError> {
    knob.parse_value(text)
        .map_err(|e| error(pos, format!("{e} (for `{knob}`)")))
}

/// `set KNOB = VALUE`; the value is the rest of the line, so cpu lists may
/// contain blanks (`0-3, 6`). `KNOB=VALUE` without blanks also works.
fn parse_set(src: &str, verb: &Word<'_>) -> Result<Action, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut pos = verb.pos.saturating_add(3);
    let skip_ws = |mut p: usize| {
        while chars.get(p).is_some_and(|c| c.is_whitespace()) {
            p = p.saturating_add(1);
        }
        p
    };
    pos = skip_ws(pos);
    let knob_start = pos;
    while chars
        .get(pos)
        .is_some_and(|c| !c.is_whitespace() && *c != '=')
    {
        pos = pos.saturating_add(1);
    }
    let knob_text: String = chars.get(knob_start..pos).unwrap_or(&[]).iter().collect();
    if knob_text.is_empty() {
        return Err(error(knob_start, "expected a knob after `set`"));
    }
    let knob = knob_at(&knob_text, knob_start)?;
    pos = skip_ws(pos);
    if chars.get(pos) != Some(&'=') {
        let found = chars
            .get(pos)
            .map_or("the end of the action".to_string(), |c| format!("`{c}`"));
        return Err(error(
            pos,
            format!("expected `=` after `set {knob}`, found {found}"),
        ));
    }
    pos = skip_ws(pos.saturating_add(1));
    let value_text: String = chars.get(pos..).unwrap_or(&[]).iter().collect();
    let value_text = value_text.trim_end();
    if value_text.is_empty() {
        return Err(error(pos, format!("expected a value after `set {knob} =`")));
    }
    let value = value_at(&knob, value_text, pos)?;
    Ok(Action::Set { knob, value })
}

/// `raise KNOB by DELTA up to LIMIT` / `lower KNOB by DELTA down to LIMIT`.
fn parse_step(
    args: &[Word<'_>],
    verb: &Word<'_>,
    end: usize,
    up: bool,
) -> Result<Action, ParseError> {
    let direction = if up { "up" } else { "down" };
    let expected = [None, Some("by"), None, Some(direction), Some("to"), None];
    let form = format!("{} KNOB by DELTA {direction} to LIMIT", verb.text);
    for (i, want) in expected.iter().enumerate() {
        match (args.get(i), want) {
            (None, _) => return Err(error(end, format!("incomplete action, expected `{form}`"))),
            (Some(w), Some(kw)) if w.text != *kw => {
                return Err(error(
                    w.pos,
                    format!("expected `{kw}`, found `{}` (the form is `{form}`)", w.text),
                ))
            }
            _ => {}
        }
    }
    if let Some(extra) = args.get(expected.len()) {
        return Err(error(
            extra.pos,
            format!("unexpected `{}` after the limit", extra.text),
        ));
    }
    // The loop above proved all six words exist.
    let (Some(knob_w), Some(delta_w), Some(limit_w)) = (args.first(), args.get(2), args.get(5))
    else {
        return Err(error(end, format!("incomplete action, expected `{form}`")));
    };
    let knob = knob_at(knob_w.text, knob_w.pos)?;
    if !knob.is_numeric() {
        return Err(error(
            knob_w.pos,
            format!(
                "`{knob}` is not numeric; {} steps sizes, frequencies, weights, counts, integers and percentages, use `set` instead",
                verb.text
            ),
        ));
    }
    let by = value_at(&knob, delta_w.text, delta_w.pos)?;
    if !is_positive(&by) {
        return Err(error(
            delta_w.pos,
            format!("the step `{}` must be a positive amount", delta_w.text),
        ));
    }
    let limit = value_at(&knob, limit_w.text, limit_w.pos)?;
    if up {
        Ok(Action::Raise { knob, by, limit })
    } else if matches!(limit, KnobValue::Size(Size::Max) | KnobValue::Count(None)) {
        Err(error(
            limit_w.pos,
            "`lower` needs a finite limit, not `max`",
        ))
    } else {
        Ok(Action::Lower { knob, by, limit })
    }
}

/// Whether a `by` amount is a finite number greater than zero.
fn is_positive(value: &KnobValue) -> bool {
    match value {
        KnobValue::Size(Size::Bytes(b)) => *b > 0,
        KnobValue::Count(Some(n)) => *n > 0,
        KnobValue::Frequency(f) => f.khz > 0,
        KnobValue::Weight(w) => *w > 0,
        KnobValue::Int(n) => *n > 0,
        KnobValue::Percent(p) => p.value() > 0.0,
        _ => false,
    }
}
