//! `cap KNOB at VALUE` (caps that win over boosts): a `while`
//! action holding a protective ceiling on a ceiling-type knob
//! ([`Knob::is_ceiling`]); the engine's merge lets it beat every raise.

use super::{error, knob_at, value_at, Action, ParseError, Word};

/// Parses the words after `cap`; `end` is the action's length (for "expected
/// … at the end" errors).
pub(super) fn parse_cap(args: &[Word<'_>], end: usize) -> Result<Action, ParseError> {
    let Some(k) = args.first() else {
        return Err(error(end, "expected a knob after `cap`"));
    };
    let knob = knob_at(k.text, k.pos)?;
    if !knob.is_ceiling() {
        return Err(error(k.pos, crate::knobs::not_a_ceiling(&knob)));
    }
    match args.get(1) {
        Some(w) if w.text == "at" => {}
        Some(w) => {
            return Err(error(
                w.pos,
                format!("expected `at` after `cap {knob}`, found `{}`", w.text),
            ))
        }
        None => {
            return Err(error(
                end,
                format!("expected `at VALUE` after `cap {knob}`"),
            ))
        }
    }
    let Some(v) = args.get(2) else {
        return Err(error(
            end,
            format!("expected a value after `cap {knob} at`"),
        ));
    };
    if let Some(extra) = args.get(3) {
        return Err(error(
            extra.pos,
            format!("unexpected `{}` after the cap's value", extra.text),
        ));
    }
    let value = value_at(&knob, v.text, v.pos)?;
    Ok(Action::Cap { knob, value })
}
