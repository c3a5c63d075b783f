#!/bin/bash
# PID 1 of the Tidemark test guest (scripts/kvm-guest.sh), started by scripts/kvm-guest/initramfs-init on
# the root it made: puts /tmp on the scratch disk, starts udev unless told not to (LVM waits for it to
# make the nodes of the devices it makes; the devices there at boot need no replay), runs
# /mnt/tidemark-out/command.sh in the project folder, writes its exit code to /mnt/tidemark-out/status,
# and powers the guest off (QEMU then exits).
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin HOME=/root LANG=C.UTF-8 TERM=dumb
out=/mnt/tidemark-out
project="$(cd "$(dirname "$0")/../.." && pwd)"

finish() {
	echo "$1" >"$out/status.tmp" && mv "$out/status.tmp" "$out/status"
	sync
	umount /tmp 2>/dev/null
	echo o >/proc/sysrq-trigger # power off now: QEMU runs with -no-reboot and exits
	while :; do :; done # (not sleep: the shares are going away, and PID 1 must not exit)
}
fail() {
	echo "tidemark guest: $*" >&2
	finish 125
}

mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mkdir -p /dev/pts /dev/shm /run/lock
mount -t devpts -o gid=5,mode=620 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
hostname tidemark-kvm
ip link set lo up 2>/dev/null

[ -b /dev/vda ] || fail "no scratch disk (/dev/vda)"
# a project folder under /tmp (a clone made there) would be hidden by the scratch disk: held aside, and
# shown again at its path on the new /tmp
hold=
case "$project/" in
/tmp/*)
	hold=/mnt/tidemark-project
	mkdir -p "$hold" && mount --bind "$project" "$hold" || fail "could not hold the project folder $project"
	;;
esac
mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1 /dev/vda || fail "mkfs.ext4 on the scratch disk failed"
mount -o noatime /dev/vda /tmp || fail "could not mount the scratch disk on /tmp"
chmod 1777 /tmp
if [ -n "$hold" ]; then
	mkdir -p "$project" && mount --bind "$hold" "$project" || fail "could not show the project folder $project on /tmp"
fi

if ! grep -qw tidemark_udev=0 /proc/cmdline; then
	/usr/lib/systemd/systemd-udevd --daemon || fail "systemd-udevd did not start"
fi

[ -r "$out/command.sh" ] || fail "no $out/command.sh"
cd "$project" || fail "no project folder $project"
# through a pipe: the console is a terminal, and programs that see one redraw their progress in place
bash "$out/command.sh" </dev/null 2>&1 | cat
finish "${PIPESTATUS[0]}"
