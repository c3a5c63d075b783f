/**
 * A restore writes long runs of a large file's pieces past the page cache (O_DIRECT) where the target is
 * on a local disk's filesystem (the temp folder here and in CI): each run is gathered at its offset within
 * a block, its whole blocks are written direct and its partial first and last blocks through the cache.
 * Pieces start and end anywhere (content-defined chunks), all-zero pieces stay holes, and the bytes must
 * come back exactly whichever way each block went.
 */
import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { directIoFilesystem } from '../../src/main/engine/aligned.js';
import { describeTree, expectSameTrees, randomBytes, tempDir } from '../helpers/fixtures.js';

const MiB = 1024 * 1024;

/** Where two buffers first differ (-1: equal): what a failure shows instead of megabytes of bytes. */
function firstDifference(a: Buffer, b: Buffer): number {
  if (a.equals(b)) return -1;
  for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return i;
  return Math.min(a.length, b.length);
}

describe('restore past the page cache', () => {
  it('writes the whole blocks of large files direct and every byte back as it was', async () => {
    const dir = await tempDir('tm-restore-direct-');
    const src = path.join(dir, 'src');
    await fs.mkdir(src);
    // random data around a zero stretch (holes), an unaligned end; text that compresses; a small file
    const big = Buffer.concat([
      randomBytes(9 * MiB + 123, 1),
      Buffer.alloc(13 * MiB),
      randomBytes(7 * MiB + 4097, 2),
    ]);
    const text = Buffer.from(
      Array.from({ length: 300_000 }, (_, i) => `line ${i} of a log that compresses well\n`).join(''),
    );
    await fs.writeFile(path.join(src, 'big.bin'), big);
    await fs.writeFile(path.join(src, 'text.log'), text);
    await fs.writeFile(path.join(src, 'small.txt'), 'a file of one blob, written whole\n');
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const b = await backup(repo, { paths: [src] });
    expect(b.status).toBe('completed');

    const target = path.join(dir, 'out');
    const r = await restore(repo, { snapshot: b.snapshotId, target, relativeTo: src });
    expect(r.errors).toEqual([]);
    expect(firstDifference(await fs.readFile(path.join(target, 'big.bin')), big)).toBe(-1);
    expect(firstDifference(await fs.readFile(path.join(target, 'text.log')), text)).toBe(-1);
    expectSameTrees(await describeTree(src), await describeTree(target));
    // the zero stretch's all-zero chunks (4 MiB, the largest: two of them) are not written: holes
    expect((await fs.stat(path.join(target, 'big.bin'))).blocks * 512).toBeLessThan(big.length - 6 * MiB);

    if (await directIoFilesystem(target)) {
      // most of the large files' bytes went direct, in whole blocks only
      const nonZero = big.length - 13 * MiB + text.length;
      expect(r.bytesWrittenDirect).toBeGreaterThan(0.8 * nonZero);
      expect(r.bytesWrittenDirect).toBeLessThanOrEqual(big.length - 8 * MiB + text.length);
      expect(r.bytesWrittenDirect! % 4096).toBe(0);
    } else expect(r.bytesWrittenDirect).toBe(0);

    // again over the restored files (overwritten: removed and written anew)
    const again = await restore(repo, { snapshot: b.snapshotId, target, relativeTo: src });
    expect(again.errors).toEqual([]);
    expect(firstDifference(await fs.readFile(path.join(target, 'big.bin')), big)).toBe(-1);
  });
});
