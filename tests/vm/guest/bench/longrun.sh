# limit: 4200
# The long-run guest soak benchmark, not a test: prints BENCH lines and
# a summary table with a PASS/FAIL per criterion of the issue, asserts nothing (it ends
# with `pass bench-done` whatever it measured). Run from the host with
# tests/bench-longrun-guest.sh, which writes /cgw/longrun_secs (without it, under the
# other benchmarks, this script does nothing) and raises the first line's limit to
# fit. The limit above covers the default 3600 s.
#
# `cgwarden run` (metrics on TCP + unix socket + textfile, the flight recorder every
# 1 s, five groups, placement rules, a PSI-trigger rule with a `while` claim, an
# oom_kill rule with a claim and a hook, a hook-storm rule) for SECS seconds while a
# loop of ~30 s cycles drives:
#   - a memory squeeze: a 150 MiB hog held 6 s in `squeeze` (memory.high 64M, no swap);
#     rule squeeze-stall (`squeeze.memory.some > 100ms/1s`) claims memory.high 256M;
#   - an OOM kill: a 96 MiB hog in `oomg` (memory.max 32M, no swap);
#   - 20 execs of `lrchild` (placed in /execs by comm), each through its own
#     `cgwarden-workload storm CHILD /execs 1 …` driver so that each one's placement
#     latency (spawn returned -> the child sees itself in /execs, polling every 1 ms) is
#     measured: 10 at once beside the squeeze, hook storm and OOM kill (the burst), 10
#     one after another with nothing else driven (the trickle). An exec is within when
#     seen within 500 ms; missed when never placed, or when a look past 500 ms still
#     found it not placed (the storm child reports its last unplaced look); unresolved
#     when seen past 500 ms but no look past 500 ms found it unplaced: placed before the
#     child's first look, which came past 500 ms (the emulated CPUs busy starting the
#     children; the flood bench does not count those as missed either), or placed
#     between a look before 500 ms and the next one past it (a starved child);
#   - a hook storm: a 4 s `lrhks` process makes rule hook-storm active, whose `then:
#     hook hs` repeats every 200 ms (~20 runs);
#   - boosts through the control socket: a timed one, one released by handle, one tied
#     to a command (`boost … -- CMD`);
#   - every 2nd cycle a group deletion: `rmdir /sys/fs/cgroup/victim`, then the
#     daemon's recreation (pids.max back) within 40 s;
#   - every RELOAD_EVERY s (120) a reload: the policy edited (victim.pids.max and the
#     squeeze threshold alternate; written to a temp file and renamed), then
#     `cgwarden reload` (the daemon also sees the file change itself);
# and beside it metrics scrapes every 3 s (busybox wget over loopback TCP) and a sampler
# every SAMPLE s (60): one `BENCH sample` line with the daemon's RSS (smaps_rollup Rss,
# and Anonymous), open fds and zombie children (each the least / the ones present in
# all of 3 reads 0.5 s apart: a hook that just ended is not yet reaped), threads, and
# CPU (utime+stime) since the last sample.
#
# Criteria: every exec placed within 500 ms; RSS flat after the
# warm-up (WARMUP, 600 s, or SECS/3 when shorter): last <= first-after-warm-up +
# 256 KiB and no monotonic growth (no step down among >= 3 post-warm-up samples while
# they rose); fds flat (last <= first-after-warm-up, no monotonic growth); no zombie
# children; no ERROR line in the daemon log. Timings are TCG's (emulated, 2 vCPUs).
bench_wanted /cgw/longrun_secs longrun tests/bench-longrun-guest.sh || { return 0 2>/dev/null || exit 0; }
SECS=$(cat /cgw/longrun_secs)
SAMPLE=$(cat /cgw/longrun_sample 2>/dev/null || echo 60)
RELOAD_EVERY=$(cat /cgw/longrun_reload_every 2>/dev/null || echo 120)
CYCLE=$(cat /cgw/longrun_cycle 2>/dev/null || echo 30)
BURST=$(cat /cgw/longrun_burst 2>/dev/null || echo 20)
WARMUP=$(cat /cgw/longrun_warmup 2>/dev/null || echo 600)
[ $((SECS / 3)) -lt "$WARMUP" ] && WARMUP=$((SECS / 3))
LIMIT_MS=500
LIFE_MS=1500 # each exec's child lives this long from its start: not placed by then is "never"

D=/tmp/lr
rm -rf "$D"
mkdir -m 0755 -p "$D" "$D/burst" "$D/textfile" "$D/rec"
P=$D/policy.yaml
S=/run/cgwarden/io.cgwarden
DLOG=$D/daemon.log
URL=http://127.0.0.1:9622/metrics
WL=$(command -v cgwarden-workload)
cp "$WL" "$D/lrchild" # the exec burst's child: comm lrchild, placed in /execs
: >"$D/lat"           # one line per exec: latency ms, or "never"
: >"$D/scrapes"       # one line per scrape: ok|fail
: >"$D/hooks"         # one line per hook run (written by the hook)
: >"$D/events"        # one line per driven event: KIND ok|fail DETAIL
up() { cut -d' ' -f1 /proc/uptime; }
ev() { echo "$1 $2 $3" >>"$D/events"; }
step() { [ -f /cgw/longrun_trace ] && echo "LR   step $1 t=$(since)s"; }
evn() { awk -v k="$1" -v r="$2" '$1 == k && $2 == r { n++ } END { print n + 0 }' "$D/events"; }

ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up

# The flight recorder every 1 s, unless /cgw/longrun_norecorder (an A/B of the
# daemon's anonymous memory: what the recorder's SQLite adds as its file grows).
recorder="  recorder:
    dir: $D/rec
    interval: 1s"
[ -f /cgw/longrun_norecorder ] && recorder="  # recorder: off (/cgw/longrun_norecorder)"
# Under massif the daemon does not lock its memory (valgrind's own would be locked too).
daemon_setting="  # daemon: defaults"
[ -f /cgw/longrun_massif ] && daemon_setting="  daemon: { mlock: false }"
# policy GEN: the policy of reload generation GEN (odd/even alternate two values).
policy() {
    if [ $(($1 % 2)) = 0 ]; then vpids=100 thr=100ms; else vpids=101 thr=120ms; fi
    cat <<EOP
# longrun bench policy, generation $1
version: 1
product: longrun-bench
settings:
  cgroup_root: $CG
  state_dir: /run/cgwarden
  on_missing: warn
  rescan: 30s
$daemon_setting
  metrics:
    socket: /run/cgwarden/metrics.sock
    listen: 127.0.0.1:9622
    textfile: $D/textfile/cgwarden.prom
    interval: 5s
$recorder
groups:
  execs:
    cpu: { weight: 100 }
    pids: { max: 512 }
  squeeze:
    memory: { high: 64M, max: 512M, swap_max: 0 }
  oomg:
    memory: { max: 32M, swap_max: 0 }
  victim:
    cpu: { weight: 150 }
    pids: { max: $vpids }
  hookrun:
    pids: { max: 64 }
placement:
  - match: { comm: lrchild }
    group: execs
  - match: { comm: lrhks }
    group: hookrun
system:
  sysctl: { vm.swappiness: 33 }
hooks:
  hs:
    exec: [/bin/sh, -c, 'echo {event} {rule} >> $D/hooks']
    timeout: 5s
  oomhook:
    exec: [/bin/sh, -c, 'echo {event} {rule} >> $D/hooks']
    timeout: 5s
rules:
  - name: squeeze-stall
    when: squeeze.memory.some > $thr/1s
    while:
      - set squeeze.memory.high = 256M
    hold: 3s
  - name: oom-seen
    when: oomg.memory.events.oom_kill > 0/3s
    while:
      - set sysctl.vm.swappiness = 91
      - hook oomhook
    hold: 2s
  - name: hook-storm
    when: running(lrhks)
    then:
      - hook hs
    cooldown: 200ms
EOP
}
GEN=0
write_policy() { # GEN: temp file + rename (the daemon never reads half a file)
    policy "$1" >"$P.tmp"
    chmod 0644 "$P.tmp"
    mv "$P.tmp" "$P"
}
write_policy 0
if ! cgwarden check "$P" >"$D/check.out" 2>&1; then
    sed 's/^/BENCH   check| /' "$D/check.out"
    fail longrun-policy "the longrun policy does not check"
    return 0 2>/dev/null || exit 0
fi
policy 1 >"$D/p1.yaml"
cgwarden check "$D/p1.yaml" >/dev/null 2>&1 || echo "BENCH   warning: generation 1 of the policy does not check"

echo "BENCH guest: $(nproc) CPUs, $(awk '/MemTotal/ {print $2/1024 " MiB"}' /proc/meminfo), kernel $(uname -r)"
echo "BENCH == longrun: ${SECS} s, sample every ${SAMPLE} s, warm-up ${WARMUP} s, cycle ${CYCLE} s, burst ${BURST} execs, reload every ${RELOAD_EVERY} s"
# /cgw/longrun_massif: under valgrind's massif (a heap snapshot every few seconds of
# its clock), many times slower; printed back at the end as MS64 lines.
if [ -f /cgw/longrun_massif ]; then
    VG="valgrind.bin --tool=massif --massif-out-file=$D/massif.out --time-unit=ms --max-snapshots=200 --detailed-freq=4 --threshold=0.2"
    STARTWAIT=600
else
    VG=""
    STARTWAIT=60
fi
env CGWARDEN_LOG=info $VG cgwarden run "$P" >/dev/null 2>"$DLOG" &
DP=$!
if ! wait_for $STARTWAIT grep -q 'cgwarden running' "$DLOG"; then
    echo "BENCH daemon did not start: $(tail -n 5 "$DLOG")"
    fail longrun-daemon "no 'cgwarden running'"
    return 0 2>/dev/null || exit 0
fi
grep 'cgwarden running' "$DLOG" | sed 's/^/BENCH   log| /'
wait_for 20 test -S "$S"
T0=$(up)
since() { awk -v a="$T0" -v b="$(up)" 'BEGIN { printf "%d", b - a }'; }
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)

# --- the sampler ------------------------------------------------------------------
fds() { ls "/proc/$DP/fd" 2>/dev/null | wc -l; }
zombies() { # the PIDs of zombie children of the daemon, one line
    cat /proc/[0-9]*/stat 2>/dev/null | sed -n 's/^\([0-9]*\) (.*) \([A-Z]\) \([0-9]*\) .*/\1 \2 \3/p' | awk -v p="$DP" '$2 == "Z" && $3 == p { printf "%s ", $1 }'
}
sample() { # one BENCH sample line, and a row in $D/samples
    t=$(since)
    r=$(rss_kib "$DP")
    a=$(awk '$1 == "Anonymous:" { print $2 }' "/proc/$DP/smaps_rollup" 2>/dev/null)
    f1=$(fds) z1=$(zombies)
    sleep 0.5
    f2=$(fds) z2=$(zombies)
    sleep 0.5
    f3=$(fds) z3=$(zombies)
    f=$(printf '%s\n%s\n%s\n' "$f1" "$f2" "$f3" | sort -n | head -n 1)
    fmax=$(printf '%s\n%s\n%s\n' "$f1" "$f2" "$f3" | sort -n | tail -n 1)
    zseen=$(echo $z1 $z2 $z3 | tr ' ' '\n' | grep -c .)
    zpers=0
    for z in $z1; do
        case " $z2 " in *" $z "*) case " $z3 " in *" $z "*) zpers=$((zpers + 1)) ;; esac ;; esac
    done
    th=$(ls "/proc/$DP/task" 2>/dev/null | wc -l)
    c=$(awk '{ print $14 + $15 }' "/proc/$DP/stat" 2>/dev/null)
    if [ -n "$LASTC" ]; then
        cpu=$(awk -v c=$((c - LASTC)) -v hz="$hz" -v dt=$((t - LASTT)) 'BEGIN { if (dt < 1) dt = 1; printf "%.2f s (%.1f%%)", c / hz, 100 * c / hz / dt }')
    else
        cpu="$(awk -v c="$c" -v hz="$hz" 'BEGIN { printf "%.2f s", c / hz }') since start"
    fi
    LASTC=$c LASTT=$t
    echo "BENCH sample t=${t}s rss=${r}KiB anon=${a}KiB fds=${f} (max ${fmax}) threads=${th} zombies=${zpers} (seen ${zseen}) cpu=${cpu}"
    echo "$t $r $f $th $zpers $zseen $c $a" >>"$D/samples"
}
sampler() {
    LASTC=
    while :; do
        sample
        sleep "$((SAMPLE - 1))"
    done
}
: >"$D/samples"
sampler &
SMP=$!

# --- the scraper --------------------------------------------------------------------
scraper() {
    while :; do
        rm -f "$D/scrape"
        if timeout 10 wget -q -O "$D/scrape" "$URL" 2>"$D/wget.err" && grep -q '^cgwarden_' "$D/scrape"; then
            echo ok >>"$D/scrapes"
        else
            echo "fail t=$(since)s: $(tr '\n' ' ' <"$D/wget.err") $(wc -c <"$D/scrape" 2>/dev/null) bytes" >>"$D/scrapes"
        fi
        sleep 3
    done
}
scraper &
SCR=$!

# --- the driven load ------------------------------------------------------------------
burst() { # PHASE N PAR: N execs, PAR at once (N: a burst; 1: a trickle, one after another),
    # one storm driver each; one line each into $D/lat: "PHASE LAT_MS FLOOR_MS LATE UNPL_MS"
    # (LATE 1: not yet placed at the child's first look; UNPL_MS: its last look that found it
    # not placed, 0 if none) or "PHASE never"
    rm -f "$D"/burst/*
    i=0 bp=
    while [ "$i" -lt "$2" ]; do
        i=$((i + 1))
        "$WL" storm "$D/lrchild" /execs 1 "$LIFE_MS" 1 1000 >"$D/burst/$i" 2>&1 &
        bp="$bp $!"
        if [ "$3" = 1 ]; then wait $bp; bp=; fi
    done
    [ -n "$bp" ] && wait $bp
    for f in "$D"/burst/*; do
        if grep -q 'placed 1,' "$f"; then
            awk -v ph="$1" '/^latency ms:/ { l = $NF } /^floor ms/ { fl = $NF } /^beyond the floor:/ { late = $4 }
                /^last unplaced look ms/ { u = $NF } END { print ph, l, fl, late + 0, u + 0 }' "$f" >>"$D/lat"
        else
            echo "$1 never" >>"$D/lat"
            echo "LR   unplaced exec: $(tr '\n' '|' <"$f")"
        fi
    done
}
squeeze_writes() { grep -c ', by rule squeeze-stall' "$DLOG"; }
oom_kills() { awk '$1 == "oom_kill" { print $2 }' "$CG/oomg/memory.events" 2>/dev/null; }
victim_ok() { knob_is "$CG/victim/pids.max" "$VPIDS"; }
VPIDS=100
LASTRELOAD=0
cycle=0
while [ "$(since)" -lt "$SECS" ]; do
    cycle=$((cycle + 1))
    c0=$(since)
    # Hook storm and memory squeeze in the background, the rest meanwhile.
    "$WL" exec-as lrhks 4 >/dev/null 2>&1 &
    HKS=$!
    sq0=$(squeeze_writes)
    in_group squeeze "$WL" exec-as lrhog alloc 150 6 >/dev/null 2>&1 &
    HOG=$!
    n0=$(wc -l <"$D/lat")
    step burst
    burst burst "$((BURST / 2))" "$((BURST / 2))"
    step oom
    # OOM kill.
    k0=$(oom_kills)
    in_group oomg "$WL" exec-as lroom alloc 96 2 >/dev/null 2>&1
    orc=$?
    k1=$(oom_kills)
    if [ "$orc" = 137 ] && [ "${k1:-0}" -gt "${k0:-0}" ]; then ev oom ok "$k1"; else ev oom fail "rc=$orc kills=$k0->$k1"; fi
    step boosts
    # Boosts: timed, released by handle, tied to a command.
    if cgwarden boost execs.cpu.weight=400 --for 3s --reason longrun --socket "$S" >"$D/b.out" 2>&1; then ev boost ok timed; else ev boost fail "timed: $(tr '\n' '|' <"$D/b.out")"; fi
    if cgwarden boost squeeze.memory.high=96M --for 1m --reason longrun --socket "$S" >"$D/b.out" 2>"$D/b.err" &&
        h=$(tail -n 1 "$D/b.out") && cgwarden release "$h" --socket "$S" >>"$D/b.out" 2>>"$D/b.err"; then
        ev boost ok released
    else
        ev boost fail "released: $(cat "$D/b.out" "$D/b.err" | tr '\n' '|')"
    fi
    if cgwarden boost execs.cpu.weight=500 --reason longrun --socket "$S" -- "$WL" sleep 1 >"$D/b.out" 2>&1; then ev boost ok tied; else ev boost fail "tied: $(tr '\n' '|' <"$D/b.out")"; fi
    step delete
    # A managed group deleted from outside, every 2nd cycle.
    if [ $((cycle % 2)) = 0 ]; then
        if rmdir "$CG/victim" 2>"$D/rmdir.err"; then
            r0=$(up)
            if wait_for 40 victim_ok; then
                ev delete ok "$(awk -v a="$r0" -v b="$(up)" 'BEGIN { printf "%.1fs", b - a }')"
            else
                ev delete fail "not back in 40 s: $(ls -d "$CG/victim" 2>&1) pids.max=$(cat "$CG/victim/pids.max" 2>&1)"
            fi
        else
            ev rmdir fail "$(cat "$D/rmdir.err")"
        fi
    fi
    step reload
    # A reload every RELOAD_EVERY s.
    if [ $(($(since) - LASTRELOAD)) -ge "$RELOAD_EVERY" ]; then
        LASTRELOAD=$(since)
        GEN=$((GEN + 1))
        write_policy "$GEN"
        if [ $((GEN % 2)) = 0 ]; then VPIDS=100; else VPIDS=101; fi
        sleep 1
        if cgwarden reload --socket "$S" >"$D/r.out" 2>&1 && wait_for 30 victim_ok; then
            ev reload ok "gen $GEN: $(tail -n 1 "$D/r.out")"
        else
            ev reload fail "gen $GEN: $(tr '\n' '|' <"$D/r.out") pids.max=$(cat "$CG/victim/pids.max" 2>&1)"
        fi
    fi
    step wait-hog
    wait "$HOG" 2>/dev/null
    wait "$HKS" 2>/dev/null
    # The other half one after another, with nothing else driven (after the squeeze's hold).
    sleep 3
    step trickle
    burst trickle "$((BURST - BURST / 2))" 1
    bl=$(tail -n +$((n0 + 1)) "$D/lat" | awk '$2 == "never" { print "never"; next } { printf "%s/%s%s\n", $2, $3, ($4 ? "L" : "") }' | tr '\n' ' ')
    sq1=$(squeeze_writes)
    if [ "$sq1" -gt "$sq0" ]; then ev squeeze ok "$((sq1 - sq0))"; else ev squeeze fail "no squeeze-stall write"; fi
    echo "LR cycle $cycle t=${c0}s execs lat/floor ms (L: not placed at first look) ${bl}; oom rc $orc, squeeze writes $((sq1 - sq0)), hooks $(wc -l <"$D/hooks"), scrapes $(wc -l <"$D/scrapes")"
    left=$((c0 + CYCLE - $(since)))
    [ "$left" -gt 0 ] && sleep "$left"
done
kill "$SCR" 2>/dev/null
wait "$SCR" 2>/dev/null
kill "$SMP" 2>/dev/null
wait "$SMP" 2>/dev/null
LASTC=$(awk 'END { print $7 }' "$D/samples") LASTT=$(awk 'END { print $1 }' "$D/samples")
sample # the last one, at the end
TEND=$(since)
kill -TERM "$DP"
if wait_for $STARTWAIT gone "$DP"; then wait "$DP"; DRC=$?; else kill -KILL "$DP"; wait "$DP" 2>/dev/null; DRC=hung; fi
sleep 1
if [ -s "$D/massif.out" ]; then
    gzip -c "$D/massif.out" | base64 | sed 's/^/MS64 /'
fi

# --- the summary ----------------------------------------------------------------------
# Execs: "PHASE LAT FLOOR LATE" or "PHASE never". Within the limit: LAT <= 500 ms. Over
# it and LATE 1 (the child looked and was not placed yet) or never placed: a miss. Over
# it and LATE 0: placed before the child's first look, which came FLOOR ms after the
# spawn (the emulated CPUs busy): placed within FLOOR ms, not resolved below 500.
xs() { awk -v ph="$1" 'ph == "all" || $1 == ph' "$D/lat"; }
total=$(wc -l <"$D/lat")
never=$(grep -c never "$D/lat")
placed=$((total - never))
ecount() { # PHASE KIND: within|miss|unresolved (a late child whose last unplaced look came
    # within the limit was placed somewhere between that look and the one past it: unresolved)
    xs "$1" | awk -v l="$LIMIT_MS" -v k="$2" '{ if ($2 == "never" || ($2 + 0 > l && $4 == 1 && $5 + 0 > l)) c = "miss"; else if ($2 + 0 > l) c = "unresolved"; else c = "within" } c == k { n++ } END { print n + 0 }'
}
q() { # PHASE COL P: quantile P of column COL (2 latency, 3 floor) of the placed execs
    xs "$1" | awk '$2 != "never"' | awk -v c="$2" '{ print $c }' | sort -n |
        awk -v p="$3" '{ v[NR] = $1 } END { if (!NR) { print "-"; exit } i = int(p * NR + 0.999999); if (i < 1) i = 1; if (i > NR) i = NR; print v[i] }'
}
over=$(ecount all miss)
within=$(ecount all within)
unres=$(ecount all unresolved)
p50=$(q all 2 0.5) p99=$(q all 2 0.99) pmax=$(q all 2 1)
# Samples after the warm-up: t rss fds threads zombies zseen cpu anon
awk -v w="$WARMUP" '$1 >= w' "$D/samples" >"$D/post"
first() { awk -v c="$1" 'NR == 1 { print $c }' "$D/post"; }
last() { awk -v c="$1" 'END { print $c }' "$D/post"; }
maxc() { awk -v c="$1" '$c + 0 > m { m = $c + 0 } END { print m + 0 }' "$2"; }
# monotonic COL: "yes" when the post-warm-up samples (>= 3) never step down and rose
monotonic() {
    awk -v c="$1" 'NR > 1 { if ($c + 0 > prev) up++; else if ($c + 0 < prev) down++ } { prev = $c + 0; n++ }
        END { if (n < 3) print "n/a (" n " samples)"; else if (down == 0 && up > 0) print "yes (" up " steps up, none down)"; else print "no (" up + 0 " up, " down + 0 " down)" }' "$D/post"
}
# third_max COL first|last: the highest value in the first or last third of
# the post-warm-up samples. RSS and fds are compared by these high-water marks,
# not by two single samples: the daemon gives memory back now and then, and a
# scrape or hook holds a descriptor for a moment, so one sample can dip (a
# 1,200 s soak read RSS 3,968 KiB once between 5,112 and 5,108) and decide the
# verdict; a leak raises the whole last third.
third_max() {
    awk -v c="$1" -v w="$2" '{ v[NR] = $c + 0 } END {
        k = int(NR / 3); if (k < 1) k = 1; if (k > NR) k = NR
        lo = (w == "first") ? 1 : NR - k + 1; m = ""
        for (i = lo; i < lo + k && i <= NR; i++) if (m == "" || v[i] > m) m = v[i]
        print m }' "$D/post"
}
rss_w=$(third_max 2 first) rss_l=$(third_max 2 last) rss_m=$(maxc 2 "$D/samples") rss_pm=$(maxc 2 "$D/post")
fd_w=$(third_max 3 first) fd_l=$(third_max 3 last) fd_m=$(maxc 3 "$D/samples")
th_w=$(first 4) th_l=$(last 4) th_m=$(maxc 4 "$D/samples")
z_m=$(maxc 5 "$D/samples") zs_m=$(maxc 6 "$D/samples")
rss_mono=$(monotonic 2) fd_mono=$(monotonic 3)
cpu_total=$(awk -v hz="$hz" 'NR == 1 { a = $7 } { b = $7 } END { printf "%.1f", (b - a) / hz }' "$D/samples")
cpu_all=$(awk -v hz="$hz" 'END { printf "%.1f", $7 / hz }' "$D/samples")
cpu_span=$(awk 'NR == 1 { a = $1 } { b = $1 } END { print b - a }' "$D/samples")
cpu_pct=$(awk -v c="$cpu_total" -v s="$cpu_span" 'BEGIN { if (s < 1) s = 1; printf "%.2f", 100 * c / s }')
errors=$(grep -cE '^[^ ]+ +ERROR ' "$DLOG")
warns=$(grep -cE '^[^ ]+ +WARN ' "$DLOG")
scr_ok=$(grep -c '^ok' "$D/scrapes") scr_fail=$(grep -c '^fail' "$D/scrapes")
hooks_file=$(wc -l <"$D/hooks")
hooks_started=$(grep -c 'hook started' "$DLOG")
hooks_dropped=$(grep -c 'too many hooks running' "$DLOG")
reload_done_log=$(grep -c 'reload: done' "$DLOG")
reload_changed_log=$(grep 'reload: done' "$DLOG" | grep -vc 'changes=0')
repaired_log=$(grep -c 'recreated with its baseline and live claims' "$DLOG")
oom_total=$(oom_kills)

echo "BENCH == daemon log: $errors ERROR, $warns WARN lines; the distinct ERROR lines (time stripped):"
grep -E '^[^ ]+ +ERROR ' "$DLOG" | sed 's/^[^ ]* *//' | sort | uniq -c | sort -rn | head -n 40 | sed 's/^/BENCH   error| /'
echo "BENCH   the distinct WARN messages (time and fields stripped):"
grep -E '^[^ ]+ +WARN ' "$DLOG" | sed 's/^[^ ]* *WARN *//; s/ [a-z_]*=[^ ]*//g' | sort | uniq -c | sort -rn | head -n 20 | sed 's/^/BENCH   warn| /'
grep '^fail' "$D/scrapes" | head -n 5 | sed 's/^/BENCH   failed| scrape /'
for k in oom boost delete rmdir reload squeeze; do
    grep "^$k fail" "$D/events" | head -n 5 | sed 's/^/BENCH   failed| /'
done
grep '^reload ok' "$D/events" | tail -n 2 | sed 's/^/BENCH   reload| /'
grep '^delete ok' "$D/events" | awk '{ print $3 }' | tr -d s | sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "BENCH   group repair time (s, 0.2 s polls): median %s max %s\n", v[int((NR + 1) / 2)], v[NR] }'

verdict() { if [ "$1" = 0 ]; then echo PASS; else echo FAIL; fi; }
c_exec=$( [ "$total" -gt 0 ] && [ "$over" = 0 ]; echo $?)
c_rss=$( [ -n "$rss_w" ] && [ "$rss_l" -le $((rss_w + 256)) ] && case "$rss_mono" in yes*) false ;; *) true ;; esac; echo $?)
c_fd=$( [ -n "$fd_w" ] && [ "$fd_l" -le "$fd_w" ] && case "$fd_mono" in yes*) false ;; *) true ;; esac; echo $?)
c_z=$( [ "$z_m" = 0 ]; echo $?)
c_err=$( [ "$errors" = 0 ]; echo $?)
row() { echo "BENCH | $1 | $2 |"; }
echo "BENCH == longrun summary (${TEND} s of load, ${cycle} cycles, TCG 2 vCPUs; daemon exit ${DRC})"
echo "BENCH | measure | value |"
echo "BENCH |---|---|"
row "execs placed / total (never placed)" "$placed / $total ($never)"
row "execs seen placed within ${LIMIT_MS} ms / missed (not placed at the child's look past ${LIMIT_MS} ms, or never) / unresolved (no look past ${LIMIT_MS} ms found it unplaced: placed before a late first look, or between a look before and one after)" "$within / $over / $unres"
for ph in burst trickle; do
    case $ph in
    burst) what="$((BURST / 2)) at once, beside the squeeze, hook storm, OOM kill" ;;
    *) what="one after another, nothing else driven" ;;
    esac
    row "  $ph ($what): total / within / missed / unresolved" "$(xs $ph | wc -l) / $(ecount $ph within) / $(ecount $ph miss) / $(ecount $ph unresolved)"
    row "  $ph latency ms p50 / p99 / max; floor (spawn -> child's first look) p50 / p99 / max" "$(q $ph 2 0.5) / $(q $ph 2 0.99) / $(q $ph 2 1); $(q $ph 3 0.5) / $(q $ph 3 0.99) / $(q $ph 3 1)"
done
row "placement latency ms (spawn returned -> the child saw itself in /execs) p50 / p99 / max" "$p50 / $p99 / $pmax"
row "RSS KiB after warm-up (t>=${WARMUP}s), highest in the first / last third of the samples; max after warm-up / max overall" "$rss_w / $rss_l; $rss_pm / $rss_m"
row "RSS monotonic growth after warm-up" "$rss_mono"
row "fds after warm-up, highest in the first / last third; max overall" "$fd_w / $fd_l; $fd_m"
row "fds monotonic growth after warm-up" "$fd_mono"
row "threads at warm-up / last / max" "$th_w / $th_l / $th_m"
row "zombie children max (present in 3 reads over 1 s) / max seen in any read" "$z_m / $zs_m"
row "daemon CPU over the run (first to last sample)" "${cpu_total} s in ${cpu_span} s (${cpu_pct} %); ${cpu_all} s since exec"
row "daemon log ERROR / WARN lines" "$errors / $warns"
row "OOM kills driven ok / failed (oomg oom_kill at end)" "$(evn oom ok) / $(evn oom fail) ($oom_total)"
row "squeeze episodes reacted / not" "$(evn squeeze ok) / $(evn squeeze fail)"
row "reloads by \`cgwarden reload\` ok / failed (log 'reload: done' / with changes: the daemon reloads on the file change itself first)" "$(evn reload ok) / $(evn reload fail) ($reload_done_log / $reload_changed_log)"
row "boosts ok / failed" "$(evn boost ok) / $(evn boost fail)"
row "scrapes ok / failed" "$scr_ok / $scr_fail"
row "hooks run (hook's own lines / log 'hook started' / dropped at capacity)" "$hooks_file / $hooks_started / $hooks_dropped"
row "group deletions repaired / not / rmdir failed (log 'recreated')" "$(evn delete ok) / $(evn delete fail) / $(evn rmdir fail) ($repaired_log)"
echo "BENCH == criteria"
echo "BENCH CRITERION every exec placed within ${LIMIT_MS} ms: $(verdict "$c_exec") ($over of $total missed, never placed $never; $within seen within, $unres unresolved by the measurement floor; max $pmax ms)"
echo "BENCH CRITERION RSS flat after warm-up (the last third's highest <= the first third's + 256 KiB, not monotonic): $(verdict "$c_rss") ($rss_w -> $rss_l KiB, $rss_mono)"
echo "BENCH CRITERION fds flat after warm-up (the last third's highest <= the first third's, not monotonic): $(verdict "$c_fd") ($fd_w -> $fd_l, $fd_mono)"
echo "BENCH CRITERION no zombie children: $(verdict "$c_z") (max $z_m persistent, $zs_m in any read)"
echo "BENCH CRITERION no ERROR lines in the daemon log: $(verdict "$c_err") ($errors)"
echo "BENCH CRITERION (extra) reloads, boosts, scrapes, group repairs, OOM kills all ok: $(verdict $(($(evn reload fail) + $(evn boost fail) + scr_fail + $(evn delete fail) + $(evn rmdir fail) + $(evn oom fail))))"
echo "LR daemon log tail:"
tail -n 30 "$DLOG" | sed 's/^/LR   dlog| /'
cgwarden reset --policy "$P" >/dev/null 2>&1
pass bench-done "longrun benchmark ran ${TEND} s (exec misses $over/$total, ERROR $errors)"
