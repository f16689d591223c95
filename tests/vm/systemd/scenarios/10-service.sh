# limit: 400
# cgwarden.service, as packaged, under systemd 252: builds the hierarchy at
# the top of /sys/fs/cgroup (0555: needs CAP_DAC_OVERRIDE), places a
# process, reacts to real memory pressure in `app` through a kernel PSI
# trigger, answers `status` over the socket to a member of socket_group (and
# refuses a non-member), and logs to journald.
use_policy "$POL/main.yaml"
check_exit start 0 systemctl start cgwarden.service
check active "cgwarden.service is active" wait_for 60 is_active cgwarden.service
check_eq type-notify notify prop $U Type
check_eq substate running prop $U SubState
check group-app "/sys/fs/cgroup/app created" wait_for 30 test -d /sys/fs/cgroup/app
check group-batch "/sys/fs/cgroup/batch created" test -d /sys/fs/cgroup/batch
check_file app-memory-high /sys/fs/cgroup/app/memory.high 67108864
check_file batch-cpu-weight /sys/fs/cgroup/batch/cpu.weight 50
check_file swappiness /proc/sys/vm/swappiness 33
check no-eacces "no Permission denied in the journal" sh -c "! journalctl -q -o cat -u $U | grep -q 'Permission denied'"
check daemon-in-unit-cgroup "the daemon runs in system.slice/cgwarden.service" \
    in_cgroup "$(mainpid)" /system.slice/cgwarden.service

# Placement of a process started here (in cgw-test.service's cgroup).
cgwarden-workload exec-as sd_app 300 &
A=$!
check placed "sd_app ($A) placed into /app" wait_for 30 in_cgroup "$A" /app
kill "$A"; wait "$A" 2>/dev/null

# Real pressure: a 150 MiB hog against memory.high 64M (no swap).
sh -c 'echo $$ >/sys/fs/cgroup/app/cgroup.procs && exec cgwarden-workload exec-as memhog alloc 150 120' >/dev/null &
HOG=$!
raised() { [ "$(cat /sys/fs/cgroup/app/memory.high)" -gt 67108864 ]; }
check pressure-raised "the PSI rule raised app/memory.high above 64M" wait_for 90 raised
echo "memory.pressure: $(tr '\n' ' ' </sys/fs/cgroup/app/memory.pressure)"
# Under journald the daemon logs structured records: a write that landed is
# one record, its kind, knob, cause, path and time taken journal fields
# (journalctl -o verbose).
rule_write_in_journal() {
    journalctl -q --no-pager -o json -u $U --since "$SCEN_SINCE" CGWARDEN_EVENT=write |
        grep '"CGWARDEN_KNOB":"app.memory.high"' | grep '"CGWARDEN_CAUSE":"rule app-stall"' |
        grep -q '"ELAPSED_MS":'
}
check rule-in-journal "journal: a write record of app.memory.high with cause rule app-stall" rule_write_in_journal
echo "a write record:"
journalctl -q --no-pager -o verbose -u $U --since "$SCEN_SINCE" CGWARDEN_EVENT=write | head -n 40 | sed 's/^/  jrnl| /'
# Every event is a record with fixed fields, so `journalctl -o
# json` filters by field: the rule firing (MESSAGE_ID of kind `rule`, fixed
# in src/daemon/eventlog.rs and docs/operations.md) and its write.
rule_event_in_journal() {
    journalctl -q --no-pager -o json -u $U --since "$SCEN_SINCE" \
        MESSAGE_ID=1122b142d8ff40ce86670a70fbecdcca CGWARDEN_RULE=app-stall |
        grep '"CGWARDEN_EVENT":"rule"' | grep -q '"CGWARDEN_STATE":"active"'
}
check journal-rule-fields "journal: a MESSAGE_ID/CGWARDEN_RULE record of app-stall going active" rule_event_in_journal
write_event_in_journal() {
    journalctl -q --no-pager -o json -u $U --since "$SCEN_SINCE" \
        MESSAGE_ID=19aa36027d324aaeade6a5ac99084eda CGWARDEN_KNOB=app.memory.high |
        grep -q '"CGWARDEN_CAUSE":"rule app-stall"'
}
check journal-write-fields "journal: a MESSAGE_ID/CGWARDEN_KNOB record of the rule's write" write_event_in_journal
echo "the rule's event record:"
journalctl -q --no-pager -o json -u $U --since "$SCEN_SINCE" CGWARDEN_RULE=app-stall | head -n 2 | sed 's/^/  jrnl| /'
kill "$HOG"; wait "$HOG" 2>/dev/null

# The control socket: root, a member of cgwops, a non-member.
check_exit status-root 0 cgwarden status
check status-op "op (in cgwops) gets the status" sh -c 'runuser -u op -- cgwarden status | grep -q sd-main'
check_exit status-nonmember 4 runuser -u nobody2 -- cgwarden status
check_eq socket-group cgwops stat -c %G /run/cgwarden/io.cgwarden
check_eq socket-mode 660 stat -c %a /run/cgwarden/io.cgwarden

# journald has the daemon's lines, with the unit's fields.
check journal-running "journal: 'cgwarden running'" journal_has $U 'cgwarden running'
check journal-unit-field "journal entries carry _SYSTEMD_UNIT=cgwarden.service" \
    sh -c "journalctl -q -o verbose -u $U | grep -q '_SYSTEMD_UNIT=cgwarden.service'"
check journal-ready "journal: systemd saw it start (Started …)" \
    sh -c "journalctl -q -o cat -u $U | grep -q '^Started cgwarden'"
show_journal $U 30
