# Every journalled original is a value its file takes back, on the real kernel:
# - zram's algorithm is journalled as the active one (`lzo-rle`), not the list the file
#   reads (`lzo [lzo-rle] lz4 lz4hc zstd`, which the kernel refuses). A run that stopped
#   right after writing the algorithm (its journal cut after that line, the device left
#   as it was then) is undone by `reset`, exit 0, algorithm back.
# - the coupled sysctls: `vm.dirty_bytes` and `vm.dirty_background_bytes` refuse 0, and
#   writing them zeroes their ratios; `reset` puts the ratios back, exit 0.
# - a threaded group stays threaded (the kernel takes only `threaded`): `reset` says so
#   and exits 0.
# Runs before 30-apply with its own state_dir; leaves zram0, the sysctls and groups as
# it found them.
Z=/sys/block/zram0
J=/run/cgw-originals/originals
P=/tmp/originals.yaml
active_alg() { grep -o '\[[^]]*\]' $Z/comp_algorithm; }
S=/proc/sys/vm
orig_sysctls() { echo "$(cat $S/dirty_bytes) $(cat $S/dirty_ratio) $(cat $S/dirty_background_bytes) $(cat $S/dirty_background_ratio) $(cat $S/overcommit_kbytes) $(cat $S/overcommit_ratio)"; }
before=$(orig_sysctls)
echo "dirty/overcommit before: $before"
check_file idle $Z/initstate 0
check kernel-refuses-list "the kernel refuses the algorithm list it prints" sh -c "! cat $Z/comp_algorithm >$Z/comp_algorithm"
check kernel-refuses-zero "the kernel refuses vm.dirty_bytes 0" sh -c "! echo 0 >$S/dirty_bytes"
mkdir -p "$CG/origdom/origthr"

cat >"$P" <<POLICY
version: 1
product: vm-originals
settings: { state_dir: /run/cgw-originals, on_missing: warn }
groups:
  origdom:
    children:
      origthr:
        type: threaded
system:
  sysctl:
    vm.dirty_bytes: 67108864
    vm.dirty_background_bytes: 33554432
    vm.overcommit_kbytes: 1048576
  zram:
    zram0: { algorithm: lz4, size: 64M }
POLICY

cgw apply "$P"
check_eq apply-exit 0 echo "$RC"
check_eq lz4 "[lz4]" active_alg
check_eq ratios-zeroed "67108864 0 33554432 0 1048576 0" orig_sysctls
check_file threaded "$CG/origdom/origthr/cgroup.type" threaded
alg0=$(tr -d '[]' <"$T/orig.zram_algorithm")
check journal-algorithm "the active algorithm $alg0 is journalled, not the list" grep -qx "FILE	$Z/comp_algorithm	$alg0" "$J"
check journal-ratio "vm.dirty_ratio is journalled beside vm.dirty_bytes" grep -q "^FILE	$S/dirty_ratio	" "$J"
sed 's/^/  journal| /' "$J"

cgw reset "$P"
check_eq reset-exit 0 echo "$RC"
check_eq sysctls-restored "$before" orig_sysctls
check_eq algorithm-restored "$(cat "$T/orig.zram_algorithm")" active_alg
check_file reset-idle $Z/initstate 0
check stays-threaded "reset says the threaded group stays threaded" grep -q "origthr/cgroup.type: stays threaded" /tmp/cgw.err
check journal-gone "journal deleted" test ! -e "$J"

# A run that stopped right after it wrote the algorithm: journal cut after that line,
# zram0 uninitialised with lz4 chosen.
cgw apply "$P"
check_eq apply2-exit 0 echo "$RC"
swapoff /dev/zram0 && echo 1 >$Z/reset
check_eq lz4-again "[lz4]" active_alg
awk '{ print } /comp_algorithm/ { exit }' "$J" >"$J.cut" && mv "$J.cut" "$J"
sed 's/^/  cut journal| /' "$J"
cgw reset "$P"
check_eq crash-reset-exit 0 echo "$RC"
check_eq crash-algorithm-restored "$(cat "$T/orig.zram_algorithm")" active_alg
check crash-no-einval "no refused write" sh -c '! grep -q "Invalid argument" /tmp/cgw.err'
check journal-gone-2 "journal deleted" test ! -e "$J"

# Back as found: the sysctls the cut journal no longer named, the group.
set -- $before
echo "$2" >$S/dirty_ratio
echo "$4" >$S/dirty_background_ratio
echo "$6" >$S/overcommit_ratio
[ "$5" = 0 ] || echo "$5" >$S/overcommit_kbytes
check_eq cleanup-sysctls "$before" orig_sysctls
rmdir "$CG/origdom/origthr" "$CG/origdom"
check cleanup-group "origdom removed" test ! -e "$CG/origdom"

# `size: 50%`: half the board's MemTotal in whole MiB, rounded down (as zram-generator).
cat >/tmp/zram-share.yaml <<POLICY
version: 1
product: vm-zram-share
settings: { state_dir: /run/cgw-originals }
system:
  zram:
    zram0: { size: 50% }
POLICY
want=$(awk '$1 == "MemTotal:" { print int(int($2 / 1024) / 2) * 1048576 }' /proc/meminfo)
echo "MemTotal: $(grep MemTotal /proc/meminfo); 50% -> $want"
cgw apply /tmp/zram-share.yaml
check_eq share-apply-exit 0 echo "$RC"
check_file share-disksize $Z/disksize "$want"
cgw reset /tmp/zram-share.yaml
check_eq share-reset-exit 0 echo "$RC"
check_file share-reset-idle $Z/initstate 0
rm -f "$P" /tmp/zram-share.yaml
