#!/usr/bin/env bash
# Filesystem snapshots (issue 29): the tests in tests/snapshot/ and tests/tracking/property-snapshot.test.ts
# make btrfs and LVM (thin and classic) filesystems on loop devices: btrfs-progs, lvm2 (+ the thin pool
# checker), e2fsprogs, xfsprogs (an LVM test snapshots XFS) and util-linux. Idempotent. They run as root;
# without loop devices, or (LVM) without device-mapper in the kernel, they skip with the reason (the LVM
# ones then run in a guest: 36-kvm-guest.sh).
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for p in btrfs-progs lvm2 thin-provisioning-tools e2fsprogs xfsprogs util-linux mount; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
[ -e /dev/loop-control ] || modprobe loop 2>/dev/null || true
if ! grep -qw device-mapper /proc/misc 2>/dev/null; then
  modprobe dm_mod 2>/dev/null || true
fi
if grep -qw device-mapper /proc/misc 2>/dev/null; then
  echo "35-snapshot: btrfs and LVM snapshot tests can run"
else
  echo "35-snapshot: the kernel has no device-mapper: lvm.test.ts skips here and runs in the QEMU guest (36-kvm-guest.sh)"
fi
