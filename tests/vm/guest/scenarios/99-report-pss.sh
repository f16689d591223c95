# limit: 240
# On a real kernel: memory_growth per critical process from PSS. One
# `cgwarden-workload` (comm `cgwarden-worklo`, matching settings.critical
# `cgwarden-work*`) holds 8 MiB before the daemon starts; the recorder's first
# interval reads its PSS from /proc/PID/smaps_rollup. Two more with 48 MiB each
# start soon after, so the comm's summed PSS grows ~96 MiB by the next PSS read
# (a minute later). `cgwarden report` then fails that process's memory_growth,
# judged on PSS (the detail says `PSS (smaps_rollup)`), and the report JSON has
# the buddy allocator's fragmentation as a measurement. `report --compare` of the
# report with itself: every change `=` or not measured, exit 1 (B failed).
P=$POL/report-pss.yaml
DB=/run/cgw-pss/recorder.db
J=$T/pss-report.json
rm -rf /run/cgw-pss /run/cgwarden-pss

check policy-valid "report-pss.yaml is valid" cgwarden check "$P"
cgwarden-workload alloc 8 200 >/dev/null 2>&1 &
W1=$!
has_rss() { [ "$(rss_kib "$W1")" -gt 8000 ]; }
check base-resident "the first workload holds its 8 MiB" wait_for 30 has_rss
start_daemon "$P"
check recorder-running "the recorder runs" wait_for 20 grep -q 'flight recorder running' "$DLOG"
sleep 6
cgwarden-workload alloc 48 200 >/dev/null 2>&1 &
W2=$!
cgwarden-workload alloc 48 200 >/dev/null 2>&1 &
W3=$!
# The criterion's object in the report JSON (one line, no nested braces).
crit() { tr -d '\n' <"$J" | grep -o '{[^{}]*"subject": "process cgwarden-worklo"[^{}]*}'; }
on_pss() {
    cgwarden report --policy "$P" --db "$DB" --since 1h --json --out "$J" >/dev/null 2>&1
    crit | grep -q '"detail": "PSS (smaps_rollup)'
}
check judged-on-pss "memory_growth of cgwarden-worklo is judged on PSS (two PSS reads a minute apart)" \
    wait_for 150 on_pss
echo "PSS_CRITERION $(crit)"
check pss-growth-fails "the ~96 MiB PSS growth fails the 50M limit" sh -c "tr -d '\n' <'$J' | grep -o '{[^{}]*\"subject\": \"process cgwarden-worklo\"[^{}]*}' | grep -q '\"status\": \"fail\"'"
check fragmentation-measured "the report has fragmentation measurements from buddyinfo" \
    grep -q '"id": "fragmentation"' "$J"
cgw report --policy "$P" --compare "$J" "$J"
check_eq compare-exit 1 echo "$RC"
check compare-same "the report compared with itself: no change" sh -c \
    "grep -q 'Memory growth  *process cgwarden-worklo' /tmp/cgw.out && ! grep -qE ' pp |%\\)' /tmp/cgw.out"
kill "$W1" "$W2" "$W3" 2>/dev/null
wait "$W1" "$W2" "$W3" 2>/dev/null
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
cgw reset "$P"
check_eq reset-exit 0 echo "$RC"
show_log 40
