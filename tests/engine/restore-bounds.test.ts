/**
 * A restore's memory is bounded by budgets, not by the snapshot: batches are handed over at a count of
 * files, of folders or of pieces, a file of many pieces is planned a slice at a time (waiting for room
 * in between), packs are read as ranges as soon as the plan is at its bound, and a worker gathers the
 * pieces of a file in runs of a fixed size (a longer piece is cut into runs). These tests make every
 * budget far smaller than what it bounds and check that everything still comes back byte-equal, with
 * its metadata, links and holes.
 */
import { describe, it, expect } from 'vitest';
import path from 'node:path';
import fs from 'node:fs/promises';
import { constants as FS, openSync, closeSync, ftruncateSync, readFileSync } from 'node:fs';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { PartWriter } from '../../src/main/engine/restore/worker/partWriter.js';
import type { DecodeFailures } from '../../src/main/engine/pool/wire.js';
import type { RestoreProgress } from '../../src/main/engine/operations.js';
import {
  tempDir,
  writeTree,
  randomBytes,
  seededRandom,
  describeTree,
  expectSameTrees,
  type TreeSpec,
} from '../helpers/fixtures.js';

const MiB = 1024 * 1024;

/** Folders of small files with varied sizes, modes and times. */
function smallFiles(folders: number, perFolder: number): TreeSpec {
  const rnd = seededRandom(7);
  const modes = [0o600, 0o644, 0o640, 0o755];
  const spec: TreeSpec = {};
  for (let d = 0; d < folders; d++) {
    const dir: TreeSpec = {};
    for (let i = 0; i < perFolder; i++)
      dir[`f${i}.${i % 3 ? 'txt' : 'bin'}`] = {
        file:
          i % 3 ? `folder ${d} file ${i}\n`.repeat(1 + rnd(200)) : randomBytes(1 + rnd(3000), d * 1000 + i),
        mode: modes[(d + i) % modes.length],
        mtime: new Date(Date.UTC(2020, d % 12, 1 + (i % 28), i % 24, d % 60, i % 60)),
      };
    spec[`d${String(d).padStart(3, '0')}`] = { dir, mode: d % 5 ? 0o755 : 0o750 };
  }
  return spec;
}

describe('restore within budgets', () => {
  it('restores small files across many folders, a folder of folders, large, sparse and linked files byte-equal in batches smaller than a folder', async () => {
    const work = await tempDir('tm-bounds-');
    const src = path.join(work, 'src');
    const wide: TreeSpec = {};
    for (let i = 0; i < 1100; i++) wide[`w${i}`] = { dir: {}, mode: i % 2 ? 0o700 : 0o755 }; // more than a batch of folders
    const sparse = Buffer.alloc(16 * MiB);
    randomBytes(300 * 1024, 9).copy(sparse, 2 * MiB + 77);
    const spec: TreeSpec = {
      many: { dir: smallFiles(40, 50) }, // 2,000 files, 50 to a folder
      wide: { dir: wide },
      big: {
        dir: {
          // chunks of up to 4 MiB: pieces longer than a worker's run, cut at a block of the file
          'random.bin': randomBytes(11 * MiB + 321, 3),
          'sparse.bin': sparse,
          empty: '',
          sym: { symlink: '../many/d001/f0.bin' },
        },
      },
    };
    await writeTree(src, spec);
    await fs.link(path.join(src, 'many/d000/f1.txt'), path.join(src, 'big/hard'));
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    const { snapshot } = await backup(repo, { paths: [src], workers: 1 });

    // a bound of 8 pieces: batches of 2 pieces (a folder of 50 files is many batches), the large file
    // planned 2 pieces at a time, packs queued long before all of each is planned
    const target = path.join(work, 'out');
    const events: RestoreProgress[] = [];
    const r = await restore(repo, {
      snapshot: snapshot.id,
      target,
      relativeTo: src,
      planLimit: 8,
      progress: (p) => events.push(p),
    });
    expect(r.errors).toEqual([]);
    expect(r.filesRestored).toBe(2000 + 3); // the hard link is made, not restored
    expectSameTrees(await describeTree(src), await describeTree(target));
    const [a, b] = [path.join(target, 'many/d000/f1.txt'), path.join(target, 'big/hard')];
    expect((await fs.stat(a)).ino).toBe((await fs.stat(b)).ino);
    // its all-zero chunks (up to 4 MiB each) stayed holes
    const st = await fs.stat(path.join(target, 'big/sparse.bin'));
    expect(st.blocks * 512).toBeLessThan(10 * MiB);
    const end = events[events.length - 1];
    expect(end).toMatchObject({ phase: 'done', filesDone: 2003, filesTotal: 2003 });
    expect(end.bytesDone).toBe(end.bytesTotal);

    // the same with the low memory mode's budgets and one worker: the same tree
    const low = path.join(work, 'low');
    const rl = await restore(repo, { snapshot: snapshot.id, target: low, relativeTo: src, memory: 'low' });
    expect(rl.errors).toEqual([]);
    expectSameTrees(await describeTree(src), await describeTree(low));
  });

  it('restores a block file of many pieces planned a slice at a time byte for byte', async () => {
    const work = await tempDir('tm-bounds-blocks-');
    const src = path.join(work, 'src');
    await fs.mkdir(src);
    // a block file: 4 KiB blocks, repeated, zero and distinct ones (binary block lists)
    const disk = Buffer.alloc(3 * MiB);
    for (let i = 0; i < disk.length / 4096; i++)
      if (i % 3 === 1) randomBytes(4096, i).copy(disk, i * 4096);
      else if (i % 3 === 2) disk.fill(i % 7, i * 4096, (i + 1) * 4096);
    await fs.writeFile(path.join(src, 'disk.img'), disk);
    await fs.writeFile(path.join(src, 'other.txt'), 'another file\n');
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    const { snapshot } = await backup(repo, { paths: [src], blockFiles: { minSize: MiB } });

    const target = path.join(work, 'out');
    const r = await restore(repo, { snapshot: snapshot.id, target, relativeTo: src, planLimit: 64 });
    expect(r.errors).toEqual([]);
    expect((await fs.readFile(path.join(target, 'disk.img'))).equals(disk)).toBe(true);
    expectSameTrees(await describeTree(src), await describeTree(target));
  });
});

describe('a worker part writer', () => {
  for (const direct of [true, false])
    it(`writes pieces longer than its run ${direct ? 'past the page cache' : 'through the cache'}, cut into runs, byte for byte`, async () => {
      const dir = await tempDir('tm-partwriter-');
      const file = path.join(dir, 'f');
      const size = 13 * MiB + 5000;
      const fd = openSync(file, FS.O_CREAT | FS.O_WRONLY, 0o600);
      ftruncateSync(fd, size);
      closeSync(fd);
      const want = Buffer.alloc(size);
      const p = new Uint8Array(Buffer.from(file));
      const failed: DecodeFailures = {};
      const w = new PartWriter(direct);
      // contiguous pieces of 5 MiB (unaligned start), 3 MiB and 1 byte, then a gap, then 2.5 MiB at an
      // unaligned offset; one all-zero piece (a hole)
      const pieces: [number, Buffer][] = [
        [100, randomBytes(5 * MiB, 1)],
        [100 + 5 * MiB, randomBytes(3 * MiB, 2)],
        [100 + 8 * MiB, randomBytes(1, 3)],
        [9 * MiB + 777, randomBytes(2.5 * MiB, 4)],
        [12 * MiB, Buffer.alloc(MiB)],
      ];
      pieces.forEach(([offset, data], i) => {
        w.add(p, offset, data, failed, i);
        data.copy(want, offset);
      });
      w.close();
      expect(failed).toEqual({});
      expect(readFileSync(file).equals(want)).toBe(true);
    });
});
