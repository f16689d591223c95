//! The rule language on arbitrary text: `parse_expr` (a `when:` condition)
//! and `parse_action` (a `then:`/`while:` item) must never panic, and every
//! position they report must lie inside the text (it becomes a column).
#![no_main]

use cgwarden::policy::expr::{parse_action, parse_expr, referenced_groups};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let chars = src.chars().count();
    match parse_expr(src) {
        Ok(expr) => {
            for (group, span) in referenced_groups(&expr) {
                assert!(
                    span.start <= span.end && span.end <= chars,
                    "group `{group}` span {span:?} outside {chars} characters of {src:?}"
                );
            }
        }
        Err(e) => assert!(e.pos <= chars, "error at {} outside {chars} characters of {src:?}: {}", e.pos, e.message),
    }
    if let Err(e) = parse_action(src) {
        assert!(e.pos <= chars, "error at {} outside {chars} characters of {src:?}: {}", e.pos, e.message);
    }
});
