# The idle footprint with metrics and the recorder on, for
# tests/bench-overload.sh: prints BENCH lines, asserts nothing. RSS from
# smaps_rollup (lib.sh's rss_kib), by mapping with mem_report.
SECS=$(cat /cgw/footprint_secs 2>/dev/null || echo 20)
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
P=$POL/daemon-footprint-observe.yaml
rm -rf /run/cgw-footprint
D=/tmp/cgwfoot
mkdir -p "$D"
env CGWARDEN_LOG=info cgwarden run "$P" 2>"$D/daemon.log" &
DP=$!
wait_for 60 grep -q "cgwarden running" "$D/daemon.log"
wait_for 20 sh -c 'wget -q -O - http://127.0.0.1:9623/metrics | grep -q "^cgwarden_"'
sleep "$SECS"
echo "BENCH footprint: metrics + recorder on, one scrape, ${SECS} s idle: rss $(rss_kib "$DP") KiB, threads $(awk '/^Threads:/ { print $2 }' "/proc/$DP/status") (target 8192 KiB)"
mem_report "$DP" | sed 's/^/BENCH   /'
grep -E "cgwarden running|settings.daemon.mlock|memory: " "$D/daemon.log" | sed 's/^/BENCH   log| /'
kill -TERM "$DP"
wait "$DP"
cgwarden reset --policy "$P" >/dev/null 2>&1
rm -rf /run/cgw-footprint
pass bench-done "footprint benchmark ran"
