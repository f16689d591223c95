# zram0 initialised by someone else (algorithm, disksize, mem_limit; not swapping):
# `apply` resets and reconfigures it without reading the write-only `reset`/`mem_limit`
# (EACCES on 6.1), and `reset` puts the other party's configuration back.
# Runs before 30-apply with its own state_dir; leaves zram0 as 00-sanity found it.
Z=/sys/block/zram0
P=$POL/zram-only.yaml
# mem_limit is write-only; mm_stat's 4th field shows it.
zinfo() { echo "zram0: comp_algorithm='$(cat $Z/comp_algorithm)' disksize=$(cat $Z/disksize) initstate=$(cat $Z/initstate) mm_stat='$(cat $Z/mm_stat)'"; }
mem_limit() { awk '{ print $4 }' $Z/mm_stat; }
active_alg() { grep -o '\[[^]]*\]' $Z/comp_algorithm; }
swap_prio() { awk '$1 == "/dev/zram0" { print $5 }' /proc/swaps; }

check_file idle $Z/initstate 0
check no-swap "zram0 not swapping" sh -c '! grep -q "^/dev/zram0 " /proc/swaps'
# Someone else's configuration.
echo lzo >$Z/comp_algorithm && echo 64M >$Z/disksize && echo 16M >$Z/mem_limit
zinfo
check_file other-initstate $Z/initstate 1
check_eq other-mem-limit 16777216 mem_limit
check write-only "reset and mem_limit cannot be read, even by root" sh -c "! cat $Z/reset && ! cat $Z/mem_limit"
check busy "comp_algorithm is refused once initialised (EBUSY)" sh -c "! echo lz4 >$Z/comp_algorithm"

cgw plan "$P"
check_eq plan-exit 0 echo "$RC"
check_eq plan-lines "WRITE $Z/reset 1
WRITE $Z/comp_algorithm lz4 (was lzo)
WRITE $Z/disksize 134217728 (was 67108864)
WRITE $Z/mem_limit 33554432 (was 16777216)
MKSWAP /dev/zram0 134217728
SWAPON /dev/zram0 priority 42
6 changes" cat /tmp/cgw.out
check_file plan-wrote-nothing $Z/disksize 67108864

cgw apply "$P"
check_eq apply-exit 0 echo "$RC"
check apply-no-error "no error on stderr (no EACCES, no EBUSY)" sh -c '! grep -q . /tmp/cgw.err'
zinfo
check_eq lz4 "[lz4]" active_alg
check_file disksize $Z/disksize 134217728
check_eq mem-limit 33554432 mem_limit
check_eq swap-priority 42 swap_prio
# The algorithm as the file takes it back: the active one, not the list it reads.
check journal-originals "the other party's disksize, algorithm and mem_limit are journalled" sh -c \
    'grep -q "^FILE	/sys/block/zram0/disksize	67108864" /run/cgw-zram/originals &&
     grep -qx "FILE	/sys/block/zram0/comp_algorithm	lzo" /run/cgw-zram/originals &&
     grep -q "^FILE	/sys/block/zram0/mem_limit	16777216" /run/cgw-zram/originals'
check journal-no-trigger "the write-only reset is not journalled" sh -c '! grep -q "zram0/reset" /run/cgw-zram/originals'

cgw plan "$P"
check_eq converged "0 changes" cat /tmp/cgw.out

cgw reset --policy "$P"
check_eq reset-exit 0 echo "$RC"
zinfo
check swapoff "zram0 not in /proc/swaps" sh -c '! grep -q "^/dev/zram0 " /proc/swaps'
check_file restored-initstate $Z/initstate 1
check_file restored-disksize $Z/disksize 67108864
check_eq restored-algorithm "[lzo]" active_alg
check_eq restored-mem-limit 16777216 mem_limit
check journal-gone "journal deleted" test ! -e /run/cgw-zram/originals

# Back to the boot state for the later scenarios (00-sanity's algorithm, idle).
echo 1 >$Z/reset
tr -d '[]' <"$T/orig.zram_algorithm" >$Z/comp_algorithm
zinfo
check_file cleanup-idle $Z/initstate 0
check_eq cleanup-algorithm "$(cat "$T/orig.zram_algorithm")" active_alg
