//! The YAML document as a tree of nodes that remember where they came from.
//!
//! Policies are read in two steps: `serde-saphyr` parses the bytes into this
//! position-carrying tree (it rejects duplicate keys and bounds alias
//! expansion), then `decode` walks the tree by hand. The walk, not serde
//! derive, builds the model because `cgwarden check` must report *every*
//! error with its `LINE:COL`, and a derived deserializer stops at the first.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::Spanned;
use std::fmt;

/// A 1-based line/column position in the policy file (columns count characters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    pub(crate) line: u32,
    pub(crate) col: u32,
}

impl Pos {
    pub(crate) fn new(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }

    /// The position `chars` characters to the right on the same line.
    pub(crate) fn shifted(self, chars: usize) -> Pos {
        let add = u32::try_from(chars).unwrap_or(u32::MAX);
        Pos {
            line: self.line,
            col: self.col.saturating_add(add),
        }
    }
}

/// One node of the document.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

/// A mapping key: always a string in a policy (other scalars are rendered).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Key {
    pub(crate) name: String,
    pub(crate) pos: Pos,
}

/// A value and where it starts. `text_pos` is where the scalar's text starts
/// (after an opening quote, or on the line after a `|`/`>` header), so
/// columns inside a string can be reported with [`Node::pos_at`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) pos: Pos,
    pub(crate) text_pos: Pos,
    /// A scalar's source text as written (`1.0`, not the parsed `1`).
    pub(crate) raw: Option<String>,
    /// For a scalar spanning several lines: where each source line's text
    /// starts, as (character offset in the value, position in the file).
    pub(crate) breaks: Vec<(usize, Pos)>,
}

impl Node {
    /// The file position of character `offset` of a string scalar's value,
    /// following the scalar across folded lines.
    pub(crate) fn pos_at(&self, offset: usize) -> Pos {
        let (start, pos) = self
            .breaks
            .iter()
            .rev()
            .find(|(k, _)| *k <= offset)
            .copied()
            .unwrap_or((0, self.text_pos));
        pos.shifted(offset - start)
    }

    /// Where the deepest of the mapping keys `keys` (a path from this node,
    /// `["settings", "tick"]`) that the document holds is written; None when
    /// it holds not even the first.
    pub(crate) fn deepest_key_pos(&self, keys: &[&str]) -> Option<Pos> {
        let (first, rest) = keys.split_first()?;
        let Value::Map(entries) = &self.value else {
            return None;
        };
        let (key, node) = entries.iter().find(|(k, _)| k.name == *first)?;
        node.deepest_key_pos(rest).or(Some(key.pos))
    }

    /// The node's kind in words, for "expected a mapping, found a list".
    pub(crate) fn kind(&self) -> &'static str {
        match self.value {
            Value::Null => "nothing",
            Value::Bool(_) => "a boolean",
            Value::Int(_) | Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    /// A scalar as text: strings as they are, numbers and booleans rendered.
    /// Units like `4G` are strings already; `30` arrives as an integer.
    pub(crate) fn scalar_text(&self) -> Option<String> {
        match &self.value {
            Value::Str(s) => Some(s.clone()),
            Value::Int(i) => Some(i.to_string()),
            // As written: `18446744073709551616` arrives as a float and
            // would read back as `18446744073709552000`.
            Value::Float(f) => Some(self.raw.clone().unwrap_or_else(|| f.to_string())),
            Value::Bool(b) => Some(b.to_string()),
            Value::Null | Value::Seq(_) | Value::Map(_) => None,
        }
    }
}

/// Why a document could not be turned into a tree.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SyntaxError {
    pub(crate) pos: Pos,
    pub(crate) message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.pos.line, self.pos.col, self.message)
    }
}

/// Parses a document. Bytes that are not UTF-8 are reported at the line and
/// column of the first bad byte.
pub(crate) fn parse(bytes: &[u8]) -> Result<Node, SyntaxError> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let good = &bytes[..e.valid_up_to()];
            // Everything before valid_up_to() is valid UTF-8 by definition.
            let good = std::str::from_utf8(good).unwrap_or("");
            return Err(SyntaxError {
                pos: end_pos(good),
                message: format!(
                    "the file is not UTF-8 text (invalid byte 0x{:02x} at offset {})",
                    bytes.get(e.valid_up_to()).copied().unwrap_or(0),
                    e.valid_up_to()
                ),
            });
        }
    };
    if text.contains('\0') {
        let before = text.split('\0').next().unwrap_or("");
        return Err(SyntaxError {
            pos: end_pos(before),
            message: "the file contains a NUL byte; it is not a text policy".into(),
        });
    }
    let raw: Spanned<Raw> = match serde_saphyr::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            let pos = e
                .location()
                .map(|l| Pos::new(clamp_u32(l.line()), clamp_u32(l.column())))
                .unwrap_or(Pos::new(1, 1));
            if let Some(breach) = budget_breach(&e) {
                return Err(too_large(text, pos, breach));
            }
            return Err(explain(text, pos, &first_line(&e.to_string())));
        }
    };
    Ok(convert(raw, text))
}

fn first_line(msg: &str) -> String {
    // serde-saphyr renders a source snippet after the first line; we print
    // our own FILE:LINE:COL prefix, so keep only the message itself.
    let line = msg.lines().next().unwrap_or(msg).trim();
    let line = line.strip_prefix("error: ").unwrap_or(line);
    // Drop its own "line N column M: " prefix: the position is ours to print.
    let line = match line.find(": ") {
        Some(i) if line.starts_with("line ") => &line[i + 2..],
        _ => line,
    };
    match line.rfind(" at line ") {
        Some(i) if line[i..].contains("column") => line[..i].to_string(),
        _ => line.to_string(),
    }
}

/// The parser's message in a policy author's words, at the position that
/// shows the cause: the tab itself, the bracket that was never closed.
fn explain(text: &str, pos: Pos, msg: &str) -> SyntaxError {
    let at = |pos: Pos, message: String| SyntaxError { pos, message };
    if let Some(rest) = msg.strip_prefix("duplicate mapping key: ") {
        let key = rest
            .split(", set DuplicateKeyPolicy")
            .next()
            .unwrap_or(rest);
        return at(pos, format!("duplicate key `{key}`"));
    }
    if msg.starts_with("multiple YAML documents") {
        return at(
            pos,
            "a policy is one YAML document; a second one starts here".into(),
        );
    }
    if msg.contains("tabs disallowed") {
        let line = text
            .lines()
            .nth(pos.line.saturating_sub(1) as usize)
            .unwrap_or("");
        if let Some(i) = line.chars().position(|c| c == '\t') {
            return at(
                Pos::new(pos.line, u32::try_from(i + 1).unwrap_or(u32::MAX)),
                format!("not valid YAML: {msg}; indent with spaces"),
            );
        }
    }
    if msg.contains("flow mapping") || msg.contains("flow sequence") || msg.contains("unclosed") {
        if let Some((open, c)) = unclosed_bracket(text) {
            return at(
                open,
                format!("not valid YAML: `{c}` is never closed ({msg})"),
            );
        }
    }
    at(pos, format!("not valid YAML: {msg}"))
}

/// The parser's resource limit that stopped it, if that is the error.
fn budget_breach(e: &serde_saphyr::Error) -> Option<&BudgetBreach> {
    match e {
        serde_saphyr::Error::Budget { breach, .. } => Some(breach),
        serde_saphyr::Error::WithSnippet { error, .. }
        | serde_saphyr::Error::AliasError { error, .. } => budget_breach(error),
        _ => None,
    }
}

/// A document past the parser's limits, in a policy author's words: which
/// list is too long, how deep is too deep, whether aliases are to blame
/// (only when the document has some). Never the parser's own terms.
fn too_large(text: &str, pos: Pos, breach: &BudgetBreach) -> SyntaxError {
    let budget = serde_saphyr::Budget::default();
    let at = |pos: Pos, message: String| SyntaxError { pos, message };
    let expanding = "anchors and aliases (`&name`, `*name`) expand";
    match breach {
        BudgetBreach::Depth { .. } => at(
            pos,
            format!(
                "lists and mappings nested more than {} levels deep; a policy needs a few",
                budget.max_depth
            ),
        ),
        BudgetBreach::Aliases { .. }
        | BudgetBreach::Anchors { .. }
        | BudgetBreach::AliasAnchorRatio { .. }
        | BudgetBreach::MergeKeys { .. }
        | BudgetBreach::RecordedAnchorEvents { .. }
        | BudgetBreach::RecordedAnchorBytes { .. } => at(
            pos,
            format!("{expanding} past what a policy may hold; write the values out or use fewer aliases"),
        ),
        BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. } => {
            let values = budget.max_nodes;
            let shape = Shape::of(text);
            match shape.longest {
                Some(list) if shape.aliases == 0 && list.items > values / 2 => {
                    let what = list
                        .key
                        .map(|k| format!("`{k}`"))
                        .unwrap_or_else(|| "a list".to_string());
                    at(
                        list.pos,
                        format!(
                            "list too long: {what} has {} items; a policy holds at most {values} values (keys, list items and scalars) in all",
                            list.items
                        ),
                    )
                }
                _ if shape.aliases > 0 => at(
                    pos,
                    format!("{expanding} to more than {values} values (keys, list items and scalars), the most a policy holds"),
                ),
                _ => at(
                    pos,
                    format!("the document holds more than {values} values (keys, list items and scalars), the most a policy holds"),
                ),
            }
        }
        _ => at(
            pos,
            "the document is too large for a policy (a policy is a small text file)".into(),
        ),
    }
}

/// The longest list of a document, for [`too_large`].
struct LongList {
    items: usize,
    pos: Pos,
    /// The mapping key the list is the value of.
    key: Option<String>,
}

/// What [`too_large`] reports from a document's parse events: its longest
/// list and how many aliases it uses. The scan reads events only (aliases
/// are not expanded) and stops at the first syntax error.
struct Shape {
    longest: Option<LongList>,
    aliases: usize,
}

impl Shape {
    fn of(text: &str) -> Shape {
        use serde_saphyr::granit_parser::{Event, Parser};
        /// An open collection: a list, or a mapping (whose children
        /// alternate key, value).
        struct Open {
            list: Option<LongList>,
            children: usize,
            key: Option<String>,
        }
        let mut shape = Shape {
            longest: None,
            aliases: 0,
        };
        let mut stack: Vec<Open> = Vec::new();
        let done = |list: LongList, shape: &mut Shape| {
            if shape.longest.as_ref().is_none_or(|l| list.items > l.items) {
                shape.longest = Some(list);
            }
        };
        for event in Parser::new_from_str(text) {
            let Ok((event, span)) = event else { break };
            let node = matches!(
                event,
                Event::Scalar(..)
                    | Event::Alias(..)
                    | Event::SequenceStart(..)
                    | Event::MappingStart(..)
            );
            // The key this node is the value of, when its parent is a mapping.
            let mut key = None;
            if node {
                if let Some(parent) = stack.last_mut() {
                    if parent.list.is_none() {
                        if parent.children % 2 == 1 {
                            key = parent.key.take();
                        } else if let Event::Scalar(k, ..) = &event {
                            parent.key = Some(k.to_string());
                        }
                    }
                    parent.children = parent.children.saturating_add(1);
                }
            }
            match event {
                Event::Alias(..) => shape.aliases = shape.aliases.saturating_add(1),
                Event::SequenceStart(..) => stack.push(Open {
                    list: Some(LongList {
                        items: 0,
                        pos: Pos::new(
                            clamp_u32(span.start.line() as u64),
                            clamp_u32(span.start.col() as u64 + 1),
                        ),
                        key,
                    }),
                    children: 0,
                    key: None,
                }),
                Event::MappingStart(..) => stack.push(Open {
                    list: None,
                    children: 0,
                    key: None,
                }),
                Event::SequenceEnd | Event::MappingEnd => {
                    if let Some(Open {
                        list: Some(mut l),
                        children,
                        ..
                    }) = stack.pop()
                    {
                        l.items = children;
                        done(l, &mut shape);
                    }
                }
                _ => {}
            }
        }
        // Lists still open where the scan stopped.
        while let Some(open) = stack.pop() {
            if let Some(mut l) = open.list {
                l.items = open.children;
                done(l, &mut shape);
            }
        }
        shape
    }
}

/// The first `[` or `{` without its closing bracket, outside quotes and
/// comments: where the author has to look when a flow collection runs on.
fn unclosed_bracket(text: &str) -> Option<(Pos, char)> {
    let mut stack: Vec<(Pos, char)> = Vec::new();
    for (li, line) in text.lines().enumerate() {
        let mut quote: Option<char> = None;
        let mut prev = ' ';
        for (ci, c) in line.chars().enumerate() {
            let here = Pos::new(
                u32::try_from(li + 1).unwrap_or(u32::MAX),
                u32::try_from(ci + 1).unwrap_or(u32::MAX),
            );
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    '"' | '\'' => quote = Some(c),
                    '#' if prev.is_whitespace() => break,
                    '[' | '{' => stack.push((here, c)),
                    ']' | '}' => {
                        let want = if c == ']' { '[' } else { '{' };
                        match stack.last() {
                            Some((_, o)) if *o == want => {
                                stack.pop();
                            }
                            _ => return stack.pop(),
                        }
                    }
                    _ => {}
                },
            }
            prev = c;
        }
    }
    stack.first().copied()
}

fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

fn end_pos(text: &str) -> Pos {
    let line = text.matches('\n').count() + 1;
    let col = text
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    Pos::new(
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(col).unwrap_or(u32::MAX),
    )
}

fn convert(raw: Spanned<Raw>, text: &str) -> Node {
    let loc = raw.referenced;
    let pos = Pos::new(clamp_u32(loc.line()), clamp_u32(loc.column()));
    let span = loc.span();
    let source = span
        .byte_offset()
        .zip(span.byte_len())
        .and_then(|(off, len)| {
            let off = usize::try_from(off).ok()?;
            let end = off.checked_add(usize::try_from(len).ok()?)?;
            text.get(off..end)
        });
    let is_scalar = !matches!(raw.value, Raw::Seq(_) | Raw::Map(_));
    let (text_pos, breaks) = match source {
        Some(src) if is_scalar => scalar_layout(src, pos),
        _ => (pos, Vec::new()),
    };
    let raw_text = if is_scalar {
        source.map(|s| s.trim().to_string())
    } else {
        None
    };
    let value = match raw.value {
        Raw::Null => Value::Null,
        Raw::Bool(b) => Value::Bool(b),
        Raw::Int(i) => Value::Int(i),
        Raw::Float(f) => Value::Float(f),
        Raw::Str(s) => Value::Str(s),
        Raw::Seq(items) => Value::Seq(items.into_iter().map(|i| convert(i, text)).collect()),
        Raw::Map(entries) => Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| {
                    let kl = k.referenced;
                    let key = Key {
                        name: k.value.0,
                        pos: Pos::new(clamp_u32(kl.line()), clamp_u32(kl.column())),
                    };
                    (key, convert(v, text))
                })
                .collect(),
        ),
    };
    Node {
        value,
        pos,
        text_pos,
        raw: raw_text,
        breaks,
    }
}

/// Where a scalar's text starts and where each of its source lines begins,
/// in terms of the parsed value: YAML folds a line break (and the next
/// line's indentation) into one space, a run of n > 1 breaks into n - 1
/// newlines; a literal block (`|`) keeps every break.
fn scalar_layout(src: &str, pos: Pos) -> (Pos, Vec<(usize, Pos)>) {
    let mut chars = src.chars().peekable();
    let mut cur = pos;
    let first = chars.peek().copied();
    let double = first == Some('"');
    let mut literal = false;
    match first {
        Some('"') | Some('\'') => {
            chars.next();
            cur = cur.shifted(1);
        }
        Some('|') | Some('>') => {
            literal = first == Some('|');
            // The header line (`|-`, `>+2`, a comment) carries no text.
            for c in chars.by_ref() {
                if c == '\n' {
                    break;
                }
            }
            cur = Pos::new(cur.line.saturating_add(1), 1);
            while let Some(' ') = chars.peek() {
                chars.next();
                cur = cur.shifted(1);
            }
        }
        _ => {}
    }
    let text_pos = cur;
    let mut breaks = vec![(0usize, cur)];
    let mut k = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                let mut newlines = 1usize;
                cur = Pos::new(cur.line.saturating_add(1), 1);
                loop {
                    match chars.peek() {
                        Some(' ') | Some('\t') => {
                            chars.next();
                            cur = cur.shifted(1);
                        }
                        Some('\r') => {
                            chars.next();
                        }
                        Some('\n') => {
                            chars.next();
                            newlines += 1;
                            cur = Pos::new(cur.line.saturating_add(1), 1);
                        }
                        _ => break,
                    }
                }
                k += if literal {
                    newlines
                } else {
                    newlines.saturating_sub(1).max(1)
                };
                breaks.push((k, cur));
            }
            '\r' => {}
            '\\' if double => {
                chars.next();
                k += 1;
                cur = cur.shifted(2);
            }
            _ => {
                k += 1;
                cur = cur.shifted(1);
            }
        }
    }
    if breaks.len() == 1 {
        breaks.clear();
    }
    (text_pos, breaks)
}

/// What serde-saphyr hands us; converted to [`Node`] right after parsing.
enum Raw {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Raw>>),
    Map(Vec<(Spanned<RawKey>, Spanned<Raw>)>),
}

/// A mapping key of any scalar type, rendered as text.
struct RawKey(String);

impl<'de> Deserialize<'de> for RawKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = RawKey;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scalar mapping key")
            }
            fn visit_unit<E>(self) -> Result<RawKey, E> {
                Ok(RawKey("~".into()))
            }
            fn visit_bool<E>(self, v: bool) -> Result<RawKey, E> {
                Ok(RawKey(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawKey, E> {
                Ok(RawKey(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<RawKey, E> {
                Ok(RawKey(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<RawKey, E> {
                // Only a key like `1e30`; keys are checked as names, never numbers.
                Ok(RawKey(v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<RawKey, E> {
                Ok(RawKey(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<RawKey, E> {
                Ok(RawKey(v))
            }
        }
        d.deserialize_any(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct RawVisitor;
        impl<'de> Visitor<'de> for RawVisitor {
            type Value = Raw;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E>(self) -> Result<Raw, E> {
                Ok(Raw::Null)
            }
            fn visit_none<E>(self) -> Result<Raw, E> {
                Ok(Raw::Null)
            }
            fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Raw, D2::Error> {
                Raw::deserialize(d)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
                Ok(Raw::Bool(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
                Ok(Raw::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Raw, E> {
                Ok(match i64::try_from(v) {
                    Ok(i) => Raw::Int(i),
                    Err(_) => Raw::Str(v.to_string()),
                })
            }
            fn visit_i128<E>(self, v: i128) -> Result<Raw, E> {
                Ok(Raw::Str(v.to_string()))
            }
            fn visit_u128<E>(self, v: u128) -> Result<Raw, E> {
                Ok(Raw::Str(v.to_string()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Raw, E> {
                Ok(Raw::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
                Ok(Raw::Str(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Raw, E> {
                Ok(Raw::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Raw, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = a.next_element()? {
                    items.push(item);
                }
                Ok(Raw::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Raw, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = a.next_entry()? {
                    entries.push(entry);
                }
                Ok(Raw::Map(entries))
            }
        }
        d.deserialize_any(RawVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(node: &Node) -> &Vec<(Key, Node)> {
        match &node.value {
            Value::Map(m) => m,
            other => panic!("expected a map, got {other:?}"),
        }
    }

    #[test]
    fn positions_of_keys_and_values() {
        let doc = parse(b"version: 1\ngroups:\n  rt:\n    cpuset: { cpus: \"6-7\" }\n").unwrap();
        let top = map(&doc);
        assert_eq!(top[0].0.name, "version");
        assert_eq!(top[0].1.value, Value::Int(1));
        assert_eq!(top[0].1.pos, Pos::new(1, 10));
        let groups = map(&top[1].1);
        assert_eq!(groups[0].0.pos, Pos::new(3, 3));
        let cpuset = map(&map(&groups[0].1)[0].1);
        assert_eq!(cpuset[0].1.value, Value::Str("6-7".into()));
        assert_eq!(cpuset[0].1.pos, Pos::new(4, 21));
        // The text of a quoted scalar starts after the quote.
        assert_eq!(cpuset[0].1.text_pos, Pos::new(4, 22));
    }

    #[test]
    fn the_deepest_key_of_a_path_is_found() {
        let doc = parse(b"version: 1\nsettings:\n  tick: 2s\n  rescan: 30s\n").unwrap();
        assert_eq!(
            doc.deepest_key_pos(&["settings", "tick"]),
            Some(Pos::new(3, 3))
        );
        assert_eq!(
            doc.deepest_key_pos(&["settings", "rescan"]),
            Some(Pos::new(4, 3))
        );
        // A key the document leaves out: its block's.
        assert_eq!(
            doc.deepest_key_pos(&["settings", "metrics"]),
            Some(Pos::new(2, 1))
        );
        assert_eq!(doc.deepest_key_pos(&["system", "zram"]), None);
        assert_eq!(doc.deepest_key_pos(&["version", "x"]), Some(Pos::new(1, 1)));
    }

    #[test]
    fn duplicate_keys_are_rejected_with_position() {
        let err = parse(b"a: 1\na: 2\n").unwrap_err();
        assert_eq!(err.pos, Pos::new(2, 1));
        assert!(err.message.contains("duplicate"), "{}", err.message);
    }

    #[test]
    fn not_utf8_reports_position() {
        let err = parse(b"version: 1\nproduct: \xff\n").unwrap_err();
        assert_eq!(err.pos, Pos::new(2, 10));
        assert!(err.message.contains("not UTF-8"));
    }

    #[test]
    fn broken_yaml_reports_position() {
        let err = parse(b"a: [1\n").unwrap_err();
        assert_eq!(err.pos.line, 1);
        assert!(err.message.contains("bracket"), "{}", err.message);
    }

    /// A list past the parser's node budget is named with its length and
    /// where it starts; aliases are blamed only when the document has some,
    /// and the parser's own terms never show.
    #[test]
    fn a_list_too_long_is_named_with_its_length() {
        // Policies are parsed on a main thread (8 MiB of stack: the CLI, the
        // daemon's loop); a test thread has 2 MiB, which an unoptimised
        // build's frames outgrow on these documents.
        std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(a_list_too_long_body)
            .unwrap()
            .join()
            .unwrap();
    }

    fn a_list_too_long_body() {
        let mut doc = String::from("version: 1\nplacement:\n");
        for _ in 0..400_000 {
            doc.push_str("  - x\n");
        }
        let err = parse(doc.as_bytes()).unwrap_err();
        assert_eq!(err.pos, Pos::new(3, 3), "{}", err.message);
        assert_eq!(
            err.message,
            "list too long: `placement` has 400000 items; a policy holds at most 250000 values (keys, list items and scalars) in all"
        );
        // The same in flow style, nested under a mapping.
        let doc = format!("a:\n  b: [{}1]\n", "1,".repeat(300_000));
        let err = parse(doc.as_bytes()).unwrap_err();
        assert_eq!(err.pos, Pos::new(2, 6), "{}", err.message);
        assert!(
            err.message
                .starts_with("list too long: `b` has 300001 items"),
            "{}",
            err.message
        );
        // Aliases expanding: they are named, and no list is blamed.
        let mut doc = String::from("a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n");
        for i in 0..30_000 {
            doc.push_str(&format!("k{i}: *a\n"));
        }
        let err = parse(doc.as_bytes()).unwrap_err();
        assert!(err.message.contains("aliases"), "{}", err.message);
        assert!(!err.message.contains("list too long"), "{}", err.message);
        assert!(
            !err.message.contains("budget") && !err.message.contains('{'),
            "{}",
            err.message
        );
        // Nesting.
        let doc = format!("{}1{}", "[".repeat(100), "]".repeat(100));
        let err = parse(doc.as_bytes()).unwrap_err();
        assert!(
            err.message.contains("nested more than 64 levels"),
            "{}",
            err.message
        );
    }

    #[test]
    fn empty_document_is_null() {
        assert_eq!(parse(b"").unwrap().value, Value::Null);
    }
}
