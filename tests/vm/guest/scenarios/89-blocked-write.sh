# limit: 400
# Nothing blocks the event loop: a knob write that reclaims for seconds
# runs on its group's writer lane while the loop keeps acting. `hogs` holds a 400 MiB
# hog; `squeezeme` running claims hogs.memory.high = 32M and the kernel reclaims the
# hog to zram inside that write(2) (its time is measured and printed). While it is
# still in the kernel, three spinners on one CPU in `spin` must get their PSI stall
# rule acted on (the `mark` hook) about as fast as without the blocked write, and the
# daemon's watchdog pings (WATCHDOG_USEC=4 s, a ping every 2 s: TCG on a loaded host stalls the whole guest now and then) must keep coming:
# the largest gap, from a notify-socket listener, must stay under WATCHDOG_USEC.

P=$POL/daemon-lanes.yaml
FIRED=$T/spin-fired
SOCK=$T/notify.sock
NLOG=$T/notify-$SCENARIO.log
rm -f "$FIRED"
up() { cut -d' ' -f1 /proc/uptime; }
fired_count() { [ -s "$FIRED" ] && wc -l <"$FIRED" || echo 0; }
# Milliseconds from uptime A to uptime B.
ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

check policy-valid "daemon-lanes.yaml is valid" cgwarden check "$P"
cgwarden-workload notify-listen "$SOCK" 300 >"$NLOG" 2>&1 &
LISTENER=$!
wait_for 10 test -S "$SOCK"
export NOTIFY_SOCKET=$SOCK WATCHDOG_USEC=4000000
start_daemon "$P"
unset NOTIFY_SOCKET WATCHDOG_USEC
check trigger-armed "spin-stall is served by a kernel PSI trigger" grep -q 'cgwarden running.*psi_triggers=1' "$DLOG"
check swap-on "zram0 swaps (the hog's pages have somewhere to go)" grep -q zram0 /proc/swaps

# The hog: 400 MiB, held. Pages are touched with varying bytes, so reclaim really
# compresses them.
# (sh -c execs the workload, so $! is the hog's PID; a backgrounded shell function
# would be a subshell with a PID of its own.)
sh -c 'echo $$ >"$0" && exec "$@"' "$CG/hogs/cgroup.procs" cgwarden-workload alloc 400 300 >/dev/null &
HOG=$!
big() { [ "$(cat "$CG/hogs/memory.current")" -gt 360000000 ]; }
check hog-resident "the hog holds > 360 MB in hogs" wait_for 120 big

spinners() { # start three spinners in `spin` (one CPU): prints nothing, sets $SPIN
    SPIN=
    for _ in 1 2 3; do
        sh -c 'echo $$ >"$0" && exec "$@"' "$CG/spin/cgroup.procs" cgwarden-workload spin 60 &
        SPIN="$SPIN $!"
    done
}
stop_spinners() { kill $SPIN 2>/dev/null; for p in $SPIN; do wait "$p" 2>/dev/null; done; }

# Phase A, the usual time: spinners alone.
n0=$(fired_count)
t0=$(up)
spinners
more_fired() { [ "$(fired_count)" -gt "$1" ]; }
check usual-fired "spin-stall acted (no write in flight)" wait_for 60 more_fired "$n0"
usual=$(ms "$t0" "$(tail -n 1 "$FIRED" 2>/dev/null || echo "$t0")")
echo "MEASURE spin-stall reaction without a blocked write: ${usual} ms (spinners start -> hook)"
stop_spinners
check usual-cleared "spin-stall cleared once the spinners stopped" wait_for 60 grep -q 'rule spin-stall idle' "$DLOG"

# Phase B: squeeze the hog, then stall `spin` while the write reclaims.
cgwarden-workload exec-as squeezeme 200 &
SQ=$!
ts=$(up)
check write-late "hogs.memory.high write passed its deadline (still in the kernel)" \
    wait_for 60 grep -q 'write past its.*knob=hogs.memory.high' "$DLOG"
n1=$(fired_count)
t1=$(up)
spinners
check blocked-fired "spin-stall acted while the memory.high write was in the kernel" wait_for 60 more_fired "$n1"
# Had the loop been blocked, the write would have finished before the hook ran.
if grep -q 'INFO set hogs.memory.high = ' "$DLOG"; then
    fail blocked-concurrent "the hogs.memory.high write had finished before spin-stall acted"
else
    pass blocked-concurrent "spin-stall acted before the blocked write finished"
fi
during=$(ms "$t1" "$(tail -n 1 "$FIRED" 2>/dev/null || echo "$t1")")
echo "MEASURE spin-stall reaction during the blocked write: ${during} ms (usual ${usual} ms)"
# TCG timing is noisy: only a gross regression (a reaction waiting for the write) fails.
check reaction-usual "reaction during the write ${during} ms <= usual ${usual} ms + 3000" \
    test "$during" -le $((usual + 3000))
stop_spinners
check write-done "the hogs.memory.high write finished" wait_for 180 grep -q 'INFO set hogs.memory.high = ' "$DLOG"
w=$(grep 'INFO set hogs.memory.high = ' "$DLOG" | head -n 1 | sed -n 's/.*elapsed_ms=\([0-9.]*\).*/\1/p')
echo "MEASURE blocked write: hogs.memory.high 1G -> 32M took ${w:-?} ms in write(2) (squeeze at uptime $ts)"
# The ping-gap check below means something only if the write outlasted WATCHDOG_USEC.
check write-outlasts-watchdog "the write took longer than WATCHDOG_USEC (${w:-?} ms > 4000 ms)" \
    test "${w%%.*}" -gt 4000
check_file squeezed "$CG/hogs/memory.high" 33554432
echo "hogs: memory.current $(cat "$CG/hogs/memory.current") swap.current $(cat "$CG/hogs/memory.swap.current" 2>/dev/null)"

kill "$SQ" 2>/dev/null
wait "$SQ" 2>/dev/null
check released "squeezeme gone: hogs.memory.high back to 1G" wait_for 60 knob_is "$CG/hogs/memory.high" 1073741824
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
kill "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null
# Gaps between WATCHDOG=1 datagrams over the whole run (the listener was killed, so
# compute them here).
gaps=$(awk '$2 == "WATCHDOG=1" { if (p) { g = ($1 - p) * 1000; if (g > m) m = g; s += g; n++ } p = $1 }
    END { printf "%d %d %d", n + 1, m, (n ? s / n : 0) }' "$NLOG")
set -- $gaps
echo "MEASURE watchdog pings: $1, max gap $2 ms, mean gap $3 ms (period 2000 ms, WATCHDOG_USEC 4000 ms)"
check pings-seen "the daemon pinged the watchdog (> 4 pings)" test "$1" -gt 4
check ping-gap "no watchdog gap reached WATCHDOG_USEC (max $2 ms < 4000 ms)" test "$2" -lt 4000
grep -E 'deadline|late write|knob writes' "$DLOG" | sed 's/^/  lanes| /'

kill "$HOG" 2>/dev/null
wait "$HOG" 2>/dev/null
DLOG_FILTER='DEBUG'
show_log 60
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check groups-removed "hogs and spin removed by reset" sh -c "test ! -e $CG/hogs && test ! -e $CG/spin"
check swap-off "zram0 no longer swaps" sh -c "! grep -q zram0 /proc/swaps"
rm -f "$FIRED" "$SOCK"
