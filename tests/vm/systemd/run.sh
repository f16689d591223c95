#!/bin/sh
# The systemd guest's harness (run by the image's cgw-test.service once
# multi-user.target is reached; see tests/vm/systemd-image.sh). Runs every
# scenario in /cgw/scenarios in name order, each in its own shell under a
# time limit, results on the console (RESULT PASS|FAIL scenario/check …) and
# in /var/lib/cgw-test/results, which survives a reboot: a scenario that
# touches /var/lib/cgw-test/reboot makes the harness reboot the guest after
# it, and the next boot goes on with the next scenario. The last boot prints
# `SUITE DONE passed=N failed=M` and powers off.
export PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin
export HOME=/root
S=/var/lib/cgw-test
mkdir -p "$S" /run/cgw-test
boot=$(($(cat "$S/boots" 2>/dev/null || echo 0) + 1))
echo "$boot" >"$S/boots"
[ "$boot" = 1 ] && : >"$S/results" && : >"$S/done"
echo "SYSTEMD GUEST UP boot=$boot uptime=$(cut -d' ' -f1 /proc/uptime)s kernel=$(uname -r) cpus=$(nproc)" \
    "$(systemctl --version | head -n1)"
only=$(cat /cgw/only 2>/dev/null)
if [ "$boot" -gt 3 ]; then
    echo "RESULT FAIL harness/boots more than 3 boots: a reboot loop" | tee -a "$S/results"
else
    for s in /cgw/scenarios/*.sh; do
        name=$(basename "$s" .sh)
        name=${name#[0-9][0-9]-}
        grep -qx "$name" "$S/done" && continue
        if [ -n "$only" ]; then
            case " $only " in *" $name "*) ;; *) continue ;; esac
        fi
        slimit=$(sed -n '1s/^# limit: \([0-9]*\)$/\1/p' "$s")
        echo "SCENARIO BEGIN $name uptime=$(cut -d' ' -f1 /proc/uptime)"
        SCENARIO=$name BOOT=$boot timeout -s KILL "${slimit:-300}" /bin/sh -c '. /cgw/lib.sh; . /cgw/sdlib.sh; . "$1"' scenario "$s" </dev/null
        rc=$?
        if [ "$rc" != 0 ]; then
            echo "RESULT FAIL $name/exit scenario script exited with status $rc (137 = killed by the time limit)" |
                tee -a "$S/results"
        fi
        echo "SCENARIO END $name rc=$rc uptime=$(cut -d' ' -f1 /proc/uptime)"
        echo "$name" >>"$S/done"
        if [ -e "$S/reboot" ]; then
            rm -f "$S/reboot"
            echo "GUEST REBOOT after $name"
            sync
            systemctl reboot
            exit 0
        fi
    done
fi
passed=$(grep -c '^RESULT PASS ' "$S/results")
failed=$(grep -c '^RESULT FAIL ' "$S/results")
echo "SUITE DONE passed=$passed failed=$failed boots=$boot uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
systemctl --no-block poweroff
