# limit: 240
# The daemon's pages stay in memory under the pressure it reacts to: run from a file
# system on a block device (ext2 on a zram device added for this scenario; pages of the
# initramfs never leave memory), its binary (cgwardend, as the packages' units run it),
# C libraries and dynamic loader all there,
# with metrics, the recorder and the watchdog on. Once it settled, the page cache is
# reclaimed (drop_caches, and the root group's memory.reclaim: the reclaim a hog taking
# all memory would cause, mapped pages included, in a fraction of the time), then every
# kind of reaction is fired: an exec placement, a running() rule (a sysctl and a hook),
# a boost through the control socket, a PSI stall trigger and a memory.events rule on a
# hog squeezed at its group's memory.high (a memory.high raise through a writer lane
# and the journal, a hook), the watchdog's ping, a /metrics scrape, a reload. The
# daemon's major page faults (field 12 of /proc/PID/stat: reads from the disk) must
# not grow: 0.

P=$POL/daemon-resident.yaml
R=/run/cgw-resident
M=/mnt/cgw-resident
S=/run/cgwarden/io.cgwarden
WL=$(command -v cgwarden-workload)
SW0=$(cat /proc/sys/vm/swappiness)
rm -rf "$R"
mkdir -p "$R"
check policy-valid "daemon-resident.yaml is valid" cgwarden check "$P"

# --- the block device: a zram device of its own (the suite may use zram0), ext2 on it
# with 4 KiB blocks (zram's logical block), served by the ext4 driver.
modprobe zram 2>/dev/null
modprobe ext4 2>/dev/null
ZN=$(cat /sys/class/zram-control/hot_add 2>/dev/null)
ZD=/dev/zram$ZN
mkfs_mount() {
    [ -n "$ZN" ] && wait_for 10 test -b "$ZD" &&
        echo 64M >"/sys/block/zram$ZN/disksize" &&
        mke2fs -b 4096 "$ZD" >/dev/null &&
        mkdir -p "$M" && mount -t ext2 "$ZD" "$M"
}
check block-fs "ext2 on $ZD mounted at $M" mkfs_mount
# The packages' daemon binary (cgwardend: `cgwarden run` alone), its libraries and the
# dynamic loader (it maps the others), run as `LOADER --library-path DIR BINARY`: every
# file the daemon maps is on the device. A static cgwardend (the packages') maps
# no other file and runs as it is.
check cgwardend-installed "cgwardend is installed beside cgwarden" test -x /usr/local/bin/cgwardend
mkdir -p "$M/lib"
cp /usr/local/bin/cgwardend "$M/cgwardend"
for f in /lib/*-linux-gnu/*.so* /lib64/ld-linux*.so* /lib/ld-linux*.so*; do
    [ -f "$f" ] && cp "$f" "$M/lib/"
done
LD=$(ls "$M"/lib/ld-linux*.so* 2>/dev/null | head -n 1)
check loader-copied "the dynamic loader is on the device (${LD:-none})" test -n "$LD"
# ld.so --verify: 0 for a dynamic executable, non-zero for a static one.
if "$LD" --verify "$M/cgwardend" >/dev/null 2>&1; then
    RUN="$LD --library-path $M/lib $M/cgwardend"
else
    RUN="$M/cgwardend"
fi
sync

# --- the daemon, with a notify socket and a 2 s watchdog (a ping every second)
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
cgwarden-workload notify-listen "$R/notify" 300 >"$R/notify.log" 2>&1 &
NL=$!
wait_for 10 test -S "$R/notify"
: >"$DLOG"
echo "+ NOTIFY_SOCKET=$R/notify WATCHDOG_USEC=2000000 $RUN $P --tick 100ms &"
# shellcheck disable=SC2086 # RUN is the loader and its arguments, or the binary
NOTIFY_SOCKET=$R/notify WATCHDOG_USEC=2000000 $RUN "$P" --tick 100ms \
    >/dev/null 2>>"$DLOG" &
DPID=$!
if wait_for 60 grep -q 'cgwarden running' "$DLOG"; then
    pass daemon-started "PID $DPID"
else
    fail daemon-started "no 'cgwarden running' in the log: $(tail -n 5 "$DLOG")"
fi
# Its code: the binary and the shared objects (the recorder's -shm file is on /run).
off_device=$(awk -v m="$M/" '$6 ~ /(\/cgwardend|\.so[.0-9]*)$/ && index($6, m) != 1 { print $6 }' "/proc/$DPID/maps" |
    sort -u | tr '\n' ' ')
check code-on-device "the binary and every library the daemon maps are under $M (others: '$off_device')" \
    test -z "$off_device"
scrape() { wget -q -O - http://127.0.0.1:9624/metrics | grep -q '^cgwarden_'; }
check scraped "GET /metrics answered" wait_for 20 scrape
# Settled: past its start, the first rounds of metrics and recorder (1 s intervals) and
# whatever the daemon does a few seconds after them.
sleep 8
majflt() { stat_field "$DPID" 12; }
# Read requests the block device completed (field 1 of its stat): the disk reads
# themselves, whoever asked.
dev_reads() { awk '{ print $1 }' "/sys/block/zram$ZN/stat" 2>/dev/null; }
lck() { awk '$1 == "Locked:" { print $2 }' "/proc/$DPID/smaps_rollup"; }
F0=$(majflt)
echo "RESIDENT settled: majflt=$F0 device_reads=$(dev_reads) minflt=$(stat_field "$DPID" 10) rss=$(rss_kib "$DPID")KiB locked=$(lck)KiB"
mem_report "$DPID"
STAGES="settled=$F0"
up() { cut -d' ' -f1 /proc/uptime; }
# What the daemon maps from files, and each thread's major faults: printed when a
# stage's count grew, so a failure names the thread and any mapping made since settling.
file_maps() { awk '$6 ~ /^\// { print $1, $2, $6 }' "/proc/$DPID/maps"; }
file_maps >"$R/maps0"
LASTF=$F0
stage() {
    f=$(majflt)
    STAGES="$STAGES $1=$f"
    echo "RESIDENT $1: majflt=$f device_reads=$(dev_reads) uptime=$(up)"
    if [ "$f" != "$LASTF" ]; then
        for t in /proc/$DPID/task/*; do
            echo "RESIDENT thread $(cat "$t/comm" 2>/dev/null) majflt=$(cut -d' ' -f12 "$t/stat" 2>/dev/null)"
        done
        # busybox diff is unified: a mapping gone is "-ADDR", a new one "+ADDR".
        file_maps | diff "$R/maps0" - | sed -n 's/^\([-+]\)\([0-9a-f]\)/RESIDENT maps \1 \2/p'
    fi
    LASTF=$f
}

# --- reclaim: the page cache dropped, the root group squeezed, dropped once more.
sync
echo 3 >/proc/sys/vm/drop_caches
echo "RESIDENT squeeze: uptime=$(up)"
echo 2G >"$CG/memory.reclaim" 2>/dev/null # EAGAIN once nothing more can be reclaimed
sync
echo 3 >/proc/sys/vm/drop_caches
echo "RESIDENT after the squeeze: uptime=$(up) $(grep -E '^(MemFree|Cached|Mlocked):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
sleep 2 # the periodic jobs run once more (metrics, recorder, watchdog)
stage squeezed
# The guarantee itself, whatever startup ran: every page of the binary and the libraries
# is resident (Rss = Size of each mapping that is not PROT_NONE).
partial=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { h = ($2 !~ /^---/ && $6 ~ /(\/cgwardend|\.so[.0-9]*)$/) ? $1 " " $6 : ""; next }
    h != "" && $1 == "Size:" { size = $2 }
    h != "" && $1 == "Rss:" && $2 < size { print h " " $2 "/" size "KiB" }' "/proc/$DPID/smaps" | tr '\n' ' ')
check code-resident "every page of the binary and libraries is resident after the reclaim (not: '$partial')" \
    test -z "$partial"
pings0=$(grep -c 'WATCHDOG=1' "$R/notify.log")

# --- every kind of reaction
"$WL" exec-as resx-placed 120 &
PL=$!
check exec-placed "resx-placed in /res-placed (placed on exec)" \
    wait_for 20 sh -c "[ \"\$(sed -n 's/^0:://p' /proc/$PL/cgroup)\" = /res-placed ]"
stage exec-placement
"$WL" exec-as resx-trig 120 &
TR=$!
check present-sysctl "running(resx-trig): vm.swappiness 77" wait_for 20 grep -qx 77 /proc/sys/vm/swappiness
check present-hook "running(resx-trig): its hook ran" wait_for 20 grep -q 'res-present fired' "$R/hooks"
stage presence
h=$(cgwarden boost res-boost.cpu.weight=300 --for 1m --socket "$S" | tail -n 1)
check boost "a boost through the control socket: cpu.weight 300" wait_for 10 grep -qx 300 "$CG/res-boost/cpu.weight"
cgwarden release "$h" --socket "$S" >/dev/null
check boost-released "released: cpu.weight 100" wait_for 10 grep -qx 100 "$CG/res-boost/cpu.weight"
stage boost
in_group res-squeeze "$WL" exec-as resx-hog alloc 150 120 >/dev/null &
HOG=$!
raised() { [ "$(cat "$CG/res-squeeze/memory.high")" -gt 67108864 ]; }
check stall-raised "the stall trigger's rule raised res-squeeze/memory.high" wait_for 60 raised
check stall-hook "the stall rule's hook ran" wait_for 20 grep -q 'res-stall fired' "$R/hooks"
check events-hook "the memory.events rule's hook ran" wait_for 20 grep -q 'res-events fired' "$R/hooks"
stage stall-and-events
check scraped-again "GET /metrics answered after the squeeze" wait_for 20 scrape
pinged() { [ "$(grep -c 'WATCHDOG=1' "$R/notify.log")" -gt "$pings0" ]; }
check watchdog "the watchdog pinged after the squeeze" wait_for 10 pinged
kill "$TR" 2>/dev/null
check present-cleared "resx-trig gone: vm.swappiness back to $SW0" wait_for 20 grep -qx "$SW0" /proc/sys/vm/swappiness
stage cleared
check reload "cgwarden reload: the policy read, checked and put in force again" cgwarden reload --socket "$S"
stage reload
F1=$(majflt)
echo "RESIDENT end: majflt=$F1 minflt=$(stat_field "$DPID" 10) rss=$(rss_kib "$DPID")KiB locked=$(lck)KiB"
check_eq no-major-faults "0" echo "$((F1 - F0))"

pass majflt-stages "$STAGES"

stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
for p in $PL $TR $HOG $NL; do kill "$p" 2>/dev/null; done
wait 2>/dev/null
show_log 60
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check_eq swappiness-restored "$SW0" cat /proc/sys/vm/swappiness
umount "$M" 2>/dev/null
[ -n "$ZN" ] && echo "$ZN" >/sys/class/zram-control/hot_remove 2>/dev/null
rm -rf "$R"
