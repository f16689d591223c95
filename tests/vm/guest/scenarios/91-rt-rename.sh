# A comm is anyone's to choose. An unprivileged process
# that renames itself (prctl PR_SET_NAME) to the name an RT placement
# grants is placed in the group but does not get SCHED_FIFO (refused once,
# with the reason); root's process of the same name gets it; `check` warns
# on the policy. No durations are asserted (TCG): waits are upper bounds.
WL=$(command -v cgwarden-workload)
RLOG=/tmp/cgwx-rtr.log

check_exit rtr-check-ok 0 cgwarden check "$POL/rt-rename.yaml"
cgwarden check "$POL/rt-rename.yaml" 2>/tmp/cgwx-rtr-check.err >/dev/null
check rtr-check-warns "check warns: FILE:LINE:COL: warning: ... exe: or user:" \
    grep -q "rt-rename.yaml:[0-9]*:[0-9]*: warning: .*fifo.*exe:" /tmp/cgwx-rtr-check.err
sed 's/^/  check| /' /tmp/cgwx-rtr-check.err

env CGWARDEN_LOG=debug cgwarden run "$POL/rt-rename.yaml" >"$RLOG" 2>&1 &
RPID=$!
check rtr-daemon "daemon running" wait_for 60 grep -q "cgwarden running" "$RLOG"
sleep 1 # past the startup scan: what follows is placed by exec/comm events

"$WL" as-uid 1000 exec-as cgwx-motion 60 & P_USER=$!
"$WL" exec-as cgwx-motion 60 & P_ROOT=$!
uid_of() { awk '/^Uid:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
user_is_1000() { [ "$(uid_of "$P_USER")" = 1000 ] && [ "$(cat "/proc/$P_USER/comm")" = cgwx-motion ]; }
in_group() { [ "$(cgroup_of "$1")" = "$2" ]; }
check rtr-user-uid "the renamed process runs as uid 1000" wait_for 10 user_is_1000
check rtr-root-placed "root's cgwx-motion in /rtr-rt" wait_for 20 in_group "$P_ROOT" /rtr-rt
fifo_ok() { [ "$(stat_field "$P_ROOT" 41)" = 1 ] && [ "$(stat_field "$P_ROOT" 40)" = 30 ]; }
check rtr-root-fifo "root's cgwx-motion has SCHED_FIFO 30" wait_for 20 fifo_ok
check rtr-user-placed "uid 1000's cgwx-motion in /rtr-rt (the group stands)" wait_for 20 in_group "$P_USER" /rtr-rt
refused() { grep "placement refused" "$RLOG" | grep "pid $P_USER (cgwx-motion) sched fifo: not granted" | grep -q "uid is 1000"; }
check rtr-user-refused "the RT grant to uid 1000 is refused with the reason" wait_for 20 refused
# Rescans (every 2 s) see it again: still no FIFO, still said once.
sleep 5
check_eq rtr-user-not-fifo 0 stat_field "$P_USER" 41
check_eq rtr-refused-once 1 grep -c "WARN placement refused: pid $P_USER (cgwx-motion)" "$RLOG"
grep "placement refused\|pidfd" "$RLOG" | head -n 3 | sed 's/^/  log| /'

kill "$P_USER" "$P_ROOT" 2>/dev/null
kill -TERM "$RPID" 2>/dev/null
wait "$RPID" 2>/dev/null
sleep 0.5
rmdir "$CG/rtr-rt" 2>/dev/null
rm -rf /run/cgwarden-rtr
