# limit: 300
# The single-writer question: cgwarden.service places a process of another
# systemd service into a top-level group. What does systemd do with it?
#  - the service's main process moved to /batch: does `systemctl stop` stop it,
#    does `systemctl daemon-reload` move it back?
#  - a child the service forked, moved to /batch: does `systemctl stop` find it?
# The checks assert what systemd 252 was seen to do (docs/platform.md
# "The single-writer question"), so a change in either shows up here.
stop_clean
use_policy "$POL/main.yaml"
systemctl start cgwarden.service
check active "cgwarden.service active" wait_for 60 is_active $U

# Main process: a service that is itself `victim_main`.
systemd-run --unit=cgw-victim-main --property=KillMode=control-group \
    /usr/local/bin/cgwarden-workload exec-as victim_main 600 >/dev/null 2>&1
sleep 1
VM=$(mainpid cgw-victim-main.service)
check main-placed "the service's main process ($VM) placed into /batch" wait_for 30 in_cgroup "$VM" /batch
check_eq main-still-tracked "$VM" mainpid cgw-victim-main.service
systemctl daemon-reload
sleep 3
check main-stays-after-daemon-reload "daemon-reload does not move it back (still in /batch)" in_cgroup "$VM" /batch
systemctl restart cgw-victim-main.service 2>/dev/null
VM2=$(mainpid cgw-victim-main.service)
check main-old-stopped-by-restart "systemctl restart stopped the moved main process" wait_for 20 sh -c "! kill -0 $VM 2>/dev/null"
check restarted-main-placed-again "the new main process ($VM2) is placed again" wait_for 30 in_cgroup "$VM2" /batch
systemctl stop cgw-victim-main.service
check main-stopped "systemctl stop stopped the moved main process" wait_for 20 sh -c "! kill -0 $VM2 2>/dev/null"

# A forked child: the main process is a shell that starts `victim_child`.
systemd-run --unit=cgw-victim-fork --property=KillMode=control-group \
    /bin/sh -c '/usr/local/bin/cgwarden-workload exec-as victim_child 600 & exec sleep 600' >/dev/null 2>&1
sleep 1
C=$(pgrep -x victim_child | head -n1)
check child-started "victim_child started ($C)" test -n "$C"
check child-placed "the forked child placed into /batch" wait_for 30 in_cgroup "$C" /batch
systemctl stop cgw-victim-fork.service
sleep 3
if kill -0 "$C" 2>/dev/null; then
    echo "FINDING: systemctl stop left the placed child $C running in $(pid_cgroup "$C")"
    pass child-escapes-stop "finding: a forked child placed out of its unit survives systemctl stop (documented: do not place processes of systemd services out of their unit)"
    kill "$C"
else
    echo "FINDING: systemctl stop also killed the placed child"
    fail child-escapes-stop "expected the placed child to escape systemctl stop (docs/platform.md says so): it was killed"
fi

systemctl reset-failed 'cgw-victim-*' 2>/dev/null
show_journal $U 20
