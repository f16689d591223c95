# cgwarden-apply.service at boot, part 2 (after the reboot): it ran during
# boot, before multi-user.target, and left the hierarchy and baseline.
A=cgwarden-apply.service
check rebooted "this is a new boot" sh -c "[ \"\$(cat /proc/sys/kernel/random/boot_id)\" != \"$(cat "$T/boot_id_before")\" ]"
check_eq apply-active active systemctl is-active $A
check_eq apply-exited exited prop $A SubState
check_eq apply-status 0 prop $A ExecMainStatus
check_eq daemon-not-started inactive systemctl is-active cgwarden.service
check group-boot "/sys/fs/cgroup/boot created at boot" test -d /sys/fs/cgroup/boot
check_file boot-memory-high /sys/fs/cgroup/boot/memory.high 134217728
check_file boot-pids-max /sys/fs/cgroup/boot/pids.max 100
check_file swappiness /proc/sys/vm/swappiness 44
before_mu() {
    a=$(systemctl show -P ExecMainExitTimestampMonotonic $A)
    m=$(systemctl show -P ActiveEnterTimestampMonotonic multi-user.target)
    [ "$a" -gt 0 ] && [ "$a" -le "$m" ]
}
check before-multi-user "apply finished before multi-user.target was reached" before_mu
check journal-boot "journal of this boot has apply's lines" sh -c "journalctl -q -b -o cat -u $A | grep -qi 'mkdir\|write\|apply'"
journalctl -q -b --no-pager -o cat -u $A | tail -n 15 | sed 's/^/  jrnl| /'
systemctl disable cgwarden-apply.service >/dev/null 2>&1
