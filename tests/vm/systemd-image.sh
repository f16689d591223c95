#!/usr/bin/env bash
# The systemd-as-PID-1 guest's base image, built once and cached:
#
#   tests/vm/systemd-image.sh            prints the cache directory on stdout
#
# A Debian 12 (bookworm) rootfs from Debian's packages alone: `debootstrap
# --variant=minbase` with systemd as init and Debian's kernel installed in it,
# whose initrd is cut down to what the guest boots from (MODULES=list:
# virtio_pci virtio_blk ext4), packed into an ext4 image by `mkfs.ext4 -d`
# (no loop mount, nothing mounted on the host). The image has a oneshot
# `cgw-test.service` wanted by multi-user.target that runs /cgw/run.sh — which
# tests/vm/run-systemd-guest.sh injects into a copy of the image together with
# the project's .deb, the workload binary and the scenarios — and powers off.
#
# Cache: ${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}/systemd-HASH/
#   base.img   ext4 image of the rootfs (sparse)
#   vmlinuz    the rootfs's kernel;  initrd.img  its small initrd;  kver
# HASH is the sha256 of this script (the package list and every setting are
# in it), so changing either builds a new image; a warm run reuses it as is.
# Needs: debootstrap, e2fsprogs (mkfs.ext4 -d), network access to Debian's
# archive (the mirror of the host's /etc/apt sources).
set -euo pipefail

# Everything the scenarios use in the guest; the .deb's own dependencies
# (libc6, libgcc-s1) are in minbase already. There is no network in the
# guest, so nothing can be installed there later.
PKGS=systemd,systemd-sysv,dbus,udev,kmod,initramfs-tools,procps,iproute2,util-linux,passwd,zstd
SUITE=bookworm
IMG_SIZE=3G

CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
say() { echo "systemd-image: $*" >&2; }
hash=$(sha256sum "$0" | cut -c1-16)
dir=$CACHE/systemd-$hash
if [[ -s $dir/base.img && -s $dir/vmlinuz && -s $dir/initrd.img && -s $dir/kver ]]; then
    say "cached in $dir"
    echo "$dir"
    exit 0
fi
for t in debootstrap mkfs.ext4; do
    command -v "$t" >/dev/null || { say "$t is missing (tests/run-all.sh installs it)"; exit 1; }
done
mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
mirror=${mirror:-http://deb.debian.org/debian}
mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/systemd-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tree=$tmp/tree
t0=$(date +%s)

say "debootstrap $SUITE ($PKGS) from $mirror"
debootstrap --variant=minbase --include="$PKGS" "$SUITE" "$tree" "$mirror" >"$tmp/debootstrap.log" 2>&1 || {
    tail -n 30 "$tmp/debootstrap.log" >&2
    exit 1
}
t1=$(date +%s)

# A small initrd: only what finds and mounts the virtio root disk.
printf 'virtio_pci\nvirtio_blk\next4\n' >>"$tree/etc/initramfs-tools/modules"
cat >"$tree/etc/initramfs-tools/conf.d/cgwarden-guest.conf" <<'EOF'
MODULES=list
COMPRESS=zstd
EOF
# Nothing mounted for the kernel's install scripts: they run without /proc
# here and do not need it (update-initramfs with MODULES=list).
say "installing the kernel into the rootfs"
chroot "$tree" apt-get install -y -qq --no-install-recommends linux-image-amd64 >"$tmp/kernel.log" 2>&1 || {
    tail -n 30 "$tmp/kernel.log" >&2
    exit 1
}
kver=$(basename "$(ls -d "$tree"/lib/modules/*-amd64 | head -n1)")
[[ -s $tree/boot/initrd.img-$kver ]] || { say "no initrd for $kver"; tail -n 30 "$tmp/kernel.log" >&2; exit 1; }
t2=$(date +%s)

# The guest's configuration.
echo cgw-systemd >"$tree/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 cgw-systemd\n' >"$tree/etc/hosts"
echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$tree/etc/fstab"
# Quiet, fast boot: no getty, no periodic jobs, a small persistent journal
# (so a run's journal can also be read from the image afterwards).
ln -sf /dev/null "$tree/etc/systemd/system/serial-getty@ttyS0.service"
ln -sf /dev/null "$tree/etc/systemd/system/getty@tty1.service"
for u in apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer \
    systemd-timesyncd.service; do
    ln -sf /dev/null "$tree/etc/systemd/system/$u"
done
mkdir -p "$tree/var/log/journal" "$tree/etc/systemd/journald.conf.d"
printf '[Journal]\nStorage=persistent\nSystemMaxUse=32M\nForwardToConsole=no\n' \
    >"$tree/etc/systemd/journald.conf.d/cgw.conf"
# The test unit: runs the injected /cgw/run.sh once multi-user is up, its
# output on the serial console (the host parses RESULT/SUITE lines) and in
# the journal; the script powers the guest off at the end.
cat >"$tree/etc/systemd/system/cgw-test.service" <<'EOF'
[Unit]
Description=cgwarden systemd guest scenarios
After=multi-user.target
ConditionPathExists=/cgw/run.sh

[Service]
Type=oneshot
ExecStart=/bin/sh /cgw/run.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity

[Install]
WantedBy=multi-user.target
EOF
ln -sf ../cgw-test.service "$tree/etc/systemd/system/multi-user.target.wants/cgw-test.service"
mkdir -p "$tree/cgw"
# Leave no apt lists or caches in the image (smaller, and nothing to update).
rm -rf "$tree"/var/cache/apt/archives/*.deb "$tree"/var/lib/apt/lists/*_Packages
: >"$tree/etc/machine-id"

cp "$tree/boot/vmlinuz-$kver" "$tmp/vmlinuz"
cp "$tree/boot/initrd.img-$kver" "$tmp/initrd.img"
echo "$kver" >"$tmp/kver"
say "mkfs.ext4 -d ($IMG_SIZE)"
truncate -s "$IMG_SIZE" "$tmp/base.img"
mkfs.ext4 -q -F -L cgwroot -d "$tree" "$tmp/base.img"
t3=$(date +%s)
mkdir -p "$dir.new"
mv "$tmp/base.img" "$tmp/vmlinuz" "$tmp/initrd.img" "$tmp/kver" "$dir.new/"
rm -rf "$dir"
mv "$dir.new" "$dir"
say "built $dir: debootstrap $((t1 - t0))s, kernel+initrd $((t2 - t1))s, mkfs $((t3 - t2))s;" \
    "initrd $(du -h "$dir/initrd.img" | cut -f1), image $(du -h "$dir/base.img" | cut -f1) used"
echo "$dir"
