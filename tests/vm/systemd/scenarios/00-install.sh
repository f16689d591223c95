# The project's .deb installed with dpkg under a running systemd: the
# maintainer scripts enable cgwarden.service (only), the units load, and
# with no /etc/cgwarden/policy.yaml nothing starts (ConditionPathExists=).
install -m 0755 /cgw/cgwarden-workload /usr/local/bin/cgwarden-workload
check_exit dpkg-install 0 dpkg -i /cgw/cgwarden.deb
check_eq pkg-installed "install ok installed" dpkg-query -W -f='${Status}' cgwarden
check_eq enabled-main enabled systemctl is-enabled cgwarden.service
check_eq not-enabled-apply disabled systemctl is-enabled cgwarden-apply.service
check_eq not-enabled-delegated disabled systemctl is-enabled cgwarden-delegated.service
check_eq inert-without-policy inactive systemctl is-active cgwarden.service
check no-group-yet "no /sys/fs/cgroup/app before a policy" test ! -e /sys/fs/cgroup/app
check cgroot-0555 "/sys/fs/cgroup is mode 555 under systemd" sh -c '[ "$(stat -c %a /sys/fs/cgroup)" = 555 ]'
# A test may replace the package's units (to prove a scenario fails on a
# broken unit): CGWARDEN_SD_UNITS on the host.
if ls /cgw/units-override/*.service >/dev/null 2>&1; then
    for u in /cgw/units-override/*.service; do
        echo "units-override: $(basename "$u") replaces the package's"
        install -m 0644 "$u" /etc/systemd/system/
    done
    systemctl daemon-reload
fi
mkdir -p /etc/cgwarden
# socket_group of the main policy, and a member of it who is not root.
groupadd -f cgwops
id op >/dev/null 2>&1 || useradd -M -N -g users -G cgwops -s /bin/sh op
id nobody2 >/dev/null 2>&1 || useradd -M -N -g users -s /bin/sh nobody2
check op-in-cgwops "op is a member of cgwops" sh -c 'id -nG op | grep -qw cgwops'
