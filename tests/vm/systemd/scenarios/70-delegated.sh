# limit: 240
# cgwarden-delegated.service (Delegate=yes): the daemon moves itself into
# the `supervisor` leaf of its own cgroup and builds the policy's groups
# inside it; placement moves into the subtree; systemctl stop is clean.
stop_clean
D=cgwarden-delegated.service
R=/system.slice/cgwarden-delegated.service
use_policy "$POL/delegated.yaml"
check_exit start 0 systemctl start $D
check active "cgwarden-delegated.service active" wait_for 60 is_active $D
check_eq delegate yes prop $D Delegate
check daemon-in-leaf "the daemon runs in $R/supervisor" wait_for 20 in_cgroup "$(mainpid $D)" $R/supervisor
check group-app "$R/app created" wait_for 30 test -d /sys/fs/cgroup$R/app
check_file app-memory-high /sys/fs/cgroup$R/app/memory.high 100663296
check_file batch-cpu-weight /sys/fs/cgroup$R/batch/cpu.weight 40
check no-top-level "nothing created at the top (/sys/fs/cgroup/app absent)" test ! -e /sys/fs/cgroup/app
cgwarden-workload exec-as sd_app 600 &
A=$!
check placed "sd_app placed into $R/app" wait_for 30 in_cgroup "$A" $R/app
check_exit status 0 cgwarden status
p0=$(mainpid $D)
check_exit reload 0 systemctl reload $D
check_eq reload-same-mainpid "$p0" mainpid $D
check journal-running "journal: 'cgwarden running'" journal_has $D 'cgwarden running'
# The placed workload lives in the unit's own cgroup tree, so on systemd 252
# a restart of the supervisor (also the watchdog's or Restart=on-failure's)
# kills it with the daemon: KillMode=control-group covers the whole
# delegated tree. (KillMode=process was tried: the restart then fails with
# 219/CGROUP, the unit's cgroup having controllers enabled; systemd >= 254's
# DelegateSubgroup= is the way out.) Asserted as seen, documented in
# docs/platform.md and the unit's header.
check_exit restart 0 systemctl restart $D
check active-again "active again after restart" wait_for 60 is_active $D
killed_by_restart() { ! kill -0 "$A" 2>/dev/null; }
check finding-restart-kills-subtree "systemd 252: the restart killed sd_app ($A), which was in the unit's subtree" \
    wait_for 20 killed_by_restart
check new-daemon-in-leaf "the new daemon runs in $R/supervisor" wait_for 20 in_cgroup "$(mainpid $D)" $R/supervisor
check regroup "the restarted daemon rebuilt $R/app" wait_for 30 test -d /sys/fs/cgroup$R/app
cgwarden-workload exec-as sd_app 600 &
A=$!
check placed-again "a new sd_app placed into $R/app" wait_for 30 in_cgroup "$A" $R/app
check_exit stop 0 systemctl stop $D
check_eq stopped inactive systemctl is-active $D
check finding-stop-kills-subtree "systemd 252: the stop killed sd_app too" wait_for 20 killed_by_restart
kill "$A" 2>/dev/null; wait "$A" 2>/dev/null
show_journal $D 20
cgwarden reset --policy /etc/cgwarden/policy.yaml >/dev/null 2>&1
