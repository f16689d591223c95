# The daemon places processes the moment they exec (process-events
# connector), by a copied binary's name, a prctl(PR_SET_NAME) rename and a
# script's cmdline; applies SCHED_FIFO; running() turns a while rule on and
# off with the process; and a socket overrun (forced with a tiny receive
# buffer while the daemon is stopped) still ends with every match placed.
# No durations are asserted (TCG): waits are generous upper bounds.
WL=$(command -v cgwarden-workload)
D=/tmp/cgwx
mkdir -p "$D"
cp "$WL" "$D/cgwx-copy"
cp "$WL" "$D/cgwx-fifo"
cp "$WL" "$D/cgwx-cyclic"
cp "$WL" "$D/cgwx-dl"
for i in 1 2 3 4 5; do cp "$WL" "$D/cgwx-flood$i"; done
printf '#!/bin/sh\nsleep 60\n: done\n' >"$D/job.sh"
chmod +x "$D/job.sh"
SW0=$(cat /proc/sys/vm/swappiness)

start_daemon() { # LOG ENV...
    _log=$1
    shift
    env CGWARDEN_LOG=debug "$@" cgwarden run "$POL/exec-placement.yaml" >"$_log" 2>&1 &
    DPID=$!
    wait_for 60 grep -q "cgwarden running" "$_log"
}
stop_daemon() { kill -TERM "$DPID" 2>/dev/null; wait "$DPID" 2>/dev/null; }

start_daemon /tmp/cgwx-d1.log
check connector-open "daemon uses the process-events connector" grep -q "process-events connector: placing on exec" /tmp/cgwx-d1.log
# /init mounts cgroup2 without favordynmods: the daemon says what that costs.
check favordynmods-advice "startup names the favordynmods mount option" grep -q "mounted without favordynmods" /tmp/cgwx-d1.log
sleep 1 # past the startup scan: what follows is placed by exec events

"$D/cgwx-copy" sleep 60 & P_COPY=$!
"$WL" exec-as cgwx-renamed 60 & P_REN=$!
"$D/job.sh" cgwx-script-tag & P_SCR=$!
"$D/cgwx-fifo" sleep 60 & P_FIFO=$!
in_group() { [ "$(cgroup_of "$1")" = "$2" ]; }
check copy-placed "copied binary cgwx-copy in /ex-copy" wait_for 20 in_group "$P_COPY" /ex-copy
check renamed-placed "prctl rename cgwx-renamed in /ex-renamed" wait_for 20 in_group "$P_REN" /ex-renamed
check script-placed "script by cmdline in /ex-script" wait_for 20 in_group "$P_SCR" /ex-script
# The script's sleep was forked before or after the move: either way it ends up there.
SLEEP_PID=$(cat /proc/$P_SCR/task/*/children 2>/dev/null | tr ' ' '\n' | grep . | head -n1)
if [ -n "$SLEEP_PID" ]; then
    check script-child "the script's child follows it" wait_for 20 in_group "$SLEEP_PID" /ex-script
else
    fail script-child "no child of the script found"
fi
check fifo-placed "cgwx-fifo in /ex-rt" wait_for 20 in_group "$P_FIFO" /ex-rt
fifo_ok() { [ "$(stat_field "$P_FIFO" 41)" = 1 ] && [ "$(stat_field "$P_FIFO" 40)" = 40 ]; }
check fifo-sched "SCHED_FIFO priority 40" wait_for 20 fifo_ok
# Placed by events, not by a rescan (rescan: 3s would also find them). A rescan that
# got to a process younger than its exec event's delay (logged "still on its way")
# raced the event, it did not replace it: only a miss fails.
if grep -q "rescan placed a process the exec events missed" /tmp/cgwx-d1.log; then
    fail by-events "a rescan had to place something: $(grep 'rescan placed' /tmp/cgwx-d1.log | head -n 2)"
else
    pass by-events "no rescan miss"
fi

# A refusal is reported with its reason; the move itself still happened.
"$D/cgwx-dl" sleep 60 & P_DL=$!
check dl-placed "cgwx-dl in /ex-dl" wait_for 20 in_group "$P_DL" /ex-dl
dl_refused() { grep "placement refused" /tmp/cgwx-d1.log | grep "cgwx-dl" | grep -q "sched deadline.*sched_setattr"; }
check dl-refused "the kernel's deadline refusal is logged with the call and reason" wait_for 20 dl_refused
grep "placement refused" /tmp/cgwx-d1.log | head -n 1 | sed 's/^/  log| /'
# Rescans (every 3 s here) try again, but the same refusal is warned once.
sleep 4
n_warn=$(grep -c "WARN placement refused: .*cgwx-dl" /tmp/cgwx-d1.log)
check_eq dl-warned-once 1 echo "$n_warn"
kill "$P_DL" 2>/dev/null

# running(): on while cgwx-cyclic lives, off once it exits.
"$D/cgwx-cyclic" sleep 4 & P_CYC=$!
sw_is() { [ "$(cat /proc/sys/vm/swappiness)" = "$1" ]; }
check running-on "swappiness 77 while cgwx-cyclic runs" wait_for 20 sw_is 77
wait "$P_CYC"
check running-off "swappiness back to $SW0 after it exits" wait_for 20 sw_is "$SW0"
kill "$P_COPY" "$P_REN" "$P_SCR" "$P_FIFO" "$SLEEP_PID" 2>/dev/null
stop_daemon

# Overrun: a tiny socket buffer, the daemon stopped (not reading) while a
# flood fills the socket and the matching processes start; on SIGCONT the
# daemon sees ENOBUFS and rescans.
start_daemon /tmp/cgwx-d2.log CGWARDEN_PROC_EVENTS_RCVBUF=1
kill -STOP "$DPID"
i=0
while [ $i -lt 200 ]; do /bin/true; i=$((i + 1)); done
FL=""
for i in 1 2 3 4 5; do "$D/cgwx-flood$i" sleep 60 & FL="$FL $!"; done
kill -CONT "$DPID"
all_flood() { for p in $FL; do in_group "$p" /ex-flood || return 1; done; }
check flood-placed "every flood match in /ex-flood after the overrun" wait_for 40 all_flood
check flood-overrun "the overrun was detected" grep -q "overran (ENOBUFS)\|sequence gap" /tmp/cgwx-d2.log
kill $FL 2>/dev/null
stop_daemon
grep "placement:" /tmp/cgwx-d1.log /tmp/cgwx-d2.log | sed 's/^/  log| /'
# Leave no groups behind for later scenarios.
sleep 0.5
for g in ex-copy ex-renamed ex-script ex-rt ex-flood ex-dl; do rmdir "$CG/$g" 2>/dev/null; done
rm -rf /run/cgwarden-exec
