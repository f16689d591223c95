//! `cgwarden top`: a live terminal view of the running
//! daemon — groups (cpuset, memory current/high/max, PSI avg10 bars), rules
//! with their state, live claims and boosts with expiry, the last actions.
//! This module owns the terminal (raw mode, alternate screen, and putting
//! both back on every way out: `q`, an error, a panic, SIGTERM/SIGHUP/
//! SIGINT/SIGQUIT, the terminal gone) and the feed from the control socket;
//! [`input`] reads the keys, [`view`] draws.
//!
//! The feed: `Status` every second, **and** a `Subscribe` stream whose every
//! event triggers a fresh `Status` at once (at most every 100 ms). Status is
//! what the screen shows — pressure and memory change continuously and are
//! not events — so it is polled; the stream only makes rule transitions,
//! writes and boosts appear immediately instead of up to a second late.
//! Both run on a thread of their own with a current-thread tokio runtime;
//! the terminal thread never waits on the socket.
//!
//! Keys (docs/top.md): `q`/Esc/Ctrl-C quit; `g` groups, `r` rules, `c`
//! claims, `a` actions, Tab next view; `s` next sort key, `i` invert the
//! order; ↑/↓ (or k/j) move the selection.
//!
//! Exit statuses: 0 quit (a key, a signal, the terminal gone); 4 no daemon answers on the socket at start (the
//! path is in the message, as for the other clients); 75 the terminal
//! cannot be set up. A daemon lost later is shown on screen and retried.

mod input;
mod view;

use crate::control::client::DaemonProxy;
use crate::control::wire::{EventReply, StatusReply};
use crate::exit;
use crossterm::{cursor, execute, terminal};
use futures_util::{Stream, StreamExt};
use input::Key;
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};
use view::{App, Link, View};

/// What the feed thread tells the terminal thread.
enum Update {
    Status(Box<StatusReply>),
    /// An event arrived on the subscription.
    Event,
    /// The daemon answered with an error.
    DaemonError(String),
    /// Nothing answers on the socket (the first one: exit 4).
    Unreachable(String),
}

/// Puts the terminal back: cooked mode, main screen, cursor shown.
/// Idempotent, so every exit path may call it.
fn restore() {
    let _ = terminal::disable_raw_mode();
    let _ = execute!(
        std::io::stdout(),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

/// Restores the terminal when dropped (returns, errors, unwinding).
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

type Conn = zlink::tokio::unix::Connection;
type Events<'a> = Pin<
    Box<
        dyn Stream<Item = zlink::Result<Result<EventReply, crate::control::wire::DaemonError>>>
            + 'a,
    >,
>;

/// Feeds `tx` until it is closed: Status every second and on every event.
async fn feed(socket: PathBuf, tx: mpsc::Sender<Update>) {
    let mut ever_connected = false;
    loop {
        let mut conn: Conn = match zlink::tokio::unix::connect(&socket).await {
            Ok(c) => c,
            Err(e) => {
                let msg = e.to_string();
                let u = if ever_connected {
                    Update::DaemonError(format!("reconnecting: {msg}"))
                } else {
                    Update::Unreachable(msg)
                };
                if tx.send(u).is_err() || !ever_connected {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        ever_connected = true;
        // The subscription is a second connection: a stream holds its own.
        let mut sub_conn: Option<Conn> = zlink::tokio::unix::connect(&socket).await.ok();
        let mut events: Option<Events> = None;
        if let Some(c) = sub_conn.as_mut() {
            if let Ok(s) = c.subscribe().await {
                events = Some(Box::pin(s));
            }
        }
        loop {
            match conn.status().await {
                Ok(Ok(s)) => {
                    if tx.send(Update::Status(Box::new(s))).is_err() {
                        return;
                    }
                }
                Ok(Err(e)) => {
                    if tx
                        .send(Update::DaemonError(e.message().to_string()))
                        .is_err()
                    {
                        return;
                    }
                }
                Err(e) => {
                    if tx.send(Update::DaemonError(format!("lost: {e}"))).is_err() {
                        return;
                    }
                    break;
                }
            }
            let t0 = Instant::now();
            let next = async {
                match events.as_mut() {
                    Some(s) => s.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                ev = next => match ev {
                    Some(Ok(Ok(_))) => {
                        if tx.send(Update::Event).is_err() {
                            return;
                        }
                    }
                    // The stream ended or failed: polling goes on.
                    _ => events = None,
                },
            }
            // Coalesce a burst of events into one Status.
            if let Some(rest) = Duration::from_millis(100).checked_sub(t0.elapsed()) {
                tokio::time::sleep(rest).await;
            }
        }
        drop(events);
        drop(sub_conn);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Runs `cgwarden top` against the socket at `socket`; the exit status.
pub(crate) fn run(socket: &Path) -> u8 {
    let (tx, rx) = mpsc::channel();
    let path = socket.to_path_buf();
    let feeder =
        crate::kernel::runtime::start("top-feed").and_then(|s| s.spawn(move || feed(path, tx)));
    if let Err(e) = feeder {
        eprintln!("cgwarden: error: top: cannot start the feed thread: {e}");
        return exit::TEMPFAIL;
    }
    // The first answer decides: no daemon, no screen.
    let first = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Update::Unreachable(e)) => {
            eprintln!(
                "cgwarden: error: no daemon answers on {}: {e} (is `cgwarden run` running, and may \
                 you use its socket?)",
                socket.display()
            );
            return exit::UNREACHABLE;
        }
        Ok(u) => Some(u),
        Err(_) => {
            eprintln!(
                "cgwarden: error: the daemon on {} did not answer within 10s",
                socket.display()
            );
            return exit::UNREACHABLE;
        }
    };
    let mut app = App::new(socket.display().to_string());
    if let Some(u) = first {
        apply(&mut app, u);
    }
    crate::kernel::signals::note_terminating();
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        prev(info);
    }));
    let mut tty = match input::Tty::open() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("cgwarden: error: top: cannot use the terminal: {e}");
            return exit::TEMPFAIL;
        }
    };
    if let Err(e) = terminal::enable_raw_mode() {
        eprintln!("cgwarden: error: top: cannot use the terminal: {e}");
        return exit::TEMPFAIL;
    }
    let guard = Guard;
    if let Err(e) = execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide
    ) {
        drop(guard);
        eprintln!("cgwarden: error: top: cannot use the terminal: {e}");
        return exit::TEMPFAIL;
    }
    let code = match Terminal::new(CrosstermBackend::new(std::io::stdout())) {
        Ok(mut term) => {
            let code = ui(&mut term, &mut app, &rx, &mut tty);
            // ratatui's Terminal shows the cursor when dropped and, if that
            // fails, `eprintln!`s — which panics when the terminal is gone
            // (stderr a closed pty: exit 101). `restore` shows the cursor.
            std::mem::forget(term);
            code
        }
        Err(e) => {
            drop(guard);
            eprintln!("cgwarden: error: top: cannot use the terminal: {e}");
            return exit::TEMPFAIL;
        }
    };
    drop(guard);
    // The feed thread ends when it next sends (the receiver is gone); it is
    // not joined, so quitting never waits on a slow socket.
    code
}

fn apply(app: &mut App, u: Update) {
    match u {
        Update::Status(s) => {
            app.status = Some(*s);
            app.updated = Some(SystemTime::now());
            app.link = Link::Up;
            app.error = None;
        }
        Update::Event => app.events += 1,
        Update::DaemonError(e) => {
            if e.starts_with("lost") || e.starts_with("reconnecting") {
                app.link = Link::Lost(e);
            } else {
                app.error = Some(e);
            }
        }
        Update::Unreachable(e) => app.link = Link::Lost(e),
    }
}

/// The event loop: keys, updates, signals, redraws. Returns the exit status.
///
/// The terminal is read by [`input::Tty`], never by crossterm's event
/// reader: that one loops inside `read()` on EOF. Each
/// wait lasts at most 100 ms and a signal cuts it short, so SIGTERM, SIGHUP,
/// SIGINT and SIGQUIT end the loop within 100 ms; the terminal gone (EOF, a
/// read error, a hang-up) ends it at once.
fn ui<B: ratatui::backend::Backend>(
    term: &mut Terminal<B>,
    app: &mut App,
    rx: &mpsc::Receiver<Update>,
    tty: &mut input::Tty,
) -> u8 {
    let mut dirty = true;
    let mut last_draw = Instant::now();
    let mut size = terminal::size().ok();
    loop {
        if crate::kernel::signals::terminating().is_some() {
            return exit::OK;
        }
        while let Ok(u) = rx.try_recv() {
            apply(app, u);
            dirty = true;
        }
        let now_size = terminal::size().ok();
        if now_size != size {
            size = now_size;
            dirty = true;
        }
        // Redraw at least every second: "updated Ns ago" and expiries move.
        if dirty || last_draw.elapsed() >= Duration::from_secs(1) {
            let now = SystemTime::now();
            if term.draw(|f| view::draw(f, app, now)).is_err() {
                return exit::TEMPFAIL;
            }
            dirty = false;
            last_draw = Instant::now();
        }
        let keys = match tty.wait(Duration::from_millis(100)) {
            input::Input::Keys(k) => k,
            // Nobody sees the screen any more: end as on SIGHUP.
            input::Input::Gone(_) => return exit::OK,
        };
        for k in keys {
            dirty = true;
            let rows = rows_in(app);
            match k {
                Key::Char('q') | Key::Esc | Key::CtrlC => return exit::OK,
                Key::Char('g') => app.set_view(View::Groups),
                Key::Char('r') => app.set_view(View::Rules),
                Key::Char('c') => app.set_view(View::Claims),
                Key::Char('a') => app.set_view(View::Actions),
                Key::Tab => app.set_view(app.view.next()),
                Key::Char('s') => app.next_sort(),
                Key::Char('i') => app.reverse = !app.reverse,
                Key::Down | Key::Char('j') if rows > 0 => {
                    let i = app.table.selected().map_or(0, |i| (i + 1).min(rows - 1));
                    app.table.select(Some(i));
                }
                Key::Up | Key::Char('k') if rows > 0 => {
                    let i = app.table.selected().map_or(0, |i| i.saturating_sub(1));
                    app.table.select(Some(i));
                }
                _ => {}
            }
        }
    }
}

fn rows_in(app: &App) -> usize {
    match &app.status {
        None => 0,
        Some(s) => match app.view {
            View::Groups => s.groups.len(),
            View::Rules => s.rules.len(),
            View::Claims => s.claims.len(),
            View::Actions => s.actions.len(),
        },
    }
}
