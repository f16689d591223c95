#!/usr/bin/env bash
# The arm64 guest's kernel and busybox, downloaded once and cached
# (idempotent; a fast no-op when done):
#   - Debian's linux-image-*-arm64 (the version linux-image-arm64 depends on
#     in bookworm) and busybox-static:arm64, fetched with `apt-get download`
#     inside packaging/arm64/build.sh's bookworm chroot (it has the arm64
#     architecture; the host's dpkg is left alone), unpacked with dpkg-deb -x,
#     modules.dep made by depmod;
#   - host packages: qemu-system-arm (qemu-system-aarch64), kmod, cpio.
# Cache: ${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}/arm64/
#   kver  root/ (boot/vmlinuz-KVER, lib/modules/KVER)  busybox
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
CACHE=${CGWARDEN_VM_CACHE:-$HOME/.cache/cgwarden-vm}
A=$CACHE/arm64
say() { echo "setup-arm64: $*" >&2; }
need=()
for p in qemu-system-arm kmod cpio; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if ((${#need[@]})); then
    say "installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [[ -s $A/kver && -x $A/busybox && -d $A/root/lib/modules/$(cat "$A/kver" 2>/dev/null) ]]; then
    say "kernel $(cat "$A/kver") cached in $A"
    exit 0
fi
chr=$(bash "$repo/packaging/arm64/build.sh" --chroot)
dl=$chr/tmp-arm64-dl
rm -rf "$dl"
mkdir -p "$dl"
inchroot() { unshare --mount --fork chroot "$chr" /usr/bin/env -i PATH=/usr/bin:/bin:/usr/sbin:/sbin "$@"; }
pkg=$(inchroot apt-cache depends linux-image-arm64:arm64 | sed -n 's/.*Depends: \(linux-image-[0-9][^:]*-arm64\)\(:arm64\)\?$/\1/p' | head -n1)
[[ -n $pkg ]] || { say "cannot resolve linux-image-arm64 in the chroot"; exit 1; }
kver=${pkg#linux-image-}
say "fetching $pkg and busybox-static:arm64 (download only)"
inchroot sh -c "cd /tmp-arm64-dl && apt-get download -qq -o APT::Sandbox::User=root $pkg:arm64 busybox-static:arm64"
rm -rf "$A"
mkdir -p "$A/root" "$A/bb"
dpkg-deb -x "$dl"/"$pkg"_*.deb "$A/root"
dpkg-deb -x "$dl"/busybox-static_*.deb "$A/bb"
cp "$A/bb/bin/busybox" "$A/busybox"
rm -rf "$A/bb" "$dl"
depmod -b "$A/root" "$kver"
echo "$kver" >"$A/kver"
say "arm64 kernel $kver ready in $A"
