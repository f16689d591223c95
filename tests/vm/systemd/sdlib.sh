# Helpers of the systemd scenarios, sourced after tests/vm/guest/lib.sh
# (check, check_eq, wait_for, …). Results persist across a reboot.
export T=/var/lib/cgw-test
export POL=/cgw/policies
U=cgwarden.service
prop() { systemctl show -P "$2" "$1"; }           # UNIT PROPERTY
mainpid() { systemctl show -P MainPID "${1:-$U}"; }
is_active() { [ "$(systemctl is-active "$1")" = active ]; }
nrestarts() { systemctl show -P NRestarts "${1:-$U}"; }
# The unit's journal since this scenario began, into the console.
SCEN_SINCE=$(date '+%Y-%m-%d %H:%M:%S')
show_journal() { # UNIT [LINES]
    echo "journal of $1 since $SCEN_SINCE:"
    journalctl -q --no-pager -o short-monotonic -u "$1" --since "$SCEN_SINCE" | tail -n "${2:-60}" | sed 's/^/  jrnl| /'
}
journal_has() { # UNIT EXTENDED-REGEX: a line of UNIT's journal since the scenario began
    journalctl -q --no-pager -o cat -u "$1" --since "$SCEN_SINCE" | grep -qE "$2"
}
use_policy() { # FILE: install it as /etc/cgwarden/policy.yaml (root-owned, 0644)
    install -m 0644 -o root -g root "$1" /etc/cgwarden/policy.yaml
}
pid_cgroup() { sed -n 's/^0:://p' "/proc/$1/cgroup" 2>/dev/null; }
in_cgroup() { [ "$(pid_cgroup "$1")" = "$2" ]; }
mainpid_changed() { _p=$(mainpid "$2"); [ -n "$_p" ] && [ "$_p" != 0 ] && [ "$_p" != "$1" ] && is_active "${2:-$U}"; }
stop_clean() { # stop every cgwarden unit and undo its groups (between scenarios)
    systemctl stop cgwarden.service cgwarden-delegated.service cgwarden-apply.service 2>/dev/null
    systemctl reset-failed cgwarden.service cgwarden-delegated.service cgwarden-apply.service 2>/dev/null
    [ -e /etc/cgwarden/policy.yaml ] && cgwarden reset --policy /etc/cgwarden/policy.yaml >/dev/null 2>&1
    rm -f /run/systemd/system/cgwarden.service.d/*.conf
    systemctl daemon-reload
}
