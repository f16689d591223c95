//! Policy diagnostics: `FILE:LINE:COL: error: MESSAGE`, collected, never fatal
//! one at a time, so `check` can report every problem in one run.

use super::yaml::Pos;
use std::fmt;

/// One problem in a policy, at a position in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Diagnostic {
    pub(crate) pos: Pos,
    pub(crate) message: String,
}

/// All problems found in one policy file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics {
    pub(crate) file: String,
    pub(crate) items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub(crate) fn new(file: impl Into<String>) -> Self {
        Diagnostics {
            file: file.into(),
            items: Vec::new(),
        }
    }

    pub(crate) fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.items.push(Diagnostic {
            pos,
            message: message.into(),
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Errors in file order, so the output reads top to bottom.
    pub(crate) fn sorted(mut self) -> Self {
        self.items.sort_by_key(|a| a.pos);
        self.items.dedup();
        self
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = escape_controls(&self.file);
        for d in &self.items {
            writeln!(
                f,
                "{file}:{}:{}: error: {}",
                d.pos.line,
                d.pos.col,
                escape_controls(&d.message)
            )?;
        }
        Ok(())
    }
}

/// `s` with every control character escaped (`\n`, `\t`, `\r`, else
/// `\u{..}`), so a value quoted in a message never breaks the one line per
/// error rule, nor sends terminal escapes.
pub(crate) fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

impl std::error::Error for Diagnostics {}

/// The closest candidate to a misspelled word, if one is close enough to be
/// a plausible typo (`memroy` → `memory`).
pub(crate) fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// ", did you mean `x`?" or nothing: appended to "unknown …" messages.
pub(crate) fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    match did_you_mean(word, candidates) {
        Some(c) => format!(", did you mean `{c}`?"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_words_only() {
        assert_eq!(
            did_you_mean("memroy", ["memory", "cpu", "io"]),
            Some("memory")
        );
        assert_eq!(did_you_mean("zzz", ["memory", "cpu", "io"]), None);
        assert_eq!(
            hint("placment", ["placement", "rules"]),
            ", did you mean `placement`?"
        );
    }

    #[test]
    fn control_characters_are_escaped_one_line_per_error() {
        let mut d = Diagnostics::new("p\n.yaml");
        d.error(Pos::new(2, 3), "bad `a\nb\tc\u{1b}[31m\u{7f}`");
        assert_eq!(
            d.to_string(),
            "p\\n.yaml:2:3: error: bad `a\\nb\\tc\\u{1b}[31m\\u{7f}`\n"
        );
        assert_eq!(d.to_string().lines().count(), 1);
    }

    #[test]
    fn renders_one_line_per_error_in_file_order() {
        let mut d = Diagnostics::new("p.yaml");
        d.error(Pos::new(3, 1), "b");
        d.error(Pos::new(1, 5), "a");
        assert_eq!(
            d.sorted().to_string(),
            "p.yaml:1:5: error: a\np.yaml:3:1: error: b\n"
        );
    }
}
