/**
 * Scattered reads (src/main/engine/backup/scatterRead.ts): the native batch (native/fsmeta readScattered)
 * and the fs fallback read the same bytes into the same places, stop short at the end of the file, and
 * report a failed read with its error code. The native half is skipped, with the reason, when the addon
 * was not built.
 */
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  nativeScatteredReads,
  readFiles,
  readThreadsStarted,
  readScattered,
  type Piece,
} from '../../src/main/engine/backup/scatterRead.js';
import { directIoFilesystem, giveAligned, O_DIRECT, takeAligned } from '../../src/main/engine/aligned.js';
import { mtimeMsOf } from '../../src/main/engine/scan/index.js';

function fixture() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-scatter-'));
  const file = path.join(dir, 'f.bin');
  const data = randomBytes(3 * 1024 * 1024 + 777);
  fs.writeFileSync(file, data);
  return { dir, file, data, done: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

const modes: { name: string; native: boolean; skip?: string }[] = [
  { name: 'fs fallback', native: false },
  {
    name: 'native batch',
    native: true,
    skip: nativeScatteredReads
      ? undefined
      : 'native/fsmeta was not built (or Windows): the fallback is tested above',
  },
];

for (const mode of modes) {
  const suite = mode.skip ? describe.skip : describe;
  suite(`scattered reads: ${mode.name}${mode.skip ? ` (skipped: ${mode.skip})` : ''}`, () => {
    it('reads every piece into its place, in order, however many are in flight', async () => {
      const f = fixture();
      const fd = fs.openSync(f.file, 'r');
      try {
        // 2,000 random 8 KiB pieces out of order, a 1 MiB piece and a 1-byte piece
        const pieces: Piece[] = Array.from({ length: 2000 }, () => ({
          offset: Math.floor(Math.random() * (f.data.length - 8192)),
          length: 8192,
        }));
        pieces.push({ offset: 1000, length: 1 << 20 }, { offset: f.data.length - 1, length: 1 });
        for (const depth of [1, 7, 32]) {
          const { buffer, got } = await readScattered(fd, pieces, depth, { native: mode.native });
          let pos = 0;
          pieces.forEach((p, i) => {
            expect(got[i]).toBe(p.length);
            expect(
              buffer.subarray(pos, pos + p.length).equals(f.data.subarray(p.offset, p.offset + p.length)),
            ).toBe(true);
            pos += p.length;
          });
          expect(buffer.length).toBe(pos);
        }
      } finally {
        fs.closeSync(fd);
        f.done();
      }
    });

    it('stops short at the end of the file and says how much it got', async () => {
      const f = fixture();
      const fd = fs.openSync(f.file, 'r');
      try {
        const end = f.data.length;
        const { buffer, got } = await readScattered(
          fd,
          [
            { offset: end - 100, length: 4096 },
            { offset: end + 5000, length: 4096 },
            { offset: 0, length: 10 },
          ],
          4,
          { native: mode.native },
        );
        expect([...got]).toEqual([100, 0, 10]);
        expect(buffer.subarray(0, 100).equals(f.data.subarray(end - 100))).toBe(true);
        expect(buffer.subarray(8192, 8202).equals(f.data.subarray(0, 10))).toBe(true);
      } finally {
        fs.closeSync(fd);
        f.done();
      }
    });

    it('reads whole files into their places, each with its own result, however many are in flight', async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-readfiles-'));
      try {
        const datas = Array.from({ length: 300 }, (_, i) => randomBytes((i * 7919) % 70_000));
        const paths = datas.map((d, i) => {
          const p = path.join(dir, `f${i}`);
          fs.writeFileSync(p, d);
          return p;
        });
        fs.symlinkSync(paths[0], path.join(dir, 'link'));
        const names = [...paths, path.join(dir, 'missing'), path.join(dir, 'link'), dir];
        // one byte more than each file's size; the last file is 10 bytes longer than expected
        const limits = [...datas.map((d) => d.length + 1), 10, 10, 10];
        limits[299] -= 11;
        for (const depth of [1, 8, 32]) {
          const { buffer, files } = await readFiles(
            names.map((n) => Buffer.from(n)),
            limits,
            depth,
            { native: mode.native, ring: false }, // the threads (the io_uring: below)
          );
          expect(files).toHaveLength(names.length);
          let start = 0;
          datas.forEach((d, i) => {
            const r = files[i];
            expect(r.start).toBe(start);
            if (r.error) throw new Error(r.error.message);
            const want = Math.min(d.length, limits[i]);
            expect(r.n).toBe(want);
            expect(buffer.subarray(r.start, r.start + r.n).equals(d.subarray(0, want))).toBe(true);
            expect(r.size).toBe(d.length);
            expect(r.mtimeMs).toBe(mtimeMsOf(fs.statSync(paths[i], { bigint: true }).mtimeNs)); // as the scan takes it
            start += limits[i];
          });
          // a missing file, a symlink (never followed) and a folder fail on their own
          expect(files.slice(300).map((r) => r.error?.code)).toEqual(['ENOENT', 'ELOOP', 'EISDIR']);
          expect(files[300].error!.message).toMatch(/^ENOENT: no such file or directory, open '.*missing'$/);
        }
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    });

    it('rejects with the error code when a read fails', async () => {
      const f = fixture();
      const dirFd = fs.openSync(f.dir, 'r'); // reading a directory fails with EISDIR
      try {
        await expect(
          readScattered(dirFd, [{ offset: 0, length: 10 }], 2, { native: mode.native }),
        ).rejects.toMatchObject({
          code: 'EISDIR',
        });
      } finally {
        fs.closeSync(dirFd);
        f.done();
      }
    });
  });
}

describe('native batches', () => {
  it.skipIf(!nativeScatteredReads)(
    'keep the threads they start and use them again: many batches start no more than one does',
    async () => {
      const f = fixture();
      try {
        const names = Array.from({ length: 40 }, () => Buffer.from(f.file));
        const limits = names.map(() => 4096);
        const batch = () => readFiles(names, limits, 8, { native: true, ring: false });
        await batch();
        const started = readThreadsStarted();
        expect(started).toBeGreaterThanOrEqual(7); // depth 8: this thread and 7 of the addon's
        for (let i = 0; i < 50; i++) await batch();
        await Promise.all([batch(), batch()]); // two at once may need a second set, once
        const after = readThreadsStarted();
        expect(after).toBeLessThanOrEqual(started + 7);
        for (let i = 0; i < 20; i++) await Promise.all([batch(), batch()]);
        expect(readThreadsStarted()).toBe(after); // (each batch used to start and join 7 threads)
        const { files } = await batch();
        expect(files.every((r) => !r.error && r.n === 4096)).toBe(true);
      } finally {
        f.done();
      }
    },
  );
});

describe('native batches of whole files through an io_uring', () => {
  it.skipIf(!nativeScatteredReads)(
    'read what the threads read, file for file: bytes, sizes, times and errors, batch after batch',
    async (ctx) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-ring-'));
      try {
        // more files than one submission takes (64), of every size from empty to 200 KB
        const datas = Array.from({ length: 150 }, (_, i) => randomBytes((i * 104_729) % 200_000));
        const paths = datas.map((d, i) => {
          const p = path.join(dir, `f${i}`);
          fs.writeFileSync(p, d);
          return p;
        });
        fs.symlinkSync(paths[0], path.join(dir, 'link'));
        fs.mkdirSync(path.join(dir, 'sub'));
        const names = [...paths, path.join(dir, 'missing'), path.join(dir, 'link'), path.join(dir, 'sub')];
        // one byte more than each size; file 7 grew by 10 bytes since its size was taken, file 9 shrank
        const limits = [...datas.map((d) => d.length + 1), 10, 10, 10];
        limits[7] -= 11;
        limits[9] += 5000;
        const total = limits.reduce((a, b) => a + b, 0);
        // into zeroed buffers: nothing but each file's bytes is written, so the buffers compare whole
        const read = (ring: boolean) =>
          readFiles(
            names.map((n) => Buffer.from(n)),
            limits,
            8,
            { native: true, ring, into: Buffer.alloc(total) },
          );
        const threads = await read(false);
        const ring = await read(true);
        expect(threads.via).toBe('threads');
        if (ring.via !== 'ring')
          ctx.skip(`no io_uring here (kernel, kernel.io_uring_disabled or a sandbox): the threads read`);
        expect(ring.files).toEqual(threads.files);
        expect(ring.buffer.equals(threads.buffer)).toBe(true);
        expect(ring.files.slice(150).map((r) => r.error?.code)).toEqual(['ENOENT', 'ELOOP', 'EISDIR']);
        expect(ring.files[7]).toMatchObject({ n: limits[7], size: datas[7].length });
        expect(ring.files[9]).toMatchObject({ n: datas[9].length, size: datas[9].length });
        // and again on the same thread's ring, many times over, with a batch of one
        for (let k = 0; k < 20; k++) expect((await read(true)).files).toEqual(threads.files);
        const one = await readFiles([Buffer.from(paths[3])], [limits[3]], 8, { native: true, ring: true });
        expect(one.files[0]).toEqual({ ...threads.files[3], start: 0 });
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  );
});

/** A folder on a filesystem that reads O_DIRECT files past the page cache, or why there is none. */
async function directIoDir(): Promise<{ dir?: string; why?: string }> {
  if (!nativeScatteredReads) return { why: 'native/fsmeta was not built (or Windows)' };
  if (O_DIRECT === undefined) return { why: 'no O_DIRECT on this platform' };
  for (const base of [os.tmpdir(), process.cwd()])
    if (await directIoFilesystem(base)) return { dir: fs.mkdtempSync(path.join(base, 'tm-aio-')) };
  return { why: `neither ${os.tmpdir()} nor ${process.cwd()} is on a filesystem with direct I/O` };
}

const direct = await directIoDir();
describe.skipIf(!direct.dir)(
  `scattered reads of a direct-I/O file: AIO and threads${direct.why ? ` (skipped: ${direct.why})` : ''}`,
  () => {
    afterAll(() => {
      if (direct.dir) fs.rmSync(direct.dir, { recursive: true, force: true });
    });

    it('reads every piece into its place with the kernel AIO, more pieces than one AIO window holds, and the same as the threads do', async () => {
      const file = path.join(direct.dir!, 'f.bin');
      const data = randomBytes(3 * 1024 * 1024 + 777);
      fs.writeFileSync(file, data);
      const fd = fs.openSync(file, fs.constants.O_RDONLY | O_DIRECT!);
      const into = takeAligned(4 * 1024 * 1024);
      if (!into) throw new Error('no aligned memory');
      try {
        // 300 aligned 8 KiB pieces out of order, a 1 MiB piece, the short last 4 KiB unit, one past the end
        const units = Math.floor(data.length / 4096);
        const pieces: Piece[] = Array.from({ length: 300 }, () => ({
          offset: 4096 * Math.floor(Math.random() * (units - 2)),
          length: 8192,
        }));
        pieces.push(
          { offset: 4096, length: 1 << 20 },
          { offset: units * 4096, length: 4096 },
          { offset: (units + 2) * 4096, length: 4096 },
        );
        const results = [];
        for (const aio of [true, false]) {
          const r = await readScattered(fd, pieces, 24, { into, aio });
          expect(r.via).toBe(aio ? 'aio' : 'threads');
          let pos = 0;
          pieces.forEach((p, i) => {
            const want = Math.max(0, Math.min(p.length, data.length - p.offset));
            expect(r.got[i]).toBe(want);
            expect(r.buffer.subarray(pos, pos + want).equals(data.subarray(p.offset, p.offset + want))).toBe(
              true,
            );
            pos += p.length;
          });
          results.push(Buffer.from(r.buffer.subarray(0, pos)));
        }
        expect(results[0].equals(results[1])).toBe(true);
      } finally {
        giveAligned(into);
        fs.closeSync(fd);
      }
    });

    it('rejects a piece the kernel refuses for direct I/O with EINVAL, with AIO and with threads', async () => {
      const file = path.join(direct.dir!, 'g.bin');
      fs.writeFileSync(file, randomBytes(1 << 20));
      const fd = fs.openSync(file, fs.constants.O_RDONLY | O_DIRECT!);
      const into = takeAligned(1 << 20);
      if (!into) throw new Error('no aligned memory');
      try {
        for (const aio of [true, false]) {
          // an aligned piece first, then one at an offset no device block starts at
          const pieces = [
            { offset: 0, length: 4096 },
            { offset: 100, length: 4096 },
          ];
          await expect(readScattered(fd, pieces, 4, { into, aio })).rejects.toMatchObject({ code: 'EINVAL' });
        }
      } finally {
        giveAligned(into);
        fs.closeSync(fd);
      }
    });
  },
);
