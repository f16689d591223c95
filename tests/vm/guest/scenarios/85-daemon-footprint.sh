# The daemon's idle footprint on the real kernel: `cgwarden run` with the iq9100-style
# rules and the default 1 s tick, nothing firing, for FOOTPRINT_SECS (20 s in the
# suite; `CGWARDEN_VM_FOOTPRINT_SECS=600 bash tests/vm/run-guest.sh …` for the 10-minute
# figure). Reports RSS and CPU time; checks RSS < 8 MiB. CPU time under TCG is guest
# time, reported, not asserted.

P=$POL/daemon-footprint.yaml
secs=$(cat /cgw/footprint_secs 2>/dev/null)
secs=${secs:-20}
check policy-valid "daemon-footprint.yaml is valid" cgwarden check "$P"
start_daemon "$P"
ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }   # utime + stime, clock ticks
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$DPID/status"; }
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
pass measured "$detail"
# The target is for a release build; a debug build (cargo test without --release) is larger.
limit=8192
[ -e /cgw/debug_build ] && limit=16384
check rss-under-limit "RSS after ${secs}s is under $((limit / 1024)) MiB (${r1} KiB)" test "${r1:-999999}" -lt "$limit"
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
