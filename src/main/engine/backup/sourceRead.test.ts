/**
 * Whole-file reads past the page cache (sourceRead.ts): byte for byte whatever the size (aligned or
 * not, however the caller asks), and through the page cache where direct I/O is refused at open or at
 * the first read (simulated: the filesystems here accept it).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { DIRECT_READ_MIN_BYTES, SourceReader } from './sourceRead.js';
import { O_DIRECT, directIoFilesystem } from '../aligned.js';

const MiB = 1024 * 1024;
/** Whether files in the temp folder are read directly at all (a local disk's filesystem). */
const directHere = await directIoFilesystem(os.tmpdir());
const dirs: string[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

async function fileOf(size: number): Promise<{ file: string; data: Buffer }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tm-source-'));
  dirs.push(dir);
  const file = path.join(dir, 'f.bin');
  const data = crypto.randomBytes(size);
  await fs.writeFile(file, data);
  return { file, data };
}

/** Reads the whole file the way the backup does: into a buffer, in requests of varying length. */
async function readAll(r: SourceReader, size: number): Promise<Buffer> {
  const out = Buffer.alloc(size + 10);
  let end = 0;
  for (let i = 0; ; i++) {
    const want = Math.min(out.length - end, 1 + ((i * 777_777) % (3 * MiB)));
    const n = await r.read(out, end, want);
    if (n === 0) break;
    end += n;
  }
  return out.subarray(0, end);
}

describe('reading a source file past the page cache', () => {
  for (const size of [DIRECT_READ_MIN_BYTES, 5 * MiB, 9 * MiB + 123, 1000]) {
    it(`reads ${size} bytes byte for byte`, async () => {
      const { file, data } = await fileOf(size);
      const r = await SourceReader.open(Buffer.from(file), size);
      try {
        expect(r.direct).toBe(size >= DIRECT_READ_MIN_BYTES && (await directIoFilesystem(file)));
        expect((await readAll(r, size)).equals(data)).toBe(true);
        expect((await r.stat({ bigint: true })).size).toBe(BigInt(size));
      } finally {
        await r.close();
      }
    });
  }

  it('reads through the page cache where direct I/O is refused at open (EINVAL)', async () => {
    const { file, data } = await fileOf(6 * MiB + 5);
    const open = fs.open.bind(fs);
    vi.spyOn(fs, 'open').mockImplementation((async (p: Buffer, flags: number) => {
      if (O_DIRECT !== undefined && flags & O_DIRECT)
        throw Object.assign(new Error('EINVAL: invalid argument, open'), { code: 'EINVAL' });
      return open(p, flags);
    }) as typeof fs.open);
    const r = await SourceReader.open(Buffer.from(file), data.length);
    try {
      expect(r.direct).toBe(false);
      expect((await readAll(r, data.length)).equals(data)).toBe(true);
    } finally {
      await r.close();
    }
  });

  it.skipIf(!directHere)(
    `goes on through the page cache, from where it was, when a direct read is refused${directHere ? '' : ' (skipped: the temp folder is not on a local disk filesystem, so nothing is read directly to refuse)'}`,
    async () => {
      const { file, data } = await fileOf(7 * MiB + 99);
      const open = fs.open.bind(fs);
      let directReads = 0;
      vi.spyOn(fs, 'open').mockImplementation((async (p: Buffer, flags: number) => {
        const fh = await open(p, flags);
        if (!(flags & O_DIRECT!)) return fh;
        const read = fh.read.bind(fh) as (...a: unknown[]) => Promise<{ bytesRead: number }>;
        // the third direct read fails as on a filesystem that opens files for direct I/O but refuses reads
        (fh as unknown as { read: unknown }).read = (...a: unknown[]) =>
          ++directReads === 3
            ? Promise.reject(Object.assign(new Error('EINVAL: invalid argument, read'), { code: 'EINVAL' }))
            : read(...a);
        return fh;
      }) as typeof fs.open);
      const r = await SourceReader.open(Buffer.from(file), data.length);
      try {
        expect(r.direct).toBe(true);
        expect((await readAll(r, data.length)).equals(data)).toBe(true);
        expect(r.direct).toBe(false);
        expect(directReads).toBe(3);
      } finally {
        await r.close();
      }
    },
  );
});
