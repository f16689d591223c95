#!/usr/bin/env bash
# Boot the systemd-as-PID-1 guest under QEMU (TCG) and run the
# systemd scenarios in it:
#
#   tests/vm/run-systemd-guest.sh DEB WORKLOAD_BIN [SERIAL_LOG]
#
# The base image comes from tests/vm/systemd-image.sh (cached by its inputs);
# a sparse copy of it gets, with `debugfs -w` (no mount), /cgw/: the
# project's .deb (the guest installs it with dpkg, maintainer scripts and
# all), cgwarden-workload, the harness (tests/vm/systemd/run.sh), the guest
# helpers (tests/vm/guest/lib.sh) and the scenarios and policies of
# tests/vm/systemd/. The guest's cgw-test.service runs them once systemd has
# reached multi-user.target; a scenario may reboot the guest (QEMU exits and
# is started again on the same disk: the harness goes on after the reboot)
# and the last boot powers off. The serial console is left in SERIAL_LOG (default
# $CACHE/last-systemd-serial.log); tests/systemd_guest.rs judges it.
#
# Environment:
#   CGWARDEN_VM_CACHE    cache directory (default ~/.cache/cgwarden-vm)
#   CGWARDEN_VM_TIMEOUT  hard limit for QEMU in seconds (default 1800)
#   CGWARDEN_VM_ONLY     space-separated scenario names to run (default: all)
#   CGWARDEN_VM_SMP / CGWARDEN_VM_MEM   guest CPUs (default 2) / memory (2G)
#   CGWARDEN_SD_UNITS    a directory of unit files injected over the
#                        package's (/cgw/units-override/, installed by the
#                        guest after the .deb): how a test proves it can fail
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
(($# >= 2)) || { echo "usage: $0 DEB WORKLOAD_BIN [SERIAL_LOG]" >&2; exit 2; }
deb=$(readlink -f "$1")
wl=$(readlink -f "$2")
log=${3:-$CACHE/last-systemd-serial.log}
[[ -f $deb ]] || { echo "run-systemd-guest: no such .deb: $deb" >&2; exit 2; }
[[ -x $wl ]] || { echo "run-systemd-guest: not executable: $wl" >&2; exit 2; }
for t in qemu-system-x86_64 debugfs; do
    command -v "$t" >/dev/null || { echo "run-systemd-guest: $t is missing (tests/run-all.sh installs it)" >&2; exit 2; }
done
now() { date +%s.%N; }
t0=$(now)
img_dir=$(bash "$here/systemd-image.sh")
t1=$(now)

stage=$(mktemp -d "${TMPDIR:-/tmp}/cgwarden-sd.XXXXXX")
trap 'rm -rf "$stage"' EXIT
cp --sparse=always "$img_dir/base.img" "$stage/rootfs.img"

# What goes into /cgw: staged on the host, then written file by file.
g=$stage/cgw
mkdir -p "$g/scenarios" "$g/policies" "$g/units-override"
cp "$here/systemd/run.sh" "$g/run.sh"
cp "$here/guest/lib.sh" "$g/lib.sh"
cp "$here/systemd/sdlib.sh" "$g/sdlib.sh"
cp "$here"/systemd/scenarios/*.sh "$g/scenarios/"
cp "$here"/systemd/policies/*.yaml "$g/policies/"
cp "$deb" "$g/cgwarden.deb"
cp "$wl" "$g/cgwarden-workload"
[[ -n ${CGWARDEN_SD_UNITS:-} ]] && cp "$CGWARDEN_SD_UNITS"/* "$g/units-override/"
echo "${CGWARDEN_VM_ONLY:-}" >"$g/only"
{
    echo "cd /cgw"
    (cd "$g" && find . -mindepth 1 -type d | sed 's|^\./||' | sort) | while read -r d; do echo "mkdir /cgw/$d"; done
    (cd "$g" && find . -type f | sed 's|^\./||' | sort) | while read -r f; do
        echo "write $g/$f /cgw/$f"
    done
} >"$stage/debugfs.cmds"
debugfs -w -f "$stage/debugfs.cmds" "$stage/rootfs.img" >"$stage/debugfs.out" 2>&1
if grep -qiE 'error|not found|cannot|no such' "$stage/debugfs.out"; then
    cat "$stage/debugfs.out" >&2
    exit 1
fi
t2=$(now)

mkdir -p "$(dirname "$log")"
: >"$log"
rc=0
# A scenario may reboot the guest on purpose (units at boot): QEMU runs with
# -no-reboot, so a reboot ends it, and the guest is booted again from the
# same disk while the log says it asked for it (a fresh QEMU each time; at
# most 3 boots). Each boot's console is appended to the log.
deadline=$(($(date +%s) + ${CGWARDEN_VM_TIMEOUT:-1800}))
for boot in 1 2 3; do
    left=$((deadline - $(date +%s)))
    ((left > 10)) || { rc=124; break; }
    rc=0
    timeout -k 5 "$left" qemu-system-x86_64 \
        -accel tcg,thread=multi -cpu max -machine q35 \
        -m "${CGWARDEN_VM_MEM:-2G}" -smp "${CGWARDEN_VM_SMP:-2}" \
        -nodefaults -no-user-config -display none -vga none -monitor none -nic none -no-reboot \
        -chardev "file,id=ser0,path=$stage/serial-$boot.log" -serial chardev:ser0 \
        -kernel "$img_dir/vmlinuz" -initrd "$img_dir/initrd.img" \
        -drive "file=$stage/rootfs.img,if=virtio,format=raw" \
        -append "console=ttyS0 root=/dev/vda rw panic=-1 psi=1 systemd.unified_cgroup_hierarchy=1 systemd.show_status=0 loglevel=3 quiet" ||
        rc=$?
    cat "$stage/serial-$boot.log" >>"$log"
    ((rc == 0)) || break
    grep -q 'GUEST REBOOT' "$stage/serial-$boot.log" || break
    echo "run-systemd-guest: boot $boot asked for a reboot; booting again" >&2
done
t3=$(now)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v rc="$rc" -v logf="$log" \
    'BEGIN { printf "run-systemd-guest: image %.1fs, copy+inject %.1fs, qemu %.1fs, rc=%d, log %s\n", b - a, c - b, d - c, rc, logf }' >&2
exit "$rc"
