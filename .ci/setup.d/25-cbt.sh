#!/usr/bin/env bash
# Block-level change tracking (issue 5): the eBPF tracker is compiled with clang against the running
# kernel's BTF and loaded with libbpf; its tests use loop-mounted ext4 images (losetup, mkfs.ext4, addpart,
# fallocate) and python3 for mmap writes. Idempotent.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
need=()
for p in clang llvm libbpf-dev bpftool libelf-dev zlib1g-dev util-linux e2fsprogs python3 mount; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# loop devices for the tests (built in on most kernels; a module on some)
[ -e /dev/loop-control ] || modprobe loop 2>/dev/null || true
if [ ! -r /sys/kernel/btf/vmlinux ]; then
  echo "25-cbt: kernel has no BTF; block-tracking tests will skip (eBPF tracker cannot be built here)"
fi
# bpffs, for the pinned tracker (systemd mounts it at boot; a bare container may not)
if ! mountpoint -q /sys/fs/bpf 2>/dev/null; then mount -t bpf bpf /sys/fs/bpf 2>/dev/null || true; fi
