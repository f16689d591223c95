//! The `when:` expression parser: words, `running(…)` globs, comparisons,
//! `and`/`or`/`not` with precedence and depth limits.

use super::metric::{parse_metric, parse_threshold};
use super::{
    error, hw, CmpOp, Compare, Expr, ExprKind, ParseError, Span, Spanned, Threshold, COMM_CHARS,
    MAX_CHARS, MAX_DEPTH, MAX_GLOB_CHARS,
};
use crate::knobs::{is_valid_name, suggest};

/// Characters of a metric name or keyword.
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')
}

/// Characters allowed in an unquoted `running(...)` pattern.
pub(super) fn is_bare_glob_char(c: char) -> bool {
    !c.is_whitespace() && !c.is_control() && !matches!(c, '(' | ')' | '"' | '\'' | ',')
}

/// Parses a `when:` expression.
pub(crate) fn parse_expr(src: &str) -> Result<Expr, ParseError> {
    let mut p = Parser::new(src)?;
    let expr = p.parse_or()?;
    p.skip_ws();
    if p.peek().is_some() {
        let found = p.describe_here();
        let hint = p
            .word_here()
            .and_then(|w| suggest(&w, ["and", "or"]))
            .map(|k| format!(", did you mean `{k}`?"))
            .unwrap_or_else(|| p.operator_hint());
        return Err(error(
            p.pos,
            format!("expected `and`, `or` or the end of the condition, found {found}{hint}"),
        ));
    }
    Ok(expr)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn new(src: &str) -> Result<Self, ParseError> {
        let chars: Vec<char> = src.chars().take(MAX_CHARS.saturating_add(1)).collect();
        if chars.len() > MAX_CHARS {
            return Err(error(
                MAX_CHARS,
                format!("longer than {MAX_CHARS} characters; split it into several rules"),
            ));
        }
        Ok(Parser {
            chars,
            pos: 0,
            depth: 0,
        })
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) {
        self.pos = self.pos.saturating_add(1).min(self.chars.len());
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn take_while(&mut self, pred: impl Fn(char) -> bool) -> String {
        let mut out = String::new();
        while let Some(c) = self.peek().filter(|c| pred(*c)) {
            out.push(c);
            self.bump();
        }
        out
    }

    fn word_here(&self) -> Option<String> {
        let word: String = self.chars[self.pos.min(self.chars.len())..]
            .iter()
            .take_while(|c| is_word_char(**c))
            .collect();
        (!word.is_empty()).then_some(word)
    }

    /// The token at the cursor, for "found ..." in messages (`||` and `&&`
    /// whole).
    fn describe_here(&self) -> String {
        let next = self.chars.get(self.pos.saturating_add(1)).copied();
        match (self.word_here(), self.peek()) {
            (Some(w), _) => format!("`{w}`"),
            (None, Some(c @ ('|' | '&'))) if next == Some(c) => format!("`{c}{c}`"),
            (None, Some(c)) => format!("`{c}`"),
            (None, None) => "the end of the condition".to_string(),
        }
    }

    /// For C's `||`, `&&` and `!` at the cursor: the keyword the rule
    /// language spells them with, as the end of a message.
    fn operator_hint(&self) -> String {
        let next = self.chars.get(self.pos.saturating_add(1)).copied();
        let (word, c) = match self.peek() {
            Some('|') => ("or", "||"),
            Some('&') => ("and", "&&"),
            Some('!') if next != Some('=') => ("not", "!"),
            _ => return String::new(),
        };
        format!("; the rule language writes `{word}`, not `{c}`")
    }

    /// A unit written apart from its number (`25 %`, `2 G`): the value
    /// taken is the bare number and the unit would be read as the next
    /// word. The joined spelling, when the word after `value` is a unit.
    fn detached_unit(&self, value: &str) -> Option<String> {
        const UNITS: &[&str] = &[
            "%", "°C", "°", "C", "c", "ns", "us", "µs", "ms", "s", "m", "h", "d", "B", "K", "M",
            "G", "T", "P", "E", "k", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB", "Hz",
            "kHz", "MHz", "GHz",
        ];
        let digits = value.strip_prefix('-').unwrap_or(value);
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return None;
        }
        let rest = self.chars.get(self.pos..).unwrap_or(&[]);
        let blanks = rest.iter().take_while(|c| c.is_whitespace()).count();
        let word: String = rest[blanks..]
            .iter()
            .take_while(|c| !c.is_whitespace() && !matches!(c, '(' | ')'))
            .collect();
        let unit = word.split('/').next().unwrap_or("");
        (blanks > 0 && UNITS.contains(&unit)).then(|| format!("{value}{word}"))
    }

    /// Whether keyword `kw` stands at the cursor as a whole word.
    fn at_keyword(&self, kw: &str) -> bool {
        let mut i = self.pos;
        for k in kw.chars() {
            if self.chars.get(i) != Some(&k) {
                return false;
            }
            i = i.saturating_add(1);
        }
        !self.chars.get(i).is_some_and(|c| is_word_char(*c))
    }

    /// Consumes keyword `kw` (after blanks) if present.
    fn eat_keyword(&mut self, kw: &str) -> bool {
        self.skip_ws();
        if self.at_keyword(kw) {
            self.pos = self.pos.saturating_add(kw.len()).min(self.chars.len());
            true
        } else {
            false
        }
    }

    fn parse_or(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.parse_and()?;
        while self.eat_keyword("or") {
            let right = self.parse_and()?;
            let span = Span::new(left.span.start, right.span.end);
            left = Expr {
                kind: ExprKind::Or(Box::new(left), Box::new(right)),
                span,
            };
        }
        Ok(left)
    }

    fn parse_and(&mut self) -> Result<Expr, ParseError> {
        let mut left = self.parse_factor()?;
        while self.eat_keyword("and") {
            let right = self.parse_factor()?;
            let span = Span::new(left.span.start, right.span.end);
            left = Expr {
                kind: ExprKind::And(Box::new(left), Box::new(right)),
                span,
            };
        }
        Ok(left)
    }

    /// Runs `f` one nesting level deeper, refusing to go past [`MAX_DEPTH`].
    fn nested<T>(
        &mut self,
        at: usize,
        f: impl FnOnce(&mut Self) -> Result<T, ParseError>,
    ) -> Result<T, ParseError> {
        if self.depth >= MAX_DEPTH {
            return Err(error(
                at,
                format!("nested deeper than {MAX_DEPTH} levels of `(` and `not`"),
            ));
        }
        self.depth = self.depth.saturating_add(1);
        let result = f(self);
        self.depth = self.depth.saturating_sub(1);
        result
    }

    fn parse_factor(&mut self) -> Result<Expr, ParseError> {
        self.skip_ws();
        let start = self.pos;
        if self.at_keyword("not") {
            self.pos = self.pos.saturating_add(3).min(self.chars.len());
            let inner = self.nested(start, Self::parse_factor)?;
            let span = Span::new(start, inner.span.end);
            return Ok(Expr {
                kind: ExprKind::Not(Box::new(inner)),
                span,
            });
        }
        match self.peek() {
            Some('(') => {
                self.bump();
                let inner = self.nested(start, Self::parse_or)?;
                self.skip_ws();
                if self.peek() != Some(')') {
                    return Err(error(
                        self.pos,
                        format!(
                            "expected `)` to close the `(` at character {start}, found {}{}",
                            self.describe_here(),
                            self.operator_hint()
                        ),
                    ));
                }
                self.bump();
                Ok(inner)
            }
            None => Err(error(
                self.pos,
                "expected a condition (a metric comparison, running(...), exists(...), `not` or `(`), found the end of the condition",
            )),
            Some(_) => self.parse_atom(),
        }
    }

    fn parse_atom(&mut self) -> Result<Expr, ParseError> {
        let start = self.pos;
        let word = self.take_while(is_word_char);
        if word.is_empty() {
            return Err(error(
                start,
                format!(
                    "expected a condition (a metric comparison, running(...), exists(...), `not` or `(`), found {}{}",
                    self.describe_here(),
                    self.operator_hint()
                ),
            ));
        }
        self.skip_ws();
        let paren_follows = self.peek() == Some('(');
        if paren_follows && (word == "running" || word == "exists" || word == "throttled") {
            return self.parse_call(&word, start);
        }
        if word == "and" || word == "or" {
            return Err(error(
                start,
                format!("expected a condition before `{word}`"),
            ));
        }
        if paren_follows && !word.contains('.') {
            let hint = suggest(&word, ["running", "exists"])
                .map(|f| format!(", did you mean `{f}`?"))
                .unwrap_or_default();
            return Err(error(
                start,
                format!("unknown function `{word}`: expected running(NAME) or exists(GROUP){hint}"),
            ));
        }
        let metric = parse_metric(&word, start)?;
        let op_pos = self.pos;
        let op = self.parse_op(&word)?;
        self.skip_ws();
        let value_start = self.pos;
        let value = self.take_while(|c| !c.is_whitespace() && c != '(' && c != ')');
        if value.is_empty() {
            return Err(error(
                value_start,
                format!(
                    "expected a value after `{word} {}`, found {}",
                    op.symbol(),
                    self.describe_here()
                ),
            ));
        }
        if let Some(joined) = self.detached_unit(&value) {
            return Err(error(
                value_start,
                format!("no space between a number and its unit: write `{joined}`"),
            ));
        }
        let mut value_span = Span::new(value_start, self.pos);
        let mut threshold = parse_threshold(&metric, &word, op, op_pos, &value, value_start)?;
        self.kpi_over(&mut threshold, &mut value_span)?; // `over 1m`
        Ok(Expr {
            kind: ExprKind::Compare(Compare {
                metric,
                op,
                value: threshold,
                value_span,
            }),
            span: Span::new(start, value_span.end),
        })
    }

    fn parse_op(&mut self, metric: &str) -> Result<CmpOp, ParseError> {
        let first = self.peek();
        let second = self.chars.get(self.pos.saturating_add(1)).copied();
        let (op, len) = match (first, second) {
            (Some('>'), Some('=')) => (CmpOp::Ge, 2),
            (Some('>'), _) => (CmpOp::Gt, 1),
            (Some('<'), Some('=')) => (CmpOp::Le, 2),
            (Some('<'), _) => (CmpOp::Lt, 1),
            (Some('='), Some('=')) => (CmpOp::Eq, 2),
            (Some('!'), Some('=')) => (CmpOp::Ne, 2),
            (Some('='), Some('>')) => {
                return Err(error(
                    self.pos,
                    "`=>` is not a comparison, did you mean `>=`?",
                ))
            }
            (Some('='), Some('<')) => {
                return Err(error(
                    self.pos,
                    "`=<` is not a comparison, did you mean `<=`?",
                ))
            }
            (Some('='), _) => {
                return Err(error(
                    self.pos,
                    "`=` is not a comparison, did you mean `==`?",
                ))
            }
            _ => {
                return Err(error(
                    self.pos,
                    format!(
                        "expected a comparison (>, >=, <, <=, ==, !=) after `{metric}`, found {}",
                        self.describe_here()
                    ),
                ))
            }
        };
        self.pos = self.pos.saturating_add(len).min(self.chars.len());
        Ok(op)
    }

    fn parse_call(&mut self, name: &str, start: usize) -> Result<Expr, ParseError> {
        self.bump(); // the `(`
        self.skip_ws();
        let arg_start = self.pos;
        let arg = match self.peek() {
            Some(q @ ('"' | '\'')) => {
                self.bump();
                let text = self.take_while(|c| c != q && !c.is_control());
                if self.peek() != Some(q) {
                    return Err(error(
                        self.pos,
                        format!(
                            "expected the closing {q} of the name started at character {arg_start}"
                        ),
                    ));
                }
                self.bump();
                text
            }
            _ => self.take_while(is_bare_glob_char),
        };
        let arg_end = self.pos;
        self.skip_ws();
        if self.peek() != Some(')') {
            return Err(error(
                self.pos,
                format!(
                    "expected `)` after {name}(...), found {}; quote names with blanks or special characters",
                    self.describe_here()
                ),
            ));
        }
        self.bump();
        let span = Span::new(start, self.pos);
        let kind = if name == "running" {
            check_glob(&arg, arg_start)?;
            ExprKind::Running(arg)
        } else if name == "throttled" {
            hw::throttled_arg(&arg, arg_start)?;
            ExprKind::Throttled(Spanned::new(arg, Span::new(arg_start, arg_end)))
        } else {
            if !is_valid_name(&arg) {
                return Err(error(
                    arg_start,
                    format!(
                        "exists() needs a group name ([a-z0-9][a-z0-9_-]{{0,63}}), found `{arg}`"
                    ),
                ));
            }
            ExprKind::Exists(Spanned::new(arg, Span::new(arg_start, arg_end)))
        };
        Ok(Expr { kind, span })
    }
}

/// Validates a `running(...)` pattern against what comm can hold.
fn check_glob(glob: &str, pos: usize) -> Result<(), ParseError> {
    let len = glob.chars().count();
    if len == 0 {
        return Err(error(pos, "running() needs a process name or glob"));
    }
    if len > MAX_GLOB_CHARS {
        return Err(error(
            pos,
            format!("running() pattern is longer than {MAX_GLOB_CHARS} characters"),
        ));
    }
    let has_wildcard = glob.contains(['*', '?', '[']);
    if !has_wildcard && len > COMM_CHARS {
        let truncated: String = glob.chars().take(COMM_CHARS).collect();
        return Err(error(
            pos,
            format!(
                "`{glob}` can never match: the kernel truncates process names (comm) to {COMM_CHARS} characters; write `{truncated}` or a glob"
            ),
        ));
    }
    // Every `[` opens a class that must close.
    let mut open = None;
    for (i, c) in glob.chars().enumerate() {
        match (c, open) {
            ('[', None) => open = Some(i),
            (']', Some(_)) => open = None,
            _ => {}
        }
    }
    if let Some(i) = open {
        return Err(error(
            pos.saturating_add(i),
            format!("unclosed `[` in running() pattern `{glob}`"),
        ));
    }
    Ok(())
}

/// KPI conditions (see `kpi.rs`).
impl Parser {
    /// After a KPI threshold: the ` over WINDOW` spelling of `/WINDOW`
    /// (`kpi.loop.p99 > 5ms over 1m`); anything else is left
    /// for the caller.
    pub(super) fn kpi_over(
        &mut self,
        threshold: &mut Threshold,
        span: &mut Span,
    ) -> Result<(), ParseError> {
        let Threshold::Kpi { window, .. } = threshold else {
            return Ok(());
        };
        let back = self.pos;
        self.skip_ws();
        if self.word_here().as_deref() != Some("over") {
            self.pos = back;
            return Ok(());
        }
        let over_at = self.pos;
        self.pos = self.pos.saturating_add(4).min(self.chars.len());
        self.skip_ws();
        let at = self.pos;
        let text = self.take_while(|c| !c.is_whitespace() && c != '(' && c != ')');
        if window.is_some() {
            return Err(error(
                over_at,
                "a KPI condition has one window: `/1m` or `over 1m`, not both",
            ));
        }
        if text.is_empty() {
            return Err(error(at, "expected a window after `over`, like `over 1m`"));
        }
        let w = super::kpi::parse_window(&text).map_err(|e| error(at, e))?;
        *window = Some(crate::units::Duration(w));
        span.end = self.pos;
        Ok(())
    }
}
