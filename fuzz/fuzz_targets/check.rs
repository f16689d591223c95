//! `cgwarden check` on arbitrary bytes: loading a policy must never panic,
//! whatever the file holds (not UTF-8, broken YAML, absurd values). The body
//! is `cgwarden::fuzzing::check`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cgwarden::fuzzing::check(data));
