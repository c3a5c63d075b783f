/**
 * The restore plan reads subtrees ahead of its walk: a whole restore of a wide, deep tree is byte-exact
 * (the walk keeps its order), and restoring one folder reads only the trees on the way to it and below
 * it, never its siblings'. The plan is made and restored in batches: files are written before the
 * walk has read every folder, and files whose content or inode is shared across batches come out right.
 */
import { describe, it, expect } from 'vitest';
import path from 'node:path';
import fs from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { BlobType } from '../../src/main/engine/repo/blobIndex.js';
import type { RestoreProgress } from '../../src/main/engine/operations.js';
import {
  tempDir,
  writeTree,
  describeTree,
  expectSameTrees,
  randomBytes,
  exists,
  until,
  type TreeSpec,
} from '../helpers/fixtures.js';

function wideTree(width: number, depth: number, tag: string): TreeSpec {
  const spec: TreeSpec = {};
  for (let i = 0; i < width; i++) {
    spec[`f${i}.txt`] = `${tag}/${i}\n`.repeat(i + 1);
    if (depth > 0) spec[`d${i}`] = { dir: wideTree(width, depth - 1, `${tag}/${i}`) };
  }
  return spec;
}

/** Folders d00, d01, … of 100 files f0…f99 each. */
async function writeFolders(
  root: string,
  count: number,
  content: (folder: number, file: number) => string | Buffer,
): Promise<void> {
  for (let d = 0; d < count; d++) {
    const dir = path.join(root, `d${String(d).padStart(2, '0')}`);
    await fs.mkdir(dir, { recursive: true });
    for (let i = 0; i < 100; i++) await fs.writeFile(path.join(dir, `f${i}`), content(d, i));
  }
}

describe('restore plan', () => {
  it('restores a wide, deep tree exactly and reads only the trees a partial restore needs', async () => {
    const work = await tempDir('tm-plan-');
    const src = path.join(work, 'src');
    await writeTree(src, wideTree(5, 3, 'x')); // 156 folders, 780 files
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    const { snapshot } = await backup(repo, { paths: [src] });

    const all = path.join(work, 'all');
    const r = await restore(repo, { snapshot: snapshot.id, target: all, relativeTo: src });
    expect(r.errors).toEqual([]);
    expect(r.filesRestored).toBe(780);
    expectSameTrees(await describeTree(src), await describeTree(all));

    // the trees a restore of src/d2/d0 needs: the folders on the way down, d2/d0 and its 5 subfolders
    const want = path.join(src, 'd2', 'd0');
    const ancestors = ['/'];
    for (const part of want.split('/').filter(Boolean))
      ancestors.push(path.posix.join(ancestors[ancestors.length - 1], part));
    const needed = new Set<string>();
    for (const p of ancestors) needed.add((await lookup(repo, snapshot, p)).treeId!);
    for (let i = 0; i < 5; i++) needed.add((await lookup(repo, snapshot, path.join(want, `d${i}`))).treeId!);
    const sibling = (await lookup(repo, snapshot, path.join(src, 'd1'))).treeId!;
    expect(needed.has(sibling)).toBe(false);

    // a fresh repository object (empty tree cache) that records the trees it reads
    const again = await Repository.open(new LocalBackend(path.join(work, 'repo')), 'pw');
    const loaded = new Set<string>();
    const loadTree = again.loadTree.bind(again);
    again.loadTree = async (id) => {
      loaded.add(id);
      return loadTree(id);
    };
    const part = path.join(work, 'part');
    const p = await restore(again, { snapshot: snapshot.id, target: part, include: [want], relativeTo: src });
    expect(p.errors).toEqual([]);
    expect(p.filesRestored).toBe(5 + 5 * 5);
    expectSameTrees(await describeTree(want), await describeTree(path.join(part, 'd2', 'd0')));
    expect([...loaded].sort()).toEqual([...needed].sort());
  });

  it('writes files before it has walked every folder, and restores batches that share content and inodes', async () => {
    const work = await tempDir('tm-batches-');
    const src = path.join(work, 'src');
    // 30 folders of 100 files (a plan held to 256 pieces), the same content at both ends, a hard link from the
    // first folder into the last, a file of many chunks in the middle, empty files
    await writeFolders(src, 30, (d, i) =>
      i % 10 === 0 ? '' : d === 0 || d === 29 ? `shared ${i}\n`.repeat(50) : `${d}/${i}\n`.repeat(i),
    );
    await fs.writeFile(path.join(src, 'd15', 'large'), randomBytes(6 * 1024 * 1024, 15));
    await fs.link(path.join(src, 'd00', 'f1'), path.join(src, 'd29', 'link'));
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    const { snapshot } = await backup(repo, { paths: [src] });

    // the last folder's tree is held back until the first folder's files are on disk: a restore that
    // planned everything first would wait for it forever (and time out here)
    const target = path.join(work, 'out');
    const last = (await lookup(repo, snapshot, path.join(src, 'd29'))).treeId!;
    const loadTree = repo.loadTree.bind(repo);
    let heldBack = false;
    repo.loadTree = async (id, opts) => {
      if (id === last) {
        await until(() => exists(path.join(target, 'd00', 'f99')), 'the first batch to be written', 30_000);
        heldBack = true;
      }
      return loadTree(id, opts);
    };
    const events: RestoreProgress[] = [];
    const r = await restore(repo, {
      snapshot: snapshot.id,
      target,
      relativeTo: src,
      planLimit: 256,
      progress: (p) => events.push(p),
    });
    expect(heldBack).toBe(true);
    expect(r.errors).toEqual([]);
    expect(r.filesRestored).toBe(3001); // the link is made, not restored
    expectSameTrees(await describeTree(src), await describeTree(target));
    const [a, b] = [path.join(target, 'd00', 'f1'), path.join(target, 'd29', 'link')];
    expect((await fs.stat(a)).ino).toBe((await fs.stat(b)).ino);
    // totals come from the folders' summaries ahead of the walk, and end exact
    for (const e of events) expect(e.filesDone).toBeLessThanOrEqual(e.filesTotal);
    const end = events[events.length - 1];
    expect(end).toMatchObject({ phase: 'done', filesTotal: 3001, filesDone: 3001 });
    expect(end.bytesDone).toBe(end.bytesTotal);
  });

  it('reads a pack as soon as every blob in it is planned, while the walk goes on, and each once', async () => {
    const work = await tempDir('tm-packs-');
    const src = path.join(work, 'src');
    // 25 folders of 100 distinct 10 KiB files, backed up by one worker: packs (4, 4, 8, 8 MiB) fill in
    // the order the walk meets the files, so the first is complete long before the last folder
    await writeFolders(src, 25, (d, i) => randomBytes(10240, d * 100 + i + 1));
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    const { snapshot } = await backup(repo, { paths: [src], workers: 1 });
    const dataPacks = repo.index.countsByPack(BlobType.Data);
    expect(dataPacks.size).toBeGreaterThan(2);

    const reads = new Map<string, [number, number][]>();
    // the reads are watched at the backend: the decode workers do not read the packs themselves here
    // (they do from a folder repository's files, restore-worker-reads.test.ts)
    Object.defineProperty(repo.backend, 'localFile', { value: undefined });
    const load = repo.backend.load.bind(repo.backend);
    repo.backend.load = async (type, name, offset, length) => {
      if (type === 'data' && dataPacks.has(name)) {
        const at = offset ?? 0;
        reads.set(name, [...(reads.get(name) ?? []), [at, at + (length ?? 0)]]);
      }
      return load(type, name, offset, length);
    };
    // the last folder's tree is held back until a data pack was read: a restore that queues packs only
    // when the walk ends would wait for it forever (and time out here)
    const last = (await lookup(repo, snapshot, path.join(src, 'd24'))).treeId!;
    const loadTree = repo.loadTree.bind(repo);
    repo.loadTree = async (id, opts) => {
      if (id === last)
        await until(() => reads.size > 0, 'a data pack to be read before the walk ends', 30_000);
      return loadTree(id, opts);
    };
    const target = path.join(work, 'out');
    const r = await restore(repo, { snapshot: snapshot.id, target, relativeTo: src });
    expect(r.errors).toEqual([]);
    expect(r.filesRestored).toBe(2500);
    expectSameTrees(await describeTree(src), await describeTree(target));
    // every data pack was read whole in a few large reads (ranges of up to 2 MiB), and no byte of it twice
    expect([...reads.keys()].sort()).toEqual([...dataPacks.keys()].sort());
    for (const [pack, ranges] of reads) {
      expect(ranges.length).toBeLessThanOrEqual(Math.ceil(repo.index.packExtent(pack)! / (2 << 20)) + 1);
      ranges.sort((a, b) => a[0] - b[0]);
      for (let i = 1; i < ranges.length; i++) expect(ranges[i][0]).toBeGreaterThanOrEqual(ranges[i - 1][1]);
    }
  });

  it('reports a file the worker could not write, by its path, and restores the others', async () => {
    // A file's path in the target can be too long for the kernel (ENAMETOOLONG, over 4096 bytes) while
    // its folder's is not: the folder is made, and only the worker's create of the file fails.
    const work = await tempDir('tm-plan-');
    const long = 'n'.repeat(200);
    let rel = '';
    while (rel.length < 3300) rel = path.join(rel, 'd'.repeat(120));
    const src = path.join(work, 'src');
    const deep = path.join(src, rel);
    await fs.mkdir(deep, { recursive: true });
    await fs.writeFile(path.join(deep, long), 'too deep to restore here');
    await fs.writeFile(path.join(deep, 'ok.txt'), 'fits');
    await fs.writeFile(path.join(src, 'top.txt'), 'fits too');
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    const { snapshot } = await backup(repo, { paths: [src] });
    // the target adds enough to the file's path (not to its folder's) to pass the limit
    let target = work;
    while (Buffer.byteLength(path.join(target, src, rel, long)) <= 4096)
      target = path.join(target, 't'.repeat(50));
    expect(Buffer.byteLength(path.join(target, src, rel))).toBeLessThan(4096);
    const r = await restore(repo, { snapshot: snapshot.id, target });
    expect(r.errors).toHaveLength(1);
    expect(r.errors[0]).toMatchObject({ path: path.join(src, rel, long), code: 'ENAMETOOLONG' });
    expect(r.filesRestored).toBe(2);
    expect(await fs.readFile(path.join(target, src, rel, 'ok.txt'), 'utf8')).toBe('fits');
    expect(await fs.readFile(path.join(target, src, 'top.txt'), 'utf8')).toBe('fits too');
  });

  // A piece of a larger file that cannot be written (here: the target filesystem is full) fails that file,
  // by its path, and not the whole files written beside it. Needs a small filesystem of its own: root
  // mounts a 2 MiB tmpfs. The small file is written before the large one fills it, or (the loops and
  // workers race) after, when it fails for want of space too: then a second restore of it succeeds, the
  // failed file having been removed.
  const canMount = process.getuid?.() === 0 && process.platform === 'linux';
  it.skipIf(!canMount)(
    'reports a large file whose pieces could not be written, and restores the small ones',
    async () => {
      const work = await tempDir('tm-plan-');
      const src = path.join(work, 'src');
      await writeTree(src, { 'big.bin': randomBytes(6 * 1024 * 1024, 7), 'small.txt': 'fits' });
      const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', {
        kdf: { N: 1024 },
      });
      const { snapshot } = await backup(repo, { paths: [src] });
      const target = path.join(work, 'small-fs');
      await fs.mkdir(target);
      const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', target], {
        encoding: 'utf8',
      });
      expect(mounted.status, mounted.stderr).toBe(0);
      try {
        const r = await restore(repo, { snapshot: snapshot.id, target });
        const big = path.join(src, 'big.bin');
        const small = path.join(src, 'small.txt');
        expect(r.errors.find((e) => e.path === big)).toMatchObject({ code: 'ENOSPC' });
        for (const e of r.errors) {
          expect([big, small]).toContain(e.path);
          expect(e.code).toBe('ENOSPC');
        }
        expect(r.filesRestored).toBe(2 - r.errors.length);
        expect(await exists(path.join(target, big))).toBe(false); // a failed file is removed
        if (!r.errors.some((e) => e.path === small)) {
          expect(await fs.readFile(path.join(target, small), 'utf8')).toBe('fits');
        } else {
          const again = await restore(repo, { snapshot: snapshot.id, target, include: [small] });
          expect(again.errors).toEqual([]);
          expect(await fs.readFile(path.join(target, small), 'utf8')).toBe('fits');
        }
      } finally {
        spawnSync('umount', [target]);
      }
    },
  );
});
