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
import { blockPolicy, fixedBlockSize, MAX_BLOCKS } from '../../src/main/engine/backup/blockFiles.js';
import { tempDir, randomBytes, seededRandom, type RangeEdit } from '../helpers/fixtures.js';

const MiB = 1024 * 1024;
const B = 8192;
const blockFiles = { minSize: MiB };

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
    expect(fixedBlockSize(2 * 1024 * MiB)).toBe(8192);
    expect(fixedBlockSize(2 * 1024 * MiB + 1)).toBe(16384);
    expect(fixedBlockSize(40 * 1024 * MiB)).toBe(256 * 1024);
    expect(Math.ceil((40 * 1024 * MiB) / fixedBlockSize(40 * 1024 * MiB))).toBeLessThanOrEqual(MAX_BLOCKS);
    const policy = blockPolicy({})!;
    expect(policy('Windows 11.VHDX', 100 * MiB)).toBe(8192);
    expect(policy('mail.pst', 100 * MiB)).toBe(8192);
    expect(policy('movie.mkv', 100 * MiB)).toBeUndefined();
    expect(policy('small.db', 10 * MiB)).toBeUndefined();
    expect(blockPolicy({ patterns: [] })).toBeUndefined();
    expect(blockPolicy(false)).toBeUndefined();
    expect(blockPolicy(undefined)).toBeUndefined(); // off unless asked for
    expect(blockPolicy({})!('disk.qcow2', 64 * MiB)).toBe(8192); // the default patterns and size
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
      expect(node0.content).toHaveLength(Math.ceil(oldSize / B));
      const fh = await fs.open(file, 'r+');
      const changed = await edit(fh, oldSize, seededRandom(4242));
      await fh.close();
      const size = (await fs.stat(file)).size;
      const withRanges = await backup(repo, {
        paths: [dir],
        parent: first.snapshotId,
        blockFiles,
        changeHint: {
          dirtyDirs: new Set([dir]),
          cursor: { test: true },
          changedRanges: new Map([[file, changed]]),
        },
      });
      const fullRead = await backup(repo, { paths: [dir], parent: first.snapshotId, blockFiles });
      const a = (await lookup(repo, withRanges.snapshot, file)).node!;
      const b = (await lookup(repo, fullRead.snapshot, file)).node!;
      expect(a.size).toBe(size);
      expect(a.blockSize).toBe(B);
      expect(a.content).toEqual(b.content);
      expect(fullRead.snapshot.stats.bytesRead).toBe(size);
      expect(withRanges.snapshot.stats.bytesRead).toBe(expectedRead(changed, oldSize, size));
      const out = await tempDir('tm-blocks-out-');
      await restore(repo, { snapshot: withRanges.snapshotId, target: out });
      const restored = await fs.readFile(path.join(out, path.relative('/', file)));
      expect(restored.equals(await fs.readFile(file))).toBe(true);
    });
  }

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
      lists.push(node.content!);
      // text and zeros are stored compressed (far smaller than the file), random data raw
      expect(r.snapshot.stats.storedBytes).toBeLessThan(original.length * 0.6);
      const out = await tempDir('tm-blocks-seg-out-');
      await restore(repo, { snapshot: r.snapshotId, target: out });
      expect((await fs.readFile(path.join(out, path.relative('/', file)))).equals(original)).toBe(true);
    }
    expect(lists[0]).toEqual(lists[1]);
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
      changeHint: {
        dirtyDirs: new Set([dir]),
        cursor: { test: true },
        changedRanges: new Map([[file, [{ offset: 8192, length: 4096 }]]]),
      },
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
      let gates = 0;
      let shrunk = false;
      const second = await backup(repo, {
        paths: [dir],
        parent: first.snapshotId,
        blockFiles,
        ...(incremental
          ? {
              changeHint: {
                dirtyDirs: new Set([dir]),
                cursor: { test: true },
                changedRanges: new Map([[file, [{ offset: 4 * MiB, length: 10_777 }]]]),
              },
            }
          : {}),
        pauseGate: {
          // the first gate is before the folder is listed (the scan must still see the old size), the
          // second just before the file is read
          wait: async () => {
            if (++gates < 2 || shrunk) return;
            shrunk = true;
            await fs.truncate(file, 2 * MiB + 5);
          },
        },
      });
      expect(shrunk).toBe(true);
      const node = (await lookup(repo, second.snapshot, file)).node!;
      expect(node.size).toBe(2 * MiB + 5);
      expect(node.content).toHaveLength(Math.ceil((2 * MiB + 5) / B));
      expect(second.skipped.map((s) => s.reason).join()).toMatch(/changed while it was being read/);
      const out = await tempDir('tm-blocks-out-');
      await restore(repo, { snapshot: second.snapshotId, target: out });
      const restored = await fs.readFile(path.join(out, path.relative('/', file)));
      expect(restored.equals(await fs.readFile(file))).toBe(true);
    });
});
