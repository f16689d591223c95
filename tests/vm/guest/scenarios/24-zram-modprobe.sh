# The policy asks for zram and the module is not loaded: `apply` runs modprobe (the
# kernel's /proc/sys/kernel/modprobe: busybox here, reading the modules.dep that
# run-guest.sh generates) and configures zram0; `reset` resets the device and leaves
# the module loaded. A modprobe that fails is reported with modprobe's own message.
# Runs before 30-apply; leaves zram loaded and idle.
Z=/sys/block/zram0
P=$POL/zram-only.yaml
K=/lib/modules/$(uname -r)
ZKO=$K/kernel/drivers/block/zram/zram.ko
active_alg() { grep -o '\[[^]]*\]' $Z/comp_algorithm; }
swap_prio() { awk '$1 == "/dev/zram0" { print $5 }' /proc/swaps; }
unloaded() { [ ! -e /sys/class/zram-control ] && [ ! -e $Z ]; }

check idle "zram0 idle, not swapping" sh -c "[ \"\$(cat $Z/initstate)\" = 0 ] && ! grep -q '^/dev/zram0 ' /proc/swaps"
rmmod zram
check rmmod "zram unloaded (no zram-control, no zram0)" unloaded

cgw plan "$P"
check_eq plan-exit 0 echo "$RC"
check plan-modprobe-first "plan starts with MODPROBE zram" sh -c 'head -n1 /tmp/cgw.out | grep -qx "MODPROBE zram"'
check plan-fresh "plan configures the device the module will create" grep -qx "WRITE $Z/disksize 134217728 (was -)" /tmp/cgw.out
check plan-loaded-nothing "plan loaded nothing" unloaded

cgw apply "$P"
check_eq apply-exit 0 echo "$RC"
check apply-modprobe "apply reports MODPROBE zram" grep -qx "MODPROBE zram" /tmp/cgw.out
check loaded "zram-control and zram0 exist" test -d /sys/class/zram-control -a -d $Z
check_eq lz4 "[lz4]" active_alg
check_file disksize $Z/disksize 134217728
check_eq swap-priority 42 swap_prio

cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
check module-kept "reset leaves the module loaded" test -d /sys/class/zram-control
check swapoff "zram0 not in /proc/swaps" sh -c '! grep -q "^/dev/zram0 " /proc/swaps'
check_file reset-initstate $Z/initstate 0
check_eq reset-algorithm "$(cat "$T/orig.zram_algorithm")" active_alg

# modprobe fails (the module file is gone): zram is missing, with modprobe's message.
rmmod zram
mv "$ZKO" /tmp/zram.ko.away
# With on_missing: fail, apply stops with exit 3 before writing anything.
sed 's/on_missing: warn/on_missing: fail/' "$P" >/tmp/zram-fail.yaml
cgw apply /tmp/zram-fail.yaml
check_eq fail-exit-3 3 echo "$RC"
check fail-no-journal "on_missing: fail: nothing journalled" test ! -e /run/cgw-zram/originals
# With on_missing: warn, zram is reported missing and the rest goes on (exit 0).
cgw apply "$P"
check_eq warn-exit 0 echo "$RC"
check fail-reported "the failed MODPROBE is reported as missing" grep -q "missing: MODPROBE zram: .*zram is missing" /tmp/cgw.err
check fail-stderr "modprobe's own message is passed on" grep -q "modprobe.*zram.ko" /tmp/cgw.err
check fail-one-line "the zram steps are skipped, not failed one by one" sh -c '[ "$(grep -c "error:\|missing:" /tmp/cgw.err)" = 1 ]'
cgw reset --policy "$P"

# Back to the boot state: module loaded, zram0 idle.
mv /tmp/zram.ko.away "$ZKO"
modprobe zram
check restored "zram0 back" test -e $Z/disksize
check_file restored-idle $Z/initstate 0
