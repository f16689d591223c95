-- The input tape (docs/replay.md): what the rule conditions read,
-- at every evaluation, for `cgwarden replay`. Additive to schema version 1;
-- written by src/observe/tape.rs through the recorder.

-- The inputs by name, as a rule names them (`inference.memory.some.avg10`,
-- `inference.cpu.some.total`, `running(x)`, `trigger(app.cpu.some/1s)`).
CREATE TABLE IF NOT EXISTS tape_keys (
    id    INTEGER PRIMARY KEY,
    name  TEXT NOT NULL UNIQUE,
    scale REAL NOT NULL              -- value = stored integer / scale
);

-- One row per recorder interval: the evaluations in it and the values that
-- changed (every watched value at the first evaluation), encoded as in
-- docs/replay.md.
CREATE TABLE IF NOT EXISTS tape (
    ts    REAL NOT NULL,             -- the first evaluation, Unix seconds
    run   INTEGER NOT NULL,
    until REAL NOT NULL,             -- the last evaluation
    evals INTEGER NOT NULL,          -- how many evaluations
    data  BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS tape_ts ON tape (ts);
