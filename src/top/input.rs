//! The keyboard, read from the terminal directly.
//!
//! crossterm's event reader loops inside `read()` when the terminal reads
//! 0 bytes (EOF: the tmux session killed, the ssh connection dropped) or
//! fails with EIO: it never returns, so `top` spun at 100 % CPU and never
//! looked at the signal flag again. This reader waits with poll(2) for at
//! most the given time, returns on a signal (EINTR), and reports the
//! terminal gone on EOF, a read error or a hang-up — the loop then ends
//! and restores what it can.

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::fs::File;
use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::time::Duration;

/// A key `top` acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Key {
    Char(char),
    Esc,
    CtrlC,
    Tab,
    Up,
    Down,
}

/// What one wait on the terminal gave.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Input {
    /// Keys (possibly none: a timeout, a signal, bytes that are no key).
    Keys(Vec<Key>),
    /// EOF, a read error or a hang-up: nobody can see the screen any more.
    Gone(String),
}

/// The terminal's input side: stdin when it is a terminal, else /dev/tty
/// (as crossterm's raw mode uses).
pub(super) struct Tty {
    file: File,
}

impl Tty {
    pub(super) fn open() -> std::io::Result<Tty> {
        let stdin = std::io::stdin();
        let file = if stdin.is_terminal() {
            File::from(stdin.as_fd().try_clone_to_owned()?)
        } else {
            File::options().read(true).open("/dev/tty")?
        };
        Ok(Tty { file })
    }

    /// Waits at most `timeout` for input; returns early on a signal.
    pub(super) fn wait(&mut self, timeout: Duration) -> Input {
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(self.file.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) => return Input::Keys(Vec::new()),
            Ok(_) => {}
            Err(Errno::EINTR) | Err(Errno::EAGAIN) => return Input::Keys(Vec::new()),
            Err(e) => return Input::Gone(format!("poll: {e}")),
        }
        let rev = fds[0].revents().unwrap_or(PollFlags::empty());
        if rev.intersects(PollFlags::POLLNVAL | PollFlags::POLLERR) {
            return Input::Gone("the terminal is closed".into());
        }
        if !rev.contains(PollFlags::POLLIN) {
            // POLLHUP alone: the other side hung up and nothing is left.
            return Input::Gone("the terminal hung up".into());
        }
        let mut buf = [0u8; 256];
        match nix::unistd::read(&self.file, &mut buf) {
            Ok(0) => Input::Gone("end of input on the terminal".into()),
            Ok(n) => Input::Keys(parse(&buf[..n])),
            Err(Errno::EINTR) | Err(Errno::EAGAIN) => Input::Keys(Vec::new()),
            Err(e) => Input::Gone(format!("reading the terminal: {e}")),
        }
    }
}

/// The keys in one read's bytes. An ESC that ends the read is the Esc key;
/// an escape sequence is an arrow or skipped whole.
pub(super) fn parse(bytes: &[u8]) -> Vec<Key> {
    let mut keys = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        i += 1;
        match b {
            0x1b => {
                let Some(&intro) = bytes.get(i) else {
                    keys.push(Key::Esc);
                    continue;
                };
                if intro != b'[' && intro != b'O' {
                    // ESC then a key (Alt+key): Esc, the key follows.
                    keys.push(Key::Esc);
                    continue;
                }
                i += 1;
                // Parameters, then one final byte in 0x40..=0x7e.
                while i < bytes.len() && !(0x40..=0x7e).contains(&bytes[i]) {
                    i += 1;
                }
                match bytes.get(i) {
                    Some(b'A') => keys.push(Key::Up),
                    Some(b'B') => keys.push(Key::Down),
                    _ => {}
                }
                i += 1;
            }
            0x03 => keys.push(Key::CtrlC),
            b'\t' => keys.push(Key::Tab),
            0x20..=0x7e => keys.push(Key::Char(b as char)),
            _ => {}
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_arrows_and_escape() {
        assert_eq!(
            parse(b"qg\t\x03"),
            vec![Key::Char('q'), Key::Char('g'), Key::Tab, Key::CtrlC]
        );
        assert_eq!(parse(b"\x1b"), vec![Key::Esc]);
        assert_eq!(
            parse(b"\x1b[A\x1b[B\x1bOA"),
            vec![Key::Up, Key::Down, Key::Up]
        );
        // Other sequences (F5, Page Down) are skipped whole.
        assert_eq!(parse(b"\x1b[15~\x1b[6~j"), vec![Key::Char('j')]);
        assert_eq!(parse(b"\x1bq"), vec![Key::Esc, Key::Char('q')]);
        // A sequence cut at the end of the read is dropped, not a panic.
        assert_eq!(parse(b"\x1b[1;"), vec![]);
    }

    #[test]
    fn a_closed_input_is_gone_not_a_spin() {
        // The other side closes: poll says POLLHUP, read gives 0. The wait
        // must say so, not return no keys forever.
        let (r, mut w) = std::io::pipe().unwrap();
        std::io::Write::write_all(&mut w, b"g").unwrap();
        drop(w);
        let mut tty = Tty {
            file: File::from(std::os::fd::OwnedFd::from(r)),
        };
        assert_eq!(
            tty.wait(Duration::from_millis(500)),
            Input::Keys(vec![Key::Char('g')])
        );
        match tty.wait(Duration::from_millis(500)) {
            Input::Gone(_) => {}
            other => panic!("a closed terminal gave {other:?}"),
        }
    }
}
