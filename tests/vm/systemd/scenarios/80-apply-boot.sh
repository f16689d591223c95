# cgwarden-apply.service at boot, part 1: enable it (and not the daemon, which
# conflicts with it), install its policy, and reboot the guest.
stop_clean
systemctl disable cgwarden.service >/dev/null 2>&1
check_exit enable-apply 0 systemctl enable cgwarden-apply.service
use_policy "$POL/apply.yaml"
check_eq daemon-disabled disabled systemctl is-enabled cgwarden.service
echo "$(cat /proc/sys/kernel/random/boot_id)" >"$T/boot_id_before"
touch "$T/reboot"
