# The daemon's idle footprint on the real kernel: `cgwarden run` with the iq9100-style
# rules and the default 1 s tick, nothing firing, for FOOTPRINT_SECS (20 s in the
# suite; `CGWARDEN_VM_FOOTPRINT_SECS=600 bash tests/vm/run-guest.sh …` for the 10-minute
# figure). Reports RSS and CPU time; checks RSS < 6 MiB. CPU time under TCG is guest
# time, reported, not asserted. Then the same with metrics (socket, TCP, textfile) and the
# flight recorder on, one scrape made (issue 29's figure: ≤ 6 MiB). RSS is smaps_rollup's
# (rss_kib in lib.sh: VmRSS lags on 6.1); mem_report prints where it is, by mapping.

P=$POL/daemon-footprint.yaml
secs=$(cat /cgw/footprint_secs 2>/dev/null)
secs=${secs:-20}
check policy-valid "daemon-footprint.yaml is valid" cgwarden check "$P"
start_daemon "$P"
ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }   # utime + stime, clock ticks
rss() { rss_kib "${1:-$DPID}"; }
hz=100
t0=$(ticks)
r0=$(rss)
up0=$(cut -d' ' -f1 /proc/uptime)
sleep "$secs"
t1=$(ticks)
r1=$(rss)
up1=$(cut -d' ' -f1 /proc/uptime)
hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$DPID/status")
detail=$(awk -v t0="$t0" -v t1="$t1" -v u0="$up0" -v u1="$up1" -v hz="$hz" -v r0="$r0" -v r1="$r1" -v hwm="$hwm" \
    'BEGIN { cpu = (t1 - t0) / hz; wall = u1 - u0; printf "wall=%.0fs cpu=%.2fs (%.3f%% of one core) rss_start=%dKiB rss_end=%dKiB hwm=%dKiB", wall, cpu, 100 * cpu / wall, r0, r1, hwm }')
echo "FOOTPRINT $detail"
mem_report "$DPID"
pass measured "$detail"
# The target is for a release build; a debug build (cargo test without --release) is larger.
# 6 MiB since issue 29 (4.4-4.6 MiB measured: startup's pages given back; 8.6-8.7 MiB before).
limit=6144
[ -e /cgw/debug_build ] && limit=16384
check rss-under-limit "RSS after ${secs}s is under $((limit / 1024)) MiB (${r1} KiB)" test "${r1:-999999}" -lt "$limit"
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"

# Issue 29: with metrics and the recorder on (their threads, SQLite, the HTTP server), after
# one scrape, idle for the same time. The daemon gives back what startup and the first
# round of each periodic job touched (kernel/residency.rs) after 2 s (2 x the 1 s
# intervals, at least 5 s): the measurement starts after that.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
P=$POL/daemon-footprint-observe.yaml
rm -rf /run/cgw-footprint
check policy-valid-observe "daemon-footprint-observe.yaml is valid" cgwarden check "$P"
start_daemon "$P"
check scraped "one GET /metrics answered" wait_for 20 sh -c 'wget -q -O - http://127.0.0.1:9623/metrics | grep -q "^cgwarden_"'
sleep "$secs"
r2=$(rss "$DPID")
th=$(awk '/^Threads:/ { print $2 }' "/proc/$DPID/status")
echo "FOOTPRINT-OBSERVE rss=${r2}KiB threads=$th"
mem_report "$DPID"
pass measured-observe "metrics and recorder on: rss=${r2}KiB threads=$th"
# Issue 29's target: 6 MiB. Measured 5.8-6.1 MiB (12.9 before), 7.0-7.2 MiB once
# issue 27's input tape joined the recorder, 5.2 MiB since the shed text is cut
# into 16 KiB pieces that fault back one at a time (kernel/residency.rs).
limit=6144
[ -e /cgw/debug_build ] && limit=16384
check rss-observe-under-limit "with metrics and recorder, RSS after ${secs}s is under $limit KiB (${r2} KiB)" \
    test "${r2:-999999}" -lt "$limit"
stop_daemon
check_eq daemon-exit-0-observe 0 echo "$DRC"
cgw reset --policy "$P"
check_eq reset-exit-observe 0 echo "$RC"
rm -rf /run/cgw-footprint
