# The reaction-cost benchmark in the guest, not a test: prints BENCH
# lines, asserts nothing. Run from the host with tests/bench-overload.sh.
#
# One stall rule served by a kernel PSI trigger (`inference.memory.some > 100ms/1s`,
# `while: set inference.memory.high = 256M`, hold 3 s) and EPISODES memory-pressure
# episodes: a 150 MiB hog held 6 s in `inference` (memory.high 64M, no swap), then
# quiet. Side by side over the same window, the anchor an integrator would write: a
# 1 s poller of the same memory.pressure file (`cgwarden-workload poll-file`), which
# acts at its next read at best. Then, with the daemon stopped, the anchor that acts
# (`cgwarden-workload poll-act`: the same 1 s read, writing memory.high up and back
# down as the rule does; it pays the same reclaim inside those writes) over the same
# episodes alone; then the floor of acting at the trigger (`trigger-act`), alone
# too. CPU from each thread's schedstat, split into the
# daemon's startup (exec to "running" plus 2 s) and the episodes' window, so the note
# can say what an episode costs. Lag: from the hog's start to the daemon's write of
# memory.high (the log's time against a stamp taken just before the hog started).
EPISODES=$(cat /cgw/reaction_episodes 2>/dev/null || echo 6)
D=/tmp/cgwreact
mkdir -p "$D"
stall_bench_policy reaction-bench "$D/state" >"$D/policy.yaml" # lib.sh

threads() { thread_schedstat "$1"; } # lib.sh
# episodes WHO LAGS: EPISODES hogs; WHO (daemon | act | trig) is the one that
# raises memory.high: its reaction is seen in the daemon's log or in poll-act's
# (trigger-act's) output.
reactions() { # WHO: how many raises so far
    case $1 in
    daemon) grep -c 'set inference.memory.high = 268435456 (256M), .* by rule inference-stall' "$D/daemon.log" ;;
    act | trig) grep -c '^wrote 268435456 at ' "$D/$1.out" ;;
    esac
}
reacted() { [ "$(reactions "$1")" -gt "$2" ]; } # WHO COUNT_BEFORE
last_reaction_lag() { # WHO: ms from the stamp in $D/t0 to the latest raise
    case $1 in
    daemon)
        t=$(grep 'set inference.memory.high = 268435456 (256M), .* by rule inference-stall' "$D/daemon.log" | tail -n 1 | awk '{ print $1 }')
        cgwarden-workload since "$D/t0" "$t" ;;
    act | trig)
        awk -v t0="$(cat "$D/t0")" '/^wrote 268435456 at / { t = $4 } END { printf "%d\n", (t - t0) * 1000 + 0.5 }' "$D/$1.out" ;;
    esac
}
episodes() { # WHO LAGS
    : >"$2"
    i=0
    while [ "$i" -lt "$EPISODES" ]; do
        i=$((i + 1))
        w0=$(reactions "$1")
        cgwarden-workload stamp-exit 0 "$D/t0" 2>/dev/null
        sh -c 'echo $$ >"$0" && exec "$@"' "$CG/inference/cgroup.procs" \
            cgwarden-workload exec-as memhog alloc 150 6 >/dev/null &
        HOG=$!
        if wait_for 30 reacted "$1" "$w0"; then
            lag=$(last_reaction_lag "$1")
            echo "$lag" >>"$2"
            echo "BENCH   $1 episode $i: hog start to memory.high=256M ${lag} ms"
        else
            echo "BENCH   $1 episode $i: no reaction within 30 s"
        fi
        wait "$HOG" 2>/dev/null
        # The hold keeps 256M 3 s after the stall ends, then 64M comes back: wait for it.
        wait_for 30 sh -c "[ \"\$(cat $CG/inference/memory.high)\" = 67108864 ]" || echo "BENCH   $1 episode $i: not released"
        sleep 3
    done
}
# window WHO LAGS PID...: `episodes WHO LAGS` between two samples of each
# PID's threads ($D/PID.0, $D/PID.1); WALL: its seconds.
window() {
    _who=$1 _lags=$2
    shift 2
    for _p in "$@"; do threads "$_p" >"$D/$_p.0"; done
    _u0=$(cut -d' ' -f1 /proc/uptime)
    episodes "$_who" "$_lags"
    _u1=$(cut -d' ' -f1 /proc/uptime)
    for _p in "$@"; do threads "$_p" >"$D/$_p.1"; done
    WALL=$(awk -v a="$_u0" -v b="$_u1" 'BEGIN { printf "%.0f", b - a }')
}
cpu_ms() { awk -v a="$(sum_ns "$D/$1.0")" -v b="$(sum_ns "$D/$1.1")" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; } # PID
p90() { sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR) { i = int(0.9 * NR + 0.999); print v[i] } else print "-" }'; }

sum_ns() { awk '{ s += $3 } END { print s + 0 }' "$1"; }

echo "BENCH == reaction cost: $EPISODES memory-pressure episodes, PSI-trigger rule vs. a 1 s poller"
if ! cgwarden check "$D/policy.yaml" >"$D/check.out" 2>&1; then
    sed 's/^/BENCH   check| /' "$D/check.out"
    fail reaction-policy "the reaction policy does not check"
    return 0 2>/dev/null || exit 0
fi
# /cgw/reaction_callgrind (CGWARDEN_REACTION_CALLGRIND=1 on bench-overload.sh,
# valgrind in the image): the daemon's user-space instructions, which under
# TCG decide most of a loop turn's CPU and, unlike the CPU, repeat from run to
# run. The daemon runs under callgrind twice: started, idle, stopped (no
# episode), then through the EPISODES; the difference over the difference in
# loop turns is what a turn executes. The second run's profile goes to the
# console (gzip, base64, `CG64 ` lines) for callgrind_annotate on the host.
if [ -f /cgw/reaction_callgrind ]; then
    cg_run() { # NAME EPISODES: prints "INSTRUCTIONS TURNS"
        rm -rf "$D/state"
        env CGWARDEN_LOG=info valgrind.bin --tool=callgrind --callgrind-out-file="$D/cg.$1" \
            cgwarden run "$D/policy.yaml" 2>"$D/daemon.log" &
        _vp=$!
        wait_for 600 grep -q "cgwarden running" "$D/daemon.log" || echo "BENCH   callgrind $1: the daemon did not start" >&2
        sleep 5
        [ "$2" -gt 0 ] && episodes daemon "$D/cg-lags" >&2
        sleep 2
        kill -TERM "$_vp"
        wait "$_vp"
        echo "$(sed -n 's/^summary: //p' "$D/cg.$1") $(sed -n 's/.*event loop wake-ups total=\([0-9]*\).*/\1/p' "$D/daemon.log")"
    }
    set -- $(cg_run zero 0)
    z_ir=${1:-0} z_turns=${2:-0}
    set -- $(cg_run episodes "$EPISODES")
    e_ir=${1:-0} e_turns=${2:-0}
    echo "BENCH reaction instructions (callgrind, whole daemon): no episode ${z_ir} in ${z_turns} turns; ${EPISODES} episodes ${e_ir} in ${e_turns} turns: $(awk -v a="$z_ir" -v b="$e_ir" -v s="$z_turns" -v t="$e_turns" 'BEGIN { d = t - s; if (d < 1) d = 1; printf "%d over %d turns, %d a turn", b - a, t - s, (b - a) / d }')"
    gzip -9c "$D/cg.episodes" | base64 | tr -d '\n' | fold -w 1000 | sed 's/^/CG64 /'
    echo
    pass reaction-done "reaction instructions counted"
    return 0 2>/dev/null || exit 0
fi
# /cgw/loop_profile (CGWARDEN_LOOP_PROFILE=1 on bench-overload.sh): the stop
# line says what each kind of wake-up cost (one clock read a turn more).
prof=
[ -f /cgw/loop_profile ] && prof=CGWARDEN_LOOP_PROFILE=1
env CGWARDEN_LOG=info $prof cgwarden run "$D/policy.yaml" 2>"$D/daemon.log" &
DP=$!
wait_for 60 grep -q "cgwarden running" "$D/daemon.log"
sleep 2
threads "$DP" >"$D/d0" # startup: everything until now
# /cgw/reaction_perf (CGWARDEN_REACTION_PERF=1 on bench-overload.sh, perf in the
# image): over the episodes' window, the daemon's system calls by thread and
# kind (perf trace -s) and by the call stack that made them (perf record of
# raw_syscalls:sys_enter with frame-pointer call chains: the stacks name Rust
# functions when the binary was built with frame pointers, as that switch
# does). The CPU figures of such a run include perf's own cost.
if [ -f /cgw/reaction_perf ] && command -v perf >/dev/null 2>&1; then
    echo -1 >/proc/sys/kernel/perf_event_paranoid
    echo 0 >/proc/sys/kernel/kptr_restrict
    perf record -q -e raw_syscalls:sys_enter -g -p "$DP" -o "$D/perf.data" >/dev/null 2>&1 &
    RPERF=$!
    perf trace -s -p "$DP" -o "$D/trace.txt" >/dev/null 2>&1 &
    RTRACE=$!
    sleep 1
fi
cgwarden-workload poll-file "$CG/inference/memory.pressure" 1000 100000 >"$D/poll.out" &
PP=$!
sleep 1
window daemon "$D/lags" "$DP" "$PP"
kill "$PP" 2>/dev/null
wait "$PP" 2>/dev/null
wall=$WALL
if [ -n "${RPERF:-}" ]; then
    kill -INT "$RPERF" "$RTRACE"
    wait "$RPERF" "$RTRACE" 2>/dev/null
    echo "BENCH   perf: the daemon's system calls over the window (perf trace -s)"
    grep -v -e '^ *$' -e '^ *---' -e '(msec)' "$D/trace.txt" | head -n 60 | sed 's/^/BENCH   perf| /'
    # One line per distinct (thread, call, first 7 user-space callers):
    # the count, then the call and its callers, innermost first.
    echo "BENCH   perf: the daemon's system calls by call stack"
    perf script -i "$D/perf.data" -F comm,trace,ip,sym 2>/dev/null | awk '
        BEGIN { m = split("0 read 1 write 3 close 7 poll 8 lseek 9 mmap 10 mprotect 11 munmap 14 rt_sigprocmask 17 pread64 72 fcntl 74 fsync 202 futex 228 clock_gettime 232 epoll_wait 257 openat 286 timerfd_settime 332 statx 435 clone3 437 openat2", t, " ")
                for (i = 1; i < m; i += 2) name[t[i]] = t[i + 1] }
        function flush() { if (key != "") c[key]++; key = "" }
        / NR [0-9]+ / { flush(); match($0, /NR [0-9]+/); nr = substr($0, RSTART + 3, RLENGTH - 3)
                        key = $1 " " (nr in name ? name[nr] : "NR " nr); n = 0; next }
        $1 ~ /^[0-9a-f]+$/ && $1 !~ /^ffffffff/ && n < 7 && $2 !~ /^(syscall|__|_start|clock_gettime|std::sys|core::|\[unknown\])/ {
            key = key " < " substr($2, 1, 70); n++ }
        END { flush(); for (k in c) print c[k], k }' | sort -rn | head -n 50 | sed 's/^/BENCH   perf| /'
    rm -f "$D/perf.data"
fi
start_ms=$(awk -v s="$(sum_ns "$D/d0")" 'BEGIN { printf "%.1f", s / 1e6 }')
win_ms=$(cpu_ms "$DP")
poll_ms=$(cpu_ms "$PP")
per=$(awk -v w="$win_ms" -v n="$EPISODES" 'BEGIN { printf "%.1f", w / n }')
lags=$(sort -n "$D/lags" | tr '\n' ' ')
p90=$(p90 "$D/lags")
echo "BENCH   daemon threads over the window:"
awk 'FNR == NR { ns[$1] = $3; next } { printf "BENCH     %s %.1f ms\n", $2, ($3 - ns[$1]) / 1e6 }' "$D/$DP.0" "$D/$DP.1"
echo "BENCH reaction: cgwarden startup ${start_ms} ms CPU; ${EPISODES} episodes in ${wall} s: ${win_ms} ms CPU (${per} ms an episode), lag p90 ${p90} ms (${lags}); 1 s poller ${poll_ms} ms CPU over the same window"
kill -TERM "$DP"
wait "$DP"
grep -E "event loop (wake-ups|profile)" "$D/daemon.log" | sed 's/^/BENCH   log| /'
# The anchor that acts: the same episodes with the daemon stopped (its stop
# gives memory.high back: 64M) and `poll-act` raising and restoring the knob
# as the rule does — a 1 s read of the pressure file, 256M when `some
# total=` grew 100 ms or more in the second, 64M after 3 s without.
# acting WHO COMMAND: `cgwarden-workload COMMAND` (poll-act or trigger-act,
# the rule's trigger, knob and values) alone over the episodes; sets CPU_MS
# and SUMMARY.
acting() {
    cgwarden-workload "$2" "$CG/inference/memory.pressure" 1000 100000 \
        "$CG/inference/memory.high" 268435456 67108864 100000 3000 >"$D/$1.out" &
    _ap=$!
    sleep 1
    window "$1" "$D/$1-lags" "$_ap"
    kill "$_ap" 2>/dev/null
    wait "$_ap" 2>/dev/null
    CPU_MS=$(cpu_ms "$_ap")
    SUMMARY="${EPISODES} episodes in ${WALL} s: ${CPU_MS} ms CPU, $(grep -c '^wrote ' "$D/$1.out") writes, lag p90 $(p90 "$D/$1-lags") ms ($(sort -n "$D/$1-lags" | tr '\n' ' '))"
}
if [ "$(cat "$CG/inference/memory.high")" = 67108864 ]; then
    acting act poll-act
    act_ms=$CPU_MS
    echo "BENCH reaction anchor that acts: 1 s poller writing memory.high, $SUMMARY"
    echo "BENCH reaction CPU: cgwarden ${win_ms} ms vs. the acting poller ${act_ms} ms (the reading poller ${poll_ms} ms)"
    # The floor of reacting at the trigger: `trigger-act`, the same trigger
    # (some 100 ms in 1 s) polled, the same writes, nothing else.
    acting trig trigger-act
    echo "BENCH reaction floor that acts at the trigger: trigger-act writing memory.high, $SUMMARY"
    echo "BENCH reaction CPU beside the floor: cgwarden ${win_ms} ms, the trigger floor ${CPU_MS} ms, the acting poller ${act_ms} ms, the reading poller ${poll_ms} ms"
else
    echo "BENCH reaction anchor that acts: not run (memory.high is $(cat "$CG/inference/memory.high") after the daemon stopped, not 64M)"
fi
cgwarden reset --policy "$D/policy.yaml" >/dev/null 2>&1
pass reaction-done "reaction benchmark ran"
