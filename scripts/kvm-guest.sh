#!/usr/bin/env bash
# Runs a command as root inside a throwaway QEMU guest booted from Debian's kernel, for tests that need
# kernel features the machine itself lacks (the project's build machines are Firecracker VMs without
# device-mapper, so LVM cannot run on them; Debian's kernel has it).
#
#   scripts/kvm-guest.sh [options] -- COMMAND [ARG…]   # runs COMMAND in the project folder, in the guest
#   scripts/kvm-guest.sh --check                       # exit 0 when a guest can boot here, printing the
#                                                      # accelerator ("kvm", or "tcg: why not kvm")
#
# Options: --cpus N (2), --mem SIZE (2G), --disk SIZE (scratch disk for /tmp, sparse; 8G),
#          --timeout SECONDS (1800; the guest is killed after that), --out DIR (a host folder the guest
#          sees read-write at /mnt/tidemark-out, also as $TIDEMARK_KVM_OUT; default: a temporary one),
#          --accel auto|kvm|tcg (auto; or $TIDEMARK_KVM_ACCEL), --no-udev (no udev daemon in the guest:
#          device-mapper's nodes are then made by LVM itself, DM_DISABLE_UDEV=1, as in a container; LVM
#          commands take a third of the time on an emulated CPU).
#
# The accelerator: KVM where /dev/kvm is hardware virtualisation (kvm_intel, kvm_amd). Elsewhere QEMU's
# emulator (TCG), some 10-20 times slower: on these build machines /dev/kvm is PVM (kvm_pvm, nested
# virtualisation without VMX/SVM), which runs only PVM-enabled guest kernels; Debian's kernel there is
# run one instruction at a time by KVM's emulator and stops on instructions it lacks (cmpxchg16b, xrstor).
#
# The guest: Debian's kernel (linux-image-amd64; booted from its uncompressed vmlinux where it can be
# unpacked, which saves decompressing it on an emulated CPU), an initramfs packed per run from
# scripts/kvm-guest/initramfs-init, klibc's tools and the kernel modules it names; the host's /usr, /etc
# and this project folder shared read-only over virtio-9p (the guest's writes stay in its memory), a
# sparse scratch disk on /tmp, no network; scripts/kvm-guest/init.sh is PID 1. COMMAND's output comes
# back on the serial console (this script's standard output), its exit code is this script's; the guest
# has $TIDEMARK_KVM_GUEST=kvm|tcg. 124: the timeout was reached; 125: the guest could not be set up (the
# console output says why). Packages: .ci/setup.d/36-kvm-guest.sh.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd -P)"
cpus=2 mem=2G disk=8G timeout=1800 out="" accel="${TIDEMARK_KVM_ACCEL:-auto}" udev=1
check=0
while [ $# -gt 0 ]; do
  case "$1" in
    --check) check=1; shift ;;
    --cpus) cpus="$2"; shift 2 ;;
    --mem) mem="$2"; shift 2 ;;
    --disk) disk="$2"; shift 2 ;;
    --timeout) timeout="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --accel) accel="$2"; shift 2 ;;
    --no-udev) udev=0; shift ;;
    --) shift; break ;;
    *) echo "kvm-guest.sh: unknown option $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done

# The newest installed Debian kernel whose modules are installed too.
kernel_version() {
  local k v best=""
  for k in /boot/vmlinuz-*; do
    [ -e "$k" ] || continue
    v="${k#/boot/vmlinuz-}"
    [ -d "/usr/lib/modules/$v/kernel/drivers/md" ] || continue
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then best="$v"; fi
  done
  echo "$best"
}

# Why no guest can boot here (empty: one can).
why_not() {
  [ "$(uname -m)" = x86_64 ] || { echo "the guest is run on x86_64 hosts only"; return; }
  command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"; return; }
  [ -n "$(kernel_version)" ] || { echo "no Debian kernel with its modules in /boot (apt-get install linux-image-amd64)"; return; }
  [ -x /usr/lib/klibc/bin/run-init ] || { echo "klibc-utils is not installed (apt-get install klibc-utils)"; return; }
  command -v cpio >/dev/null || { echo "cpio is not installed (apt-get install cpio)"; return; }
  command -v modprobe >/dev/null || { echo "modprobe is not installed (apt-get install kmod)"; return; }
  [ -x /usr/lib/systemd/systemd-udevd ] || { echo "systemd-udevd is not installed (apt-get install udev)"; return; }
  [ -L /bin ] && [ -L /lib ] || { echo "the host has no merged /usr (the guest's root is made from /usr)"; return; }
}

# Why KVM cannot run the guest here (empty: it can).
why_not_kvm() {
  [ -e /dev/kvm ] || { echo "no /dev/kvm"; return; }
  [ -r /dev/kvm ] && [ -w /dev/kvm ] || { echo "/dev/kvm is not readable and writable by $(id -un)"; return; }
  if [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; then return; fi
  if [ -d /sys/module/kvm_pvm ]; then
    echo "/dev/kvm is PVM (kvm_pvm), which cannot run Debian's kernel"
    return
  fi
  echo "/dev/kvm has no hardware virtualisation (neither kvm_intel nor kvm_amd is loaded)"
}

reason="$(why_not)"
if [ "$accel" = auto ]; then
  kvm_reason="$(why_not_kvm)"
  if [ -z "$kvm_reason" ]; then accel=kvm; else accel=tcg; fi
fi
case "$accel" in
  kvm) accel_args=(-accel kvm -cpu host) ;;
  tcg) accel_args=(-accel tcg,thread=multi -cpu max) ;;
  *) echo "kvm-guest.sh: --accel auto, kvm or tcg" >&2; exit 2 ;;
esac
if [ "$check" = 1 ]; then
  [ -n "$reason" ] && { echo "$reason"; exit 1; }
  echo "$accel${kvm_reason:+: $kvm_reason}"
  exit 0
fi
[ $# -gt 0 ] || { echo "kvm-guest.sh: no command given (usage in the header of $0)" >&2; exit 2; }
[ -z "$reason" ] || { echo "kvm-guest.sh: cannot run a guest here: $reason" >&2; exit 125; }
[ -z "${kvm_reason:-}" ] || echo "kvm-guest.sh: emulating the guest's CPU (TCG): $kvm_reason" >&2

work="$(mktemp -d /tmp/tidemark-kvm.XXXXXX)"
trap 'rm -rf "$work"' EXIT
if [ -z "$out" ]; then out="$work/out"; fi
mkdir -p "$out"
out="$(cd "$out" && pwd -P)"
rm -f "$out/status"
{
  echo '# written by scripts/kvm-guest.sh; run by scripts/kvm-guest/init.sh in the guest'
  echo "export TIDEMARK_KVM_GUEST=$accel TIDEMARK_KVM_OUT=/mnt/tidemark-out"
  [ "$udev" = 1 ] || echo "export DM_DISABLE_UDEV=1"
  printf 'exec'
  printf ' %q' "$@"
  echo
} >"$out/command.sh"
truncate -s "$disk" "$work/scratch.img"

# The kernel: the vmlinux inside the compressed image where it can be found (QEMU boots it through its
# PVH entry point), else the compressed image.
kver="$(kernel_version)"
kernel="/boot/vmlinuz-$kver"
unpack() { # magic (grep -P), decompressor
  local at
  at="$(LC_ALL=C grep -obUaP -m1 "$1" "$kernel" | head -1 | cut -d: -f1)"
  [ -n "$at" ] && command -v "${2%% *}" >/dev/null &&
    tail -c +$((at + 1)) "$kernel" | $2 >"$work/vmlinux" 2>/dev/null
}
if { unpack '\xfd7zXZ\x00' 'xz -dcq --single-stream' || unpack '\x28\xb5\x2f\xfd' 'zstd -dcq' ||
  unpack '\x1f\x8b\x08' 'gzip -dcq'; } && [ "$(head -c 4 "$work/vmlinux" | od -An -c | tr -d ' ')" = 177ELF ]; then
  kernel="$work/vmlinux"
fi

# The initramfs: scripts/kvm-guest/initramfs-init as /init, klibc's shell and tools, and the modules it
# names with what they need (modprobe --show-depends lists them in load order).
boot="$root/scripts/kvm-guest/initramfs-init"
ir="$work/initramfs"
mkdir -p "$ir/bin" "$ir/lib" "$ir/modules" "$ir/proc" "$ir/sys" "$ir/dev" "$ir/root"
cp -p "$boot" "$ir/init"
cp /usr/lib/klibc-*.so "$ir/lib/"
for b in sh cat mkdir ln mount insmod run-init; do cp "/usr/lib/klibc/bin/$b" "$ir/bin/"; done
for m in $(sed -n 's/^MODULES="\(.*\)"$/\1/p' "$boot"); do
  modprobe -S "$kver" --show-depends "$m" || { echo "kvm-guest.sh: no module $m for $kver" >&2; exit 125; }
done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >"$work/modules"
while read -r ko; do
  cp "$ko" "$ir/modules/"
  basename "$ko" >>"$ir/modules/order"
done <"$work/modules"
(cd "$ir" && find . | cpio -o -H newc -R 0:0 --quiet) >"$work/initrd.cpio"

share() { # host folder, tag, extra options
  echo "-fsdev local,id=$2,path=$1,security_model=passthrough,multidevs=remap$3 -device virtio-9p-pci,fsdev=$2,mount_tag=$2"
}
set +e
# shellcheck disable=SC2046 # the share options are split on purpose
timeout --kill-after=10 "$timeout" qemu-system-x86_64 \
  "${accel_args[@]}" -smp "$cpus" -m "$mem" \
  -machine q35 -nodefaults -no-user-config -no-reboot -display none -monitor none \
  -chardev stdio,id=console,signal=on -serial chardev:console \
  -kernel "$kernel" -initrd "$work/initrd.cpio" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init tidemark_project=$root tidemark_udev=$udev" \
  $(share /usr usr ,readonly=on) $(share /etc etc ,readonly=on) $(share "$root" project ,readonly=on) \
  $(share "$out" out "") \
  -drive "file=$work/scratch.img,if=virtio,format=raw,cache=unsafe" </dev/null
qemu=$?
set -e
if [ "$qemu" = 124 ] || [ "$qemu" = 137 ]; then
  echo "kvm-guest.sh: the guest did not finish in $timeout s" >&2
  exit 124
fi
if [ ! -s "$out/status" ]; then
  echo "kvm-guest.sh: the guest stopped before the command finished (qemu exit code $qemu)" >&2
  exit 125
fi
exit "$(cat "$out/status")"
