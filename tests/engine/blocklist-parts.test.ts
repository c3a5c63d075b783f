/**
 * Block lists in two parts (repo/tree.ts): a long list is stored once as a base blob, and each snapshot
 * lists only the blocks that differ from it. A wrong join is a wrong restore, and a base that prune does not
 * count as used is every later snapshot lost; so the nights below change the file in every way block
 * tracking meets (pages, unaligned writes, an append, a truncation, offset 0), each restores byte for byte
 * with the list of a whole read, and prune and check run after the first snapshots are forgotten.
 */
import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { prune } from '../../src/main/engine/repo/retention.js';
import { check } from '../../src/main/engine/check/index.js';
import { nextPatch } from '../../src/main/engine/backup/blockFiles.js';
import {
  contentIds,
  decodeTree,
  encodeTree,
  joinBlockList,
  PATCH_ENTRY,
} from '../../src/main/engine/repo/tree.js';
import { CorruptObjectError } from '../../src/main/engine/errors.js';
import type { TreeNode } from '../../src/main/engine/repo/types.js';
import { randomBytes, seededRandom, tempDir } from '../helpers/fixtures.js';

const MiB = 1024 * 1024;
const B = 4096;
const blockFiles = { minSize: MiB };

function patchOf(entries: [number, Buffer][]): Buffer {
  const out = Buffer.alloc(entries.length * PATCH_ENTRY);
  entries.forEach(([i, id], k) => {
    out.writeUInt32LE(i, k * PATCH_ENTRY);
    id.copy(out, k * PATCH_ENTRY + 4);
  });
  return out;
}

describe('block lists in two parts', () => {
  it('encode and decode; the join applies the patch and refuses one that does not fit', () => {
    const base = randomBytes(32 * 10, 1);
    const idA = Buffer.alloc(32, 0xaa);
    const idB = Buffer.alloc(32, 0xbb);
    const idC = Buffer.alloc(32, 0xcc);
    const node: TreeNode = {
      name: 'disk.img',
      type: 'file',
      mode: 0o644,
      mtimeNs: '1',
      size: 12 * B,
      blockSize: B,
      blockBase: 'ab'.repeat(32),
      blockCount: 12,
      blockPatch: patchOf([
        [3, idA],
        [10, idB],
        [11, idC],
      ]),
    };
    const back = decodeTree(encodeTree({ nodes: [node] }), 'test tree').nodes[0];
    expect(back.blockBase).toBe(node.blockBase);
    expect(back.blockCount).toBe(12);
    expect(back.blockPatch!.equals(node.blockPatch!)).toBe(true);
    expect(back.blockIds).toBeUndefined(); // joined by Repository.loadTree
    const joined = joinBlockList(back, base, 'test');
    const want = Buffer.concat([base.subarray(0, 96), idA, base.subarray(128, 320), idB, idC]);
    expect(joined.equals(want)).toBe(true);
    // a patch that leaves a block past the base uncovered, or is out of order, is corrupt
    expect(() => joinBlockList({ ...back, blockPatch: patchOf([[10, idB]]) }, base, 'test')).toThrow(
      CorruptObjectError,
    );
    expect(() =>
      joinBlockList(
        {
          ...back,
          blockPatch: patchOf([
            [11, idC],
            [10, idB],
          ]),
        },
        base,
        'test',
      ),
    ).toThrow(CorruptObjectError);
    const bad = encodeTree({ nodes: [node] })
      .toString('latin1')
      .replace(node.blockBase!, 'zz'.repeat(32));
    expect(() => decodeTree(Buffer.from(bad, 'latin1'), 'test tree')).toThrow(CorruptObjectError);
  });

  it('the next patch keeps the previous entries, adds the blocks read, and gives up past an eighth', () => {
    const prev = patchOf([
      [5, Buffer.alloc(32, 1)],
      [40, Buffer.alloc(32, 2)],
      [99, Buffer.alloc(32, 3)],
    ]);
    const read = Uint32Array.from([5, 7, 98]);
    const readIds = Buffer.concat([Buffer.alloc(32, 7), Buffer.alloc(32, 8), Buffer.alloc(32, 9)]);
    const p = nextPatch(prev, 100, read, readIds, 99)!; // the file shrank to 99 blocks
    const idx = Array.from({ length: p.length / PATCH_ENTRY }, (_, k) => p.readUInt32LE(k * PATCH_ENTRY));
    expect(idx).toEqual([5, 7, 40, 98]); // 99 is gone with the file's end
    expect(p.subarray(4, 36).equals(Buffer.alloc(32, 7))).toBe(true); // block 5 as read today
    expect(p.subarray(2 * PATCH_ENTRY + 4, 3 * PATCH_ENTRY).equals(Buffer.alloc(32, 2))).toBe(true); // 40 kept
    // a file that grew: the blocks past the previous list must have been read
    expect(() => nextPatch(prev, 100, read, readIds, 102)).toThrow(/internal error/);
    const many = Uint32Array.from({ length: 20 }, (_, i) => i * 3);
    expect(nextPatch(prev, 100, many, Buffer.alloc(32 * 20), 100)).toBeUndefined(); // 23 entries > 100 / 8 × 32 / 36
  });

  it('a damaged base list: check reports that blob with the files it affects, restore fails that file alone', async () => {
    const dir = await tempDir('tm-parts-');
    const file = path.join(dir, 'disk.img');
    await fs.writeFile(file, randomBytes(2 * MiB + 5, 61));
    await fs.writeFile(path.join(dir, 'notes.txt'), 'next to it');
    const store = new MemoryBackend();
    const repo = await Repository.init(store, 'pw', { kdf: { N: 1024 } });
    const r = await backup(repo, { paths: [dir], blockFiles, listInPartsFrom: 64 });
    const base = (await lookup(repo, r.snapshot, file)).node!.blockBase!;
    const loc = repo.index.get(base)!;
    const pack = await store.load('data', loc.pack);
    pack[loc.offset + 20] ^= 0xff; // inside the sealed base list
    await store.save('data', loc.pack, pack);
    const report = await check(await Repository.open(store, 'pw'));
    expect(report.ok).toBe(false);
    const problem = report.problems.find((p) => p.object === `blob ${base}`);
    expect(problem?.kind).toBe('corrupt-blob');
    expect(problem?.affects).toEqual([`${r.snapshotId.slice(0, 8)}:${file}`]);
    // the folder's tree itself is sound, and the file next to it is not reported
    expect(report.problems.filter((p) => p.kind === 'corrupt-tree')).toEqual([]);
    expect(report.problems).toHaveLength(1);
    // a restore fails that file alone, and says why
    const out = await tempDir('tm-parts-out-');
    const rr = await restore(await Repository.open(store, 'pw'), { snapshot: r.snapshotId, target: out });
    expect(rr.errors.map((e) => e.path)).toEqual([file]);
    expect(rr.errors[0].message).toMatch(/base block list cannot be read/);
    expect(await fs.readFile(path.join(out, path.relative('/', dir), 'notes.txt'), 'utf8')).toBe(
      'next to it',
    );
  });

  it('nights patch the base, a new base comes when the patch grows, and prune keeps what they need', async () => {
    const dir = await tempDir('tm-parts-');
    const file = path.join(dir, 'disk.img');
    let size = 2 * MiB + 777;
    await fs.writeFile(file, randomBytes(size, 51));
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const listInPartsFrom = 64; // this file has 513 blocks
    const first = await backup(repo, { paths: [dir], blockFiles, listInPartsFrom });
    const node0 = (await lookup(repo, first.snapshot, file)).node!;
    expect(node0.blockBase).toBeDefined();
    expect(node0.blockPatch!.length).toBe(0);
    const rand = seededRandom(777);
    const nights: ((fh: fs.FileHandle) => Promise<{ offset: number; length: number }[]>)[] = [
      async (fh) => {
        const out = [];
        for (let i = 0; i < 12; i++) {
          const offset = rand(Math.floor(size / 4096)) * 4096;
          await fh.write(randomBytes(4096, 100 + i), 0, 4096, offset);
          out.push({ offset, length: 4096 });
        }
        return out;
      },
      async (fh) => {
        await fh.write(randomBytes(300_001, 9), 0, 300_001, size);
        const r = [{ offset: size, length: 300_001 }];
        size += 300_001;
        return r;
      },
      async (fh) => {
        const out = [];
        for (let i = 0; i < 6; i++) {
          const offset = rand(size - 20_000) + 1;
          await fh.write(randomBytes(10_001, 200 + i), 0, 10_001, offset);
          out.push({ offset, length: 10_001 });
        }
        return out;
      },
      async (fh) => {
        const cut = size - MiB - 123;
        await fh.truncate(cut);
        const r = [{ offset: cut, length: size - cut }];
        size = cut;
        return r;
      },
      async (fh) => {
        await fh.write(randomBytes(5000, 10), 0, 5000, 0);
        return [{ offset: 0, length: 5000 }];
      },
      async (fh) => {
        const out = [];
        for (let i = 0; i < 30; i++) {
          const offset = rand(Math.floor(size / 4096)) * 4096;
          await fh.write(randomBytes(4096, 300 + i), 0, 4096, offset);
          out.push({ offset, length: 4096 });
        }
        return out;
      },
    ];
    const snaps = [first.snapshotId];
    const bases = [node0.blockBase!];
    let patched = 0;
    for (const [night, edit] of nights.entries()) {
      const fh = await fs.open(file, 'r+');
      const changed = await edit(fh);
      await fh.close();
      // each night opens the repository afresh (nothing of the night before in its tree cache) and counts
      // the block lists it joins
      const nightly = await Repository.open(repo.backend, 'pw');
      let joins = 0;
      const join = nightly.joinBlockList.bind(nightly);
      nightly.joinBlockList = (n, where) => {
        joins++;
        return join(n, where);
      };
      const r = await backup(nightly, {
        paths: [dir],
        parent: snaps[snaps.length - 1],
        blockFiles,
        listInPartsFrom,
        changeHint: {
          dirtyDirs: new Set([dir]),
          cursor: { night },
          changedRanges: new Map([[file, changed]]),
        },
      });
      expect(r.snapshot.scanMode?.mode).toBe('blocks');
      const joinsDuringBackup = joins;
      const node = (await lookup(nightly, r.snapshot, file)).node!;
      if (node.blockBase === bases[bases.length - 1]) {
        patched++;
        expect(joinsDuringBackup).toBe(0); // a night's patch is made without loading the base list
      } else bases.push(node.blockBase!);
      expect(node.blockPatch!.length).toBeLessThanOrEqual((node.blockCount! * 32) / 8);
      snaps.push(r.snapshotId);
      // the list joined from its parts is the list of a whole read, and the file restores byte for byte
      const whole = await backup(nightly, {
        paths: [dir],
        blockFiles,
        forceFull: true,
        listInPartsFrom: 1e9,
      });
      expect(contentIds(node)).toEqual(contentIds((await lookup(nightly, whole.snapshot, file)).node!));
      await nightly.removeSnapshot(whole.snapshotId);
      const out = await tempDir('tm-parts-out-');
      await restore(nightly, { snapshot: r.snapshotId, target: out });
      expect(
        (await fs.readFile(path.join(out, path.relative('/', file)))).equals(await fs.readFile(file)),
      ).toBe(true);
    }
    expect(patched).toBeGreaterThanOrEqual(3); // most nights wrote a patch against the base
    expect(bases.length).toBeGreaterThanOrEqual(2); // and the growing patch brought a new base
    // only the last snapshot stays: what it needs (its base among it) must survive prune
    const last = await Repository.open(repo.backend, 'pw');
    for (const id of snaps.slice(0, -1)) await last.removeSnapshot(id);
    await prune(last, { graceMs: 0 });
    const fresh = await Repository.open(repo.backend, 'pw');
    const out = await tempDir('tm-parts-out-');
    await restore(fresh, { snapshot: snaps[snaps.length - 1], target: out });
    expect(
      (await fs.readFile(path.join(out, path.relative('/', file)))).equals(await fs.readFile(file)),
    ).toBe(true);
    const report = await check(fresh, { readData: true });
    expect(report.problems).toEqual([]);
    expect(report.ok).toBe(true);
  });
});
