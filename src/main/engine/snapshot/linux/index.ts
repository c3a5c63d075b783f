/**
 * Linux snapshots: btrfs subvolume snapshots and LVM (thin and classic) snapshots, chosen by the
 * filesystem a path is on (/proc/self/mountinfo). Anything else (ext4 or XFS on a plain partition, tmpfs,
 * network and FUSE filesystems) has no snapshot here: `target` says so, and the source is read live.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Exec, SnapshotProvider, SnapshotRecord, SnapshotTarget } from '../types.js';
import { systemExec } from '../exec.js';
import { mountOf, mountsInside, readMounts } from './mounts.js';
import {
  btrfsLeftovers,
  btrfsTarget,
  createBtrfs,
  nestedSubvolumes,
  removeBtrfs,
  subvolumeRoot,
} from './btrfs.js';
import {
  createLvm,
  lvmDevice,
  LVM_MOUNT_BASE,
  lvmLeftovers,
  lvmProblem,
  lvmTarget,
  removeLvm,
} from './lvm.js';

const BLOCK_FS = new Set(['ext2', 'ext3', 'ext4', 'xfs', 'f2fs', 'jfs', 'reiserfs']);

export class LinuxSnapshots implements SnapshotProvider {
  readonly platform = 'linux';
  constructor(private readonly exec: Exec = systemExec) {}

  async target(p: string): Promise<SnapshotTarget | { none: string }> {
    const real = await fsp.realpath(p);
    const m = mountOf(await readMounts(), real);
    if (!m) return { none: `no mounted filesystem found for ${p}` };
    if (m.options.includes('ro'))
      return { none: `${m.mountPoint} is mounted read-only (nothing changes there)` };
    if (process.getuid?.() !== 0)
      return {
        none: `filesystem snapshots need root (Tidemark runs as ${process.env.USER ?? `uid ${process.getuid?.()}`})`,
      };
    if (m.fstype === 'btrfs') {
      return btrfsTarget(await subvolumeRoot(real, m.mountPoint), m.source, m.source);
    }
    if (BLOCK_FS.has(m.fstype)) {
      const lv = await lvmDevice(m.dev);
      if (!lv)
        return {
          none: `${m.fstype} on ${m.source} (${m.mountPoint}) is not on LVM or btrfs, so it has no snapshots`,
        };
      return lvmTarget(this.exec, lv, m.mountPoint, m.fstype);
    }
    return { none: `${m.fstype} filesystems (${m.mountPoint}) have no snapshots Tidemark can take` };
  }

  create(t: SnapshotTarget, record: SnapshotRecord) {
    return t.kind === 'btrfs' ? createBtrfs(this.exec, t, record) : createLvm(this.exec, t, record);
  }

  remove(record: SnapshotRecord): Promise<void> {
    return record.kind === 'btrfs' ? removeBtrfs(this.exec, record) : removeLvm(this.exec, record);
  }

  problem(record: SnapshotRecord): Promise<string | undefined> {
    return lvmProblem(this.exec, record);
  }

  async leftovers(targets: SnapshotTarget[]): Promise<SnapshotRecord[]> {
    const out: SnapshotRecord[] = [];
    for (const t of targets) if (t.kind === 'btrfs') out.push(...(await btrfsLeftovers(t.volume)));
    if (targets.some((t) => t.kind !== 'btrfs')) out.push(...(await lvmLeftovers(this.exec)));
    return out;
  }

  async nestedMounts(p: string): Promise<string[]> {
    const real = await fsp.realpath(p);
    const mounts = await readMounts();
    const found = mountsInside(mounts, real, [LVM_MOUNT_BASE]);
    const m = mountOf(mounts, real);
    if (m?.fstype === 'btrfs' && process.getuid?.() === 0) {
      const root = await subvolumeRoot(real, m.mountPoint);
      found.push(...(await nestedSubvolumes(this.exec, root, real).catch(() => [])));
    }
    // a path given through a symlink: report it under the path the job names
    return [...new Set(found)].map((f) => (real === p ? f : path.join(p, path.relative(real, f))));
  }
}
