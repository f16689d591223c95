//! The control socket's varlink service on an arbitrary request: it must
//! never panic or stop serving (a well-formed GetInfo is answered after
//! every input). The body is `cgwarden::fuzzing::varlink_request`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| cgwarden::fuzzing::varlink_request(data));
