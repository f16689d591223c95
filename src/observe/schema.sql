-- The flight recorder's database, schema version 2.
-- Written by the daemon (src/observe/recorder.rs), read by `cgwarden report`
-- and by `sqlite3` on the device. Times are Unix seconds (REAL, UTC).
-- docs/recorder.md documents every column and gives example queries.

CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,        -- schema_version, product, created
    value TEXT NOT NULL
);

-- One row per daemon start: restarts and reboots are counted from these.
CREATE TABLE IF NOT EXISTS runs (
    id          INTEGER PRIMARY KEY,
    started     REAL NOT NULL,
    boot_id     TEXT NOT NULL,      -- /proc/sys/kernel/random/boot_id
    pid         INTEGER NOT NULL,
    product     TEXT NOT NULL,
    policy_hash TEXT NOT NULL,
    version     TEXT NOT NULL       -- cgwarden's version
);

-- One row per group per interval; grp 'host' is the whole machine
-- (/proc/pressure/*, memory_current = MemTotal - MemAvailable).
CREATE TABLE IF NOT EXISTS samples (
    ts                REAL NOT NULL,
    run               INTEGER NOT NULL,
    grp               TEXT NOT NULL,
    cpu_some_avg10    REAL,          -- PSI avg10, percent
    cpu_full_avg10    REAL,
    memory_some_avg10 REAL,
    memory_full_avg10 REAL,
    io_some_avg10     REAL,
    io_full_avg10     REAL,
    cpu_some_total    INTEGER,       -- PSI total=, microseconds
    cpu_full_total    INTEGER,
    memory_some_total INTEGER,
    memory_full_total INTEGER,
    io_some_total     INTEGER,
    io_full_total     INTEGER,
    memory_current    INTEGER,       -- bytes
    memory_high       INTEGER,       -- bytes; NULL: max
    memory_max        INTEGER,       -- bytes; NULL: max
    swap_current      INTEGER,       -- bytes
    ev_low            INTEGER,       -- memory.events counters as read
    ev_high           INTEGER,       -- (cumulative since the group was
    ev_max            INTEGER,       --  created; a drop means it was
    ev_oom            INTEGER,       --  recreated)
    ev_oom_kill       INTEGER,
    ev_oom_group_kill INTEGER
);
CREATE INDEX IF NOT EXISTS samples_ts ON samples (ts);

-- RSS of the processes named in report.criteria.processes or matching
-- settings.critical, per interval; PSS at most once a minute.
CREATE TABLE IF NOT EXISTS processes (
    ts   REAL NOT NULL,
    run  INTEGER NOT NULL,
    comm TEXT NOT NULL,
    pid  INTEGER NOT NULL,
    rss  INTEGER NOT NULL,           -- bytes (VmRSS)
    pss  INTEGER                     -- bytes (smaps_rollup Pss:); NULL: not read
);
CREATE INDEX IF NOT EXISTS processes_ts ON processes (ts);

-- Temperatures of the zones named in report.criteria.thermal_zones.
CREATE TABLE IF NOT EXISTS thermal (
    ts   REAL NOT NULL,
    run  INTEGER NOT NULL,
    zone TEXT NOT NULL,              -- the zone's `type`
    temp INTEGER NOT NULL,           -- millidegrees Celsius
    trip INTEGER                     -- lowest passive/hot trip point, m°C; NULL: none
);
CREATE INDEX IF NOT EXISTS thermal_ts ON thermal (ts);

-- Every action and rule transition, as the control socket's event stream
-- names them (kind: start, stop, rule, write, write_failed, claim_granted,
-- claim_expired, claim_released, claim_owner_gone, drift, reload,
-- reload_failed, critical_exit, kill, freeze, thaw). start/stop are the
-- daemon's own.
CREATE TABLE IF NOT EXISTS events (
    ts     REAL NOT NULL,
    run    INTEGER NOT NULL,
    kind   TEXT NOT NULL,
    rule   TEXT,
    state  TEXT,                     -- rule: the new phase (pending, active, idle)
    knob   TEXT,
    old    TEXT,
    new    TEXT,
    cause  TEXT,
    detail TEXT
);
CREATE INDEX IF NOT EXISTS events_ts ON events (ts);

-- Memory telemetry of the whole machine, per interval: name is
-- vmstat.FIELD (the counter as read), meminfo.FIELD (bytes),
-- zram.DEV.FIELD (mm_stat bytes) or fragmentation.ORDER (0-1).
CREATE TABLE IF NOT EXISTS memstat (
    ts    REAL NOT NULL,
    run   INTEGER NOT NULL,
    name  TEXT NOT NULL,
    value REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS memstat_ts ON memstat (ts);

-- The daemon's own cost, per interval.
CREATE TABLE IF NOT EXISTS daemon (
    ts          REAL NOT NULL,
    run         INTEGER NOT NULL,
    rss         INTEGER,             -- bytes
    cpu_seconds REAL,                -- user + system since start
    fds         INTEGER
);
CREATE INDEX IF NOT EXISTS daemon_ts ON daemon (ts);

-- KPIs from applications, one row per name per interval: the
-- interval's samples as a histogram (blob: LEB128 varints, the zero
-- bucket's count then (bucket index delta, count) pairs; a bucket index is
-- an f64's top 16 bits: 11 exponent and 5 mantissa bits) with count, sum,
-- sum of squares, min and max, so any window merges exactly. unit is
-- `seconds` (values in seconds) or `none`.
CREATE TABLE IF NOT EXISTS kpi (
    ts      REAL NOT NULL,
    run     INTEGER NOT NULL,
    name    TEXT NOT NULL,
    unit    TEXT NOT NULL,
    count   INTEGER NOT NULL,
    sum     REAL NOT NULL,
    sumsq   REAL NOT NULL,
    min     REAL NOT NULL,
    max     REAL NOT NULL,
    buckets BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS kpi_ts ON kpi (ts);
