/**
 * `repair` on each kind of damage `check` reports — a flipped byte in a pack, an index file, a snapshot
 * file or a tree; a truncated or a missing pack; lost index files — ending every time with
 * `check --read-data` clean and every file restorable that the damage did not take (byte for byte, in
 * every snapshot), what was taken named in the report. Also: lost blobs come back from source files
 * still on disk (content-defined chunks and a block file's blocks), a dry run writes nothing, a healthy
 * repository is left as it is, repair waits for nobody's lock, and a crash at each of its removal steps
 * leaves a repository that a second repair finishes without duplicating snapshots.
 */
import { describe, it, expect, beforeAll } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { FaultyBackend } from '../../src/main/engine/backend/faulty/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { check } from '../../src/main/engine/check/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { contentIds } from '../../src/main/engine/repo/tree.js';
import { repair, type RepairReport } from '../../src/main/engine/repair/index.js';
import { RepoLockedError } from '../../src/main/engine/errors.js';
import type { EntryInfo } from '../helpers/fixtures.js';
import { tempDir, writeTree, randomBytes, describeTree, listRepoFiles } from '../helpers/fixtures.js';

const KiB = 1024;
const PW = 'pw';

let work: string;
let src: string;
let base: string;
/** The source as each snapshot saw it (relative path → entry), oldest first. */
const expected: Map<string, EntryInfo>[] = [];

async function copyRepo(name: string): Promise<string> {
  const dir = path.join(work, name);
  await fs.cp(base, dir, { recursive: true });
  return dir;
}

const open = (dir: string) => Repository.open(new LocalBackend(dir), PW);

async function flipByte(file: string, offset: number): Promise<void> {
  await fs.chmod(file, 0o644);
  const fh = await fs.open(file, 'r+');
  const b = Buffer.alloc(1);
  await fh.read(b, 0, 1, offset);
  b[0] ^= 0x5a;
  await fh.write(b, 0, 1, offset);
  await fh.close();
}

/** Where a file's n-th chunk is stored, in the given snapshot (default the newest). */
async function chunkOf(dir: string, rel: string, n = 0, snap = -1) {
  const repo = await open(dir);
  try {
    await repo.loadIndex();
    const snaps = await repo.listSnapshots();
    const { node } = await lookup(repo, snaps.at(snap)!, path.posix.join(src, rel));
    const id = contentIds(node!)[n];
    const loc = repo.index.get(id)!;
    return { id, loc, file: repo.backend.localFile!('data', loc.pack)! };
  } finally {
    await repo.close();
  }
}

/**
 * A chunk of `rel` stored in a pack that holds nothing the source no longer has (photos/gone.bin, the
 * first version of photos/p1.bin): damage to that pack loses nothing for good (backup workers mix files
 * in packs).
 */
async function chunkAwayFromGone(dir: string, rel: string) {
  const repo = await open(dir);
  try {
    await repo.loadIndex();
    const snaps = await repo.listSnapshots();
    const ids = async (r: string, snap = -1) =>
      contentIds((await lookup(repo, snaps.at(snap)!, path.posix.join(src, r))).node!);
    const gone = [...(await ids('photos/gone.bin')), ...(await ids('photos/p1.bin', 0))];
    const gonePacks = new Set(gone.map((id) => repo.index.get(id)!.pack));
    for (const id of await ids(rel)) {
      const loc = repo.index.get(id)!;
      if (!gonePacks.has(loc.pack)) return { id, loc, file: repo.backend.localFile!('data', loc.pack)! };
    }
    throw new Error(`every pack holding ${rel} holds something no longer on disk too`);
  } finally {
    await repo.close();
  }
}

/** Where the tree of a folder is stored. */
async function treeOf(dir: string, rel: string) {
  const repo = await open(dir);
  try {
    await repo.loadIndex();
    const snaps = await repo.listSnapshots();
    const { node } = await lookup(repo, snaps[0], path.posix.join(src, rel));
    const loc = repo.index.get(node!.subtree!)!;
    return { id: node!.subtree!, loc, file: repo.backend.localFile!('data', loc.pack)! };
  } finally {
    await repo.close();
  }
}

async function runRepair(dir: string, opts: Parameters<typeof repair>[1] = {}): Promise<RepairReport> {
  const repo = await open(dir);
  try {
    return await repair(repo, opts);
  } finally {
    await repo.close();
  }
}

async function checkData(dir: string) {
  const repo = await open(dir);
  try {
    return await check(repo, { readData: true });
  } finally {
    await repo.close();
  }
}

/** The paths (relative to the source) the report says are lost in the snapshot with this ID. */
function lostIn(report: RepairReport, snapshotId: string): string[] {
  return report.lost
    .filter((l) => l.where.startsWith(`${snapshotId.slice(0, 8)}:`))
    .map((l) => path.posix.relative(src, l.where.slice(9)));
}

/**
 * Restores every snapshot and compares it with the source as it was when that snapshot was taken,
 * without the `lost` paths (per snapshot, by its index among the snapshots, oldest first).
 */
async function expectRestorable(dir: string, lost: string[][] = []): Promise<void> {
  const repo = await open(dir);
  try {
    const snaps = await repo.listSnapshots();
    expect(snaps).toHaveLength(expected.length);
    for (const [i, s] of snaps.entries()) {
      const target = path.join(work, `restored-${path.basename(dir)}-${i}`);
      const r = await restore(repo, { snapshot: s.id, target, relativeTo: src });
      expect(r.errors).toEqual([]);
      const want = new Map(expected[i]);
      for (const l of lost[i] ?? [])
        for (const k of [...want.keys()]) if (k === l || k.startsWith(`${l}/`)) want.delete(k);
      const got = await describeTree(target, { mtime: false });
      const wantNoTimes = new Map([...want].map(([k, v]) => [k, { ...v, mtimeMs: undefined }]));
      expect([...got.keys()].sort()).toEqual([...wantNoTimes.keys()].sort());
      for (const [k, v] of got) expect(JSON.stringify(v), k).toBe(JSON.stringify(wantNoTimes.get(k)));
      await fs.rm(target, { recursive: true, force: true });
    }
  } finally {
    await repo.close();
  }
}

async function expectClean(dir: string): Promise<void> {
  const c = await checkData(dir);
  expect(c.problems).toEqual([]);
  expect(c.ok).toBe(true);
  // and a second repair finds nothing to do
  const again = await runRepair(dir);
  expect(again.clean).toBe(true);
}

describe('repair', () => {
  beforeAll(async () => {
    work = await tempDir('tm-repair-');
    src = path.join(work, 'src');
    await writeTree(src, {
      docs: {
        dir: {
          'a.txt': 'a small text file\n',
          'report.bin': randomBytes(600 * KiB, 1),
          'notes.md': '# notes\n'.repeat(300),
        },
      },
      photos: { dir: { 'p1.bin': randomBytes(300 * KiB, 2), 'gone.bin': randomBytes(250 * KiB, 3) } },
      deep: {
        dir: { sub: { dir: { leaf: { dir: { 'x.txt': 'x', 'y.bin': randomBytes(200 * KiB, 4) } } } } },
      },
      'disk.img': randomBytes(2048 * KiB, 5),
    });
    base = path.join(work, 'base');
    const repo = await Repository.init(new LocalBackend(base), PW, {
      kdf: { N: 1024 },
      chunker: { min: 16 * KiB, avg: 64 * KiB, max: 256 * KiB },
      packSize: 256 * KiB,
    });
    const opts = { paths: [src], job: 'my-job', blockFiles: { patterns: ['*.img'], minSize: KiB } };
    await backup(repo, opts);
    expected.push(await describeTree(src, { mtime: false }));
    await fs.writeFile(path.join(src, 'docs', 'new.txt'), 'added later\n');
    await fs.writeFile(path.join(src, 'photos', 'p1.bin'), randomBytes(310 * KiB, 6));
    await backup(repo, opts);
    expected.push(await describeTree(src, { mtime: false }));
    await repo.close();
    // a file both snapshots hold that is no longer on disk: what is lost of it cannot come back
    await fs.rm(path.join(src, 'photos', 'gone.bin'));
  });

  it('leaves a healthy repository as it is', async () => {
    const dir = await copyRepo('healthy');
    const before = await listRepoFiles(dir);
    const r = await runRepair(dir);
    expect(r.clean).toBe(true);
    expect(r.lostCount).toBe(0);
    expect(await listRepoFiles(dir)).toEqual(before);
  });

  it('a flipped byte in a pack: the damaged chunk is read again from the source file', async () => {
    const dir = await copyRepo('flip-pack');
    const { id, loc, file } = await chunkOf(dir, 'docs/report.bin', 1);
    await flipByte(file, loc.offset + 20);
    const c = await checkData(dir);
    expect(c.problems.some((p) => p.kind === 'corrupt-blob' && p.object === `blob ${id}`)).toBe(true);
    const snapsBefore = (await listRepoFiles(dir)).filter((f) => f.startsWith('snapshots/'));

    const r = await runRepair(dir);
    expect(r.clean).toBe(false);
    expect(r.packs.damaged.map((d) => d.pack)).toEqual([loc.pack]);
    expect(r.blobs.fromSources).toBe(1);
    expect(r.sources).toEqual([{ path: path.join(src, 'docs', 'report.bin'), blobs: 1 }]);
    expect(r.blobs.lost).toBe(0);
    expect(r.lostCount).toBe(0);
    expect(r.snapshots.rebuilt).toEqual([]);
    // nothing was lost, so the snapshots are the same objects
    expect((await listRepoFiles(dir)).filter((f) => f.startsWith('snapshots/'))).toEqual(snapsBefore);
    await expectClean(dir);
    await expectRestorable(dir);
  });

  it('a flipped byte in a pack whose file is gone: the file is left out and named, the rest restores', async () => {
    const dir = await copyRepo('flip-gone');
    const { loc, file } = await chunkOf(dir, 'photos/gone.bin', 2);
    await flipByte(file, loc.offset + loc.length - 3);
    const snaps = await (await open(dir)).listSnapshots();

    const r = await runRepair(dir);
    expect(r.blobs.lost).toBe(1);
    expect(r.unreadableSources.map((u) => u.path)).toEqual([path.join(src, 'photos', 'gone.bin')]);
    expect(r.snapshots.rebuilt.map((x) => x.from).sort()).toEqual(snaps.map((s) => s.id).sort());
    for (const s of snaps) expect(lostIn(r, s.id)).toEqual(['photos/gone.bin']);
    expect(r.lostCount).toBe(2);
    await expectClean(dir);
    await expectRestorable(dir, [['photos/gone.bin'], ['photos/gone.bin']]);
    const after = await (await open(dir)).listSnapshots();
    for (const s of after) {
      expect(s.tags).toContain('repaired');
      expect(snaps.map((x) => x.id)).toContain(s.repairedFrom);
      expect(s.stats.files).toBe(snaps.find((x) => x.id === s.repairedFrom)!.stats.files - 1);
    }
  });

  it('a flipped byte in an index file, and every index file lost: the index is rebuilt from the packs', async () => {
    const dir = await copyRepo('flip-index');
    const names = (await listRepoFiles(dir))
      .filter((f) => f.startsWith('index/'))
      .map((f) => f.split(':')[0]);
    expect(names.length).toBeGreaterThan(1);
    await flipByte(path.join(dir, names[0]), 40);
    expect((await checkData(dir)).problems.some((p) => p.kind === 'corrupt-index')).toBe(true);
    const r = await runRepair(dir);
    expect(r.index.damaged).toEqual([path.basename(names[0])]);
    expect(r.packs.unindexed).toBeGreaterThan(0);
    expect(r.lostCount).toBe(0);
    await expectClean(dir);
    await expectRestorable(dir);

    const dir2 = await copyRepo('lost-index');
    await fs.rm(path.join(dir2, 'index'), { recursive: true });
    expect((await checkData(dir2)).problems.some((p) => p.kind === 'missing-blob')).toBe(true);
    const r2 = await runRepair(dir2);
    expect(r2.lostCount).toBe(0);
    await expectClean(dir2);
    await expectRestorable(dir2);
  });

  it('a flipped byte in a snapshot file: its root tree is saved as a recovered snapshot of the same job', async () => {
    const dir = await copyRepo('flip-snapshot');
    const repo = await open(dir);
    const [first, second] = await repo.listSnapshots();
    await repo.close();
    await flipByte(path.join(dir, 'snapshots', second.id), 30);
    expect((await checkData(dir)).problems.some((p) => p.kind === 'corrupt-snapshot')).toBe(true);

    const r = await runRepair(dir);
    expect(r.snapshots.removed.map((x) => x.id)).toEqual([second.id]);
    expect(r.snapshots.recovered).toHaveLength(1);
    expect(r.snapshots.recovered[0].tree).toBe(second.tree);
    expect(r.snapshots.recovered[0].paths).toEqual([src]);
    await expectClean(dir);
    await expectRestorable(dir);
    const after = await (await open(dir)).listSnapshots();
    expect(after[0].id).toBe(first.id);
    expect(after[1]).toMatchObject({
      tree: second.tree,
      job: 'my-job',
      host: second.host,
      tags: ['recovered'],
    });
  });

  it('a flipped byte in a tree: the folder it lists is left out of every snapshot and named', async () => {
    const dir = await copyRepo('flip-tree');
    const { loc, file } = await treeOf(dir, 'deep/sub/leaf');
    await flipByte(file, loc.offset + 10);
    expect(
      (await checkData(dir)).problems.some((p) => p.kind === 'corrupt-blob' || p.kind === 'corrupt-tree'),
    ).toBe(true);
    const snaps = await (await open(dir)).listSnapshots();
    const r = await runRepair(dir);
    for (const s of snaps) expect(lostIn(r, s.id)).toEqual(['deep/sub/leaf']);
    expect(r.lost.every((l) => l.kind === 'folder')).toBe(true);
    await expectClean(dir);
    await expectRestorable(dir, [['deep/sub/leaf'], ['deep/sub/leaf']]);
  });

  it('a truncated pack: the blobs before the cut are kept, the rest read again from the sources', async () => {
    const dir = await copyRepo('truncated');
    const { loc, file } = await chunkAwayFromGone(dir, 'docs/report.bin');
    const size = (await fs.stat(file)).size;
    await fs.chmod(file, 0o644);
    await fs.truncate(file, Math.floor(size / 2));
    expect((await checkData(dir)).ok).toBe(false);
    const r = await runRepair(dir);
    expect(r.packs.damaged.map((d) => d.pack)).toEqual([loc.pack]);
    expect(r.packs.damaged[0].salvaged).toBeGreaterThan(0);
    expect(r.blobs.fromSources).toBeGreaterThan(0);
    expect(r.lostCount).toBe(0);
    await expectClean(dir);
    await expectRestorable(dir);
  });

  it('a missing pack: a block file’s blocks are read again from where they lie in the file', async () => {
    const dir = await copyRepo('missing');
    const { loc, file } = await chunkAwayFromGone(dir, 'disk.img');
    await fs.rm(file);
    const c = await checkData(dir);
    expect(c.problems.some((p) => p.kind === 'missing-pack' && p.object === `data/${loc.pack}`)).toBe(true);
    const r = await runRepair(dir);
    expect(r.packs.missing).toEqual([loc.pack]);
    // (the pack may hold other files' chunks too: all come back)
    expect(r.sources.map((s) => s.path)).toContain(path.join(src, 'disk.img'));
    expect(r.blobs.fromSources).toBeGreaterThan(1);
    expect(r.blobs.lost).toBe(0);
    expect(r.lostCount).toBe(0);
    await expectClean(dir);
    await expectRestorable(dir);
  });

  it('a dry run reports what repair would do and writes nothing', async () => {
    const dir = await copyRepo('dry');
    const { loc, file } = await chunkOf(dir, 'photos/gone.bin', 0);
    await flipByte(file, loc.offset + 1);
    const before = await listRepoFiles(dir);
    const r = await runRepair(dir, { dryRun: true });
    expect(r.dryRun).toBe(true);
    expect(r.packs.damaged).toHaveLength(1);
    expect(r.snapshots.rebuilt).toHaveLength(2);
    expect(r.lostCount).toBe(2);
    expect(await listRepoFiles(dir)).toEqual(before);
  });

  it('takes the exclusive lock: a running backup keeps it out', async () => {
    const dir = await copyRepo('locked');
    const holder = await open(dir);
    const lock = await holder.lock(false, 'backup');
    try {
      await expect(runRepair(dir)).rejects.toBeInstanceOf(RepoLockedError);
    } finally {
      await lock.release();
      await holder.close();
    }
  });

  it('a crash at each write and removal step leaves a repository a second repair finishes', async () => {
    const steps = [
      ['save', 'data'],
      ['save', 'index'],
      ['save', 'snapshots'],
      ['remove', 'index'],
      ['remove', 'data'],
      ['remove', 'snapshots'],
    ] as const;
    for (const [op, type] of steps) {
      const dir = await copyRepo(`crash-${op}-${type}`);
      const { loc, file } = await chunkOf(dir, 'photos/gone.bin', 1);
      await flipByte(file, loc.offset + 7);
      const faulty = new FaultyBackend(new LocalBackend(dir), [
        { op, type, effect: { throw: () => new Error(`crash at ${op} ${type}`) } },
      ]);
      const repo = await Repository.open(faulty, PW);
      await expect(repair(repo)).rejects.toThrow(`crash at ${op} ${type}`);
      await repo.close();
      const r = await runRepair(dir);
      expect(r.clean).toBe(false);
      await expectClean(dir);
      // two snapshots, as before the damage: none saved twice
      await expectRestorable(dir, [['photos/gone.bin'], ['photos/gone.bin']]);
    }
  });
});
