/**
 * macOS: an APFS local snapshot (`tmutil localsnapshot`, which snapshots the APFS volumes Time Machine
 * knows, named com.apple.TimeMachine.<date>.local), mounted read-only with `mount_apfs -s` in a folder of
 * its own; released with `umount` and `tmutil deletelocalsnapshots <date>`. The record keeps the date,
 * which is how the next run deletes a leftover. HFS+ and other filesystems have no snapshot.
 *
 * UNTESTED: written to Apple's documented tools (tmutil(8), mount_apfs(8)) behind the same interface as
 * Linux and Windows, and unit-tested with a fake command runner; it has never run on a Mac. Mounting a
 * snapshot needs root and Full Disk Access for the Tidemark process.
 */
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Exec, MadeSnapshot, SnapshotProvider, SnapshotRecord, SnapshotTarget } from '../types.js';
import { systemExec } from '../exec.js';

export const APFS_MOUNT_BASE = path.join(os.tmpdir(), 'tidemark-snapshots');

/** `mount` output lines: "/dev/disk3s1s1 on / (apfs, sealed, local, read-only, journaled)". */
export function parseMacMounts(stdout: string): { device: string; mountPoint: string; fstype: string }[] {
  const out = [];
  for (const line of stdout.split('\n')) {
    const m = /^(\S+) on (.+) \(([^,)]+)/.exec(line);
    if (m) out.push({ device: m[1], mountPoint: m[2], fstype: m[3] });
  }
  return out;
}

/** The snapshot date tmutil printed ("Created local snapshot with date: 2024-05-01-101112"). */
export function parseSnapshotDate(stdout: string): string | undefined {
  return /(\d{4}-\d{2}-\d{2}-\d{6})/.exec(stdout)?.[1];
}

export class MacSnapshots implements SnapshotProvider {
  readonly platform = 'darwin';
  constructor(
    private readonly exec: Exec = systemExec,
    private readonly mountBase = APFS_MOUNT_BASE,
  ) {}

  async target(p: string): Promise<SnapshotTarget | { none: string }> {
    const real = await fsp.realpath(p);
    const mounts = parseMacMounts((await this.exec('mount', [])).stdout);
    let best: (typeof mounts)[number] | undefined;
    for (const m of mounts)
      if (
        (real === m.mountPoint || real.startsWith(m.mountPoint === '/' ? '/' : m.mountPoint + '/')) &&
        (!best || m.mountPoint.length > best.mountPoint.length)
      )
        best = m;
    if (!best) return { none: `no mounted volume found for ${p}` };
    if (best.fstype !== 'apfs')
      return { none: `${best.mountPoint} is ${best.fstype}, not APFS: no snapshots` };
    // the Data volume of a modern macOS holds the users' files; its firmlinks make /Users look like part of /
    return {
      kind: 'apfs',
      key: `apfs:${best.device}`,
      volume: best.mountPoint,
      describe: `APFS volume ${best.mountPoint} (${best.device})`,
      data: { device: best.device },
    };
  }

  async create(t: SnapshotTarget, record: SnapshotRecord): Promise<MadeSnapshot> {
    const made = await this.exec('tmutil', ['localsnapshot', t.volume]);
    const date = parseSnapshotDate(made.stdout);
    if (!date) throw new Error(`tmutil localsnapshot printed no snapshot date: ${made.stdout.trim()}`);
    const mnt = path.join(this.mountBase, record.name);
    record.data = { ...record.data, date, snapshot: `com.apple.TimeMachine.${date}.local`, mountPoint: mnt };
    await fsp.mkdir(mnt, { recursive: true, mode: 0o700 });
    await this.exec('mount_apfs', ['-o', 'rdonly,nobrowse', '-s', record.data.snapshot, t.volume, mnt]);
    const [live, snap] = await Promise.all([fsp.stat(t.volume), fsp.stat(mnt)]);
    return {
      root: mnt,
      ...(live.dev !== snap.dev ? { dev: { snapshot: snap.dev, original: live.dev } } : {}),
      hidden: [this.mountBase],
    };
  }

  async remove(record: SnapshotRecord): Promise<void> {
    const mnt = record.data.mountPoint;
    if (mnt) {
      await this.exec('umount', [mnt]).catch(() => this.exec('umount', ['-f', mnt]).catch(() => {}));
      await fsp.rmdir(mnt).catch(() => {});
    }
    if (record.data.date)
      await this.exec('tmutil', ['deletelocalsnapshots', record.data.date]).catch((err: Error) => {
        if (!/no such|not found|No local snapshots/i.test(err.message)) throw err;
      });
  }
}
