//! What `cgwarden top` draws: a pure function of the last `Status` reply,
//! the chosen view and sort, and the time, so every screen is tested with
//! ratatui's test backend at any size (down to 0×0) without a daemon.

use crate::control::wire::{ClaimInfo, GroupStatus, RuleStatus, StatusReply};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState};
use ratatui::Frame;
use std::time::SystemTime;

/// The main table's content.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum View {
    Groups,
    Rules,
    Claims,
    Actions,
}

impl View {
    pub(crate) fn next(self) -> View {
        match self {
            View::Groups => View::Rules,
            View::Rules => View::Claims,
            View::Claims => View::Actions,
            View::Actions => View::Groups,
        }
    }

    /// The sort keys of this view, in `s` order.
    pub(crate) fn sorts(self) -> &'static [&'static str] {
        match self {
            View::Groups => &["name", "cpu", "memory", "io", "mem.current"],
            View::Rules => &["name", "state", "since"],
            View::Claims => &["expiry", "knob", "owner"],
            View::Actions => &["newest"],
        }
    }

    fn title(self) -> &'static str {
        match self {
            View::Groups => "groups",
            View::Rules => "rules",
            View::Claims => "claims and boosts",
            View::Actions => "actions",
        }
    }
}

/// The connection as `top` sees it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Link {
    Up,
    /// Lost; retrying. The reason.
    Lost(String),
}

/// Everything the screen shows.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) socket: String,
    pub(crate) status: Option<StatusReply>,
    pub(crate) updated: Option<SystemTime>,
    pub(crate) link: Link,
    /// The last error the daemon answered (e.g. Unavailable).
    pub(crate) error: Option<String>,
    pub(crate) view: View,
    /// Index into `view.sorts()`.
    pub(crate) sort: usize,
    pub(crate) reverse: bool,
    pub(crate) table: TableState,
    /// How many events the subscription delivered (shown: immediacy works).
    pub(crate) events: u64,
}

impl App {
    pub(crate) fn new(socket: String) -> App {
        App {
            socket,
            status: None,
            updated: None,
            link: Link::Up,
            error: None,
            view: View::Groups,
            sort: 0,
            reverse: false,
            table: TableState::default(),
            events: 0,
        }
    }

    pub(crate) fn set_view(&mut self, v: View) {
        if v != self.view {
            self.view = v;
            self.sort = 0;
            self.reverse = false;
            self.table = TableState::default();
        }
    }

    pub(crate) fn next_sort(&mut self) {
        self.sort = (self.sort + 1) % self.view.sorts().len().max(1);
    }

    fn sort_name(&self) -> &'static str {
        self.view.sorts().get(self.sort).copied().unwrap_or("name")
    }
}

/// Bytes for a narrow column.
pub(crate) fn size(b: Option<i64>) -> String {
    match b {
        None => "-".into(),
        Some(b) if b >= 1 << 30 => format!("{:.1}G", b as f64 / f64::from(1u32 << 30)),
        Some(b) if b >= 1 << 20 => format!("{:.0}M", b as f64 / f64::from(1u32 << 20)),
        Some(b) if b >= 1 << 10 => format!("{:.0}K", b as f64 / 1024.0),
        Some(b) => b.to_string(),
    }
}

/// `text` for a column `width` cells wide, never cut silently: a whole
/// number too long is shortened with a decimal unit and
/// marked `≈` (4294967296 in 9 cells is `≈4.29G`); any other text too long
/// ends in `…`.
pub(crate) fn fit(text: &str, width: usize) -> String {
    let n = text.chars().count();
    if n <= width {
        return text.to_string();
    }
    if let Ok(v) = text.parse::<i64>() {
        let a = v.unsigned_abs() as f64;
        let sign = if v < 0 { "-" } else { "" };
        for (unit, div) in [
            ("k", 1e3),
            ("M", 1e6),
            ("G", 1e9),
            ("T", 1e12),
            ("P", 1e15),
            ("E", 1e18),
        ] {
            let x = a / div;
            if x >= 1000.0 {
                continue;
            }
            for prec in [2usize, 1, 0] {
                let s = format!("≈{sign}{x:.prec$}{unit}");
                if s.chars().count() <= width {
                    return s;
                }
            }
        }
    }
    if width == 0 {
        return String::new();
    }
    let mut s: String = text.chars().take(width - 1).collect();
    s.push('…');
    s
}

fn limit(v: &Option<String>) -> String {
    match v.as_deref() {
        None => "-".into(),
        Some(t) => match t.trim().parse::<i64>() {
            Ok(b) => size(Some(b)),
            Err(_) => t.trim().to_string(),
        },
    }
}

/// A PSI bar: 4 cells of eighth blocks for 0–100 %, then the value.
pub(crate) fn bar(v: Option<f64>) -> String {
    const CELLS: usize = 4;
    let Some(v) = v.filter(|v| v.is_finite()) else {
        return format!("{:CELLS$} -", "");
    };
    let eighths = ((v.clamp(0.0, 100.0) / 100.0) * (CELLS * 8) as f64).round() as usize;
    let mut s = String::new();
    for i in 0..CELLS {
        let n = eighths.saturating_sub(i * 8).min(8);
        s.push(match n {
            0 => ' ',
            1 => '▏',
            2 => '▎',
            3 => '▍',
            4 => '▌',
            5 => '▋',
            6 => '▊',
            7 => '▉',
            _ => '█',
        });
    }
    format!("{s}{v:>5.1}")
}

fn psi_style(v: Option<f64>) -> Style {
    match v {
        Some(v) if v >= 40.0 => Style::default().fg(Color::Red),
        Some(v) if v >= 10.0 => Style::default().fg(Color::Yellow),
        Some(_) => Style::default().fg(Color::Green),
        None => Style::default().fg(Color::DarkGray),
    }
}

fn state_style(s: &str) -> Style {
    match s {
        "active" => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        "pending" => Style::default().fg(Color::Yellow),
        "holding" => Style::default().fg(Color::Magenta),
        _ => Style::default().fg(Color::DarkGray),
    }
}

fn parse_time(t: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(t.trim_end_matches('Z'))
        .ok()
        .or_else(|| humantime::parse_rfc3339(t).ok())
}

/// `12s`, `5m`, `3h`, `2d` — how far `t` is from `now` (either way).
pub(crate) fn ago(t: SystemTime, now: SystemTime) -> String {
    let s = match now.duration_since(t) {
        Ok(d) => d.as_secs(),
        Err(e) => e.duration().as_secs(),
    };
    span(s)
}

/// Seconds as `12s`, `5m`, `3h`, `2d`.
pub(crate) fn span(s: u64) -> String {
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

/// Time of day of an RFC 3339 time (`HH:MM:SS`), else the text.
fn clock(t: &str) -> String {
    t.get(11..19).unwrap_or(t).to_string()
}

fn sorted_groups<'a>(app: &App, s: &'a StatusReply) -> Vec<&'a GroupStatus> {
    let mut g: Vec<&GroupStatus> = s.groups.iter().collect();
    let key = |v: Option<f64>| v.filter(|v| v.is_finite()).unwrap_or(-1.0);
    match app.sort_name() {
        "cpu" => g.sort_by(|a, b| key(b.cpu_some_avg10).total_cmp(&key(a.cpu_some_avg10))),
        "memory" => g.sort_by(|a, b| key(b.memory_some_avg10).total_cmp(&key(a.memory_some_avg10))),
        "io" => g.sort_by(|a, b| key(b.io_some_avg10).total_cmp(&key(a.io_some_avg10))),
        "mem.current" => g.sort_by_key(|x| std::cmp::Reverse(x.memory_current.unwrap_or(-1))),
        _ => g.sort_by(|a, b| a.name.cmp(&b.name)),
    }
    if app.reverse {
        g.reverse();
    }
    g
}

fn sorted_rules<'a>(app: &App, s: &'a StatusReply) -> Vec<&'a RuleStatus> {
    let mut r: Vec<&RuleStatus> = s.rules.iter().collect();
    let rank = |st: &str| match st {
        "active" => 0,
        "holding" => 1,
        "pending" => 2,
        _ => 3,
    };
    match app.sort_name() {
        "state" => r.sort_by_key(|x| (rank(&x.state), x.name.clone())),
        // Newest transition first.
        "since" => r.sort_by(|a, b| b.since.cmp(&a.since)),
        _ => r.sort_by(|a, b| a.name.cmp(&b.name)),
    }
    if app.reverse {
        r.reverse();
    }
    r
}

fn sorted_claims<'a>(app: &App, s: &'a StatusReply) -> Vec<&'a ClaimInfo> {
    let mut c: Vec<&ClaimInfo> = s.claims.iter().collect();
    match app.sort_name() {
        "knob" => c.sort_by(|a, b| a.knob.cmp(&b.knob)),
        "owner" => c.sort_by(|a, b| a.owner.cmp(&b.owner)),
        // Soonest expiry first; claims without a deadline last.
        _ => c.sort_by_key(|x| (x.expires_at.is_none(), x.expires_at.clone())),
    }
    if app.reverse {
        c.reverse();
    }
    c
}

/// Draws the whole screen.
pub(crate) fn draw(f: &mut Frame, app: &mut App, now: SystemTime) {
    let area = f.area();
    if area.width == 0 || area.height == 0 {
        return;
    }
    let actions_h = if area.height >= 18 && app.view != View::Actions {
        7
    } else {
        0
    };
    let [head, main, actions, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(0),
        Constraint::Length(actions_h),
        Constraint::Length(1),
    ])
    .areas(area);
    header(f, app, now, head);
    match app.view {
        View::Groups => groups(f, app, main),
        View::Rules => rules(f, app, main, now),
        View::Claims => claims(f, app, main, now),
        View::Actions => actions_table(f, app, main, usize::MAX),
    }
    if actions_h > 0 {
        actions_table(f, app, actions, usize::from(actions_h.saturating_sub(2)));
    }
    let keys = Line::from(vec![
        Span::styled(" q", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(" quit "),
        Span::styled("g r c a", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw("/"),
        Span::styled("tab", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(" view "),
        Span::styled("s", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(format!(" sort:{} ", app.sort_name())),
        Span::styled("i", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(" invert "),
        Span::styled("↑↓", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(" move"),
    ]);
    f.render_widget(
        Paragraph::new(keys).style(Style::default().bg(Color::DarkGray).fg(Color::White)),
        foot,
    );
}

fn header(f: &mut Frame, app: &App, now: SystemTime, area: Rect) {
    let mut l1 = vec![Span::styled(
        "cgwarden top",
        Style::default().add_modifier(Modifier::BOLD),
    )];
    let mut l2 = Vec::new();
    match &app.status {
        Some(s) => {
            l1.push(Span::raw(format!(
                " {} pid {} up {} policy {}",
                s.product,
                s.daemon.pid,
                span(u64::try_from(s.daemon.uptime_seconds).unwrap_or(0)),
                crate::show::short(&s.policy.hash)
            )));
            let active = s.rules.iter().filter(|r| r.state == "active").count();
            let count = crate::show::count::<usize>;
            l2.push(Span::raw(format!(
                "{}  {} ({active} active)  {}  {}  ",
                count(s.groups.len(), "group"),
                count(s.rules.len(), "rule"),
                count(s.claims.len(), "claim"),
                crate::show::count(s.daemon.knob_writes, "write")
            )));
            if let Some(e) = &s.last_reload_error {
                let first = e.lines().next().unwrap_or("");
                l2.push(Span::styled(
                    format!("RELOAD FAILED: {first}  "),
                    Style::default().fg(Color::Red),
                ));
            }
        }
        None => l1.push(Span::raw(format!(" connecting to {}", app.socket))),
    }
    match &app.link {
        Link::Up => {
            if let Some(u) = app.updated {
                l2.push(Span::styled(
                    format!("updated {} ago", ago(u, now)),
                    Style::default().fg(Color::DarkGray),
                ));
            }
        }
        Link::Lost(why) => l2.push(Span::styled(
            format!("DAEMON LOST ({why}); retrying {}", app.socket),
            Style::default().fg(Color::White).bg(Color::Red),
        )),
    }
    if let Some(e) = &app.error {
        l2.push(Span::styled(
            format!("  {e}"),
            Style::default().fg(Color::Red),
        ));
    }
    f.render_widget(Paragraph::new(vec![Line::from(l1), Line::from(l2)]), area);
}

fn block(app: &App) -> Block<'static> {
    let order = if app.reverse { " ▲" } else { "" };
    Block::default().borders(Borders::TOP).title(format!(
        " {} (by {}{order}) ",
        app.view.title(),
        app.sort_name()
    ))
}

fn hl() -> Style {
    Style::default().add_modifier(Modifier::REVERSED)
}

fn groups(f: &mut Frame, app: &mut App, area: Rect) {
    let rows: Vec<Row> = match &app.status {
        None => Vec::new(),
        Some(s) => sorted_groups(app, s)
            .into_iter()
            .map(|g| {
                let name = if g.exists {
                    g.name.clone()
                } else {
                    format!("{} (gone)", g.name)
                };
                Row::new(vec![
                    Cell::from(name),
                    Cell::from(g.cpuset.clone().unwrap_or_else(|| "-".into())),
                    Cell::from(size(g.memory_current)),
                    Cell::from(limit(&g.memory_high)),
                    Cell::from(limit(&g.memory_max)),
                    Cell::from(Span::styled(
                        bar(g.cpu_some_avg10),
                        psi_style(g.cpu_some_avg10),
                    )),
                    Cell::from(Span::styled(
                        bar(g.memory_some_avg10),
                        psi_style(g.memory_some_avg10),
                    )),
                    Cell::from(Span::styled(
                        bar(g.io_some_avg10),
                        psi_style(g.io_some_avg10),
                    )),
                ])
            })
            .collect(),
    };
    let header = Row::new(vec![
        "group", "cpus", "mem", "high", "max", "cpu psi", "mem psi", "io psi",
    ])
    .style(Style::default().add_modifier(Modifier::BOLD));
    let t = Table::new(
        rows,
        [
            Constraint::Min(8),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(9),
        ],
    )
    .header(header)
    .block(block(app))
    .row_highlight_style(hl());
    f.render_stateful_widget(t, area, &mut app.table);
}

fn rules(f: &mut Frame, app: &mut App, area: Rect, now: SystemTime) {
    let rows: Vec<Row> = match &app.status {
        None => Vec::new(),
        Some(s) => sorted_rules(app, s)
            .into_iter()
            .map(|r| {
                let since = r
                    .since
                    .as_deref()
                    .and_then(parse_time)
                    .map(|t| format!("{} ago", ago(t, now)))
                    .unwrap_or_default();
                Row::new(vec![
                    Cell::from(r.name.clone()),
                    Cell::from(Span::styled(r.state.clone(), state_style(&r.state))),
                    Cell::from(since),
                ])
            })
            .collect(),
    };
    let t = Table::new(
        rows,
        [
            Constraint::Min(16),
            Constraint::Length(8),
            Constraint::Length(12),
        ],
    )
    .header(
        Row::new(vec!["rule", "state", "since"])
            .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(block(app))
    .row_highlight_style(hl());
    f.render_stateful_widget(t, area, &mut app.table);
}

fn claims(f: &mut Frame, app: &mut App, area: Rect, now: SystemTime) {
    let rows: Vec<Row> = match &app.status {
        None => Vec::new(),
        Some(s) => sorted_claims(app, s)
            .into_iter()
            .map(|c| {
                let exp = match c.expires_at.as_deref().and_then(parse_time) {
                    Some(t) if t > now => format!("in {}", ago(t, now)),
                    Some(_) => "now".into(),
                    None => c.tied_to.clone().unwrap_or_else(|| "while active".into()),
                };
                Row::new(vec![
                    Cell::from(fit(&c.owner, 14)),
                    Cell::from(c.knob.clone()),
                    // Units for people (knobs::human), shortened only if
                    // still too wide.
                    Cell::from(fit(&crate::knobs::human::human_text(&c.knob, &c.value), 10)),
                    Cell::from(fit(&exp, 13)),
                    Cell::from(c.reason.clone().unwrap_or_default()),
                ])
            })
            .collect(),
    };
    let t = Table::new(
        rows,
        [
            Constraint::Length(14),
            Constraint::Min(12),
            Constraint::Length(10),
            Constraint::Length(13),
            Constraint::Min(6),
        ],
    )
    .header(
        Row::new(vec!["owner", "knob", "value", "expires", "reason"])
            .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(block(app))
    .row_highlight_style(hl());
    f.render_stateful_widget(t, area, &mut app.table);
}

fn actions_table(f: &mut Frame, app: &mut App, area: Rect, max: usize) {
    let rows: Vec<Row> = match &app.status {
        None => Vec::new(),
        Some(s) => s
            .actions
            .iter()
            .rev()
            .take(max)
            .map(|a| {
                Row::new(vec![
                    Cell::from(clock(&a.time)),
                    Cell::from(a.cause.clone()),
                    Cell::from(a.knob.clone()),
                    Cell::from(format!("{} → {}", a.old.as_deref().unwrap_or("-"), a.new)),
                ])
            })
            .collect(),
    };
    let t = Table::new(
        rows,
        [
            Constraint::Length(8),
            Constraint::Min(10),
            Constraint::Min(12),
            Constraint::Min(10),
        ],
    )
    .block(
        Block::default()
            .borders(Borders::TOP)
            .title(" last actions (newest first) "),
    );
    if app.view == View::Actions && max == usize::MAX {
        f.render_stateful_widget(t.row_highlight_style(hl()), area, &mut app.table);
    } else {
        f.render_widget(t, area);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::wire::{ActionInfo, ClaimInfo, GroupStatus, RuleStatus};
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    fn sample() -> StatusReply {
        StatusReply {
            product: "cell".into(),
            groups: vec![
                GroupStatus {
                    name: "inference".into(),
                    exists: true,
                    cpuset: Some("4-7".into()),
                    memory_current: Some(300 << 20),
                    memory_high: Some("536870912".into()),
                    memory_max: Some("max".into()),
                    cpu_some_avg10: Some(3.0),
                    memory_some_avg10: Some(62.5),
                    io_some_avg10: None,
                    ..Default::default()
                },
                GroupStatus {
                    name: "vision".into(),
                    exists: false,
                    cpu_some_avg10: Some(f64::NAN),
                    ..Default::default()
                },
            ],
            rules: vec![
                RuleStatus {
                    name: "mem-pressure".into(),
                    state: "active".into(),
                    since: Some("2026-01-01T00:00:00.000Z".into()),
                },
                RuleStatus {
                    name: "quiet".into(),
                    state: "idle".into(),
                    since: Some("garbage".into()),
                },
            ],
            claims: vec![ClaimInfo {
                owner: "boost 3".into(),
                knob: "cpufreq.policy4.min".into(),
                value: "1.8GHz".into(),
                expires_at: Some("2026-01-01T00:10:00Z".into()),
                reason: Some("job".into()),
                ..Default::default()
            }],
            actions: vec![ActionInfo {
                time: "2026-01-01T00:00:01.000Z".into(),
                cause: "rule mem-pressure".into(),
                knob: "inference.memory.high".into(),
                old: Some("512M".into()),
                new: "1G".into(),
            }],
            ..Default::default()
        }
    }

    fn screen(app: &mut App, w: u16, h: u16) -> String {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap(); // test
        let now = humantime::parse_rfc3339("2026-01-01T00:01:00Z").unwrap(); // test
        t.draw(|f| draw(f, app, now)).unwrap(); // test
        let buf = t.backend().buffer().clone();
        let mut s = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                s.push_str(buf[(x, y)].symbol());
            }
            s.push('\n');
        }
        s
    }

    #[test]
    fn numbers_are_shortened_and_marked_never_cut() {
        assert_eq!(fit("4294967296", 10), "4294967296");
        assert_eq!(fit("4294967296", 9), "≈4.29G");
        assert_eq!(fit("4294967296", 4), "≈4G");
        assert_eq!(fit("-123456789012", 7), "≈-123G");
        assert_eq!(fit("rule inference-pressure", 14), "rule inferenc…");
        assert_eq!(fit("xy", 0), "");
        // On screen: the claims view at 100×30 with a 4 GiB claim.
        let mut app = App::new("/run/cgwarden/io.cgwarden".into());
        let mut st = sample();
        st.claims[0].value = "42949672960".into();
        st.claims[0].knob = "inference.memory.high".into();
        app.status = Some(st);
        app.set_view(View::Claims);
        let s = screen(&mut app, 100, 30);
        // A knob's value in units, never cut.
        assert!(s.contains(" 40G "), "{s}");
        assert!(!s.contains("4294967296"), "{s}");
        // A number that is no knob value is still shortened, marked.
        let mut st = sample();
        st.claims[0].value = "42949672960".into();
        st.claims[0].knob = "no.such.knob".into();
        app.status = Some(st);
        let s = screen(&mut app, 100, 30);
        assert!(s.contains("≈42.95G"), "{s}");
    }

    #[test]
    fn every_view_shows_its_content_at_80x24() {
        let mut app = App::new("/run/cgwarden/io.cgwarden".into());
        app.status = Some(sample());
        let s = screen(&mut app, 80, 24);
        for want in [
            "inference",
            "4-7",
            "300M",
            "512M",
            "62.5",
            "vision (gone)",
            "last actions",
            "1G",
        ] {
            assert!(s.contains(want), "{want} missing:\n{s}");
        }
        app.set_view(View::Rules);
        let s = screen(&mut app, 80, 24);
        assert!(
            s.contains("mem-pressure") && s.contains("active") && s.contains("60s ago"),
            "{s}"
        );
        app.set_view(View::Claims);
        let s = screen(&mut app, 80, 24);
        assert!(
            s.contains("boost 3") && s.contains("in 9m") && s.contains("1.8GHz"),
            "{s}"
        );
        app.set_view(View::Actions);
        let s = screen(&mut app, 80, 24);
        assert!(s.contains("inference.memory.high"), "{s}");
    }

    #[test]
    fn sorting_orders_groups_by_pressure() {
        let mut app = App::new(String::new());
        let mut st = sample();
        st.groups[1].exists = true;
        st.groups[1].memory_some_avg10 = Some(90.0);
        app.status = Some(st);
        let s = screen(&mut app, 80, 24);
        assert!(s.find("inference") < s.find("vision"), "{s}");
        app.next_sort(); // cpu
        app.next_sort(); // memory
        let s = screen(&mut app, 80, 24);
        assert!(s.contains("by memory"), "{s}");
        assert!(s.find("vision") < s.find("inference"), "{s}");
    }

    #[test]
    fn tiny_and_odd_terminals_never_panic() {
        let mut app = App::new("x".into());
        app.status = Some(sample());
        app.link = Link::Lost("gone".into());
        let views = [
            (View::Groups, " groups (by "),
            (View::Rules, " rules (by "),
            (View::Claims, " claims and boosts (by "),
            (View::Actions, " last actions (newest first) "),
        ];
        for (w, h) in [
            (0, 0),
            (1, 1),
            (3, 2),
            (10, 4),
            (20, 10),
            (80, 17),
            (300, 100),
        ] {
            for (v, title) in views {
                app.set_view(v);
                let s = screen(&mut app, w, h);
                let at = format!("{v:?} at {w}x{h}");
                // The whole terminal and nothing beyond it.
                let lines: Vec<&str> = s.lines().collect();
                assert_eq!(lines.len(), usize::from(h), "{at}:\n{s}");
                for l in &lines {
                    assert_eq!(l.chars().count(), usize::from(w), "{at}:\n{s}");
                }
                // From three rows: the header above, the keys below.
                if h >= 3 {
                    let head = &"cgwarden top"[..usize::from(w).min(12)];
                    assert!(lines[0].starts_with(head), "{at}: header:\n{s}");
                    let keys = &" q quit"[..usize::from(w).min(7)];
                    assert!(lines[lines.len() - 1].starts_with(keys), "{at}: keys:\n{s}");
                }
                if w >= 80 && h >= 17 {
                    assert!(s.contains("DAEMON LOST (gone)"), "{at}:\n{s}");
                    assert!(s.contains(title), "{at}: {title:?}:\n{s}");
                }
            }
        }
    }

    #[test]
    fn bars_scale_and_survive_nonsense() {
        assert_eq!(bar(Some(0.0)), "      0.0");
        assert_eq!(bar(Some(100.0)), "████100.0");
        assert_eq!(bar(Some(50.0)), "██   50.0");
        assert!(bar(Some(f64::NAN)).ends_with('-'));
        assert_eq!(bar(Some(-5.0)).chars().count(), 9);
        assert_eq!(bar(Some(1e9)).chars().take(4).collect::<String>(), "████");
    }
}
