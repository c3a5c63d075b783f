/**
 * Large files that change in place (VM disks, databases) are cut into fixed-size blocks. Given the byte
 * ranges that changed (what the block tracker reports), a backup reads exactly the blocks those ranges
 * touch, and produces the very block list a full read would; restores are byte-exact.
 */
import { describe, it, expect } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import {
  DEFAULT_BLOCK_FILE_PATTERNS,
  blockPolicy,
  fixedBlockSize,
  joinStripes,
  MAX_BLOCKS,
  stripeParts,
} from '../../src/main/engine/backup/blockFiles.js';
import { minimatch } from 'minimatch';
import { contentCount, contentIds, decodeTree, encodeTree } from '../../src/main/engine/repo/tree.js';
import type { TreeNode } from '../../src/main/engine/repo/types.js';
import { tempDir, randomBytes, seededRandom, type RangeEdit } from '../helpers/fixtures.js';
import { CompressionProbe } from '../../src/main/engine/compress/index.js';
import { spareSegmentCount } from '../../src/main/engine/pool/index.js';

const MiB = 1024 * 1024;
const B = 4096;
const blockFiles = { minSize: MiB };
/** A change hint naming one changed file and its changed byte ranges (what block tracking would give). */
const hintFor = (dir: string, file: string, ranges: { offset: number; length: number }[]) => ({
  dirtyDirs: new Set([dir]),
  cursor: { test: true },
  changedRanges: new Map([[file, ranges]]),
});

/** A pause gate that truncates `file` to `size` just before it is read: the first gate is before its
 *  folder is listed (the scan must still see the old size), the second just before the file is read. */
function truncateBeforeRead(file: string, size: number) {
  let gates = 0;
  let shrunk = false;
  return {
    gate: {
      wait: async () => {
        if (++gates < 2 || shrunk) return;
        shrunk = true;
        await fs.truncate(file, size);
      },
    },
    done: () => shrunk,
  };
}

/** A file that shrank to `size` while the backup ran is saved as read, flagged, and restores byte for byte. */
async function expectSavedAsRead(
  repo: Repository,
  r: Awaited<ReturnType<typeof backup>>,
  file: string,
  size: number,
): Promise<TreeNode> {
  const node = (await lookup(repo, r.snapshot, file)).node!;
  expect(node.size).toBe(size);
  expect(contentCount(node)).toBe(Math.ceil(size / B));
  expect(r.skipped.map((s) => s.reason).join()).toMatch(/changed while it was being read/);
  const out = await tempDir('tm-blocks-out-');
  await restore(repo, { snapshot: r.snapshotId, target: out });
  const restored = await fs.readFile(path.join(out, path.relative('/', file)));
  expect(restored.equals(await fs.readFile(file))).toBe(true);
  return node;
}

const scenarios: Record<string, RangeEdit> = {
  'scattered 4 KiB page writes': async (fh, size, rand) => {
    const out = [];
    for (let i = 0; i < 40; i++) {
      const offset = rand(size / 4096) * 4096;
      await fh.write(randomBytes(4096, 500 + i), 0, 4096, offset);
      out.push({ offset, length: 4096 });
    }
    return out;
  },
  'unaligned writes across block boundaries': async (fh, size, rand) => {
    const out = [];
    for (let i = 0; i < 10; i++) {
      const offset = rand(size - 20_000) + 1;
      await fh.write(randomBytes(10_001, 600 + i), 0, 10_001, offset);
      out.push({ offset, length: 10_001 });
    }
    return out;
  },
  'an append': async (fh, size) => {
    await fh.write(randomBytes(300_001, 9), 0, 300_001, size);
    return [{ offset: size, length: 300_001 }];
  },
  'a truncation inside a block': async (fh, size) => {
    await fh.truncate(size - 2 * MiB - 123);
    return [{ offset: size - 2 * MiB - 123, length: 2 * MiB + 123 }];
  },
  'a write at offset 0': async (fh) => {
    await fh.write(randomBytes(5000, 10), 0, 5000, 0);
    return [{ offset: 0, length: 5000 }];
  },
};

/** The bytes a reader of exactly the touched blocks reads, plus every block that is not whole in both versions. */
function expectedRead(changed: { offset: number; length: number }[], oldSize: number, size: number): number {
  const n = Math.ceil(size / B);
  const need = new Set<number>();
  const whole = Math.floor(Math.min(oldSize, size) / B);
  for (let i = whole; i < n; i++) if (!(oldSize === size && i === n - 1)) need.add(i);
  for (const r of changed)
    for (
      let i = Math.floor(r.offset / B);
      i <= Math.min(n - 1, Math.floor((r.offset + r.length - 1) / B));
      i++
    )
      need.add(i);
  let bytes = 0;
  for (const i of need) bytes += Math.min(B, size - i * B);
  return bytes;
}

describe('fixed-size blocks for files written in place', () => {
  it('picks the block size so no file has more than MAX_BLOCKS blocks, and matches by name and size', () => {
    expect(fixedBlockSize(2 * 1024 * MiB)).toBe(4096);
    expect(fixedBlockSize(2 * 1024 * MiB + 1)).toBe(8192);
    expect(fixedBlockSize(40 * 1024 * MiB)).toBe(128 * 1024);
    expect(Math.ceil((40 * 1024 * MiB) / fixedBlockSize(40 * 1024 * MiB))).toBeLessThanOrEqual(MAX_BLOCKS);
    const policy = blockPolicy({})!;
    expect(policy('Windows 11.VHDX', 100 * MiB)).toBe(4096);
    expect(policy('mail.pst', 100 * MiB)).toBe(4096);
    expect(policy('movie.mkv', 100 * MiB)).toBeUndefined();
    expect(policy('small.db', 10 * MiB)).toBeUndefined();
    expect(blockPolicy({ patterns: [] })).toBeUndefined();
    expect(blockPolicy(false)).toBeUndefined();
    expect(blockPolicy(undefined)).toBeUndefined(); // off unless asked for
    expect(blockPolicy({})!('disk.qcow2', 64 * MiB)).toBe(4096); // the default patterns and size
  });

  it('matches "*.ext" patterns by suffix exactly as minimatch does, and other globs with minimatch', () => {
    const names = [
      '.db',
      'x.DB',
      'a.db.bak',
      'db',
      'x.sqlite3',
      'x.sqlite',
      'disk-01.img',
      'disk-1.img',
      'vm.raw',
    ];
    const patterns = [...DEFAULT_BLOCK_FILE_PATTERNS, 'disk-??.img', '[Vv]m*.raw'];
    const policy = blockPolicy({ patterns, minSize: 0 })!;
    for (const name of names) {
      const expected = patterns.some((p) => minimatch(name, p, { nocase: true, dot: true, matchBase: true }));
      expect(policy(name, 1) !== undefined, name).toBe(expected);
    }
    expect(policy('disk-01.img', 1)).toBe(4096);
    expect(policy('vm.raw', 1)).toBe(4096);
    expect(blockPolicy({ patterns: ['disk-??.img'], minSize: 0 })!('disk-1.img', 1)).toBeUndefined();
  });

  for (const [name, edit] of Object.entries(scenarios)) {
    it(`read only the touched blocks and equal a full read after ${name}`, async () => {
      const dir = await tempDir('tm-blocks-');
      const file = path.join(dir, 'disk.img');
      const oldSize = 24 * MiB + 777; // a short last block
      await fs.writeFile(file, randomBytes(oldSize, 77));
      const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
      const first = await backup(repo, { paths: [dir], blockFiles });
      const node0 = (await lookup(repo, first.snapshot, file)).node!;
      expect(node0.blockSize).toBe(B);
      expect(node0.content).toBeUndefined(); // stored as a binary block list
      expect(contentCount(node0)).toBe(Math.ceil(oldSize / B));
      const fh = await fs.open(file, 'r+');
      const changed = await edit(fh, oldSize, seededRandom(4242));
      await fh.close();
      const size = (await fs.stat(file)).size;
      const withRanges = await backup(repo, {
        paths: [dir],
        parent: first.snapshotId,
        blockFiles,
        changeHint: hintFor(dir, file, changed),
      });
      const fullRead = await backup(repo, { paths: [dir], parent: first.snapshotId, blockFiles });
      const a = (await lookup(repo, withRanges.snapshot, file)).node!;
      const b = (await lookup(repo, fullRead.snapshot, file)).node!;
      expect(a.size).toBe(size);
      expect(a.blockSize).toBe(B);
      expect(a.blockIds!.equals(b.blockIds!)).toBe(true);
      expect(fullRead.snapshot.stats.bytesRead).toBe(size);
      expect(withRanges.snapshot.stats.bytesRead).toBe(expectedRead(changed, oldSize, size));
      const out = await tempDir('tm-blocks-out-');
      await restore(repo, { snapshot: withRanges.snapshotId, target: out });
      const restored = await fs.readFile(path.join(out, path.relative('/', file)));
      expect(restored.equals(await fs.readFile(file))).toBe(true);
    });
  }

  it('waits for ranges given as a promise; a rejected one reads the changed file whole and says why', async () => {
    const dir = await tempDir('tm-blocks-later-');
    const file = path.join(dir, 'disk.img');
    const oldSize = 24 * MiB + 777;
    await fs.writeFile(file, randomBytes(oldSize, 78));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const first = await backup(repo, { paths: [dir], blockFiles });
    const fh = await fs.open(file, 'r+');
    const changed = await scenarios['scattered 4 KiB page writes'](fh, oldSize, seededRandom(99));
    await fh.close();
    const hint = (changedRanges: Promise<Map<string, typeof changed> | undefined>) => ({
      dirtyDirs: new Set([dir]),
      cursor: { test: true },
      changedRanges,
    });
    // as the app hands them over: still being computed when the backup starts
    const later = new Promise<Map<string, typeof changed>>((r) =>
      setTimeout(() => r(new Map([[file, changed]])), 50),
    );
    const withRanges = await backup(repo, {
      paths: [dir],
      parent: first.snapshotId,
      blockFiles,
      changeHint: hint(later),
    });
    expect(withRanges.snapshot.stats.bytesRead).toBe(expectedRead(changed, oldSize, oldSize));
    expect(withRanges.snapshot.scanMode?.mode).toBe('blocks');
    const log: string[] = [];
    const failed = await backup(repo, {
      paths: [dir],
      parent: first.snapshotId,
      blockFiles,
      changeHint: hint(Promise.reject(new Error('the tracker stopped'))),
      log: (m) => log.push(m),
    });
    expect(failed.snapshot.stats.bytesRead).toBe(oldSize);
    expect(failed.snapshot.scanMode?.mode).toBe('journal');
    expect(log.some((m) => m.includes('the tracker stopped') && m.includes('read whole'))).toBe(true);
    const a = (await lookup(repo, withRanges.snapshot, file)).node!;
    const b = (await lookup(repo, failed.snapshot, file)).node!;
    expect(a.blockIds!.equals(b.blockIds!)).toBe(true);
    expect(failed.skipped).toEqual([]);
    expect(failed.status).toBe('completed');
  });

  it('fills emptied segment buffers again, night after night, without mixing their blocks', async () => {
    // Sealed segments hand their raw buffer back to the pool, which gives it to the next reading worker
    // (QueryReply.spares): the same memory carries other blocks each time, so every night is restored
    // and compared whole.
    const dir = await tempDir('tm-blocks-spares-');
    const file = path.join(dir, 'disk.img');
    const size = 24 * MiB + 777;
    await fs.writeFile(file, randomBytes(size, 41));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    let parent = (await backup(repo, { paths: [dir], blockFiles, workers: 2 })).snapshotId;
    expect(spareSegmentCount()).toBeGreaterThan(0);
    const rand = seededRandom(4711);
    for (let night = 0; night < 3; night++) {
      const fh = await fs.open(file, 'r+');
      const changed = [];
      for (let i = 0; i < 700; i++) {
        const offset = rand(Math.floor(size / 4096)) * 4096; // inside the file
        await fh.write(randomBytes(4096, 9000 + 700 * night + i), 0, 4096, offset);
        changed.push({ offset, length: 4096 });
      }
      await fh.close();
      const r = await backup(repo, {
        paths: [dir],
        parent,
        blockFiles,
        workers: 2,
        changeHint: {
          dirtyDirs: new Set([dir]),
          cursor: { night },
          changedRanges: new Map([[file, changed]]),
        },
      });
      expect(r.snapshot.scanMode?.mode).toBe('blocks');
      expect(r.snapshot.stats.bytesRead).toBe(expectedRead(changed, size, size));
      const out = await tempDir('tm-blocks-spares-out-');
      await restore(repo, { snapshot: r.snapshotId, target: out });
      expect(
        (await fs.readFile(path.join(out, path.relative('/', file)))).equals(await fs.readFile(file)),
      ).toBe(true);
      parent = r.snapshotId;
    }
  });

  it('stores a block list in binary after the tree JSON, and rejects a tree whose lists do not add up', () => {
    const ids = (n: number, seed: number) => randomBytes(n * 32, seed);
    const file = (name: string, extra: Partial<TreeNode>): TreeNode => ({
      name,
      type: 'file',
      mode: 0o644,
      mtimeNs: '1',
      size: 3 * B,
      ...extra,
    });
    const tree = {
      nodes: [
        file('z.img', { blockSize: B, blockIds: ids(3, 1) }),
        file('a.txt', { content: ['ab'.repeat(32)] }),
        file('m.db', { blockSize: B, blockIds: ids(2, 2) }),
      ],
    };
    const buf = encodeTree(tree);
    const nl = buf.indexOf(0x0a);
    expect(buf.length - nl - 1).toBe(5 * 32); // both lists, raw
    expect(JSON.parse(buf.subarray(0, nl).toString()).nodes.map((n: TreeNode) => n.blockIds)).toEqual([
      undefined,
      2,
      3,
    ]);
    const back = decodeTree(buf, 'tree');
    expect(back.nodes.map((n) => n.name)).toEqual(['a.txt', 'm.db', 'z.img']);
    expect(back.nodes[1].blockIds!.equals(ids(2, 2))).toBe(true);
    expect(back.nodes[2].blockIds!.equals(ids(3, 1))).toBe(true);
    expect(contentIds(back.nodes[2])).toEqual(
      [0, 1, 2].map((i) => ids(3, 1).toString('hex', i * 32, i * 32 + 32)),
    );
    expect(encodeTree(back).equals(buf)).toBe(true); // canonical: the same tree keeps its ID
    // a tree without block lists is JSON alone, as before
    expect(encodeTree({ nodes: [tree.nodes[1]] }).includes(0x0a)).toBe(false);
    // lists that do not add up are corrupt, not misread
    expect(() => decodeTree(Buffer.concat([buf, Buffer.alloc(32)]), 'tree')).toThrow(
      /bytes after its block lists/,
    );
    expect(() => decodeTree(buf.subarray(0, buf.length - 32), 'tree')).toThrow(/invalid block list/);
    const json = (nodes: object[]) => Buffer.from(JSON.stringify({ nodes }) + '\n' + 'x'.repeat(32));
    expect(() => decodeTree(json([{ name: 'f', type: 'file', blockIds: 1 }]), 't')).toThrow(
      /invalid block list/,
    );
    expect(() =>
      decodeTree(json([{ name: 'f', type: 'file', blockSize: B, content: [], blockIds: 1 }]), 't'),
    ).toThrow(/invalid block list/);
    expect(() => decodeTree(json([{ name: 'f', type: 'file', blockSize: B, blockIds: 1.5 }]), 't')).toThrow(
      /invalid block list/,
    );
    expect(() => encodeTree({ nodes: [file('f', { blockIds: ids(1, 3) })] })).toThrow(/needs a block size/);
  });

  it('stores a block list raw when its IDs are random and compressed when they repeat (a sparse VM disk)', async () => {
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const tree = (blockIds: Buffer) => ({
      nodes: [
        {
          name: 'vm.img',
          type: 'file' as const,
          mode: 0o644,
          mtimeNs: '1',
          size: 64 * 1024 * B,
          blockSize: B,
          blockIds,
        },
      ],
    });
    const random = randomBytes(64 * 1024 * 32, 81); // 64 Ki blocks, all different
    const zeros = Buffer.concat(Array.from({ length: 64 * 1024 }, () => randomBytes(32, 82))); // one block, repeated
    const a = await repo.saveTree(tree(random));
    const b = await repo.saveTree(tree(zeros));
    await repo.flush();
    expect(repo.index.get(a)!.compressed).toBe(false);
    expect(repo.index.get(b)!.compressed).toBe(true);
    expect(repo.index.get(b)!.length).toBeLessThan(zeros.length / 100);
    expect((await repo.loadTree(a)).nodes[0].blockIds!.equals(random)).toBe(true);
    expect((await repo.loadTree(b)).nodes[0].blockIds!.equals(zeros)).toBe(true);
  });

  it('an incremental whose parent lists the blocks as hex (trees written before binary lists) equals a full read', async () => {
    const dir = await tempDir('tm-blocks-old-');
    const file = path.join(dir, 'disk.img');
    const size = 6 * MiB + 100;
    await fs.writeFile(file, randomBytes(size, 91));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const first = await backup(repo, { paths: [dir], blockFiles });
    // rewrite the first snapshot's trees the old way: the block list as hex IDs in `content`
    const rewrite = async (treeId: string): Promise<string> => {
      const t = await repo.loadTree(treeId);
      const nodes: TreeNode[] = [];
      for (const n of t.nodes) {
        if (n.type === 'dir') nodes.push({ ...n, subtree: await rewrite(n.subtree!) });
        else if (n.blockIds) {
          const { blockIds: _ids, ...rest } = n;
          nodes.push({ ...rest, content: contentIds(n) });
        } else nodes.push(n);
      }
      return repo.saveTree({ nodes });
    };
    const { id: _id, ...snap } = first.snapshot;
    const oldId = await repo.saveSnapshot({ ...snap, tree: await rewrite(first.snapshot.tree) });
    await repo.flush();
    const oldNode = (await lookup(repo, await repo.loadSnapshot(oldId), file)).node!;
    expect(oldNode.blockIds).toBeUndefined();
    expect(oldNode.content).toEqual(contentIds((await lookup(repo, first.snapshot, file)).node!));

    const fh = await fs.open(file, 'r+');
    await fh.write(randomBytes(4096, 92), 0, 4096, 3 * B);
    await fh.close();
    const changed = [{ offset: 3 * B, length: 4096 }];
    const hint = {
      dirtyDirs: new Set([dir]),
      cursor: { test: true },
      changedRanges: new Map([[file, changed]]),
    };
    const inc = await backup(repo, { paths: [dir], parent: oldId, blockFiles, changeHint: hint });
    const full = await backup(repo, { paths: [dir], parent: first.snapshotId, blockFiles });
    expect(inc.snapshot.stats.bytesRead).toBe(B);
    const a = (await lookup(repo, inc.snapshot, file)).node!;
    const b = (await lookup(repo, full.snapshot, file)).node!;
    expect(a.blockIds!.equals(b.blockIds!)).toBe(true);
    const out = await tempDir('tm-blocks-old-out-');
    await restore(repo, { snapshot: inc.snapshotId, target: out });
    expect(
      (await fs.readFile(path.join(out, path.relative('/', file)))).equals(await fs.readFile(file)),
    ).toBe(true);
  });

  it('stores the same blocks sealed on the reading thread or by any worker, compressible or not', async () => {
    // one worker seals a block file's segments itself; with more, segments move to whichever is free
    const dir = await tempDir('tm-blocks-seg-');
    const file = path.join(dir, 'mixed.img');
    const text = Buffer.from('a database page of text that compresses well. '.repeat(200_000)).subarray(
      0,
      9 * MiB,
    );
    await fs.writeFile(file, Buffer.concat([randomBytes(7 * MiB + 5, 31), text, Buffer.alloc(3 * MiB)]));
    const original = await fs.readFile(file);
    // two empty repositories with the same keys (so the same blob IDs): one per way of sealing
    const keyed = new MemoryBackend();
    await Repository.init(keyed, 'pw', { kdf: { N: 1024 } });
    const lists: string[][] = [];
    for (const workers of [1, 2]) {
      const mem = new MemoryBackend();
      await mem.init();
      for (const type of ['config', 'keys'] as const)
        for await (const o of keyed.list(type)) await mem.save(type, o.name, await keyed.load(type, o.name));
      const repo = await Repository.open(mem, 'pw');
      const r = await backup(repo, { paths: [dir], blockFiles, workers });
      const node = (await lookup(repo, r.snapshot, file)).node!;
      expect(node.blockSize).toBe(B);
      lists.push(contentIds(node));
      // text and zeros are stored compressed (far smaller than the file), random data raw; compression
      // is probed along the random part (CompressionProbe), so at most PROBE − 1 of the text blocks
      // stored right after it are stored raw (the text repeats: those blobs are used again further on)
      expect(r.snapshot.stats.storedBytes).toBeLessThan(original.length * 0.6);
      const ids = contentIds(node);
      const firstText = Math.ceil((7 * MiB + 5) / B); // the first block holding only text
      const rawText = ids
        .slice(firstText, Math.floor((16 * MiB + 5) / B))
        .filter((id) => !repo.index.get(id)!.compressed);
      expect(new Set(rawText).size).toBeLessThan(CompressionProbe.PROBE);
      expect(ids.slice(0, firstText - 1).every((id) => !repo.index.get(id)!.compressed)).toBe(true);
      const out = await tempDir('tm-blocks-seg-out-');
      await restore(repo, { snapshot: r.snapshotId, target: out });
      expect((await fs.readFile(path.join(out, path.relative('/', file)))).equals(original)).toBe(true);
    }
    expect(lists[0]).toEqual(lists[1]);
  });

  it('reads the same blocks past the page cache, through it, and through it after a refused direct read', async () => {
    // The temp folder is on a local disk's filesystem here, so block files are read with O_DIRECT; the
    // same file is read with direct I/O off, and with every direct read refused by the kernel (EINVAL:
    // the test hook hands it an unaligned buffer), which must go on through the page cache.
    const dir = await tempDir('tm-blocks-direct-');
    const file = path.join(dir, 'vm.img');
    const data = randomBytes(9 * MiB + 1234, 55); // a short last block: the direct read asks for 4 KiB units
    await fs.writeFile(file, data);
    const keyed = new MemoryBackend();
    await Repository.init(keyed, 'pw', { kdf: { N: 1024 } });
    const lists: Buffer[] = [];
    const envs = [{}, { TIDEMARK_NO_DIRECT_IO: '1' }, { TIDEMARK_TEST_UNALIGNED_READS: '1' }];
    for (const [i, env] of envs.entries()) {
      const saved = { ...process.env };
      Object.assign(process.env, env); // read by the worker threads, which start with this backup
      try {
        const mem = new MemoryBackend();
        await mem.init();
        for (const type of ['config', 'keys'] as const)
          for await (const o of keyed.list(type))
            await mem.save(type, o.name, await keyed.load(type, o.name));
        const repo = await Repository.open(mem, 'pw');
        // another number of workers each time: a pool of its own, whose threads start with this environment
        const r = await backup(repo, { paths: [dir], blockFiles, workers: i + 1 });
        expect(r.skipped).toEqual([]);
        expect(r.snapshot.stats.bytesRead).toBe(data.length);
        lists.push((await lookup(repo, r.snapshot, file)).node!.blockIds!);
        const out = await tempDir('tm-blocks-direct-out-');
        await restore(repo, { snapshot: r.snapshotId, target: out });
        expect((await fs.readFile(path.join(out, path.relative('/', file)))).equals(data)).toBe(true);
      } finally {
        for (const k of Object.keys(env)) delete process.env[k];
        Object.assign(process.env, saved);
      }
    }
    expect(lists[1].equals(lists[0])).toBe(true);
    expect(lists[2].equals(lists[0])).toBe(true);
  });

  it('keeps the block list of an unchanged block file whose device number changed, without reading it', async () => {
    // A disk that comes back under another device number (a remount, a USB disk) changes no file's
    // size, times or inode: its files are reused unread, but their tree nodes are written anew.
    const dir = await tempDir('tm-blocks-dev-');
    const file = path.join(dir, 'disk.qcow2');
    await fs.writeFile(file, randomBytes(5 * MiB + 3, 71));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const first = await backup(repo, { paths: [dir], blockFiles });
    const rewrite = async (treeId: string): Promise<string> => {
      const t = await repo.loadTree(treeId);
      const nodes: TreeNode[] = [];
      for (const n of t.nodes)
        nodes.push(
          n.type === 'dir' ? { ...n, subtree: await rewrite(n.subtree!) } : { ...n, dev: (n.dev ?? 0) + 1 },
        );
      return repo.saveTree({ nodes });
    };
    const { id: _id, ...snap } = first.snapshot;
    const parent = await repo.saveSnapshot({ ...snap, tree: await rewrite(first.snapshot.tree) });
    await repo.flush();
    const second = await backup(repo, { paths: [dir], parent, blockFiles });
    expect(second.status).toBe('completed');
    expect(second.snapshot.stats.bytesRead).toBe(0);
    const a = (await lookup(repo, first.snapshot, file)).node!;
    const b = (await lookup(repo, second.snapshot, file)).node!;
    expect(b.blockSize).toBe(B);
    expect(b.blockIds!.equals(a.blockIds!)).toBe(true);
  });

  it('reads a file whole when its block size changed, and chunks files no pattern matches', async () => {
    const dir = await tempDir('tm-blocks-');
    const file = path.join(dir, 'data.sqlite');
    const other = path.join(dir, 'video.mkv');
    await fs.writeFile(file, randomBytes(4 * MiB, 5));
    await fs.writeFile(other, randomBytes(4 * MiB, 6));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const first = await backup(repo, { paths: [dir], blockFiles });
    expect((await lookup(repo, first.snapshot, other)).node!.blockSize).toBeUndefined();
    expect((await lookup(repo, first.snapshot, other)).node!.content!.length).toBeLessThan(20);
    // the file grows past 2 GiB worth of blocks? simulate a policy change instead: no pattern now
    const fh = await fs.open(file, 'r+');
    await fh.write(randomBytes(4096, 7), 0, 4096, 8192);
    await fh.close();
    const second = await backup(repo, {
      paths: [dir],
      parent: first.snapshotId,
      blockFiles: { ...blockFiles, patterns: ['*.nothing'] },
      changeHint: hintFor(dir, file, [{ offset: 8192, length: 4096 }]),
    });
    const node = (await lookup(repo, second.snapshot, file)).node!;
    expect(node.blockSize).toBeUndefined();
    expect(second.snapshot.stats.bytesRead).toBe(4 * MiB); // read whole: the previous blocks do not apply
  });

  // A file that shrinks between the scan and the read: the pause gate (also awaited just before a file's
  // read starts) truncates it. The snapshot must hold exactly what the file holds when read, flagged.
  for (const incremental of [false, true])
    it(`saves a block file that shrank after the scan consistently (${incremental ? 'with' : 'without'} changed ranges)`, async () => {
      const dir = await tempDir('tm-blocks-');
      const file = path.join(dir, 'disk.img');
      await fs.writeFile(file, randomBytes(4 * MiB + 777, 31));
      const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
      const first = await backup(repo, { paths: [dir], blockFiles });
      await fs.appendFile(file, randomBytes(10_000, 32)); // changed: metadata differs from the parent's
      const shrink = truncateBeforeRead(file, 2 * MiB + 5);
      const second = await backup(repo, {
        paths: [dir],
        parent: first.snapshotId,
        blockFiles,
        ...(incremental ? { changeHint: hintFor(dir, file, [{ offset: 4 * MiB, length: 10_777 }]) } : {}),
        pauseGate: shrink.gate,
      });
      expect(shrink.done()).toBe(true);
      await expectSavedAsRead(repo, second, file, 2 * MiB + 5);
    });

  // The same, but the file ends inside one of several changed pieces that are read in one batch: that piece
  // comes back short and the pieces after it empty. (A short piece once shifted the block slots of the pieces
  // after it in its batch; that had no visible effect, because a file that shrank is then read whole — which
  // is what this test holds the engine to.)
  it('saves a block file that shrank inside a batch of changed pieces consistently', async () => {
    const dir = await tempDir('tm-blocks-');
    const file = path.join(dir, 'disk.img');
    await fs.writeFile(file, randomBytes(4 * MiB, 33));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const first = await backup(repo, { paths: [dir], blockFiles });
    // changed pieces of 1–3 blocks all over the file, the one around 2 MiB three blocks long
    const changed = [0.25, 0.5, 1, 1.5, 2, 2.5, 3, 3.5].map((m, i) => ({
      offset: m * MiB - (m === 2 ? B : 0),
      length: (m === 2 ? 3 : 1 + (i % 2)) * B,
    }));
    const fh = await fs.open(file, 'r+');
    for (const [i, c] of changed.entries())
      await fh.write(randomBytes(c.length, 40 + i), 0, c.length, c.offset);
    await fh.close();
    const cut = 2 * MiB + B / 2 + 3; // inside the second block of the three-block piece
    const shrink = truncateBeforeRead(file, cut);
    const second = await backup(repo, {
      paths: [dir],
      parent: first.snapshotId,
      blockFiles,
      changeHint: hintFor(dir, file, changed),
      pauseGate: shrink.gate,
    });
    expect(shrink.done()).toBe(true);
    const node = await expectSavedAsRead(repo, second, file, cut);
    // the same block list as a backup that reads the shrunk file whole
    const whole = await backup(repo, { paths: [dir], blockFiles, forceFull: true });
    expect(contentIds((await lookup(repo, whole.snapshot, file)).node!)).toEqual(contentIds(node));
  });

  it('joins the block IDs of striped parts in file order, and refuses parts of the wrong length', () => {
    // 7 blocks in stripes of 2: part 0 reads stripes 0 and 2 (blocks 0, 1, 4, 5), part 1 stripes 1 and 3
    const id = (i: number) => Buffer.alloc(32, i + 1);
    const part0 = Buffer.concat([0, 1, 4, 5].map(id));
    const part1 = Buffer.concat([2, 3, 6].map(id));
    expect(joinStripes([part0, part1], 7, 2).equals(Buffer.concat([0, 1, 2, 3, 4, 5, 6].map(id)))).toBe(true);
    // three parts: stripes 0, 3 / 1 / 2
    const three = [
      Buffer.concat([0, 1, 6].map(id)),
      Buffer.concat([2, 3].map(id)),
      Buffer.concat([4, 5].map(id)),
    ];
    expect(joinStripes(three, 7, 2).equals(Buffer.concat([0, 1, 2, 3, 4, 5, 6].map(id)))).toBe(true);
    expect(() => joinStripes([part0, part1.subarray(32)], 7, 2)).toThrow(/too few/);
    expect(() => joinStripes([part0, Buffer.concat([part1, id(7)])], 7, 2)).toThrow(/too many/);
    // two stripes per worker at least, else one reader
    expect(stripeParts(64 * MiB, 2)).toBe(2);
    expect(stripeParts(64 * MiB - 1, 2)).toBe(1);
    expect(stripeParts(2 * 1024 * MiB, 1)).toBe(1);
    expect(stripeParts(2 * 1024 * MiB, 8)).toBe(8);
  });

  for (const workers of [2, 3])
    it(`reads a whole block file with ${workers} workers in stripes: the same list as one reader, restored byte for byte`, async () => {
      const dir = await tempDir('tm-blocks-stripes-');
      const file = path.join(dir, 'disk.img');
      const size = 3 * MiB + 777; // stripes of 256 KiB: 13 of them, the last short, in a short last block
      await fs.writeFile(file, randomBytes(size, 91));
      const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
      const striped = await backup(repo, { paths: [dir], blockFiles, workers, stripeBytes: 256 * 1024 });
      const one = await backup(repo, { paths: [dir], blockFiles, workers: 1, forceFull: true });
      const a = (await lookup(repo, striped.snapshot, file)).node!;
      const b = (await lookup(repo, one.snapshot, file)).node!;
      expect(stripeParts(size, workers, 256 * 1024)).toBe(workers);
      expect(contentCount(a)).toBe(Math.ceil(size / B));
      expect(a.blockIds!.equals(b.blockIds!)).toBe(true);
      expect(striped.snapshot.stats.bytesRead).toBe(size);
      expect(striped.skipped).toEqual([]);
      const out = await tempDir('tm-blocks-out-');
      await restore(repo, { snapshot: striped.snapshotId, target: out });
      expect(
        (await fs.readFile(path.join(out, path.relative('/', file)))).equals(await fs.readFile(file)),
      ).toBe(true);
    });

  it('saves a block file that shrank while it was read in stripes as read', async () => {
    const dir = await tempDir('tm-blocks-stripes-');
    const file = path.join(dir, 'disk.img');
    await fs.writeFile(file, randomBytes(3 * MiB, 92));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const cut = MiB + 300 * 1024 + 5; // inside part 1's first stripe (stripes of 256 KiB)
    const shrink = truncateBeforeRead(file, cut);
    const r = await backup(repo, {
      paths: [dir],
      blockFiles,
      workers: 2,
      stripeBytes: 256 * 1024,
      pauseGate: shrink.gate,
    });
    expect(shrink.done()).toBe(true);
    const node = await expectSavedAsRead(repo, r, file, cut);
    const whole = await backup(repo, { paths: [dir], blockFiles, workers: 1, forceFull: true });
    expect(contentIds((await lookup(repo, whole.snapshot, file)).node!)).toEqual(contentIds(node));
  });

  it('restores block files of repeated, all-zero and distinct blocks byte for byte, the zeros as holes', async () => {
    // the blocks of one file follow each other in a pack and are written in runs; a repeated block is one
    // blob written at several places (in two files); all-zero blocks are left as holes
    const dir = await tempDir('tm-blocks-runs-');
    const n = 768;
    const a = Buffer.alloc(n * B);
    randomBytes(200 * B, 70).copy(a, 0); // distinct
    // blocks 200–455 stay zero (1 MiB): a hole
    for (let i = 456; i < 600; i++) randomBytes(B, 71).copy(a, i * B); // one block repeated
    randomBytes((n - 600) * B, 72).copy(a, 600 * B);
    // b's copy of the repeated block starts where a's run of it ends (600 blocks in): a run is one file's
    const b = Buffer.concat([randomBytes(600 * B, 73), randomBytes(B, 71), randomBytes(MiB + 5, 74)]);
    await fs.writeFile(path.join(dir, 'a.img'), a);
    await fs.writeFile(path.join(dir, 'b.img'), b);
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const r = await backup(repo, { paths: [dir], blockFiles });
    expect((await lookup(repo, r.snapshot, path.join(dir, 'a.img'))).node!.blockSize).toBe(B);
    const out = await tempDir('tm-blocks-out-');
    const res = await restore(repo, { snapshot: r.snapshotId, target: out, relativeTo: dir });
    expect(res.errors).toEqual([]);
    expect((await fs.readFile(path.join(out, 'a.img'))).equals(a)).toBe(true);
    expect((await fs.readFile(path.join(out, 'b.img'))).equals(b)).toBe(true);
    const st = await fs.stat(path.join(out, 'a.img'));
    expect(st.blocks * 512).toBeLessThanOrEqual(a.length - MiB); // the zero blocks were not written
  });

  it('restores a night that changed one block in each of many block files (more files than a worker keeps open)', async () => {
    const dir = await tempDir('tm-blocks-many-');
    const files = Array.from({ length: 40 }, (_, i) => path.join(dir, `d${String(i).padStart(2, '0')}.img`));
    for (const [i, f] of files.entries()) await fs.writeFile(f, randomBytes(MiB + 100, 200 + i));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const first = await backup(repo, { paths: [dir], blockFiles });
    for (const [i, f] of files.entries()) {
      const fh = await fs.open(f, 'r+');
      await fh.write(randomBytes(B, 300 + i), 0, B, ((i * 37) % 200) * B);
      await fh.close();
    }
    // the night's new blocks, one per file, sit side by side in one pack: one restore task writes all 40 files
    const night = await backup(repo, { paths: [dir], blockFiles, parent: first.snapshotId });
    expect(night.snapshot.stats.newBlobs).toBeGreaterThanOrEqual(40);
    const out = await tempDir('tm-blocks-out-');
    const res = await restore(repo, { snapshot: night.snapshotId, target: out, relativeTo: dir });
    expect(res.errors).toEqual([]);
    for (const f of files)
      expect((await fs.readFile(path.join(out, path.basename(f)))).equals(await fs.readFile(f))).toBe(true);
  });
});
