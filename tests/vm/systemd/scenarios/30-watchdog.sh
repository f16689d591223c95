# limit: 300
# The watchdog: a stopped daemon (SIGSTOP) stops pinging; after WatchdogSec
# (30 s) systemd kills it and restarts it, and the restart finds the
# originals journal the first run wrote (RuntimeDirectoryPreserve=yes).
p0=$(mainpid)
n0=$(nrestarts)
# The first run's journal, which the restart must find and keep (it may
# append to it, never start a new one).
l0=$(wc -l </run/cgwarden/originals 2>/dev/null)
j0=$(head -n "$l0" /run/cgwarden/originals 2>/dev/null | md5sum)
check journal-before "originals journal exists ($(wc -l </run/cgwarden/originals 2>/dev/null) lines)" test -s /run/cgwarden/originals
kill -STOP "$p0"
check restarted "a new MainPID after the watchdog fired" wait_for 150 mainpid_changed "$p0"
check_eq nrestarts-plus-1 $((n0 + 1)) nrestarts
check watchdog-journal "journal: systemd's watchdog timeout" journal_has $U '[Ww]atchdog timeout'
check_eq journal-kept "$j0" sh -c "head -n $l0 /run/cgwarden/originals | md5sum"
check reborn-groups "the restart keeps /app with its baseline" sh -c '[ "$(cat /sys/fs/cgroup/app/memory.high)" = 67108864 ]'
no_refusal() { ! journal_has $U 'damaged|not a cgwarden originals journal'; }
check no-journal-error "the restart did not refuse its journal" no_refusal
show_journal $U 30
