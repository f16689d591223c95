# limit: 240
# Last resorts on a real kernel: a critical process's exit is an event (its
# latency from the exit is printed); a real memory squeeze (a hog throttled
# at work's memory.high, no swap) fires `freeze rec` then `kill in work
# prefer cgwx-batch* avoid cgwx-avoid`: the largest preferred process dies
# (SIGTERM; the time from the decision to its end is printed), the avoided
# and the critical ones live, rec is frozen until `thaw rec`; an OOM kill
# outside every policy group is counted (metrics, report); vmstat and
# buddyinfo figures equal the files read at the same moment.
WL=$(command -v cgwarden-workload)
LOG=/tmp/cgw-resort.log
S=/run/cgwarden-resort/io.cgwarden
URL=http://127.0.0.1:9624/metrics
scrape() { wget -q -O - "$URL"; }

check policy-valid "last-resort.yaml is valid" cgwarden check "$POL/last-resort.yaml"
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
env CGWARDEN_LOG=debug cgwarden run "$POL/last-resort.yaml" >"$LOG" 2>&1 &
DPID=$!
wait_for 60 grep -q "cgwarden running" "$LOG"
check socket "control socket" wait_for 20 test -S "$S"
cgwarden events --json --socket "$S" >"$T/resort-events" 2>&1 &
EV=$!
wait_for 10 grep -q subscribed "$T/resort-events"
check frag-rule "a rule on host.fragmentation.0 and host.meminfo.MemTotal" wait_for 20 grep -qx 11 /proc/sys/vm/watermark_scale_factor

# ---- a critical process exits ----
"$WL" exec-as cgwx-crit stamp-exit 2 "$T/crit.stamp" &
crit_event() { grep '"critical_exit"' "$T/resort-events" | grep -q cgwx-crit; }
check critical-exit "critical_exit event for cgwx-crit" wait_for 20 crit_event
line=$(grep '"critical_exit"' "$T/resort-events" | head -n 1)
echo "  event| $line"
t=$(echo "$line" | sed -n 's/.*"time": *"\([^"]*\)".*/\1/p')
ms=$(cgwarden-workload since "$T/crit.stamp" "$t")
echo "CRITICAL_EXIT_TO_EVENT_MS ${ms:-?}"
# The arm64 guest (aarch64 emulated on x86) writes its slowdown factor here.
lim=$((1000 * $(cat /cgw/tcg_slowdown 2>/dev/null || echo 1)))
check critical-latency "event within $lim ms of the exit (${ms:-?} ms)" test "${ms:-99999}" -lt "$lim"
check critical-metric "cgwarden_critical_exits_total{name=cgwx-crit} 1" sh -c "wget -q -O - $URL | grep -q 'cgwarden_critical_exits_total{name=\"cgwx-crit\"} 1'"

# ---- the squeeze ----
"$WL" exec-as cgwx-rec sleep 600 & P_REC=$!
"$WL" exec-as cgwx-motion alloc 16 600 & P_MOT=$!
"$WL" exec-as cgwx-avoid alloc 40 600 & P_AVO=$!
"$WL" exec-as cgwx-batch1 alloc 8 600 & P_B1=$!
in_g() { [ "$(cgroup_of "$1")" = "$2" ]; }
placed() { in_g "$P_MOT" /work && in_g "$P_AVO" /work && in_g "$P_B1" /work && in_g "$P_REC" /rec; }
check placed "motion, avoid, batch1 in /work, rec in /rec" wait_for 20 placed
sleep 2
"$WL" exec-as cgwx-batch2 alloc 300 600 & P_B2=$!
gone() { ! kill -0 "$1" 2>/dev/null || [ "$(stat_field "$1" 3)" = Z ]; }
check hog-killed "the largest preferred (cgwx-batch2) is killed" wait_for 90 gone "$P_B2"
check avoided-alive "cgwx-avoid (larger, avoided) alive" kill -0 "$P_AVO"
check critical-alive "cgwx-motion (critical) alive" kill -0 "$P_MOT"
check batch1-alive "cgwx-batch1 (smaller preferred) alive" kill -0 "$P_B1"
check_eq rec-frozen 1 cat "$CG/rec/cgroup.freeze"
check rec-frozen-events "rec's cgroup.events says frozen 1" grep -qx "frozen 1" "$CG/rec/cgroup.events"
kill_event() { grep '"kind": *"kill"' "$T/resort-events" | grep -q cgwx-batch2; }
check kill-event "kill event names cgwx-batch2 and the reason" wait_for 10 kill_event
kl=$(grep '"kind": *"kill"' "$T/resort-events" | head -n 1)
echo "  event| $kl"
fl=$(grep -n '"kind": *"freeze"' "$T/resort-events" | head -n 1 | cut -d: -f1)
kn=$(grep -n '"kind": *"kill"' "$T/resort-events" | head -n 1 | cut -d: -f1)
check freeze-then-kill "freeze (line ${fl:-?}) before kill (line ${kn:-?})" test "${fl:-99}" -lt "${kn:-0}"
check kill-preferred "the event says preferred and work.memory.some" sh -c "echo '$kl' | grep -q 'preferred' && echo '$kl' | grep -q 'work.memory.some'"
kms=$(echo "$kl" | sed -n 's/.*ended \([0-9][0-9]*\) ms after the decision.*/\1/p')
echo "KILL_DECISION_TO_END_MS ${kms:-?}"
check kill-metric "cgwarden_kills_total{group=work,rule=squeeze} 1" sh -c "wget -q -O - $URL | grep -q 'cgwarden_kills_total{group=\"work\",rule=\"squeeze\"} 1'"
"$WL" exec-as cgwx-thaw sleep 30 & P_THAW=$!
thawed() { grep -qx 0 "$CG/rec/cgroup.freeze" && grep -qx "frozen 0" "$CG/rec/cgroup.events"; }
check thawed "thaw rec when cgwx-thaw runs" wait_for 20 thawed

# ---- an OOM kill outside every policy group ----
OOM0=$(sed -n 's/^oom_kill //p' /proc/vmstat)
mkdir -p "$CG/cgwx-outside"
echo $((32 * 1048576)) >"$CG/cgwx-outside/memory.max"
echo 0 >"$CG/cgwx-outside/memory.swap.max" 2>/dev/null
sh -c "echo \$\$ >$CG/cgwx-outside/cgroup.procs; exec $WL alloc 96 5" &
wait $! 2>/dev/null
OOM1=$(sed -n 's/^oom_kill //p' /proc/vmstat)
check global-oom "vmstat oom_kill rose ($OOM0 -> $OOM1)" test "$OOM1" -gt "$OOM0"
check oom-rule "host.vmstat.oom_kill > 0 (a rate) fired its while claim" wait_for 10 grep -qx 61 /proc/sys/vm/swappiness
sys_oom() { scrape | grep -q "cgwarden_cgroup_memory_events_total{group=\"host\",event=\"oom_kill\"} $OOM1"; }
check global-oom-metric "the host row's oom_kill is $OOM1" wait_for 10 sys_oom

# ---- telemetry equals the files at the same moment ----
B0=$(cat /proc/buddyinfo)
V0=$(sed -n 's/^pgfault //p' /proc/vmstat)
scrape >"$T/resort-scrape"
V1=$(sed -n 's/^pgfault //p' /proc/vmstat)
B1=$(cat /proc/buddyinfo)
got=$(sed -n 's/^cgwarden_vmstat_total{field="pgfault"} //p' "$T/resort-scrape")
check vmstat-pgfault "scraped pgfault $got within [$V0, $V1]" test "${got:-0}" -ge "$V0" -a "${got:-0}" -le "$V1"
check_eq vmstat-oom "$OOM1" sed -n 's/^cgwarden_vmstat_total{field="oom_kill"} //p' "$T/resort-scrape"
frag() { # BUDDYINFO ORDER -> the unusable free space index, all zones
    # busybox awk may have no `^`: 2^k by doubling.
    echo "$1" | awk -v o="$2" '{ for (i = 5; i <= NF; i++) { n[i-5] += $i } } END { t = 0; u = 0; for (k in n) { p = n[k]; for (j = 0; j < k + 0; j++) p *= 2; t += p; if (k + 0 >= o) u += p } if (t == 0) print 1; else printf "%.6f\n", (t - u) / t }'
}
for o in 0 3 6 9; do
    f0=$(frag "$B0" "$o")
    f1=$(frag "$B1" "$o")
    g=$(sed -n "s/^cgwarden_memory_fragmentation_index{order=\"$o\"} //p" "$T/resort-scrape")
    ok=$(awk -v a="$f0" -v b="$f1" -v g="${g:-x}" 'BEGIN { lo = (a < b ? a : b) - 0.005; hi = (a > b ? a : b) + 0.005; print (g != "x" && g + 0 >= lo && g + 0 <= hi) ? "yes" : "no" }')
    check "fragmentation-$o" "order $o: scraped $g, files $f0 / $f1" test "$ok" = yes
done
mt=$(sed -n 's/^MemTotal: *\([0-9]*\) kB/\1/p' /proc/meminfo)
check_eq meminfo-total "$((mt * 1024))" sed -n 's/^cgwarden_meminfo_bytes{field="MemTotal"} //p' "$T/resort-scrape"
grep -E '^cgwarden_(vmstat|memory_fragmentation|meminfo|zram|critical|kills|freezes)' "$T/resort-scrape" | head -n 40 | sed 's/^/  prom| /'

# ---- the report counts the OOM kill outside the groups and the critical exit ----
sleep 2
kill "$P_REC" "$P_MOT" "$P_AVO" "$P_B1" "$P_THAW" 2>/dev/null
kill -TERM "$DPID" 2>/dev/null
wait "$DPID" 2>/dev/null
kill "$EV" 2>/dev/null
cgw report --policy "$POL/last-resort.yaml" --db /run/cgw-resort-rec/recorder.db --json --since 1h
check report-oom "report: an OOM kill outside the groups" grep -q "outside the groups: [1-9]" /tmp/cgw.out
check report-critical "report: critical_exits fails naming cgwx-crit" grep -q "cgwx-crit (pid" /tmp/cgw.out
rmdir "$CG/cgwx-outside" 2>/dev/null
cgw reset "$POL/last-resort.yaml"
check_eq reset 0 echo "$RC"
