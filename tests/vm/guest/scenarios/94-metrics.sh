# Metrics and the flight recorder against the real kernel. The daemon
# serves GET /metrics on 127.0.0.1:9622 (busybox wget is the client) and writes the
# textfile; a 40 MiB workload holds memory in `inference`. Checked: the scraped
# memory.current is the file's (within 4 MiB: the workload may still be faulting
# in), the PSI totals are total=/1e6 of the file read just before and after the
# scrape and never go backwards, the textfile is there. The scrape and the textfile
# are printed as `prom|` lines: the host side (tests/vm.rs) runs `promtool check
# metrics` on them (the guest has no promtool). The recorder's database exists
# (the guest has no sqlite3; the fake-root tests check its content).

P=$POL/metrics.yaml
URL=http://127.0.0.1:9622/metrics
rm -rf "$T/textfile" "$T/recorder"

# The guest's init leaves the loopback interface down.
ip link set lo up 2>/dev/null || ifconfig lo 127.0.0.1 up
check loopback-up "lo is up" sh -c "ip link show lo | grep -q UP || ifconfig lo | grep -q UP"
check policy-valid "metrics.yaml is valid" cgwarden check "$P"
start_daemon "$P"
check metrics-listening "the daemon logs the metrics listener" \
    wait_for 20 grep -q 'metrics listening' "$DLOG"
in_group inference cgwarden-workload alloc 40 120 >/dev/null &
W=$!
grown() { [ "$(cat "$CG/inference/memory.current")" -gt 41943040 ]; }
check workload-memory "inference holds the workload's 40 MiB" wait_for 60 grown

scrape() { wget -q -O - "$URL"; }
# The value of series $1 in the scrape on stdin.
series() { awk -v s="$1" 'index($0, s " ") == 1 { print $2 }'; }
# (Shell functions are not seen inside check's `sh -c`: values are taken here.)
if scrape >"$T/scrape1" 2>"$T/wget.err" && [ -s "$T/scrape1" ]; then
    pass scrape-ok "GET /metrics over loopback TCP: $(wc -c <"$T/scrape1") bytes"
else
    fail scrape-ok "GET /metrics over loopback TCP failed: $(cat "$T/wget.err")"
fi
cur_file=$(cat "$CG/inference/memory.current")
cur_metric=$(series 'cgwarden_cgroup_memory_current_bytes{group="inference"}' <"$T/scrape1")
echo "memory.current file=$cur_file metric=$cur_metric"
check memory-current-matches "scraped memory.current $cur_metric within 4 MiB of the file's $cur_file" \
    awk -v a="$cur_metric" -v b="$cur_file" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 0 && d <= 4194304) }'
check_eq memory-high "134217728" echo "$(series 'cgwarden_cgroup_memory_high_bytes{group="inference"}' <"$T/scrape1")"
check_eq memory-max "268435456" echo "$(series 'cgwarden_cgroup_memory_max_bytes{group="inference"}' <"$T/scrape1")"

# PSI: total= (µs) read just before and just after a scrape bound the scraped seconds.
psi_total() { sed -n "s/^$2 .*total=\([0-9]*\).*/\1/p" "$CG/inference/$1.pressure"; }
for res in cpu memory io; do
    for kind in some:waiting full:stalled; do
        line=${kind%%:*} word=${kind##*:}
        [ "$res" = cpu ] && [ "$line" = full ] && [ -z "$(psi_total cpu full)" ] && continue
        before=$(psi_total "$res" "$line")
        scrape >"$T/scrape2"
        after=$(psi_total "$res" "$line")
        m=$(series "cgwarden_cgroup_pressure_${res}_${word}_seconds_total{group=\"inference\"}" <"$T/scrape2")
        m1=$(series "cgwarden_cgroup_pressure_${res}_${word}_seconds_total{group=\"inference\"}" <"$T/scrape1")
        check "psi-$res-$line" "scraped $res $line $m s is total=/1e6 between $before and $after µs, and >= the first scrape's $m1" \
            awk -v m="$m" -v m1="$m1" -v a="$before" -v b="$after" \
            'BEGIN { exit !(m != "" && m * 1e6 >= a - 1 && m * 1e6 <= b + 1 && m + 0 >= m1 + 0) }'
    done
done
rss=$(series cgwarden_process_resident_memory_bytes <"$T/scrape1")
check process-rss "the daemon's RSS is exported ($rss bytes)" awk -v r="$rss" 'BEGIN { exit !(r > 1000000) }'
check socket-mode "the metrics socket is 0660" sh -c "[ \"\$(stat -c %a /run/cgwarden/metrics.sock)\" = 660 ]"
check textfile "the textfile is written" wait_for 10 test -s "$T/textfile/cgwarden.prom"
check textfile-value "the textfile has the group's memory.current" \
    grep -q '^cgwarden_cgroup_memory_current_bytes{group="inference"} ' "$T/textfile/cgwarden.prom"
check recorder-db "the recorder database exists and grows" wait_for 10 test -s "$T/recorder/recorder.db"

# For the host side's promtool (tests/vm.rs): each block between PROM BEGIN/END.
for f in "$T/scrape1" "$T/textfile/cgwarden.prom"; do
    echo "PROM BEGIN $f"
    sed 's/^/prom| /' "$f"
    echo "PROM END"
done

kill "$W" 2>/dev/null
wait "$W" 2>/dev/null
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
check socket-removed "the metrics socket is removed at stop" test ! -e /run/cgwarden/metrics.sock
show_log 40
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
rm -rf "$T/textfile" "$T/recorder"
