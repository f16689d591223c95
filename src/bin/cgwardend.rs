//! `cgwardend`, the supervisor daemon alone (src/cli/daemon.rs).

fn main() -> std::process::ExitCode {
    cgwarden::daemon_main()
}
