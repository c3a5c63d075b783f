#!/bin/sh
# Compiles the eBPF program and embeds it in a libbpf skeleton header: called by binding.gyp (and build.mjs).
# Usage: gen-bpf.sh OUTDIR. Needs clang (BPF target) and bpftool; vmlinux.h comes from the running kernel's
# BTF (CO-RE relocations make the object portable to other kernels with BTF).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$1
mkdir -p "$out"
if [ ! -r /sys/kernel/btf/vmlinux ]; then
  echo "gen-bpf: /sys/kernel/btf/vmlinux missing (kernel without BTF): cannot build the eBPF tracker" >&2
  exit 1
fi
bpftool btf dump file /sys/kernel/btf/vmlinux format c > "$out/vmlinux.h.tmp"
mv "$out/vmlinux.h.tmp" "$out/vmlinux.h"
clang -O2 -g -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -I"$out" -I"$here/src" -c "$here/src/cbt.bpf.c" -o "$out/cbt.bpf.full.o"
# Keep BTF (needed for CO-RE) but drop DWARF, which would bloat the embedded object 20x.
strip=$(command -v llvm-strip || command -v llvm-strip-14 || true)
if [ -n "$strip" ]; then "$strip" -g "$out/cbt.bpf.full.o" -o "$out/cbt.bpf.o"; else cp "$out/cbt.bpf.full.o" "$out/cbt.bpf.o"; fi
bpftool gen skeleton "$out/cbt.bpf.o" name cbt_bpf > "$out/cbt.skel.h.tmp"
mv "$out/cbt.skel.h.tmp" "$out/cbt.skel.h"
