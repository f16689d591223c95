# The whole locked daemon's resident set (not a test: prints BENCH lines, asserts
# nothing). Run from the host with tests/bench-resident.sh, once per build: the
# iq9100 policy (policies/iq9100-vision.yaml, copied in as /cgw/iq9100.yaml) with its
# metrics (socket, textfile every 15 s) and flight recorder (every 10 s), on a guest
# with its 8 CPUs, `mlock: true` (the default). After SECS (default 40: at least two
# rounds of each periodic job) the RSS (smaps_rollup's Rss), how much of it is locked,
# file-backed (binary, C libraries) and anonymous (heap, stacks), and the mappings.
bench_wanted /cgw/resident_secs resident tests/bench-resident.sh || { return 0 2>/dev/null || exit 0; }
SECS=$(cat /cgw/resident_secs)
BUILD=$(cat /cgw/resident_build 2>/dev/null || echo default)
# What runs the daemon: `cgwarden run` or the packages' cgwardend.
CMD=$(cat /cgw/resident_cmd 2>/dev/null || echo "cgwarden run")
P=/cgw/iq9100.yaml
D=/tmp/cgwres
mkdir -p "$D" /var/lib/node_exporter/textfile_collector /var/lib/cgwarden
# shellcheck disable=SC2086 # CMD is a command and its first argument
env CGWARDEN_LOG=info $CMD "$P" 2>"$D/daemon.log" &
DP=$!
if ! wait_for 60 grep -q "cgwarden running" "$D/daemon.log"; then
    sed 's/^/BENCH   log| /' "$D/daemon.log" | tail -n 20
    fail bench-done "the daemon did not start"
    return 0 2>/dev/null || exit 0
fi
sleep "$SECS"
roll() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$DP/smaps_rollup"; }
# File-backed: the pages of mappings with a path that are not private copies.
file=$(awk '/^[0-9a-f]+-[0-9a-f]+ / { f = ($6 ~ /^\//); next }
    f && $1 == "Rss:" { s += $2 } f && $1 == "Anonymous:" { s -= $2 } END { print s + 0 }' "/proc/$DP/smaps")
th=$(awk '/^Threads:/ { print $2 }' "/proc/$DP/status")
echo "BENCH resident: build=$BUILD rss=$(roll Rss)KiB locked=$(roll Locked)KiB file=${file}KiB anon=$(roll Anonymous)KiB threads=$th majflt=$(stat_field "$DP" 12) after ${SECS}s"
mem_report "$DP" | sed 's/^/BENCH   /'
grep -E "cgwarden running|settings.daemon.mlock|memory: " "$D/daemon.log" | sed 's/^/BENCH   log| /'
kill -TERM "$DP"
wait "$DP"
cgwarden reset --policy "$P" >/dev/null 2>&1
pass bench-done "resident benchmark ran ($BUILD)"
