//! Exit statuses of the `cgwarden` command, in one place so the
//! command line, the daemon and the systemd units agree.
//!
//! The service manager restarts on [`TEMPFAIL`] but not on [`REFUSED`] or
//! [`MISSING`] (`RestartPreventExitStatus=1 3` in `systemd/cgwarden.service`):
//! those do not fix themselves by trying again.

/// Success.
pub(crate) const OK: u8 = 0;
/// An invalid policy, or a refused request: the state_dir lock is held, the
/// journal is damaged or not cgwarden's, state_dir is unsafe, a kernel write
/// was rejected.
pub(crate) const REFUSED: u8 = 1;
/// A usage error (unknown argument, `--root DIR` without `DIR/sys/fs/cgroup`).
pub(crate) const USAGE: u8 = 2;
/// The system lacks what the policy requires and `on_missing: fail` is set.
pub(crate) const MISSING: u8 = 3;
/// The daemon is not reachable on its control socket.
pub(crate) const UNREACHABLE: u8 = 4;
/// A runtime failure that may pass (`EX_TEMPFAIL`): state_dir or the journal
/// cannot be created, read, written or synced for an I/O reason.
pub(crate) const TEMPFAIL: u8 = 75;

/// The status for an error of the kernel-access layer: an I/O failure may
/// pass ([`TEMPFAIL`]); anything else (damaged content, a refusal) will not
/// ([`REFUSED`]).
pub(crate) fn for_kernel_error(e: &crate::kernel::Error) -> u8 {
    match e {
        crate::kernel::Error::Io { .. } => TEMPFAIL,
        _ => REFUSED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_other_definitions() {
        assert_eq!(crate::converge::EXIT_MISSING, i32::from(MISSING));
        assert_eq!(crate::daemon::EXIT_MISSING, MISSING);
        assert_eq!(crate::daemon::EXIT_INVALID, REFUSED);
    }

    #[test]
    fn io_errors_may_pass_refusals_do_not() {
        let io = crate::kernel::Error::io(
            "write",
            "/run/cgwarden/originals",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert_eq!(for_kernel_error(&io), TEMPFAIL);
        let other = crate::kernel::Error::other("/run/cgwarden/originals", "line 3: damaged");
        assert_eq!(for_kernel_error(&other), REFUSED);
    }
}
