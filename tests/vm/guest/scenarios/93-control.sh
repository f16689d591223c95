# limit: 240
# The control socket against the real kernel: the CLI as root and as a
# non-root user of the socket's group, a boost tied to a process ending within 50 ms of
# its exit (pidfd), refusals outside the `control:` grant, verify seeing a change made
# behind the daemon's back, the event stream, and a clean stop leaving no boost behind.

P=$POL/control.yaml
S=/run/cgwarden/io.cgwarden
W=$CG/ctl/cpu.weight
check policy-valid "control.yaml is valid" cgwarden check "$P"
start_daemon "$P" --tick 100ms
check socket "control socket $S" wait_for 20 test -S "$S"
check_eq socket-mode "660 root vision" stat -c '%a %U %G' "$S"
check status "cgwarden status answers" sh -c "cgwarden status --socket $S | grep -q vm-control"
check status-json "status --json lists group ctl" sh -c "cgwarden status --json --socket $S | grep -q '\"name\": \"ctl\"'"
check_eq baseline 100 cat "$W"

# A boost tied to a process: released when the process exits (pidfd), within 50 ms.
out=$(cgwarden-workload boost-exit "$S" ctl.cpu.weight 900 "$W" 900 2>&1)
echo "$out"
us=$(echo "$out" | sed -n 's/.* \([0-9][0-9]*\) us after.*/\1/p')
# Under the arm64 guest (aarch64 emulated on x86, several times slower than the
# x86 guest) tests/vm/run-guest-arm64.sh writes a slowdown factor to
# /cgw/tcg_slowdown; the x86 guest has none (factor 1, the documented 50 ms).
lim=$((50000 * $(cat /cgw/tcg_slowdown 2>/dev/null || echo 1)))
check pid-tied-release "released ${us:-?} us after the exit (limit $lim)" test "${us:-999999}" -lt "$lim"
check_eq back-after-exit 100 cat "$W"

# Non-root, inside its grant: granted; outside: refused with a reason.
as_vision() { cgwarden-workload run-as 1000 cgwarden "$@" --socket "$S"; }
check user-boost "uid 1000 boosts ctl.cpu.weight for 30s" as_vision boost ctl.cpu.weight=300 --for 30s
check user-boost-written "ctl.cpu.weight is 300" wait_for 10 grep -qx 300 "$W"
refused() { # WHY ARGS... : exit 1 and a reason on stderr
    _why=$1
    shift
    _e=$(as_vision "$@" 2>&1 >/dev/null)
    _rc=$?
    echo "  ($*: exit $_rc: $_e)"
    [ "$_rc" = 1 ] && [ -n "$_e" ]
}
check user-knob-refused "a knob outside the grant" refused grant boost ctl.memory.high=1G --for 30s
check user-long-refused "longer than max_duration" refused duration boost ctl.cpu.weight=300 --for 2h
check user-nofor-refused "no --for" refused deadline boost ctl.cpu.weight=300
check user-reload-refused "reload is root's" refused root reload
check_eq other-uid-unreachable 4 sh -c "cgwarden-workload run-as 65534 cgwarden status --socket $S >/dev/null 2>&1; echo \$?"

# verify: in step, then a change behind the daemon's back is drift (exit 1).
check verify-clean "verify exit 0" cgwarden verify --socket "$S"
echo 555 >"$CG/ctl/cpu.weight"
check_eq verify-drift 1 sh -c "cgwarden verify --socket $S >$T/verify.out 2>&1; echo \$?"
check verify-names-knob "verify names ctl.cpu.weight" grep -q 'DRIFT ctl.cpu.weight' "$T/verify.out"

# The event stream sees a boost and its release.
cgwarden events --socket "$S" >"$T/events.out" 2>&1 &
EV=$!
wait_for 10 grep -q subscribed "$T/events.out"
h=$(cgwarden boost ctl.memory.high=512M --for 1m --reason test --socket "$S" | tail -n 1)
cgwarden release "$h" --socket "$S"
check events-granted "claim_granted in the stream" wait_for 10 grep -q claim_granted "$T/events.out"
check events-released "claim_released in the stream" wait_for 10 grep -q claim_released "$T/events.out"
kill "$EV" 2>/dev/null
wait "$EV" 2>/dev/null

stop_daemon
check_eq daemon-exit-0 0 echo "$DRC"
check_eq boosts-released 100 cat "$W"
check socket-removed "socket removed at stop" test ! -e "$S"
show_log 60
