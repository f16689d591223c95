# limit: 300
# Restart= and RestartPreventExitStatus=1 3 with the real daemon's exits:
# 75 (state_dir on the read-only file system) restarts; 1 (a damaged
# originals journal) and 3 (on_missing: fail, no cpufreq here) do not.
stop_clean
# NRestarts is flushed by a manual start, or else kept: 0 or unchanged.
not_restarted() { _n=$(nrestarts); [ "$(systemctl is-active $U)" = failed ] && { [ "$_n" = 0 ] || [ "$_n" = "$1" ]; }; }

# 75
use_policy "$POL/tempfail.yaml"
systemctl start --no-block cgwarden.service
two_restarts() { [ "$(nrestarts)" -ge 2 ]; }
check exit-75-restarts "exit 75: systemd restarts it (NRestarts >= 2)" wait_for 90 two_restarts
check exit-75-status "journal: main process exited with status 75" journal_has $U "code=exited, status=75"
show_journal $U 12
systemctl stop cgwarden.service; systemctl reset-failed cgwarden.service

# 1: a damaged journal in state_dir.
use_policy "$POL/main.yaml"
mkdir -p /run/cgwarden
echo "this is not a cgwarden journal" >/run/cgwarden/originals
n1=$(nrestarts)
systemctl start --no-block cgwarden.service
failed() { [ "$(systemctl is-active $U)" = failed ]; }
check exit-1-fails "exit 1: the unit ends failed" wait_for 60 failed
sleep 5
check_eq exit-1-status 1 prop $U ExecMainStatus
check exit-1-not-restarted "failed, not restarted (NRestarts $(nrestarts), was $n1)" not_restarted "$n1"
check exit-1-journal "journal names the journal file" journal_has $U 'originals'
show_journal $U 8
rm -f /run/cgwarden/originals
systemctl reset-failed cgwarden.service

# 3: the board lacks a knob the policy requires.
use_policy "$POL/missing.yaml"
n3=$(nrestarts)
systemctl start --no-block cgwarden.service
check exit-3-fails "exit 3: the unit ends failed" wait_for 60 failed
sleep 5
check_eq exit-3-status 3 prop $U ExecMainStatus
check exit-3-not-restarted "failed, not restarted (NRestarts $(nrestarts), was $n3)" not_restarted "$n3"
check exit-3-journal "journal names cpufreq" journal_has $U 'cpufreq'
show_journal $U 8
systemctl reset-failed cgwarden.service
rm -f /etc/cgwarden/policy.yaml
