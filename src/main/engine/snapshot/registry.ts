/**
 * Records of the snapshots this machine made, one small JSON file each in `<data folder>/snapshots/`,
 * written (and synced) before a snapshot is made and removed after it is gone. A record whose process
 * is no longer running is a leftover of a crash or kill: the next run removes the snapshot, then the
 * record. Names carry the owner's process ID and the time, so a snapshot whose record was lost is
 * still recognised (btrfs folders, LVM tags) and judged the same way.
 */
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import crypto from 'node:crypto';
import type { SnapshotKind, SnapshotRecord } from './types.js';

const NAME = /^tidemark-(\d+)-([0-9a-z]+)-[0-9a-f]{4}$/;

/** A new recognisable snapshot name: tidemark-<pid>-<time, base 36>-<random>. */
export function snapshotName(pid = process.pid, now = Date.now()): string {
  return `tidemark-${pid}-${now.toString(36)}-${crypto.randomBytes(2).toString('hex')}`;
}

/** The owner process and creation time encoded in a name, or undefined when it is not one of ours. */
export function parseSnapshotName(name: string): { pid: number; createdAt: number } | undefined {
  const m = NAME.exec(name);
  return m ? { pid: Number(m[1]), createdAt: parseInt(m[2], 36) } : undefined;
}

/** When a process started (ms since the epoch), where the platform tells (Linux /proc); else undefined. */
function processStart(pid: number): number | undefined {
  if (process.platform !== 'linux') return undefined;
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]); // starttime, in clock ticks after boot
    const uptime = Number(fs.readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
    return Date.now() - uptime * 1000 + (ticks / 100) * 1000;
  } catch {
    return undefined;
  }
}

/** True while the process that made a snapshot at `createdAt` may still be using it. */
export function ownerAlive(pid: number, createdAt: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  // a process ID used again by a process started after the snapshot was made is not its owner
  const start = processStart(pid);
  return start === undefined || start <= createdAt + 5_000;
}

export class SnapshotRegistry {
  constructor(readonly dir: string) {}

  private file(name: string): string {
    return path.join(this.dir, `${name}.json`);
  }

  /** Writes the record durably (before the snapshot is made). */
  async add(record: SnapshotRecord): Promise<void> {
    await fsp.mkdir(this.dir, { recursive: true, mode: 0o700 });
    const tmp = `${this.file(record.name)}.tmp`;
    const fh = await fsp.open(tmp, 'w', 0o600);
    try {
      await fh.writeFile(JSON.stringify(record, null, 1));
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fsp.rename(tmp, this.file(record.name));
  }

  /** Updates the provider data of a record (what `create` learned: a mount point, a shadow copy ID). */
  async update(record: SnapshotRecord): Promise<void> {
    await this.add(record);
  }

  async delete(name: string): Promise<void> {
    await fsp.rm(this.file(name), { force: true });
  }

  async list(): Promise<SnapshotRecord[]> {
    let names: string[];
    try {
      names = await fsp.readdir(this.dir);
    } catch {
      return [];
    }
    const out: SnapshotRecord[] = [];
    for (const n of names.filter((n) => n.endsWith('.json'))) {
      try {
        const r = JSON.parse(await fsp.readFile(path.join(this.dir, n), 'utf8')) as SnapshotRecord;
        if (r && typeof r.name === 'string' && isKind(r.kind)) out.push(r);
      } catch {
        // a record cut short by a crash while it was written: the snapshot was not made yet
        await fsp.rm(path.join(this.dir, n), { force: true }).catch(() => {});
      }
    }
    return out;
  }

  /** Records whose owner is gone: their snapshots are leftovers. */
  async orphans(): Promise<SnapshotRecord[]> {
    return (await this.list()).filter((r) => !ownerAlive(r.pid, r.createdAt));
  }
}

function isKind(k: unknown): k is SnapshotKind {
  return k === 'btrfs' || k === 'lvm' || k === 'lvm-thin' || k === 'vss' || k === 'apfs';
}
