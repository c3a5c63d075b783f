/**
 * btrfs: a read-only snapshot of the subvolume that holds a source, kept in `.tidemark-snapshots/` at
 * that subvolume's root (a snapshot must be on the same filesystem; the backup leaves that folder out).
 * Inode numbers and times are the same in the snapshot; only the device number differs (each subvolume
 * has its own), which the backup maps back (SourceView.dev). Subvolumes nested inside a source are not
 * in its snapshot (they show as empty folders), so each is snapshotted on its own (`nested`).
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Exec, MadeSnapshot, SnapshotRecord, SnapshotTarget } from '../types.js';
import { parseSnapshotName, ownerAlive } from '../registry.js';

export const BTRFS_SNAPSHOT_DIR = '.tidemark-snapshots';

/** The root of the subvolume a path is in: the highest folder above it with the same device number
 *  (every btrfs subvolume has its own), not above the mount point. */
export async function subvolumeRoot(p: string, mountPoint: string): Promise<string> {
  let cur = p;
  const dev = (await fsp.stat(cur)).dev;
  while (cur !== mountPoint && cur !== path.dirname(cur)) {
    const up = path.dirname(cur);
    if ((await fsp.stat(up)).dev !== dev) break;
    cur = up;
  }
  return cur;
}

export function btrfsTarget(subvolRoot: string, source: string, fsKey: string): SnapshotTarget {
  return {
    kind: 'btrfs',
    key: `btrfs:${fsKey}:${subvolRoot}`,
    volume: subvolRoot,
    describe: `btrfs subvolume ${subvolRoot} (${source})`,
    data: {},
  };
}

export async function createBtrfs(
  exec: Exec,
  t: SnapshotTarget,
  record: SnapshotRecord,
): Promise<MadeSnapshot> {
  const dir = path.join(t.volume, BTRFS_SNAPSHOT_DIR);
  await fsp.mkdir(dir, { recursive: true, mode: 0o700 });
  const snap = path.join(dir, record.name);
  record.data.path = snap;
  await exec('btrfs', ['subvolume', 'snapshot', '-r', t.volume, snap]);
  const [live, made] = await Promise.all([fsp.stat(t.volume), fsp.stat(snap)]);
  return {
    root: snap,
    ...(live.dev !== made.dev ? { dev: { snapshot: made.dev, original: live.dev } } : {}),
    hidden: [dir],
  };
}

export async function removeBtrfs(exec: Exec, record: SnapshotRecord): Promise<void> {
  const snap = record.data.path ?? path.join(record.volume, BTRFS_SNAPSHOT_DIR, record.name);
  try {
    await fsp.lstat(snap);
  } catch {
    return; // never made, or already gone
  }
  await exec('btrfs', ['subvolume', 'delete', snap]);
}

/** Snapshots in a subvolume's `.tidemark-snapshots/` whose owner is gone (their records may be lost). */
export async function btrfsLeftovers(volume: string): Promise<SnapshotRecord[]> {
  const dir = path.join(volume, BTRFS_SNAPSHOT_DIR);
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  const out: SnapshotRecord[] = [];
  for (const name of names) {
    const owner = parseSnapshotName(name);
    if (!owner || ownerAlive(owner.pid, owner.createdAt)) continue;
    out.push({
      name,
      kind: 'btrfs',
      volume,
      pid: owner.pid,
      createdAt: owner.createdAt,
      data: { path: path.join(dir, name) },
    });
  }
  return out;
}

/**
 * Subvolumes strictly inside `dir` (which lies in the subvolume rooted at `subvolRoot`), from
 * `btrfs subvolume show` (the subvolume's path from the top) and `btrfs subvolume list -a` (all of them).
 * Tidemark's own snapshots are left out.
 */
export async function nestedSubvolumes(exec: Exec, subvolRoot: string, dir: string): Promise<string[]> {
  const show = await exec('btrfs', ['subvolume', 'show', subvolRoot]);
  const first = show.stdout.split('\n')[0].trim();
  const rel = first === '/' || first === '<FS_TREE>' ? '' : first.replace(/^\/+|\/+$/g, '');
  // -a: every path from the top of the filesystem (some prefixed <FS_TREE>/); without it, the paths of
  // subvolumes below the given one are relative to it and the others are not
  const list = await exec('btrfs', ['subvolume', 'list', '-a', subvolRoot]);
  const out: string[] = [];
  for (const line of list.stdout.split('\n')) {
    const m = / path (.+)$/.exec(line);
    if (!m) continue;
    const p = m[1].replace(/^<FS_TREE>\//, '');
    if (rel && !p.startsWith(rel + '/')) continue;
    const live = path.join(subvolRoot, rel ? p.slice(rel.length + 1) : p);
    if (live.split(path.sep).includes(BTRFS_SNAPSHOT_DIR)) continue;
    if (live !== dir && live.startsWith(dir === '/' ? '/' : dir + path.sep)) out.push(live);
  }
  return out.sort((a, b) => a.length - b.length);
}
