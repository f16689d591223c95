//! The daemon's log line on standard error (when neither a terminal nor
//! journald takes it): the same bytes as `tracing-subscriber`'s default
//! ("full") format without colours, target or spans —
//! `2026-12-03T11:24:05.123456Z  INFO set x = 1 knob=x new=1` — built with
//! a fraction of the work.
//!
//! Why hand-written: counted in a loop turn's instructions, the
//! default formatter was their largest share: about 15,000–19,000
//! instructions a record, most of them no-op colour styles around each
//! field name and a character-by-character write for the escaping of
//! terminal controls. This formatter pushes whole strings into the
//! layer's buffer and escapes only when a value holds something to
//! escape; a test holds it byte for byte to the default formatter.
//!
//! On a terminal the stamp is dimmed and the level coloured (the default
//! formatter also set field names in italics; they are plain here, so its
//! code is not in the binary at all).
//!
//! The rules it keeps (tracing-subscriber 0.3's `DefaultVisitor`): the
//! message first as written, with ESC, BEL, BS, FF, DEL and the C1
//! controls shown as escapes; every other field ` name=value` (an `r#`
//! prefix dropped), a `&str` value in Debug quotes, a Display (`%`) or
//! Debug (`?`) value as formatted, an error with its sources. The daemon
//! opens no spans, so none are shown.
//!
//! One difference, on purpose: a float field is shown with three decimals
//! (`elapsed_ms=0.652`, `2.000`), not as the shortest text that reads back
//! to the same binary value (`0.6520980000000001`): a log line is read by
//! people, and a column of numbers lines up.

use std::fmt::{self, Write as _};
use std::time::SystemTime;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format (`fmt::layer().event_format(Line::new(false))`).
pub(crate) struct Line {
    clock: fn() -> SystemTime,
    /// On a terminal: the stamp dimmed and the level in colour, as the
    /// default formatter shows them (the rest of the line as without).
    ansi: bool,
}

impl Line {
    /// Lines stamped with the system clock; `ansi` on a terminal.
    pub(crate) fn new(ansi: bool) -> Self {
        Self {
            clock: SystemTime::now,
            ansi,
        }
    }
}

impl<S, N> FormatEvent<S, N> for Line
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = String::with_capacity(256);
        let lvl = event.metadata().level();
        if self.ansi {
            line.push_str("\x1b[2m");
            crate::show::push_rfc3339(&mut line, (self.clock)(), 6);
            line.push_str("\x1b[0m ");
            line.push_str(colour(lvl));
            line.push_str(level(lvl));
            line.push_str("\x1b[0m ");
        } else {
            crate::show::push_rfc3339(&mut line, (self.clock)(), 6);
            line.push(' ');
            line.push_str(level(lvl));
            line.push(' ');
        }
        let mut v = Fields {
            out: &mut line,
            first: true,
            scratch: String::new(),
        };
        event.record(&mut v);
        line.push('\n');
        writer.write_str(&line)
    }
}

fn level(l: &Level) -> &'static str {
    match *l {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => " INFO",
        Level::WARN => " WARN",
        _ => "ERROR",
    }
}

/// The level's colour on a terminal (the default formatter's).
fn colour(l: &Level) -> &'static str {
    match *l {
        Level::TRACE => "\x1b[35m",
        Level::DEBUG => "\x1b[34m",
        Level::INFO => "\x1b[32m",
        Level::WARN => "\x1b[33m",
        _ => "\x1b[31m",
    }
}

struct Fields<'a> {
    out: &'a mut String,
    first: bool,
    /// A formatted value waiting to be escaped.
    scratch: String,
}

impl Fields<'_> {
    fn pad(&mut self) {
        if self.first {
            self.first = false;
        } else {
            self.out.push(' ');
        }
    }

    fn name(&mut self, field: &Field) {
        self.pad();
        let n = field.name();
        self.out.push_str(n.strip_prefix("r#").unwrap_or(n));
        self.out.push('=');
    }

    /// The message as the default formatter shows it: `text` with terminal
    /// controls escaped.
    fn message_text(&mut self, text: &str) {
        self.pad();
        push_sanitized(self.out, text);
    }
}

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message_text(value);
        } else {
            self.name(field);
            push_debug_str(self.out, value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.name(field);
        let _ = write!(self.out, "{value}");
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.name(field);
        let _ = write!(self.out, "{value}");
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.name(field);
        let _ = write!(self.out, "{value:.3}");
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.name(field);
        self.out.push_str(if value { "true" } else { "false" });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let mut text = String::new();
        let _ = write!(text, "{value}");
        let mut shown = String::new();
        push_sanitized(&mut shown, &text);
        if let Some(mut source) = value.source() {
            let n = field.name();
            let _ = write!(shown, " {n}.sources=[");
            let mut first = true;
            loop {
                if !first {
                    shown.push_str(", ");
                }
                first = false;
                text.clear();
                let _ = write!(text, "{source}");
                push_sanitized(&mut shown, &text);
                match source.source() {
                    Some(s) => source = s,
                    None => break,
                }
            }
            shown.push(']');
        }
        if field.name() == "message" {
            self.pad();
            // The default formatter sanitizes the message once more.
            push_sanitized(self.out, &shown);
        } else {
            self.name(field);
            self.out.push_str(&shown);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.scratch.clear();
            let _ = write!(self.scratch, "{value:?}");
            let text = std::mem::take(&mut self.scratch);
            self.message_text(&text);
            self.scratch = text;
        } else {
            self.name(field);
            let _ = write!(self.out, "{value:?}");
        }
    }
}

/// Whether `c` is one the default formatter escapes in a message.
fn escaped(c: char) -> bool {
    matches!(c, '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f') || ('\u{80}'..='\u{9f}').contains(&c)
}

/// `text` with ESC, BEL, BS, FF, DEL and the C1 controls as escapes.
fn push_sanitized(out: &mut String, text: &str) {
    // A byte scan first: the C1 controls are 0xC2 0x80..=0x9F in UTF-8.
    if !text
        .bytes()
        .any(|b| matches!(b, 0x1b | 0x07 | 0x08 | 0x0c | 0x7f | 0xc2))
        || !text.chars().any(escaped)
    {
        out.push_str(text);
        return;
    }
    for c in text.chars() {
        match c {
            '\x1b' => out.push_str("\\x1b"),
            '\x07' => out.push_str("\\x07"),
            '\x08' => out.push_str("\\x08"),
            '\x0c' => out.push_str("\\x0c"),
            '\x7f' => out.push_str("\\x7f"),
            c if escaped(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// `s` as `{:?}` shows it: in quotes, escaped; printable ASCII without a
/// quote or backslash is copied as is.
fn push_debug_str(out: &mut String, s: &str) {
    if s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
    {
        out.push('"');
        out.push_str(s);
        out.push('"');
    } else {
        let _ = write!(out, "{s:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, UNIX_EPOCH};
    use tracing_subscriber::fmt::time::FormatTime;
    use tracing_subscriber::prelude::*;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl Buf {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// The reference's stamp: the same fixed time, formatted by humantime
    /// (which `show`'s test holds to the daemon's stamp).
    struct Fixed;
    impl FormatTime for Fixed {
        fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
            write!(w, "{}", humantime::format_rfc3339_micros(fixed()))
        }
    }
    fn fixed() -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(1_796_033_700_250_001)
    }

    /// Runs `f` under the default formatter (as `init_logging` set it up
    /// before this module) and under [`Line`]; returns both outputs.
    fn both(f: impl Fn()) -> (String, String) {
        let a = Buf::default();
        let wa = a.clone();
        let reference = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || wa.clone())
                .with_target(false)
                .with_ansi(false)
                .with_timer(Fixed),
        );
        tracing::subscriber::with_default(reference, &f);
        (a.text(), ours(false, f))
    }

    /// What [`Line`] (with or without colour) prints of `f`'s events.
    fn ours(ansi: bool, f: impl Fn()) -> String {
        let b = Buf::default();
        let w = b.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(move || w.clone())
            .event_format(Line { clock: fixed, ansi });
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), f);
        b.text()
    }

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "outer \x1b[31m failed")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn the_daemons_records_match_the_default_format() {
        let (want, got) = both(|| {
            let knob = Some("inference.memory.high");
            let none: Option<&str> = None;
            tracing::info!(
                target: "cgwarden::event",
                message_id = "19aa36027d324aaeade6a5ac99084eda",
                cgwarden_event = "write",
                cgwarden_rule = none,
                cgwarden_knob = knob,
                cgwarden_handle = Some(7u64),
                cgwarden_dry_run = Some(true),
                "{}",
                "set inference.memory.high = 256M (was 64M) by rule a"
            );
            let path = std::path::Path::new("/sys/fs/cgroup/a b/memory.high");
            tracing::info!(knob = %"a.memory.high", path = %path.display(), old = %"64M", new = %"268435456 (256M)", cause = %"rule x", elapsed_ms = 1.5f64, "write");
            tracing::info!(
                elapsed_ms = 2.0f64,
                n = -3i64,
                big = 1u128 << 100,
                "compact memory"
            );
            tracing::warn!("missing: {}", "cpu.max");
            tracing::error!(r#type = "x", value = ?vec![1, 2], "late \x1b[2J write\u{85}!");
            tracing::debug!("hidden at info? no: the reference shows debug too");
            tracing::info!(quote = "a \"b\" \\ c\td\u{1b}é", "");
            let e = Outer(std::io::Error::other("inner \x07 bell"));
            tracing::warn!(
                error = &e as &(dyn std::error::Error + 'static),
                "with sources"
            );
            tracing::warn!(
                error = &std::io::Error::other("plain") as &(dyn std::error::Error + 'static)
            );
            tracing::info!(message = "as a str field \x1b", other = true);
        });
        assert!(want.lines().count() >= 10, "{want}");
        // The one difference: floats with three decimals.
        let want = want
            .replace("elapsed_ms=1.5\n", "elapsed_ms=1.500\n")
            .replace("elapsed_ms=2.0 ", "elapsed_ms=2.000 ");
        assert_eq!(got, want);
    }

    /// A float field has three decimals, whatever binary tail it carries.
    #[test]
    fn a_float_field_has_three_decimals() {
        let got = ours(false, || {
            tracing::info!(elapsed_ms = 0.6520980000000001f64, "write");
            tracing::info!(elapsed_ms = 2.0f64, x = f64::NAN, "write");
        });
        assert_eq!(
            got,
            "2026-11-30T10:15:00.250001Z  INFO write elapsed_ms=0.652\n\
             2026-11-30T10:15:00.250001Z  INFO write elapsed_ms=2.000 x=NaN\n"
        );
    }

    /// On a terminal the stamp is dimmed and the level coloured; the
    /// fields are as without colour.
    #[test]
    fn a_terminal_sees_the_level_in_colour() {
        let got = ours(true, || {
            tracing::warn!(knob = "a", "drift");
            tracing::info!("ok");
        });
        assert_eq!(
            got,
            "\x1b[2m2026-11-30T10:15:00.250001Z\x1b[0m \x1b[33m WARN\x1b[0m drift knob=\"a\"\n\
             \x1b[2m2026-11-30T10:15:00.250001Z\x1b[0m \x1b[32m INFO\x1b[0m ok\n"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn any_text_formats_as_the_default(msg in any::<String>(), v in any::<String>(), n in any::<u64>()) {
            let (want, got) = both(|| {
                tracing::info!(k = v.as_str(), d = %v, g = ?v, n, "{msg}");
                tracing::warn!(message = msg.as_str(), k = v.as_str());
            });
            prop_assert_eq!(got, want);
        }
    }
}
