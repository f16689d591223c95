//! Observability: what the daemon shows of itself to a
//! fleet (OpenMetrics), what it remembers on the device (the SQLite flight
//! recorder) and what it concludes from that memory (`cgwarden report`).
//! Everything here talks to the engine through the daemon, never around it,
//! and runs off the event loop: a slow scrape or an fsync never delays a
//! reaction.

pub(crate) mod http; // GET /metrics and the textfile, tasks of cgw-services
pub(crate) mod kpi; // KPIs from applications (store, StatsD and cyclictest parsers)
pub(crate) mod memstat; // memory telemetry (metrics, recorder)
pub(crate) mod metrics; // the OpenMetrics exposition
pub(crate) mod procmem; // RSS and PSS of the judged processes, for the recorder
pub(crate) mod recorder; // the SQLite flight recorder, on cgw-recorder
#[cfg(feature = "report")]
pub(crate) mod replay; // `cgwarden replay`, the engine over the tape
#[cfg(feature = "report")]
pub(crate) mod report;
pub(crate) mod sample; // one reading of a group, for metrics and recorder
pub(crate) mod state; // what the daemon publishes for the observe threads
pub(crate) mod tape; // the input tape replay reads
pub(crate) mod textfile; // the metrics textfile's write, off the serving thread

/// The flight recorder's schema, shared by the writer and `report`;
/// documented in docs/recorder.md.
pub const SCHEMA: &str = include_str!("schema.sql");
/// The schema's version. Version 1 named the machine's row and its tape
/// lines `system`; version 2 names them `host`, as the rules do, so a
/// group may be called `system`. The recorder renames a version 1
/// database's machine names when it opens one ([`host_name_of_v1`]), and
/// the readers read an unconverted one the same way.
pub(crate) const SCHEMA_VERSION: i64 = 2;

/// A version 1 database's name for the machine or one of its lines
/// (`system`, `system.memory.some.total`, `armed(system.cpu.some)`) as
/// version 2 spells it; every other name as it is. In version 1 no group
/// could be called `system`, so the rename never takes a group's name.
pub(crate) fn host_name_of_v1(name: &str) -> std::borrow::Cow<'_, str> {
    use crate::knobs::MACHINE;
    if name == "system" {
        return MACHINE.into();
    }
    if let Some(rest) = name.strip_prefix("system.") {
        return format!("{MACHINE}.{rest}").into();
    }
    if name.contains("(system.") {
        return name.replace("(system.", &format!("({MACHINE}.")).into();
    }
    name.into()
}
