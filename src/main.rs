//! The `cgwarden` command. Its code is the library's `cli` module, so the
//! compiler sees the whole program in one crate and reports what nothing
//! calls.

fn main() -> std::process::ExitCode {
    cgwarden::main()
}
