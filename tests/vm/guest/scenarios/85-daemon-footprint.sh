# The daemon's idle footprint on the real kernel: `cgwarden run` with the iq9100-style
# rules and the default 1 s tick, nothing firing, for FOOTPRINT_SECS (20 s in the
# suite; `CGWARDEN_VM_FOOTPRINT_SECS=600 bash tests/vm/run-guest.sh …` for the 10-minute
# figure). Reports RSS and CPU time; checks RSS < 12 MiB. CPU time under TCG is guest
# time, reported, not asserted. Then the same with metrics (socket, TCP, textfile) and the
# flight recorder on, one scrape made (< 12 MiB). The daemon is locked (mlockall): the
# whole binary and C library are resident, whatever it ran (docs/size.md). RSS is
# smaps_rollup's (rss_kib in lib.sh: VmRSS lags on 6.1); mem_report prints where it is,
# by mapping.

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
# The bound is for a release build (9.3 MiB measured); a debug build (cargo test without
# --release) locks its much larger unoptimized binary.
limit=12288
[ -e /cgw/debug_build ] && limit=262144
check rss-under-limit "RSS after ${secs}s is under $((limit / 1024)) MiB (${r1} KiB)" test "${r1:-999999}" -lt "$limit"
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"

# With metrics and the recorder on (their threads, SQLite, the HTTP server), after one
# scrape, idle for the same time.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
P=$POL/daemon-footprint-observe.yaml
rm -rf /run/cgw-footprint
check policy-valid-observe "daemon-footprint-observe.yaml is valid" cgwarden check "$P"
start_daemon "$P"
check scraped "one GET /metrics answered" wait_for 20 sh -c 'wget -q -O - http://127.0.0.1:9623/metrics | grep -q "^cgwarden_"'
sleep "$secs"
r2=$(rss "$DPID")
th=$(awk '/^Threads:/ { print $2 }' "/proc/$DPID/status")
names=$(for t in /proc/"$DPID"/task/*; do cat "$t/comm"; done 2>/dev/null | sort | tr '\n' ' ')
echo "FOOTPRINT-OBSERVE rss=${r2}KiB threads=$th ($names)"
mem_report "$DPID"
pass measured-observe "metrics and recorder on: rss=${r2}KiB threads=$th"
# A thread only where a priority or a blocking call needs one: the event loop, cgw-exec
# (when something is placed), cgw-recorder (which also writes the textfile) and
# cgw-services (control and KPI sockets, metrics, policy watch).
check services-thread "control, metrics, KPI socket and policy watch share cgw-services ($names)" \
    sh -c "echo '$names' | grep -qw cgw-services"
check threads-observe "at most 4 threads: $th ($names)" test "${th:-99}" -le 4
# 10.5 MiB measured (release build): the binary and C library (7.7 MiB) and the
# metrics and recorder threads' stacks and heaps.
limit=12288
[ -e /cgw/debug_build ] && limit=262144
check rss-observe-under-limit "with metrics and recorder, RSS after ${secs}s is under $limit KiB (${r2} KiB)" \
    test "${r2:-999999}" -lt "$limit"
stop_daemon
check_eq daemon-exit-0-observe 0 echo "$DRC"
cgw reset --policy "$P"
check_eq reset-exit-observe 0 echo "$RC"
rm -rf /run/cgw-footprint
