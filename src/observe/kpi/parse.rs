//! The KPI inputs' text formats: StatsD lines (the datagram socket) and
//! cyclictest's histogram output (`cgwarden kpi --cyclictest FILE`).
//!
//! StatsD, as the etsy daemon and PyPI's `statsd` client write it:
//! `NAME:VALUE|TYPE[|@RATE][|#TAGS]`, one or more lines per datagram
//! separated by `\n`. Accepted types: `ms` (a timer, milliseconds: kept in
//! seconds) and `g` (a gauge, unit none). A signed gauge (`+3|g`, `-3|g`)
//! is StatsD's *change* of a gauge, not a sample, and is refused, as are
//! `|c` counters, `|s` sets and `|h` histograms: a count of events is not a
//! distribution to take percentiles of (a client that counts frames should
//! send the rate as a gauge). `@RATE` (client-side sampling) is tolerated
//! and ignored: each line is one sample whatever its rate, since the
//! percentiles of the samples sent are the percentiles of the samples
//! taken. DogStatsD `|#tags` are ignored.
//!
//! cyclictest (rt-tests) `-h US` and `--histfile=PATH` print the same
//! block: one line per microsecond bucket, `%06d` then one `%06lu` count
//! per thread separated by tabs (plus an all-threads column with
//! `--histofall`), then `# Total:`, `# Min Latencies:`, `# Avg
//! Latencies:`, `# Max Latencies:` and `# Histogram Overflows:` lines with
//! one field per thread. With `-h` on stdout the block follows the status
//! lines (`T: 0 ( 1234) P: …`, with terminal escapes), which are skipped.
//! A latency at or above the histogram's size is an *overflow*: cyclictest
//! counts it but not its value. Each overflow is ingested at its thread's
//! `Max Latencies` value — an upper bound for it — so a p99 computed with
//! overflows is never below the truth (pessimistic, as a validation must
//! be). Bucket `i` holds latencies of `i` µs (cyclictest truncates).

use super::Unit;

/// One StatsD sample, in the canonical unit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub(crate) name: String,
    pub(crate) unit: Unit,
    pub(crate) value: f64,
}

/// Parses one datagram: each non-empty line is a sample or why it is not.
pub(crate) fn statsd(datagram: &[u8]) -> Vec<Result<Sample, String>> {
    datagram
        .split(|b| *b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.iter().all(u8::is_ascii_whitespace))
        .map(|l| match std::str::from_utf8(l) {
            Ok(s) => statsd_line(s),
            Err(_) => Err("a StatsD line that is not UTF-8".to_string()),
        })
        .collect()
}

fn statsd_line(line: &str) -> Result<Sample, String> {
    let shown = || {
        line.chars()
            .take(80)
            .collect::<String>()
            .escape_debug()
            .to_string()
    };
    let (name, rest) = line
        .split_once(':')
        .ok_or_else(|| format!("`{}`: expected NAME:VALUE|TYPE", shown()))?;
    super::check_name(name)?;
    let mut parts = rest.split('|');
    let value = parts.next().unwrap_or("");
    let kind = parts
        .next()
        .ok_or_else(|| format!("`{}`: no |TYPE after the value", shown()))?;
    for extra in parts {
        if let Some(rate) = extra.strip_prefix('@') {
            match rate.parse::<f64>() {
                Ok(r) if r > 0.0 && r <= 1.0 => {}
                _ => {
                    return Err(format!(
                        "`{}`: sample rate `@{rate}` is not in (0, 1]",
                        shown()
                    ))
                }
            }
        } else if !extra.starts_with('#') {
            return Err(format!("`{}`: unknown field `|{extra}`", shown()));
        }
    }
    let unit = match kind {
        "ms" => Unit::Seconds,
        "g" => Unit::None,
        "c" | "s" | "h" | "d" => {
            return Err(format!(
                "`{}`: StatsD type |{kind} is not a KPI (only |ms timers and |g gauges are)",
                shown()
            ))
        }
        _ => return Err(format!("`{}`: unknown StatsD type |{kind}", shown())),
    };
    if value.starts_with(['+', '-']) {
        return Err(format!(
            "`{}`: a signed value is a change of a gauge, not a sample",
            shown()
        ));
    }
    let v: f64 = value
        .parse()
        .map_err(|_| format!("`{}`: `{value}` is not a number", shown()))?;
    super::check_value(v)?;
    let value = if unit == Unit::Seconds { v / 1000.0 } else { v };
    Ok(Sample {
        name: name.to_string(),
        unit,
        value,
    })
}

/// A cyclictest histogram: per thread, (latency in µs, count) pairs with
/// the overflows added at the thread's max latency.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Cyclictest {
    /// Per thread: (µs, samples).
    pub(crate) threads: Vec<Vec<(u64, u64)>>,
    /// Per thread: overflows (latencies beyond the histogram).
    pub(crate) overflows: Vec<u64>,
    /// Per thread: `# Max Latencies`.
    pub(crate) max_us: Vec<u64>,
}

impl Cyclictest {
    /// Every thread's samples merged, in seconds, for [`super::Store::record`].
    pub(crate) fn samples(&self) -> Vec<(f64, u64)> {
        let mut by_us: std::collections::BTreeMap<u64, u64> = Default::default();
        for t in &self.threads {
            for (us, n) in t {
                *by_us.entry(*us).or_insert(0) += n;
            }
        }
        for (i, o) in self.overflows.iter().enumerate() {
            if *o > 0 {
                let at = self.max_us.get(i).copied().unwrap_or(0);
                *by_us.entry(at).or_insert(0) += o;
            }
        }
        by_us
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(us, n)| (us as f64 / 1e6, n))
            .collect()
    }

    pub(crate) fn count(&self) -> u64 {
        self.threads
            .iter()
            .flat_map(|t| t.iter().map(|(_, n)| *n))
            .chain(self.overflows.iter().copied())
            .sum()
    }
}

fn numbers(s: &str) -> Option<Vec<u64>> {
    s.split_whitespace().map(|w| w.parse().ok()).collect()
}

/// Parses cyclictest's `-h`/`--histfile` output (see the module docs).
pub(crate) fn cyclictest(text: &str) -> Result<Cyclictest, String> {
    let mut rows: Vec<(u64, Vec<u64>)> = Vec::new();
    let mut max_us = None;
    let mut overflows = None;
    let mut seen_header = false;
    for (no, line) in text.lines().enumerate() {
        let line = line.trim_end();
        if line == "# Histogram" {
            seen_header = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# Max Latencies:") {
            max_us =
                Some(numbers(rest).ok_or_else(|| {
                    format!("line {}: `# Max Latencies:` is not numbers", no + 1)
                })?);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# Histogram Overflows:") {
            overflows = Some(numbers(rest).ok_or_else(|| {
                format!("line {}: `# Histogram Overflows:` is not numbers", no + 1)
            })?);
            continue;
        }
        let Some(first) = line.split_whitespace().next() else {
            continue;
        };
        if first.len() == 6 && first.bytes().all(|b| b.is_ascii_digit()) {
            let Some(mut nums) = numbers(line) else {
                return Err(format!(
                    "line {}: a histogram line that is not numbers: `{}`",
                    no + 1,
                    line.escape_debug()
                ));
            };
            let us = nums.remove(0);
            rows.push((us, nums));
        }
    }
    let Some(max_us) = max_us else {
        return Err(if rows.is_empty() && !seen_header {
            "no cyclictest histogram found (run cyclictest with -h US or --histfile=PATH)"
                .to_string()
        } else {
            "no `# Max Latencies:` line: the histogram is cut short".to_string()
        });
    };
    let threads = max_us.len();
    if threads == 0 {
        return Err("`# Max Latencies:` names no thread".into());
    }
    let overflows = overflows.unwrap_or_else(|| vec![0; threads]);
    let mut out = Cyclictest {
        threads: vec![Vec::new(); threads],
        overflows,
        max_us,
    };
    for (us, counts) in rows {
        // --histofall adds one all-threads column: not a thread.
        if counts.len() != threads && counts.len() != threads + 1 {
            return Err(format!(
                "histogram line {us:06} has {} counts for {threads} threads",
                counts.len()
            ));
        }
        for (t, n) in counts.iter().take(threads).enumerate() {
            if *n > 0 {
                if let Some(v) = out.threads.get_mut(t) {
                    v.push((us, *n));
                }
            }
        }
    }
    if out.count() == 0 {
        return Err("the cyclictest histogram holds no sample".into());
    }
    Ok(out)
}
