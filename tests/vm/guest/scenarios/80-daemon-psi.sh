# `cgwarden run` against the real kernel: a stall-time rule (`inference.memory.some >
# 50ms/1s`) is served by a kernel PSI trigger (root may use a 1 s window). A hog in
# `inference` (memory.high 64M, no swap) is throttled by the kernel; the rule raises
# memory.high by 32M steps (cooldown 3s, at most 192M) and runs the alert hook with the
# documented environment and nothing of the daemon's. Ends with `cgwarden reset`.

P=$POL/daemon-psi.yaml
M64=67108864
rm -f "$T/alert.env" "$T/alert.env.tmp"
swap0=$(cat /proc/sys/vm/swappiness)

check policy-valid "daemon-psi.yaml is valid" cgwarden check "$P"
# Debug level: the daemon logs each wake-up by the kernel's PSI trigger.
CGWARDEN_LOG=debug start_daemon "$P" --tick 100ms
check psi-trigger-registered "a kernel PSI trigger was registered (psi_triggers=1 at startup)" \
    grep -q 'cgwarden running.*psi_triggers=1' "$DLOG"
check no-polling "the stall condition is not polled" sh -c "! grep -qi polling '$DLOG'"
check_file baseline-high "$CG/inference/memory.high" "$M64"
check_file baseline-max "$CG/inference/memory.max" 268435456
check_file baseline-swap-max "$CG/inference/memory.swap.max" 0
high0=$(event_count inference high)
echo "memory.events high before the hog: '$high0'"

# The hog: 150 MiB wanted, kept for 120 s; the kernel throttles it at memory.high.
# (sh -c execs the workload, so $! is the hog's PID; a backgrounded shell function
# would be a subshell with a PID of its own.)
sh -c 'echo $$ >"$0" && exec "$@"' "$CG/inference/cgroup.procs" \
    cgwarden-workload exec-as memhog alloc 150 120 >/dev/null &
HOG=$!
check hog-in-group "hog runs in /inference" wait_for 20 sh -c "[ \"\$(sed -n 's/^0:://p' /proc/$HOG/cgroup)\" = /inference ]"
high_grew() { [ "$(event_count inference high)" -gt "${high0:-0}" ]; }
check events-high "memory.events high increased (was '$high0')" wait_for 60 high_grew
echo "memory.events: $(tr '\n' ' ' <"$CG/inference/memory.events")"
echo "memory.pressure: $(tr '\n' ' ' <"$CG/inference/memory.pressure")"
raised() { [ "$(cat "$CG/inference/memory.high")" -gt "$M64" ]; }
check high-raised "inference/memory.high raised above 64M" wait_for 60 raised
h=$(cat "$CG/inference/memory.high")
check high-step "memory.high is 64M + k*32M, at most 192M (got $h)" \
    sh -c "case $h in 100663296|134217728|167772160|201326592) exit 0 ;; *) exit 1 ;; esac"
check write-logged "the write is logged with its rule" \
    grep -qE 'INFO set inference.memory.high = [0-9]+ \([0-9]+M\), .*by rule inference-stall ' "$DLOG"
check psi-trigger-woke "the kernel PSI trigger woke the daemon (debug 'PSI trigger' line)" \
    wait_for 30 grep -qE 'PSI trigger trigger="?/sys/fs/cgroup/inference/memory.pressure' "$DLOG"

# The hook's environment.
check hook-ran "alert hook wrote $T/alert.env" wait_for 30 test -s "$T/alert.env"
echo "hook environment:"; sed 's/^/  env| /' "$T/alert.env" 2>/dev/null
for want in CGWARDEN_RULE=inference-stall CGWARDEN_EVENT=fired CGWARDEN_METRIC=inference.memory.some \
    CGWARDEN_GROUP=inference CGWARDEN_PRODUCT=vm-daemon-psi \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin; do
    check "hook-env-${want%%=*}" "hook env has $want" grep -q "^$want" "$T/alert.env"
done
check hook-env-time "CGWARDEN_TIME is RFC 3339" grep -qE '^CGWARDEN_TIME=20[0-9][0-9]-[0-9][0-9]-[0-9][0-9]T' "$T/alert.env"
check hook-env-threshold "CGWARDEN_THRESHOLD set" grep -q '^CGWARDEN_THRESHOLD=.' "$T/alert.env"
# Only CGWARDEN_*, PATH, and what busybox sh itself exports (PWD, SHLVL).
extra=$(grep -vE '^(CGWARDEN_[A-Z]+|PATH|PWD|SHLVL)=' "$T/alert.env" 2>/dev/null | cut -d= -f1 | tr '\n' ' ')
check hook-env-clean "nothing of the daemon's environment (extra: '$extra')" test -z "$extra"
check hook-env-no-marker "CGW_LEAK_MARKER not passed on" sh -c "! grep -q CGW_LEAK_MARKER '$T/alert.env'"

# Clean stop: the raised memory.high is the baseline now and stays at the daemon's last
# write (read from the log: the rule may step once more before SIGTERM lands).
stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
last=$(grep 'INFO set inference.memory.high = ' "$DLOG" | tail -n 1 | sed -n 's/.* = \([0-9]*\)[ ,].*/\1/p')
check_file high-kept-after-stop "$CG/inference/memory.high" "${last:-0}"
kill "$HOG" 2>/dev/null
wait "$HOG" 2>/dev/null
for p in $(cat "$CG/inference/cgroup.procs" 2>/dev/null); do kill "$p"; done
# Debug level: leave out the per-file inotify lines.
DLOG_FILTER='DEBUG modified'
show_log
cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check group-removed "$CG/inference removed by reset" test ! -e "$CG/inference"
check_eq swappiness-untouched "$swap0" cat /proc/sys/vm/swappiness
rm -f "$T/alert.env" "$T/alert.env.tmp"
