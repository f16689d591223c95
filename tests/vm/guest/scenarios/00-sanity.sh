# The kernel environment the other scenarios rely on, and the harness's own tools.
# Also records the pre-apply originals that 20-missing-fail and 70-reset compare against.

check cgroup2-mounted "cgroup2 is mounted at $CG" grep -q " $CG cgroup2 " /proc/mounts
check no-cgroup-v1 "no cgroup v1 hierarchy is mounted" sh -c "! grep -q ' cgroup ' /proc/mounts"
for c in cpuset cpu io memory pids; do
    check "controller-$c" "root offers $c" grep -qw "$c" "$CG/cgroup.controllers"
done
for r in cpu memory io; do
    check "psi-$r" "/proc/pressure/$r readable" grep -q '^some ' "/proc/pressure/$r"
done
check_eq cpus 4 nproc
check zram-loaded "zram module loaded and zram0 present" test -e /sys/block/zram0/disksize
check zram-lz4 "lz4 offered by zram0" grep -qw 'lz4' /sys/block/zram0/comp_algorithm
check_file zram-idle /sys/block/zram0/initstate 0
check no-swap "no swap active" sh -c '[ "$(wc -l </proc/swaps)" = 1 ]'
check binaries "cgwarden starts (loader and libraries present)" sh -c 'cgwarden --help >/dev/null 2>&1; rc=$?; [ $rc != 126 ] && [ $rc != 127 ]'
check_exit workload-usage 2 cgwarden-workload bogus

# The workload helper renames itself, and cgroup moves are visible in /proc/PID/cgroup.
cgwarden-workload exec-as probe_proc 60 &
p=$!
check workload-comm "exec-as sets comm" wait_for 10 sh -c "[ \"\$(cat /proc/$p/comm)\" = probe_proc ]"
check_eq workload-in-root / cgroup_of "$p"
mkdir "$CG/cgw-selftest"
echo "$p" >"$CG/cgw-selftest/cgroup.procs"
check_eq selftest-move /cgw-selftest cgroup_of "$p"
echo "$p" >"$CG/cgroup.procs"
kill "$p"
wait "$p" 2>/dev/null
rmdir "$CG/cgw-selftest"
check selftest-clean "self-test group removed" test ! -e "$CG/cgw-selftest"

# Originals, for later comparison.
: >"$T/orig.sysctl"
for kv in $SYSCTLS; do
    k=${kv%%=*}
    echo "$k=$(cat "$(sysctl_path "$k")")" >>"$T/orig.sysctl"
done
# The fake tree's values (src/knobs/sysctl.rs `fake`) are what this kernel prints at boot.
for kv in vm.page-cluster=3 net.core.rmem_max=212992 net.core.wmem_max=212992 \
    net.core.rmem_default=212992 net.core.wmem_default=212992 net.core.netdev_max_backlog=1000 \
    net.core.busy_read=0 net.core.busy_poll=0 net.ipv4.ipfrag_high_thresh=4194304 \
    net.ipv4.ipfrag_time=30; do
    check_eq "fake-default-${kv%%=*}" "${kv#*=}" cat "$(sysctl_path "${kv%%=*}")"
done
# The table's bounds are this kernel's: one past each is refused, the bound taken
# (vm.page-cluster's 31 is from 6.2 on; this 6.1 kernel takes any int).
for kv in net.core.rmem_max=2304/2303 net.core.wmem_max=4608/4607 net.core.busy_poll=0/-1 \
    net.core.rmem_default=2304/2303 net.core.wmem_default=4608/4607; do
    k=${kv%%=*} b=${kv#*=}
    was=$(cat "$(sysctl_path "$k")")
    check "bound-$k" "$k takes ${b%/*}, refuses ${b#*/}" \
        sh -c "! (echo '${b#*/}' >'$(sysctl_path "$k")') 2>/dev/null && echo '${b%/*}' >'$(sysctl_path "$k")'"
    echo "$was" >"$(sysctl_path "$k")"
done
cat "$CG/cgroup.subtree_control" >"$T/orig.subtree_control"
grep -o '\[[^]]*\]' /sys/block/zram0/comp_algorithm >"$T/orig.zram_algorithm"
cat /sys/kernel/rcu_expedited >"$T/orig.rcu_expedited" 2>/dev/null
echo "originals:"; sed 's/^/  /' "$T/orig.sysctl"; echo "  subtree_control='$(cat "$T/orig.subtree_control")'"
echo "  zram0 comp_algorithm=$(cat "$T/orig.zram_algorithm")"
check originals-differ "every policy sysctl differs from its boot value (so writes are visible)" \
    sh -c 'for kv in $SYSCTLS; do grep -qx "$kv" '"$T/orig.sysctl"' && exit 1; done; exit 0'
