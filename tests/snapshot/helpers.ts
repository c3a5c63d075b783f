// Loop-device filesystems for the snapshot tests: a btrfs filesystem with a subvolume, and LVM volume
// groups (thin and classic) with ext4 on them. Each has a unique name (this process's ID and a random
// part), and cleanup() undoes everything even after a failure half-way. Loop devices are shared with other
// test runs on the machine, so attaching one is retried.
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const env = { ...process.env, LC_ALL: 'C', LVM_SUPPRESS_FD_WARNINGS: '1' };

export function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

function have(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

function common(): string | undefined {
  if (process.platform !== 'linux') return 'filesystem snapshots are tested on Linux';
  if (process.getuid?.() !== 0) return 'needs root (loop devices, mount, snapshots)';
  if (!fs.existsSync('/dev/loop-control')) return 'no loop devices here (/dev/loop-control missing)';
  for (const cmd of ['losetup', 'mount', 'umount']) if (!have(cmd)) return `${cmd} is not installed`;
  return undefined;
}

/** Why btrfs snapshots cannot be tested here, or undefined. */
export function btrfsSkipReason(): string | undefined {
  const c = common();
  if (c) return c;
  for (const cmd of ['mkfs.btrfs', 'btrfs'])
    if (!have(cmd)) return `${cmd} is not installed (apt-get install btrfs-progs)`;
  if (!fs.readFileSync('/proc/filesystems', 'utf8').includes('btrfs')) return 'the kernel has no btrfs';
  return undefined;
}

/** Why LVM snapshots cannot be tested here, or undefined. */
export function lvmSkipReason(): string | undefined {
  const c = common();
  if (c) return c;
  for (const cmd of ['pvcreate', 'vgcreate', 'lvcreate', 'lvremove', 'mkfs.ext4'])
    if (!have(cmd)) return `${cmd} is not installed (apt-get install lvm2 e2fsprogs)`;
  // the device node can exist (dmsetup makes it) where the kernel has no driver: ask the kernel
  if (!/\bdevice-mapper\b/.test(fs.readFileSync('/proc/misc', 'utf8')))
    return 'the kernel has no device-mapper (not in /proc/misc), so LVM cannot run on this machine';
  return undefined;
}

export const uniqueName = (prefix: string) =>
  `${prefix}${process.pid}x${crypto.randomBytes(3).toString('hex')}`;

/** Attaches an image to a free loop device, trying again when another run took the one it picked. */
function attachLoop(image: string): string {
  let last: unknown;
  for (let attempt = 0; attempt < 8; attempt++) {
    try {
      return sh('losetup', ['-f', '--show', image]);
    } catch (err) {
      last = err;
      execFileSync('sleep', [String(0.2 * (attempt + 1))]);
    }
  }
  throw new Error(`no loop device could be attached: ${(last as Error).message}`);
}

export interface TestFs {
  /** Where the data lives (a btrfs subvolume, or the root of the ext4 on the logical volume). */
  data: string;
  mnt: string;
  cleanup(): void;
}

/** Runs every step even when one fails; throws the first failure at the end. */
function undo(steps: (() => void)[]): void {
  let first: unknown;
  for (const s of steps) {
    try {
      s();
    } catch (err) {
      first ??= err;
    }
  }
  if (first) throw first;
}

export function makeBtrfs(sizeMiB = 400): TestFs {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), uniqueName('tm-snap-btrfs-')));
  const image = path.join(dir, 'disk.img');
  const mnt = path.join(dir, 'mnt');
  const steps: (() => void)[] = [() => fs.rmSync(dir, { recursive: true, force: true })];
  const cleanup = () => undo([...steps].reverse());
  try {
    fs.mkdirSync(mnt);
    fs.closeSync(fs.openSync(image, 'w'));
    fs.truncateSync(image, sizeMiB * 1024 * 1024);
    const loop = attachLoop(image);
    steps.push(() => sh('losetup', ['-d', loop]));
    sh('mkfs.btrfs', ['-q', '-f', loop]);
    sh('mount', ['-t', 'btrfs', loop, mnt]);
    steps.push(() => {
      // snapshots a test left behind go with the filesystem
      sh('umount', [mnt]);
    });
    sh('btrfs', ['subvolume', 'create', path.join(mnt, 'data')]);
    return { data: path.join(mnt, 'data'), mnt, cleanup };
  } catch (err) {
    cleanup();
    throw err;
  }
}

export interface TestVolumeGroup {
  vg: string;
  /**
   * Makes a logical volume (thin: in the group's thin pool, made on first use) with a filesystem on it,
   * mounted at a folder of its own; returns the mount point.
   */
  volume(name: string, o: { sizeMiB: number; thin?: boolean; fstype?: 'ext4' | 'xfs' }): string;
  /** Takes all the group's free space but about `leaveMiB` (a volume named `filler`); undo: `unfill`. */
  fill(leaveMiB: number): void;
  unfill(): void;
  /** The logical volumes carrying a tag, in this group only. */
  tagged(tag: string): string[];
  cleanup(): void;
}

/**
 * A volume group on a loop device (an image of `sizeMiB`, sparse; its thin pool, if one is made, takes
 * `poolMiB`) with a unique name; cleanup() unmounts
 * what is mounted from it (a failed test may leave a snapshot mounted) and removes it with every volume.
 */
export function makeVolumeGroup(sizeMiB: number, poolMiB = Math.floor(sizeMiB / 2)): TestVolumeGroup {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), uniqueName('tm-snap-lvm-')));
  const image = path.join(dir, 'disk.img');
  const vg = uniqueName('tmsnapvg');
  const steps: (() => void)[] = [() => fs.rmSync(dir, { recursive: true, force: true })];
  const cleanup = () => undo([...steps].reverse());
  const lvs = (args: string[]) =>
    sh('lvs', ['--noheadings', ...args])
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
  let pool = false;
  try {
    fs.closeSync(fs.openSync(image, 'w'));
    fs.truncateSync(image, sizeMiB * 1024 * 1024);
    const loop = attachLoop(image);
    steps.push(() => sh('losetup', ['-d', loop]));
    sh('pvcreate', ['-q', '-ff', '-y', loop]);
    steps.push(() => sh('pvremove', ['-q', '-ff', '-y', loop]));
    sh('vgcreate', ['-q', vg, loop]);
    steps.push(() => sh('vgremove', ['-q', '-f', vg])); // removes every volume left in it
    steps.push(() => {
      // mounted from this group: its volumes, and snapshots a failed test left mounted
      for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n').reverse())
        if (line.includes(`/${vg}-`) || line.includes(`/${vg}/`)) sh('umount', ['-l', line.split(' ')[4]]);
    });
  } catch (err) {
    cleanup();
    throw err;
  }
  return {
    vg,
    volume(name, o) {
      if (o.thin && !pool) {
        sh('lvcreate', ['-q', '-L', `${poolMiB}m`, '--thinpool', 'pool', vg]);
        pool = true;
      }
      if (o.thin) sh('lvcreate', ['-q', '-V', `${o.sizeMiB}m`, '--thin', '-n', name, `${vg}/pool`]);
      else sh('lvcreate', ['-q', '-L', `${o.sizeMiB}m`, '-n', name, vg]);
      const dev = sh('lvs', ['--noheadings', '-o', 'lv_dm_path', `${vg}/${name}`]);
      if (o.fstype === 'xfs') sh('mkfs.xfs', ['-q', '-f', dev]);
      else sh('mkfs.ext4', ['-q', '-F', dev]);
      const mnt = path.join(dir, name);
      fs.mkdirSync(mnt);
      sh('mount', [dev, mnt]);
      return mnt;
    },
    fill(leaveMiB) {
      const free = Number(sh('vgs', ['--noheadings', '--units', 'm', '--nosuffix', '-o', 'vg_free', vg]));
      sh('lvcreate', ['-q', '-L', `${Math.floor(free - leaveMiB)}m`, '-n', 'filler', vg]);
    },
    unfill() {
      sh('lvremove', ['-q', '-f', `${vg}/filler`]);
    },
    tagged(tag) {
      return lvs(['-o', 'vg_name,lv_name', `@${tag}`])
        .map((l) => l.split(/\s+/))
        .filter(([g]) => g === vg)
        .map(([, lv]) => lv);
    },
    cleanup,
  };
}

/** A volume group on a loop device with one logical volume (thin or classic) holding ext4, mounted. */
export function makeLvm(kind: 'thin' | 'classic', sizeMiB = 600): TestFs & { vg: string } {
  const group = makeVolumeGroup(sizeMiB);
  try {
    const mnt = group.volume('data', { sizeMiB: Math.floor(sizeMiB / 3), thin: kind === 'thin' });
    return { data: mnt, mnt, vg: group.vg, cleanup: group.cleanup };
  } catch (err) {
    group.cleanup();
    throw err;
  }
}
