//! The originals journal reader on arbitrary bytes: it must never panic, and
//! whatever it accepts names only canonical paths under the kernel interfaces
//! cgwarden manages (`reset` acts on it as root). The body is
//! `cgwarden::fuzzing::journal` (the journal module is crate-private).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cgwarden::fuzzing::journal(data));
