#!/usr/bin/env bash
# The test guest (scripts/kvm-guest.sh; tests/snapshot/lvm-kvm.test.ts runs the LVM tests in it, since
# these machines' kernel has no device-mapper): QEMU, Debian's kernel (booted with an initramfs the
# script packs itself from klibc-utils, cpio and kmod, so Debian's initramfs is not made: INITRD=No) and
# udev for the guest. Idempotent. Where /dev/kvm cannot run Debian's kernel the guest's CPU is emulated.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for p in qemu-system-x86 linux-image-amd64 klibc-utils cpio kmod udev xz-utils; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  INITRD=No apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
echo "36-kvm-guest: $(bash "$(dirname "$0")/../../scripts/kvm-guest.sh" --check 2>&1 || true)"
