# limit: 240
# `cgwarden soak` beside the daemon on a real kernel, compressed to
# 100 s (warm-up 10 s, the seed's built-in loads 80 s, cool-down 10 s): one CPU
# worker per CPU group pinned to its CPUs (the guest has no cpufreq and one
# cluster_id: one group per CPU), the memory flip (40 % of MemAvailable), the IO
# writer into DIR, loopback TCP. In the middle the daemon is SIGKILLed and
# restarted, and the soak itself is stopped (SIGTERM) and run again: it resumes
# from its first start, and the report at the end counts the daemon restart
# (restarts FAIL). A toy control loop (cgwx-ctl, a critical process) reports its loop
# latency and a frame rate as KPIs; an injected slow loop turns loop_p99 FAIL (exit 1).
# The report of the window before the slow loop, compared with the soak's own report
# at the end (`report --compare`: the before/after table). Not on this guest: cpufreq
# (thermal_throttling has no policy to watch: not measured), stress-ng/fio (the built-in loads run) and cyclictest (not in the image).
P=$POL/soak.yaml
OUTD=/run/cgw-soak-out
rm -rf /run/cgw-soak-rec "$OUTD"

# The loopback network load needs lo up (the guest boots with it down).
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
check policy-valid "soak.yaml is valid" cgwarden check "$P"
cgwarden-workload exec-as cgwx-ctl 600 >/dev/null 2>&1 &
CTL=$!
start_daemon "$P"
placed() { [ "$(cgroup_of "$CTL")" = /ctl ]; }
check ctl-placed "the control loop runs in /ctl" wait_for 20 placed
# The toy control loop's KPIs, twice a second through `cgwarden kpi`: its loop latency
# (nominal 0.9–1.2 ms: busybox sh cannot time a loop below /proc/uptime's 10 ms, so the
# values are the pipeline's test, not a measurement) and a vision pipeline's frame rate.
toy_loop() {
    while :; do
        cgwarden kpi --policy "$P" loop_latency 1.2ms 0.9ms >/dev/null 2>&1
        cgwarden kpi --policy "$P" fps 29.8 30.1 >/dev/null 2>&1
        sleep 0.5
    done
}
toy_loop &
TOY=$!

# Refused while the recorder is off: another policy without settings.recorder.
sed '/recorder:/,/interval:/d' "$P" >"$T/soak-norec.yaml"
cgw soak --for 10s --out "$T/soak-norec" --policy "$T/soak-norec.yaml"
check_eq refuse-no-recorder 3 echo "$RC"

SOAKLOG=$T/soak-run1.log
cgwarden soak --for 100s --out "$OUTD" --policy "$P" --progress 5s >"$SOAKLOG" 2>&1 &
SOAK=$!
in_load() { grep -q '^soak: load at' "$SOAKLOG"; }
check load-phase "the soak entered its load phase" wait_for 60 in_load
sed 's/^/  soak1| /' "$SOAKLOG"
# The CPU workers: one thread per CPU, each pinned to its CPU.
pinned() {
    n=0
    for t in /proc/$SOAK/task/*; do
        c=$(cat "$t/comm" 2>/dev/null)
        case "$c" in "soak cpu cpu"*)
            want=${c#soak cpu cpu}
            got=$(awk '/^Cpus_allowed_list:/ { print $2 }' "$t/status")
            echo "PIN $c -> $got"
            [ "$got" = "$want" ] || return 1
            n=$((n + 1)) ;;
        esac
    done
    [ "$n" -ge 1 ]
}
check cpu-workers-pinned "each 'soak cpu cpuN' thread may run on CPU N only" pinned
io_file() { [ -e "$OUTD/cgwarden-soak-io.bin" ]; }
check io-writer "the IO writer's file is in DIR" wait_for 20 io_file
flip_mib=$(sed -n 's/^soak: load memory flip \([0-9]*\) MiB.*/\1/p' "$SOAKLOG")
flipped() { [ "$(rss_kib "$SOAK")" -gt $((flip_mib * 1024 / 2)) ]; }
check memory-flip "the soak's RSS rose past half the flip (${flip_mib} MiB)" wait_for 40 flipped
echo "SOAK_RSS_KIB $(rss_kib "$SOAK")"

# The daemon dies in the middle and comes back.
kill -KILL "$DPID"
wait "$DPID" 2>/dev/null
start_daemon "$P"
restarted() { grep -q 'restarted; was' "$SOAKLOG"; }
check progress-sees-restart "a progress line names the daemon's restart" wait_for 20 restarted

# thermal_throttling is the one criterion not measured: the guest has no cpufreq.
kpis_pass() { grep -q '1 fail (restarts), 1 not measured' "$SOAKLOG"; }
check kpis-pass-before "before the slow loop: only restarts fails, loop_p99 and fps_stddev measured" wait_for 20 kpis_pass
# The window so far, before the slow loop: side A of the compare below.
cgw report --policy "$P" --since 60s --json --out "$T/soak-before.json"
check report-before "a report of the window before the slow loop" test -s "$T/soak-before.json"
# The soak itself is stopped and run again: it resumes.
kill -TERM "$SOAK"
wait "$SOAK"
check_eq soak-sigterm-75 75 echo "$?"
stopped_clean() { grep -q 'stopped by SIGTERM' "$SOAKLOG" && ! io_file; }
check loads-stopped "SIGTERM said so and the IO writer removed its file" stopped_clean
sed 's/^/  soak1| /' "$SOAKLOG" | tail -n 5
SOAKLOG=$T/soak-run2.log
cgwarden soak --for 100s --out "$OUTD" --policy "$P" --progress 5s >"$SOAKLOG" 2>&1 &
SOAK=$!
resumed() { grep -q 'resumed at 0:0' "$SOAKLOG"; }
check soak-resumed "the rerun resumed from the first start" wait_for 30 resumed
# The injected slow loop: 40 iterations of 20 ms (over 1 % of the loop's samples).
cgw kpi --policy "$P" loop_latency $(for i in $(seq 40); do printf '20ms '; done)
check_eq slow-loop-sent 0 echo "$RC"
slow_seen() { grep -q 'fail (restarts, loop_p99)' "$SOAKLOG"; }
check progress-sees-slow-loop "a progress line names loop_p99 failing" wait_for 30 slow_seen
soak_done() { ! alive "$SOAK"; }
wait_for 150 soak_done
wait "$SOAK"
SRC=$?
sed 's/^/  soak2| /' "$SOAKLOG"
check_eq soak-exit-1 1 echo "$SRC"
check report-json "DIR/report.json written" test -s "$OUTD/report.json"
check report-html "DIR/report.html written" test -s "$OUTD/report.html"
crit() { # ID FIELD: the first criterion ID's FIELD in report.json (a string or a number)
    tr -d '\n' <"$OUTD/report.json" | sed 's/},/}\n/g' | grep "\"id\": \"$1\"" | head -n 1 |
        sed -n "s/.*\"$2\": *\"\([^\"]*\)\".*/\1/p; t; s/.*\"$2\": *\([^,}]*\).*/\1/p"
}
for id in oom_kills memory_growth thermal_throttling restarts memory_full_avg10 critical_exits loop_p99 fps_stddev; do
    echo "SOAK_CRITERION $id status=$(crit "$id" status) measured=$(crit "$id" measured) detail=$(crit "$id" detail)"
done
check_eq restarts-fail fail crit restarts status
restart_detail() { crit restarts detail | grep -q '1 daemon restart'; }
check restarts-detail "restarts' detail says a daemon restart" restart_detail
all_measured() { [ "$(grep -c '"status": "not_measured"' "$OUTD/report.json")" = 1 ]; }
check all-measured "only thermal_throttling is 'not measured' (no cpufreq in the guest)" all_measured
check_eq thermal-not-measured not_measured crit thermal_throttling status
check_eq oom-pass pass crit oom_kills status
check_eq loop-p99-fail fail crit loop_p99 status
check_eq fps-stddev-pass pass crit fps_stddev status
grep '^soak: this run used' "$T/soak-run1.log" "$SOAKLOG" | sed 's/^/SOAK_CPU /'
cgw soak --for 100s --out "$OUTD" --policy "$P"
check_eq finished-rerun 1 echo "$RC"
cgw report --policy "$P" --compare "$T/soak-before.json" "$OUTD/report.json"
check_eq compare-exit-1 1 echo "$RC"
loop_row() { echo "$OUT" | grep -E '^Control loop|loop_latency .*p99' | grep -q 'FAIL\|ms'; }
check compare-loop-row "the compare table has the loop latency row" loop_row

kill "$TOY" 2>/dev/null
wait "$TOY" 2>/dev/null
kill "$CTL" 2>/dev/null
wait "$CTL" 2>/dev/null
stop_daemon
cgw reset "$P"
check_eq reset-exit 0 echo "$RC"
