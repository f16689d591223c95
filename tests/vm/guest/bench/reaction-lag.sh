# The reaction-lag benchmark in the guest, not a test: prints BENCH lines,
# asserts nothing. Run from the host with tests/bench-reaction.sh.
#
# One stall rule served by a kernel PSI trigger (`inference.memory.some >
# 100ms/1s`, `while: set inference.memory.high = 256M`, hold 3 s); an
# episode is a 150 MiB hog started in `inference` (memory.high 64M, no
# swap), which stalls until the rule raises memory.high. The reference
# clock is a bare PSI trigger monitor (`cgwarden-workload psi-stamp`: the
# same file, the same trigger text the rule arms, a poll(2) and a
# CLOCK_REALTIME stamp): an episode's lag is the daemon's write of 256M (its
# log line's stamp, the same clock) minus the monitor's first stamp after
# the hog started.
#
# The daemon runs as deployed, from a file system on a block device (ext2 on
# a zram device; pages of the initramfs never leave memory), so that a
# reclaim can take its pages. Situations, all in one boot:
#   start     the first episode 2 s after "cgwarden running", then the next
#             ones, each once the previous one was released and 2 s passed
#   silence   the hog started while the rule ends by silence: just before,
#             at and just after the release predicted from the previous
#             episode (an episode whose trigger comes before the release
#             counts 0 if the rule holds through, its next raise if not)
#   reload    right after a reload: the policy file edited (the file watch),
#             then SIGHUP with the same content
#   reclaim   after the page cache was dropped and the root group squeezed
#             (memory.reclaim)
#   first     a fresh daemon each: started, 2 s after "cgwarden running" one
#             episode, stopped
# Then the cost: the same episodes handled by `cgwarden-workload
# trigger-act` (the floor: the same trigger, the same writes, nothing else),
# CPU from each thread's schedstat (TCG time: compare rows of one run); and
# with /cgw/reaction_callgrind (valgrind in the image) the instructions an
# episode costs under callgrind, the daemon beside trigger-act, each as
# (instructions over N episodes - instructions over an idle window as
# long) / N.
bench_wanted /cgw/reaction_lag_episodes reaction-lag tests/bench-reaction.sh || { return 0 2>/dev/null || exit 0; }
EPISODES=$(cat /cgw/reaction_lag_episodes)
FIRSTS=$(cat /cgw/reaction_lag_firsts 2>/dev/null || echo 3)
CG_EPISODES=$(cat /cgw/reaction_lag_cg_episodes 2>/dev/null || echo 4)
# The situations after `start` (always measured): all unless the host names some.
SITUATIONS=$(cat /cgw/reaction_lag_situations 2>/dev/null || echo "silence reload reclaim first floor")
want() { case " $SITUATIONS " in *" $1 "*) return 0 ;; esac; return 1; }
D=/tmp/cgwlag
M=/mnt/cgwlag
WL=$(command -v cgwarden-workload)
mkdir -p "$D"
policy() { # COMMENT: the policy, a comment line at its end (an edit for the reload)
    stall_bench_policy reaction-lag-bench "$D/state" "$1" # lib.sh
}
policy initial >"$D/policy.yaml"
echo "BENCH == reaction lag after the kernel's PSI trigger: a stall rule vs. a bare trigger monitor"
if ! cgwarden check "$D/policy.yaml" >"$D/check.out" 2>&1; then
    sed 's/^/BENCH   check| /' "$D/check.out"
    fail reaction-lag-done "the policy does not check"
    return 0 2>/dev/null || exit 0
fi

# --- the daemon's files on a block device (as 85-daemon-resident does)
modprobe zram 2>/dev/null
modprobe ext4 2>/dev/null
ZN=$(cat /sys/class/zram-control/hot_add 2>/dev/null)
ZD=/dev/zram$ZN
if [ -n "$ZN" ] && wait_for 10 test -b "$ZD" && echo 64M >"/sys/block/zram$ZN/disksize" &&
    mke2fs -b 4096 "$ZD" >/dev/null 2>&1 && mkdir -p "$M" && mount -t ext2 "$ZD" "$M"; then
    mkdir -p "$M/lib"
    cp /usr/local/bin/cgwarden "$M/cgwarden"
    for f in /lib/*-linux-gnu/*.so* /lib64/ld-linux*.so* /lib/ld-linux*.so*; do
        [ -f "$f" ] && cp "$f" "$M/lib/"
    done
    sync
    LD=$(ls "$M"/lib/ld-linux*.so* 2>/dev/null | head -n 1)
fi
if [ -n "${LD:-}" ]; then
    RUN="$LD --library-path $M/lib $M/cgwarden"
    echo "BENCH   the daemon runs from ext2 on $ZD ($RUN)"
else
    RUN=cgwarden
    echo "BENCH   no block device: the daemon runs from the initramfs (the reclaim situation cannot take its pages)"
fi

# --- the reference clock. The group exists before the daemon starts (it
# adopts it, and a stop leaves it), so the monitor's trigger lives across
# the daemon's restarts; `monitor` starts it again if its trigger died.
mkdir -p "$CG/inference"
MON=
monitor() {
    [ -n "$MON" ] && alive "$MON" && return 0
    "$WL" psi-stamp "$CG/inference/memory.pressure" "some 100000 1000000" 100000 >>"$D/stamps" 2>&1 &
    MON=$!
    wait_for 10 sh -c "grep -c '^armed' '$D/stamps' | grep -qv '^0$'" ||
        echo "BENCH   psi-stamp did not arm: $(tail -n 2 "$D/stamps" | tr '\n' '|')"
}
: >"$D/stamps"
monitor

now() { "$WL" stamp-exit 0 "$D/now" 2>/dev/null; cat "$D/now"; }
start_daemon_bench() { # the daemon started; waits for "cgwarden running"
    : >"$D/daemon.log"
    rm -rf "$D/state"
    env CGWARDEN_LOG=$(cat /cgw/reaction_lag_log 2>/dev/null || echo info) $RUN run "$D/policy.yaml" 2>>"$D/daemon.log" &
    DP=$!
    wait_for 60 grep -q "cgwarden running" "$D/daemon.log" ||
        echo "BENCH   the daemon did not start: $(tail -n 5 "$D/daemon.log" | tr '\n' '|')"
}
stop_daemon_bench() {
    kill -TERM "$DP" 2>/dev/null
    wait "$DP" 2>/dev/null
    cat "$D/daemon.log" >>"$D/daemon-all.log"
}
RAISE='set inference.memory.high = 268435456 (256M),'
LOWER='set inference.memory.high = 67108864 (64M),'
raises() { grep -c "$RAISE" "$D/daemon.log"; }
released() { [ "$(cat "$CG/inference/memory.high")" = 67108864 ]; }
hog() { # the episode's hog, in inference; HOG its pid
    sh -c 'echo $$ >"$0" && exec "$@"' "$CG/inference/cgroup.procs" \
        "$WL" exec-as memhog alloc 150 3 >/dev/null &
    HOG=$!
}
# lag_of T0: the episode that began at the Unix time T0 (the hog's start):
# the monitor's first stamp after T0 (into $D/t1), then each daemon write of
# memory.high as "MS R|L" (ms after that stamp, R = 256M, L = 64M), then the
# lag: the first moment memory.high is 256M to stay (0 when it was 256M at
# the stamp and no release followed), from the writes before the hog ended
# (3 s). Prints the lag in ms, or "none".
lag_of() {
    t1=$(awk -v t0="$1" '$1 == "trigger" && $3 > t0 { print $3; exit }' "$D/stamps")
    [ -n "$t1" ] || { echo none; return; }
    echo "$t1" >"$D/t1"
    grep -e "$RAISE" -e "$LOWER" "$D/daemon.log" | while read -r ts rest; do
        case $rest in *"$RAISE"*) k=R ;; *) k=L ;; esac
        echo "$("$WL" since "$D/t1" "$ts") $k"
    done | awk -v t0="$1" -v t1="$t1" -v st="$2" '
        BEGIN { lim = 3000 - (t1 - t0) * 1000 }
        $1 <= 0 { st = $2; next }
        $1 > lim { next }
        $2 == "L" { st = "L"; lag = ""; next }
        $2 == "R" && st != "R" { st = "R"; lag = $1 }
        END { if (st == "R" && lag == "") lag = 0; print (lag == "" ? "none" : lag) }'
}
# episode SITUATION [NO_WAIT]: one hog; the lag into $D/lags.SITUATION and a
# BENCH line; then, unless NO_WAIT, waits for the hog to end, the release,
# and 2 s more.
episode() {
    monitor
    w0=$(raises)
    k0=L
    released || k0=R
    t0=$(now)
    hog
    if wait_for 30 sh -c "[ \$(grep -c '$RAISE' '$D/daemon.log') -gt $w0 ] || [ $k0 = R ]"; then
        sleep 0.5
        wait_for 10 sh -c "awk -v t0=$t0 '\$1 == \"trigger\" && \$3 > t0 { f = 1 } END { exit !f }' '$D/stamps'"
        lag=$(lag_of "$t0" "$k0")
    else
        lag=none
    fi
    [ "$lag" = none ] || echo "$lag" >>"$D/lags.$1"
    n=$((${n:-0} + 1))
    echo "BENCH   $1 episode: lag after the trigger ${lag} ms (memory.high at the start: $k0; stamps $(awk -v t0="$t0" '$1 == "trigger" && $3 > t0 { n++ } END { print n + 0 }' "$D/stamps"))"
    [ -n "${2:-}" ] && return 0
    wait "$HOG" 2>/dev/null
    wait_for 30 released || echo "BENCH   $1 episode: not released"
    sleep 2
}
# The last release's time minus the last raise's (ms): how long a rule
# holds after its raise when the hog ends as these do.
hold_ms() {
    r=$(grep "$RAISE" "$D/daemon.log" | tail -n 1 | cut -d' ' -f1)
    l=$(grep "$LOWER" "$D/daemon.log" | tail -n 1 | cut -d' ' -f1)
    echo "$(now)" >"$D/x"
    a=$("$WL" since "$D/x" "$r")
    b=$("$WL" since "$D/x" "$l")
    echo $((b - a))
}
sleep_until() { # UNIX_TIME
    awk -v t="$1" -v n="$(now)" 'BEGIN { d = t - n; if (d > 0) printf "%.3f\n", d; else print 0 }' | xargs sleep
}
threads() { thread_schedstat "$1"; } # lib.sh
cpu_ns() { awk '{ s += $3 } END { print s + 0 }'; }

# --- start: EPISODES episodes, the first 2 s after "cgwarden running"
start_daemon_bench
sleep 2
c0=$(threads "$DP" | cpu_ns)
u0=$(cut -d' ' -f1 /proc/uptime)
i=0
while [ "$i" -lt "$EPISODES" ]; do
    i=$((i + 1))
    episode start
done
u1=$(cut -d' ' -f1 /proc/uptime)
d_cpu=$(( ($(threads "$DP" | cpu_ns) - c0) / 1000000 ))
d_wall=$(awk -v a="$u0" -v b="$u1" 'BEGIN { printf "%.0f", b - a }')
H=$(hold_ms)
echo "BENCH   the rule's raise to its release: ${H} ms"

# --- silence: hog A, then hog B started OFF ms after the release predicted
# from hog A's raise (negative: before it)
for off in -300 -100 0 100; do
    want silence || break
    w0=$(raises)
    hog
    wait_for 30 sh -c "[ \$(grep -c '$RAISE' '$D/daemon.log') -gt $w0 ]"
    r=$(grep "$RAISE" "$D/daemon.log" | tail -n 1 | cut -d' ' -f1)
    "$WL" stamp-exit 0 "$D/x" 2>/dev/null
    rel=$(awk -v x="$(cat "$D/x")" -v a="$("$WL" since "$D/x" "$r")" -v h="$H" -v o="$off" \
        'BEGIN { printf "%.3f\n", x + (a + h + o) / 1000 }')
    sleep_until "$rel"
    echo "BENCH   silence: hog B ${off} ms from the predicted release"
    episode silence
done

# --- reload: the policy file edited (its watch reloads), then SIGHUP
for how in edit hup; do
    want reload || break
    r0=$(grep -c 'reload.*: done\|changed.*: done\|: done' "$D/daemon.log")
    if [ "$how" = edit ]; then policy "edited $(now)" >"$D/policy.yaml"; else kill -HUP "$DP"; fi
    wait_for 30 sh -c "[ \$(grep -c ': done' '$D/daemon.log') -gt $r0 ]" ||
        echo "BENCH   reload ($how): no ': done' line"
    grep ': done' "$D/daemon.log" | tail -n 1 | sed 's/^/BENCH   log| /'
    episode "reload-$how"
done

# --- reclaim: the page cache dropped, the root group squeezed
majflt() { cut -d' ' -f12 "/proc/$DP/stat"; }
for j in 1 2; do
    want reclaim || break
    f0=$(majflt)
    sync
    echo 3 >/proc/sys/vm/drop_caches
    echo 2G >"$CG/memory.reclaim" 2>/dev/null
    echo 3 >/proc/sys/vm/drop_caches
    sleep 1
    episode reclaim
    echo "BENCH   reclaim episode $j: the daemon's major faults over it: $(($(majflt) - f0))"
done
stop_daemon_bench
grep -E "event loop (wake-ups|profile)" "$D/daemon-all.log" | sed 's/^/BENCH   log| /'

# --- first: a fresh daemon each, one episode 2 s after "cgwarden running"
j=0
want first || FIRSTS=0
while [ "$j" -lt "$FIRSTS" ]; do
    j=$((j + 1))
    start_daemon_bench
    sleep 2
    episode first
    stop_daemon_bench
done

# With CGWARDEN_LAG_LOG=debug on the host: the daemons' logs and the
# monitor's stamps, to see what a late episode waited for.
if [ -f /cgw/reaction_lag_log ]; then
    sed 's/^/DLOG /' "$D/daemon-all.log" | head -n 3000
    sed 's/^/STAMP /' "$D/stamps"
fi

# --- the floor: trigger-act over EPISODES episodes, its CPU and its lag
"$WL" trigger-act "$CG/inference/memory.pressure" 1000 100000 \
    "$CG/inference/memory.high" 268435456 67108864 100000 3000 >"$D/trig.out" &
TP=$!
sleep 2
# trigger-act's writes, in the daemon log's form, for lag_of.
trig_log() {
    awk '/^wrote / { printf "%s set inference.memory.high = %s (%s), by trigger-act\n", $4, $2,
        ($2 == 268435456 ? "256M" : "64M") }' "$D/trig.out" | while read -r t rest; do
        echo "$(awk -v t="$t" 'BEGIN { s = int(t); printf "%s", s }' | xargs -I{} date -u -d @{} +%Y-%m-%dT%H:%M:%S).${t#*.}Z $rest"
    done >"$D/daemon.log"
}
tc0=$(threads "$TP" | cpu_ns)
tu0=$(cut -d' ' -f1 /proc/uptime)
i=0
want floor || i=$EPISODES
while [ "$i" -lt "$EPISODES" ]; do
    i=$((i + 1))
    w0=$(grep -c '^wrote 268435456' "$D/trig.out")
    t0=$(now)
    hog
    wait_for 30 sh -c "[ \$(grep -c '^wrote 268435456' '$D/trig.out') -gt $w0 ]"
    sleep 0.5
    trig_log
    lag=$(lag_of "$t0" L)
    [ "$lag" = none ] || echo "$lag" >>"$D/lags.trigger-act"
    echo "BENCH   trigger-act episode: lag after the trigger ${lag} ms"
    wait "$HOG" 2>/dev/null
    wait_for 30 released || echo "BENCH   trigger-act episode: not released"
    sleep 2
done
tu1=$(cut -d' ' -f1 /proc/uptime)
t_cpu=$(( ($(threads "$TP" | cpu_ns) - tc0) / 1000000 ))
t_wall=$(awk -v a="$tu0" -v b="$tu1" 'BEGIN { printf "%.0f", b - a }')
kill "$TP" 2>/dev/null
wait "$TP" 2>/dev/null

# --- the figures
stats() { # FILE: "N episodes, p50 A ms, p90 B ms, max C ms (all: ...)"
    sort -n "$1" 2>/dev/null | awk '{ v[NR] = $1 } END {
        if (!NR) { print "no episode measured"; exit }
        p50 = v[int(0.5 * NR + 0.999)]; p90 = v[int(0.9 * NR + 0.999)]
        printf "%d episodes, p50 %d ms, p90 %d ms, max %d ms (", NR, p50, p90, v[NR]
        for (i = 1; i <= NR; i++) printf "%s%d", (i > 1 ? " " : ""), v[i]
        print ")" }'
}
cat "$D"/lags.start "$D"/lags.silence "$D"/lags.reload-* "$D"/lags.reclaim "$D"/lags.first >"$D/lags.all" 2>/dev/null
for s in start silence reload-edit reload-hup reclaim first all trigger-act; do
    echo "BENCH lag $s: $(stats "$D/lags.$s")"
done
echo "BENCH cpu: cgwarden ${d_cpu} ms over ${EPISODES} episodes in ${d_wall} s; trigger-act ${t_cpu} ms over ${EPISODES} episodes in ${t_wall} s; ratio $(awk -v a="$d_cpu" -v b="$t_cpu" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "-" }')"

# --- instructions under callgrind: (episodes - idle window as long) / N
if [ -f /cgw/reaction_callgrind ]; then
    # cg WHO NAME N: WHO (daemon | trig) under callgrind, 5 s to settle, then
    # N episodes or, with N = 0, an idle window as long as the last pass of
    # episodes ($D/cg_wall); prints the
    # instructions (callgrind's summary).
    cg() {
        rm -f "$D/cg.$2"
        if [ "$1" = daemon ]; then
            rm -rf "$D/state"
            : >"$D/daemon.log"
            env CGWARDEN_LOG=info valgrind.bin --tool=callgrind --callgrind-out-file="$D/cg.$2" \
                cgwarden run "$D/policy.yaml" 2>>"$D/daemon.log" &
            _vp=$!
            wait_for 600 grep -q "cgwarden running" "$D/daemon.log" || echo "BENCH   callgrind $2: the daemon did not start" >&2
        else
            valgrind.bin --tool=callgrind --callgrind-out-file="$D/cg.$2" \
                "$WL" trigger-act "$CG/inference/memory.pressure" 1000 100000 \
                "$CG/inference/memory.high" 268435456 67108864 100000 3000 >"$D/trig.out" 2>"$D/cg.$2.err" &
            _vp=$!
        fi
        sleep 5
        _c0=$(cut -d' ' -f1 /proc/uptime)
        if [ "$3" = 0 ]; then
            sleep "$(cat "$D/cg_wall")"
        else
            _i=0
            while [ "$_i" -lt "$3" ]; do
                _i=$((_i + 1))
                _w0=$(released && echo 0 || echo 1)
                hog
                wait_for 60 sh -c "! [ \"\$(cat $CG/inference/memory.high)\" = 67108864 ]"
                wait "$HOG" 2>/dev/null
                wait_for 60 released || echo "BENCH   callgrind $2: not released" >&2
                sleep 2
            done
            # (cg runs in a command substitution: the length goes through a file.)
            awk -v a="$_c0" -v b="$(cut -d' ' -f1 /proc/uptime)" 'BEGIN { printf "%.0f\n", b - a }' >"$D/cg_wall"
        fi
        kill -TERM "$_vp"
        wait "$_vp"
        sed -n 's/^summary: //p' "$D/cg.$2"
    }
    echo 0 >"$D/cg_wall"
    d_eps=$(cg daemon d-eps "$CG_EPISODES")
    d_idle=$(cg daemon d-idle 0)
    t_eps=$(cg trig t-eps "$CG_EPISODES")
    t_idle=$(cg trig t-idle 0)
    echo "BENCH   callgrind: cgwarden $d_eps over $CG_EPISODES episodes, $d_idle idle ($(cat "$D/cg_wall") s); trigger-act $t_eps, $t_idle idle"
    awk -v de="$d_eps" -v di="$d_idle" -v te="$t_eps" -v ti="$t_idle" -v n="$CG_EPISODES" 'BEGIN {
        d = (de - di) / n; t = (te - ti) / n
        printf "BENCH instructions an episode (callgrind): cgwarden %d, trigger-act %d, ratio %s\n", d, t, (t > 0 ? sprintf("%.1f", d / t) : "-") }'
    gzip -9c "$D/cg.d-eps" | base64 | tr -d '\n' | fold -w 1000 | sed 's/^/CG64 /'
    echo
    # The idle window's profile too: episodes minus idle, function by
    # function, is what an episode costs (tests/callgrind-diff.py).
    gzip -9c "$D/cg.d-idle" | base64 | tr -d '\n' | fold -w 1000 | sed 's/^/CGI64 /'
    echo
fi
kill "$MON" 2>/dev/null
wait "$MON" 2>/dev/null
cgwarden reset --policy "$D/policy.yaml" >/dev/null 2>&1
umount "$M" 2>/dev/null
[ -n "$ZN" ] && echo "$ZN" >/sys/class/zram-control/hot_remove 2>/dev/null
pass reaction-lag-done "reaction-lag benchmark ran"
