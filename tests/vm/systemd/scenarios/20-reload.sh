# `systemctl reload` applies the policy's difference; the daemon keeps its
# MainPID (SIGHUP, no restart).
p0=$(mainpid)
n0=$(nrestarts)
check running-before "cgwarden.service active with a MainPID ($p0)" sh -c "[ '$p0' -gt 0 ]"
use_policy "$POL/main-reload.yaml"
check_exit reload 0 systemctl reload cgwarden.service
weight_is() { [ "$(cat /sys/fs/cgroup/batch/cpu.weight)" = "$1" ]; }
check diff-applied "batch/cpu.weight 50 -> 80" wait_for 30 weight_is 80
check_eq same-mainpid "$p0" mainpid
check_eq no-restart "$n0" nrestarts
check still-active "still active" is_active $U
check reload-journal "journal: SIGHUP reload" journal_has $U 'SIGHUP: reloading'
check status-new-product "status shows the reloaded policy" sh -c 'cgwarden status | grep -q sd-main-reloaded'
show_journal $U 20
