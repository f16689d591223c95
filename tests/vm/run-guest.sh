#!/usr/bin/env bash
# Boot one throw-away guest kernel under QEMU (TCG) and run the guest scenarios in it.
#
#   tests/vm/run-guest.sh CGWARDEN_BIN WORKLOAD_BIN [SERIAL_LOG]
#
# Builds an uncompressed newc initramfs in a temp dir from busybox, the two binaries
# (with the shared libraries `ldd` names), the zram/compressor and ext4 modules, and
# tests/vm/guest/ (init, lib.sh, scenarios/, policies/), boots it, and leaves the
# serial console in SERIAL_LOG (default: $CACHE/last-serial.log). Exit status is
# QEMU's (124 = hard timeout). It does not judge the results: tests/vm.rs does, and
# `grep '^RESULT\|^SUITE' LOG` does for a human.
#
# Environment:
#   CGWARDEN_VM_CACHE    cache made by tests/vm/setup.sh (default ~/.cache/cgwarden-vm)
#   CGWARDEN_VM_TIMEOUT  hard limit for QEMU in seconds (default 1200)
#   CGWARDEN_VM_FOOTPRINT_SECS  how long 85-daemon-footprint measures (default 20)
#   CGWARDEN_VM_DEBUG_BUILD=1    the binaries are a debug build (footprint limit doubled)
#   CGWARDEN_VM_SMP      guest CPUs (default 4; the policies assume 4)
#   CGWARDEN_VM_MEM      guest memory (default 2G)
#   CGWARDEN_VM_ONLY     space-separated scenario names to run (default: all)
#   CGWARDEN_VM_KEEP=1   keep the initramfs staging dir and print its path
#   CGWARDEN_VM_SUITE    guest directory to run: scenarios (default) or bench
#   CGWARDEN_VM_EXTRA    a directory copied over the image root last (benchmarks' extras)
#   CGWARDEN_VM_APPEND   more kernel command-line words (e.g. tsc=reliable: a vDSO clock)
#   CGWARDEN_VM_TOOLS    space-separated host programs copied in with their libraries
#                        (/usr/local/bin; e.g. perf for a benchmark's profile)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
(($# >= 2)) || { echo "usage: $0 CGWARDEN_BIN WORKLOAD_BIN [SERIAL_LOG]" >&2; exit 2; }
cgw=$(readlink -f "$1")
wl=$(readlink -f "$2")
log=${3:-$CACHE/last-serial.log}
for f in "$cgw" "$wl"; do [[ -x $f ]] || { echo "run-guest: not executable: $f" >&2; exit 2; }; done
[[ -s $CACHE/kver ]] || { echo "run-guest: no kernel cache in $CACHE; run: bash tests/vm/setup.sh" >&2; exit 2; }
command -v qemu-system-x86_64 >/dev/null || { echo "run-guest: qemu missing; run: bash tests/vm/setup.sh" >&2; exit 2; }
kver=$(cat "$CACHE/kver")
kroot=$CACHE/root
now() { date +%s.%N; }
t0=$(now)

stage=$(mktemp -d "${TMPDIR:-/tmp}/cgwarden-vm.XXXXXX")
[[ ${CGWARDEN_VM_KEEP:-} == 1 ]] && echo "run-guest: staging in $stage" >&2 || trap 'rm -rf "$stage"' EXIT
r=$stage/root
mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,usr/local/bin,etc,proc,sys,dev,run,tmp,lib/modules,cgw}

# busybox: /bin/sh must exist before /init runs; /init installs the other applets.
cp /bin/busybox "$r/bin/busybox"
ln -s busybox "$r/bin/sh"

# Binaries and the libraries (and dynamic loader) they need, at the same paths.
copy_with_libs() {
    cp "$1" "$r/usr/local/bin/$2"
    local lib
    for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*' || true); do
        [[ -e $r$lib ]] && continue
        mkdir -p "$r$(dirname "$lib")"
        cp -L "$lib" "$r$lib"
    done
}
copy_with_libs "$cgw" cgwarden
# cgwardend, the packages' daemon binary: cargo builds it beside cgwarden.
[[ -x $(dirname "$cgw")/cgwardend ]] && copy_with_libs "$(dirname "$cgw")/cgwardend" cgwardend
copy_with_libs "$wl" cgwarden-workload
for tool in ${CGWARDEN_VM_TOOLS:-}; do
    path=$(command -v "$tool") || { echo "run-guest: CGWARDEN_VM_TOOLS: $tool is not on this host" >&2; exit 2; }
    copy_with_libs "$path" "$tool"
done

# Kernel modules, in dependency order (the guest insmods the list top to bottom), at
# their usual place /lib/modules/KVER/kernel/... with a modules.dep made by depmod, so
# that a real `modprobe zram` works in the guest too (busybox modprobe reads
# modules.dep; cgwarden runs the kernel's modprobe when zram is not loaded).
: >"$r/lib/modules/load-order"
# virtio_pci + virtio_rng: the virtio-rng-pci device and its real IRQs
# (96-irqs); ext4 (with jbd2, mbcache, crc16, crc32c) serves the ext2 file
# system on a zram device that 85-daemon-resident runs the daemon from; built-in
# drivers print no insmod line.
for m in zram lz4 lz4hc zstd virtio_pci virtio_rng ext4; do
    modprobe -d "$kroot" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" { print $2 }'
done | awk '!seen[$0]++' | while read -r ko; do
    rel=${ko#"$kroot/lib/modules/"}
    mkdir -p "$r/lib/modules/$(dirname "$rel")"
    cp "$ko" "$r/lib/modules/$rel"
    echo "$rel" >>"$r/lib/modules/load-order"
    echo "${rel#"$kver/"}" >>"$r/lib/modules/$kver/modules.order"
done
cp "$kroot/lib/modules/$kver/modules.builtin" "$kroot/lib/modules/$kver/modules.builtin.modinfo" \
    "$r/lib/modules/$kver/"
depmod -b "$r" "$kver"

# Guest side of the suite.
cp -r "$here/guest/." "$r/cgw/"
mv "$r/cgw/init" "$r/init"
chmod +x "$r/init"
printf 'root:x:0:0:root:/root:/bin/sh\nvision:x:1000:1000:vision:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/sh\n' >"$r/etc/passwd"
printf 'root:x:0:\nvision:x:1000:\nnogroup:x:65534:\n' >"$r/etc/group"
echo "${CGWARDEN_VM_ONLY:-}" >"$r/cgw/only"
echo "${CGWARDEN_VM_SUITE:-scenarios}" >"$r/cgw/suite"
[[ -n ${CGWARDEN_VM_EXTRA:-} ]] && cp -a "$CGWARDEN_VM_EXTRA/." "$r/"
[[ -n ${CGWARDEN_VM_FOOTPRINT_SECS:-} ]] && echo "$CGWARDEN_VM_FOOTPRINT_SECS" >"$r/cgw/footprint_secs"
[[ -n ${CGWARDEN_VM_DEBUG_BUILD:-} ]] && : >"$r/cgw/debug_build"

(cd "$r" && find . -print0 | cpio --null -o -H newc --quiet) >"$stage/initramfs.cpio"
t1=$(now)

# Boot. The uncompressed vmlinux boots through its PVH note (faster than the bzImage).
kernel=$CACHE/vmlinux
[[ -s $kernel ]] || kernel=$kroot/boot/vmlinuz-$kver
mkdir -p "$(dirname "$log")"
: >"$log"
rc=0
timeout -k 5 "${CGWARDEN_VM_TIMEOUT:-1200}" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max -machine q35 \
    -m "${CGWARDEN_VM_MEM:-2G}" -smp "${CGWARDEN_VM_SMP:-4}" \
    -nodefaults -no-user-config -display none -vga none -no-reboot -monitor none \
    -device virtio-rng-pci \
    -serial "file:$log" \
    -kernel "$kernel" -initrd "$stage/initramfs.cpio" \
    -append "console=ttyS0 loglevel=1 panic=-1 psi=1 cgroup_no_v1=all threadirqs rdinit=/init${CGWARDEN_VM_APPEND:+ $CGWARDEN_VM_APPEND}" ||
    rc=$?
t2=$(now)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v sz="$(du -h "$stage/initramfs.cpio" | cut -f1)" \
    -v rc="$rc" -v logf="$log" 'BEGIN { printf "run-guest: initramfs %.1fs (%s), qemu %.1fs, rc=%d, log %s\n", b - a, sz, c - b, rc, logf }' >&2
exit "$rc"
