//! `rules:`: a rule, its actions, and the references its actions make.

use super::{argument_offset, first_word, name_problem, valid_name, Decoder};
use crate::policy::diag::hint;
use crate::policy::expr::{self, Action};
use crate::policy::model::*;
use crate::policy::yaml::{Node, Pos, Value};

impl<'a> Decoder<'a> {
    pub(super) fn rule(
        &mut self,
        node: &Node,
        groups: &[&str],
        hooks: &[&str],
    ) -> Option<(Rule, Pos)> {
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
                                    let h = machine_hint(&g, &text, span.start)
                                        .unwrap_or_else(|| hint(&g, groups.iter().copied()));
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
        if let Some(group) = knob.as_ref().and_then(|k| k.group()) {
            if !groups.contains(&group) {
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

/// The did-you-mean for a metric of an unknown group `system` (what
/// integrators call the machine): the same metric under `host`, the rule
/// language's name for the whole machine. `at` is the metric's character
/// offset in `text`.
fn machine_hint(group: &str, text: &str, at: usize) -> Option<String> {
    if group != "system" {
        return None;
    }
    let word: String = text
        .chars()
        .skip(at)
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .collect();
    let rest = word.strip_prefix("system.")?;
    Some(format!(
        ", did you mean `{}.{rest}` (the whole machine)?",
        crate::knobs::MACHINE
    ))
}
