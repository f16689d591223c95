//! The rule language on arbitrary text: `parse_expr` (a `when:` condition)
//! and `parse_action` (a `then:`/`while:` item) must never panic, and every
//! position they report must lie inside the text (it becomes a column).
//! The body is `cgwarden::fuzzing::expr`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cgwarden::fuzzing::expr(data));
