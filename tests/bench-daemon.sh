#!/usr/bin/env bash
# Daemon benchmarks (`cgwarden run`, release build). Prints numbers; asserts nothing.
#
#   bash tests/bench-daemon.sh footprint [SECONDS]   idle RSS + CPU of `run policies/iq9100-vision.yaml`
#                                                    on the fake demo board (default 600 s, 1 s tick)
#   bash tests/bench-daemon.sh latency [EVENTS]      wake → knob write latency on a fake root
#                                                    (default 2000 events; = cargo bench --bench daemon_latency)
#   bash tests/bench-daemon.sh psi [SECONDS]         real-kernel PSI trigger: stall onset → wake, on the host
#                                                    cgroup2 mount (a cgwarden-bench-* group; the daemon
#                                                    code, not the binary: see benches/daemon_latency.rs)
#   bash tests/bench-daemon.sh tick                  = cargo bench --bench tick (engine + sampler)
#   bash tests/bench-daemon.sh observe [SECONDS]     footprint without, then with metrics and
#                                                    the recorder (interval 1 s, accelerated), scrape
#                                                    latency, recorder bytes per interval and per day at 10 s
#
# Honours CARGO_TARGET_DIR. BENCH_NO_BUILD=1 skips `cargo build`. The fake roots go under
# $TMPDIR (tempfile): TMPDIR=/dev/shm keeps ext4 journalling (truncate on every fake knob
# write) out of the latency figure; footprint uses /tmp.
# Never touches this host's `/`: every daemon runs with --root on a fake tree, except `psi`,
# which only creates/removes its own cgwarden-bench-* group below /sys/fs/cgroup/unified
# and moves only the processes it started (spinners), removing the group afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
T=${CARGO_TARGET_DIR:-target}
B=$T/release/cgwarden
mode=${1:-footprint}
shift || true

build() {
    [ "${BENCH_NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --bins --examples
}

# Lays out what a kernel would show in each group of the iq9100 policy after `apply`, so the
# tick samples real files: PSI, memory.current, memory.events, MemAvailable.
populate_board() { # DIR
    local d=$1 g
    for g in realtime inference vision system; do
        local gd=$d/sys/fs/cgroup/$g
        mkdir -p "$gd"
        for r in cpu memory io; do
            printf 'some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500\n' >"$gd/$r.pressure"
        done
        printf '268435456\n' >"$gd/memory.current"
        printf 'low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n' >"$gd/memory.events"
        printf 'populated 1\nfrozen 0\n' >"$gd/cgroup.events"
    done
    mkdir -p "$d/proc/pressure"
    for r in cpu memory io; do
        printf 'some avg10=0.00 avg60=0.00 avg300=0.00 total=1000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=500\n' >"$d/proc/pressure/$r"
    done
    printf 'MemTotal:       16384000 kB\nMemFree:         8192000 kB\nMemAvailable:   12288000 kB\n' >"$d/proc/meminfo"
}

# utime+stime in clock ticks, and the scheduler's ns-precision run time.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
cpu_ns() { awk '{ print $1 }' "/proc/$1/schedstat"; }
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

footprint() {
    local secs=${1:-600}
    build
    tree=$(mktemp -d /tmp/cgw-bench-fp.XXXXXX)
    pid=
    trap 'if [ -n "${pid:-}" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; rm -rf "$tree"' EXIT
    "$T/release/examples/demo_root" "$tree/board" >/dev/null
    local pol=${BENCH_POLICY:-policies/iq9100-vision.yaml}
    cp "$B" "$tree/cgwarden" # a rebuild during a long run does not touch the running binary
    local B=$tree/cgwarden
    "$B" apply "$pol" --root "$tree/board" >/dev/null 2>&1
    populate_board "$tree/board"
    "$B" run "$pol" --root "$tree/board" 2>"$tree/daemon.log" &
    pid=$!
    for _ in $(seq 200); do
        grep -q 'cgwarden running' "$tree/daemon.log" && break
        sleep 0.05
    done
    grep -q 'cgwarden running' "$tree/daemon.log" || { cat "$tree/daemon.log"; echo "daemon did not start" >&2; exit 1; }
    sleep 2 # let startup settle (first evaluation, first tick)
    local hz t0 c0 n0 r0 t1 c1 n1 r1 hwm threads
    hz=$(getconf CLK_TCK)
    t0=$(date +%s%N); c0=$(cpu_ticks $pid); n0=$(cpu_ns $pid); r0=$(status_kb $pid VmRSS)
    echo "footprint: pid $pid, policy $pol, fake board $tree/board, default tick, ${secs}s; $(nproc) CPUs"
    echo "  start (after startup + 2 s): VmRSS ${r0} KiB, CPU so far $(awk -v c="$c0" -v h="$hz" 'BEGIN{printf "%.2f", c/h}') s (startup converge included)"
    local step=$((secs >= 60 ? 60 : secs)) left=$secs
    while [ "$left" -gt 0 ]; do
        local s=$((left < step ? left : step))
        sleep "$s"
        left=$((left - s))
        kill -0 "$pid" 2>/dev/null || { cat "$tree/daemon.log"; echo "daemon died" >&2; exit 1; }
        echo "  t+$((secs - left))s: VmRSS $(status_kb $pid VmRSS) KiB, cpu $(awk -v a="$n0" -v b="$(cpu_ns $pid)" 'BEGIN{printf "%.3f", (b-a)/1e6}') ms since start"
    done
    t1=$(date +%s%N); c1=$(cpu_ticks $pid); n1=$(cpu_ns $pid); r1=$(status_kb $pid VmRSS)
    hwm=$(status_kb $pid VmHWM); threads=$(status_kb $pid Threads)
    awk -v t0="$t0" -v t1="$t1" -v c0="$c0" -v c1="$c1" -v n0="$n0" -v n1="$n1" -v h="$hz" \
        -v r0="$r0" -v r1="$r1" -v hwm="$hwm" -v th="$threads" 'BEGIN {
        wall = (t1 - t0) / 1e9
        printf "  end: wall %.1f s, VmRSS %d KiB (%.2f MiB; start %d KiB), VmHWM %d KiB, threads %d\n", wall, r1, r1 / 1024, r0, hwm, th
        printf "  CPU (utime+stime, %d Hz ticks): %.2f s = %.4f %% of one core\n", h, (c1 - c0) / h, 100 * (c1 - c0) / h / wall
        printf "  CPU (schedstat run time, ns):  %.1f ms = %.4f %% of one core, %.1f us per second\n", (n1 - n0) / 1e6, 100 * (n1 - n0) / 1e9 / wall, (n1 - n0) / 1e3 / wall
    }'
    echo "  daemon log ($(wc -l <"$tree/daemon.log") lines), warnings and errors:"
    grep -E 'WARN|ERROR' "$tree/daemon.log" | sed 's/^/    /' || true
    [ -z "${BENCH_AFTER:-}" ] || "$BENCH_AFTER" "$tree/board" "$pid"
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
    rm -rf "$tree"
}

# What metrics and the recorder cost. The iq9100 policy enables both; "without"
# is the same policy with settings.metrics/recorder cut out; "with" records every 1 s
# (10x the default) so the database's growth shows in a short run.
observe_after() { # BOARD PID: scrape latency, then the recorder's size per interval
    local board=$1 sock=$1/run/cgwarden/metrics.sock db=$1/var/lib/cgwarden/recorder.db
    echo "  scrape latency over the unix socket, 200 scrapes (curl time_total):"
    for _ in $(seq 200); do
        curl -s -o /dev/null -w '%{time_total}\n' --unix-socket "$sock" http://localhost/metrics
    done | sort -n | awk '{ a[NR] = $1 } END { printf "    p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms\n", a[int(NR*0.5)]*1000, a[int(NR*0.9)]*1000, a[int(NR*0.99)]*1000, a[NR]*1000 }'
    echo "    exposition: $(curl -s --unix-socket "$sock" http://localhost/metrics | wc -c) bytes, $(curl -s --unix-socket "$sock" http://localhost/metrics | grep -vc '^#') samples"
    sqlite3 "$db" 'PRAGMA wal_checkpoint(TRUNCATE);' >/dev/null
    sqlite3 "$db" "SELECT (SELECT page_count FROM pragma_page_count) - (SELECT freelist_count FROM pragma_freelist_count), (SELECT page_size FROM pragma_page_size), (SELECT count(DISTINCT ts) FROM samples), (SELECT count(*) FROM samples), (SELECT count(*) FROM events);" |
        awk -F'|' '{ used = $1 * $2; per = used / $3
            printf "  recorder: %d intervals, %d sample rows, %d events, %d bytes used = %.0f bytes per interval\n", $3, $4, $5, used, per
            printf "    at the default 10 s: %.1f MiB per day; 64M max_size holds %.1f days (retention 7d)\n", per * 8640 / 1048576, 64 * 1048576 / (per * 8640) }'
}

observe() {
    local secs=${1:-120} tmp
    build
    tmp=$(mktemp -d /tmp/cgw-bench-obs.XXXXXX)
    awk '/^  metrics:/ { skip = 1; next } /^  recorder:/ { skip = 1; next }
         skip && /^    / { next } { skip = 0; print }' policies/iq9100-vision.yaml >"$tmp/without.yaml"
    sed 's/^    interval: 10s/    interval: 1s/' policies/iq9100-vision.yaml >"$tmp/with.yaml"
    echo "=== without metrics and recorder"
    BENCH_POLICY=$tmp/without.yaml footprint "$secs"
    echo "=== with metrics (socket + textfile every 15 s) and the recorder every 1 s"
    BENCH_POLICY=$tmp/with.yaml BENCH_AFTER=observe_after footprint "$secs"
    rm -rf "$tmp"
}

case $mode in
footprint) footprint "$@" ;;
latency) cargo bench --bench daemon_latency -- "${1:-2000}" ;;
psi) cargo bench --bench daemon_latency -- psi "${1:-60}" ;;
tick) cargo bench --bench tick ;;
observe) observe "$@" ;;
*)
    sed -n '2,17p' "$0"
    exit 2
    ;;
esac
