# limit: 240
# SIGKILL while a rule claims vm.swappiness (77 over the baseline 33): systemd
# restarts the daemon, which reads its journal and leaves no claimed value
# behind once the claim's condition is gone.
n0=$(nrestarts)
cgwarden-workload exec-as holdme 300 &
H=$!
sw_is() { [ "$(cat /proc/sys/vm/swappiness)" = "$1" ]; }
check claimed "holdme running: vm.swappiness claimed 77" wait_for 60 sw_is 77
p0=$(mainpid)
kill -KILL "$p0"
kill "$H"; wait "$H" 2>/dev/null
check restarted "a new MainPID after SIGKILL" wait_for 60 mainpid_changed "$p0"
check_eq nrestarts-plus-1 $((n0 + 1)) nrestarts
check killed-journal "journal: main process killed by SIGKILL" journal_has $U 'status=9/KILL'
check released "no claim left: vm.swappiness back to 33" wait_for 60 sw_is 33
check_file app-high-baseline /sys/fs/cgroup/app/memory.high 67108864
show_journal $U 30
