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
import { ALIGN, O_DIRECT, directIoFilesystem, takeAligned } from '../aligned.js';

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

  it('reads into aligned memory at aligned offsets directly, and anywhere else through its stage', async () => {
    const size = 9 * MiB + 123;
    const { file, data } = await fileOf(size);
    const r = await SourceReader.open(Buffer.from(file), size);
    const into = takeAligned(12 * MiB)!;
    const direct = r.direct;
    const read = vi.spyOn((r as unknown as { fh: fs.FileHandle }).fh, 'read');
    try {
      // the way the backup reads: the unread rest moved so that it ends at an aligned offset, then filled
      let start = 0;
      let end = 0;
      const got: Buffer[] = [];
      for (let i = 0; ; i++) {
        const n = await r.readAligned(into, end, into.length - end);
        if (n === 0) break;
        end += n;
        const take = Math.min(end - start, 5 * MiB + i * 1001); // consume part, keep the rest
        got.push(Buffer.from(into.subarray(start, start + take)));
        start += take;
        const keep = end - start;
        const to = (ALIGN - (keep % ALIGN)) % ALIGN;
        into.copy(into, to, start, end);
        start = to;
        end = to + keep;
      }
      got.push(Buffer.from(into.subarray(start, end)));
      expect(Buffer.concat(got).equals(data)).toBe(true);
      // direct reads went straight into `into` (no 1 MiB stage between): a few large reads
      if (direct) {
        expect(read.mock.calls.length).toBeGreaterThan(0);
        expect(read.mock.calls.length).toBeLessThanOrEqual(3);
        expect(read.mock.calls.every((c) => (c[0] as unknown) === into)).toBe(true);
      }
      // an unaligned offset is served through the stage, byte for byte
      const again = await SourceReader.open(Buffer.from(file), size);
      try {
        const n = await again.readAligned(into, 100, 2 * MiB);
        expect(n).toBeGreaterThan(0);
        expect(into.subarray(100, 100 + n).equals(data.subarray(0, n))).toBe(true);
        let end2 = 100 + n;
        for (let k; (k = await again.readAligned(into, end2, into.length - end2));) end2 += k;
        expect(into.subarray(100, end2).equals(data)).toBe(true);
      } finally {
        await again.close();
      }
    } finally {
      await r.close();
    }
  });

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
