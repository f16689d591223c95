//! Policy diagnostics: `FILE:LINE:COL: error: MESSAGE`, collected, never fatal
//! one at a time, so `check` can report every problem in one run.

use super::yaml::Pos;
use std::fmt;

/// One problem in a policy, at a position in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub pos: Pos,
    pub message: String,
}

/// All problems found in one policy file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics {
    pub file: String,
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn new(file: impl Into<String>) -> Self {
        Diagnostics {
            file: file.into(),
            items: Vec::new(),
        }
    }

    pub fn error(&mut self, pos: Pos, message: impl Into<String>) {
        self.items.push(Diagnostic {
            pos,
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Errors in file order, so the output reads top to bottom.
    pub fn sorted(mut self) -> Self {
        self.items.sort_by_key(|a| a.pos);
        self.items.dedup();
        self
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.items {
            writeln!(
                f,
                "{}:{}:{}: error: {}",
                self.file, d.pos.line, d.pos.col, d.message
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// The closest candidate to a misspelled word, if one is close enough to be
/// a plausible typo (`memroy` → `memory`).
pub fn did_you_mean<'a>(
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
pub fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
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
