// Block-level change tracking against the real kernel: a loop-mounted ext4 image, the eBPF tracker, the
// store and FIEMAP. Every write path a program can use (pwrite, mmap+msync, O_DIRECT, append, truncate,
// punch-hole, zero-range, write-new-and-rename) is applied at random; the changed ranges reported must cover
// every byte that differs from the previous content. Needs root; skips with the reason otherwise.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cbtAvailability, directWrite, hasPython, makeLoopExt4, mmapWrite, type LoopFs } from './helpers.js';
import { BlockTracker } from '../../src/main/tracking/blocks/tracker.js';
import {
  BlockChangeSession,
  computeChangedRanges,
  type FileMapper,
} from '../../src/main/tracking/blocks/store.js';
import { loadCbtNative } from '../../src/main/tracking/blocks/native.js';
import type { ByteRange } from '../../src/main/tracking/blocks/ranges.js';

const avail = cbtAvailability();
if (!avail.ok) console.warn(`tests/cbt skipped: ${avail.reason}`);

/** Small deterministic PRNG so a failure can be replayed with the same seed. */
function prng(seed: number) {
  let s = seed >>> 0;
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)) };
}

/** Asserts every byte that differs between old and new (or lies beyond the old end) is inside ranges. */
export function expectCovered(name: string, oldBuf: Buffer, newBuf: Buffer, ranges: ByteRange[]): number {
  let missed = -1;
  let ri = 0;
  const sorted = [...ranges].sort((a, b) => a.offset - b.offset);
  let differing = 0;
  const B = 4096;
  for (let blk = 0; blk * B < newBuf.length; blk++) {
    const lo = blk * B;
    const hi = Math.min(newBuf.length, lo + B);
    if (hi <= oldBuf.length && oldBuf.subarray(lo, hi).equals(newBuf.subarray(lo, hi))) continue;
    for (let i = lo; i < hi; i++) {
      if (i < oldBuf.length && oldBuf[i] === newBuf[i]) continue;
      differing++;
      while (ri < sorted.length && sorted[ri].offset + sorted[ri].length <= i) ri++;
      const covered = ri < sorted.length && sorted[ri].offset <= i;
      if (!covered && missed < 0) missed = i;
    }
  }
  expect(
    missed,
    `${name}: changed byte at ${missed} not in ranges ${JSON.stringify(sorted.slice(0, 8))}`,
  ).toBe(-1);
  return differing;
}

const rangeBytes = (r: ByteRange[]) => r.reduce((n, x) => n + x.length, 0);

describe.skipIf(!avail.ok)('block tracking on a loop-mounted ext4 image', () => {
  let loop: LoopFs;
  let tracker: BlockTracker;
  let mapper: FileMapper;
  const MiB = 1 << 20;

  beforeAll(async () => {
    loop = makeLoopExt4(192);
    const load = loadCbtNative();
    if (!load.ok) throw new Error(load.reason);
    mapper = load.native;
    const t = await BlockTracker.start([loop.mnt]);
    if (!t.ok) throw new Error(t.reason);
    tracker = t.tracker;
  });
  afterAll(() => {
    tracker?.stop();
    loop?.cleanup();
  });

  it('tracks the loop disk itself, at 4 KiB granularity', () => {
    const st = tracker.status();
    expect(st.running).toBe(true);
    const [maj, min] = fs
      .readFileSync(`/sys/class/block/${path.basename(loop.loopDev)}/dev`, 'utf8')
      .trim()
      .split(':')
      .map(Number);
    expect(st.devices).toEqual([expect.objectContaining({ major: maj, minor: min, blockShift: 3 })]);
  });

  it('reports ranges covering every changed byte, for every write path, over several backups', async () => {
    const rnd = prng(Number(process.env.CBT_SEED ?? 20261130));
    const data = path.join(loop.mnt, 'data');
    fs.mkdirSync(data);
    const names = [
      'pwrite',
      'mmap',
      'direct',
      'append',
      'truncate',
      'punch',
      'zero',
      'cow',
      'untouched',
      'mixed',
    ];
    const files = names.map((n) => path.join(data, `${n}.bin`));
    for (const f of files) fs.writeFileSync(f, randomBytes(8 * MiB));
    const src = path.join(loop.dir, 'direct-src');
    fs.writeFileSync(src, randomBytes(64 * 4096));
    const storeDir = path.join(loop.dir, 'store');
    const logs: string[] = [];
    const opts = { dir: storeDir, consumer: 'job-1', tracker, mapper, log: (l: string) => logs.push(l) };

    // first backup: no baselines yet, every file is read whole
    let s = await BlockChangeSession.begin([data], opts);
    const whole = new Map<string, string>();
    let m = await computeChangedRanges(files, s, { onWholeFile: (f, r) => whole.set(path.basename(f), r) });
    expect(m.size).toBe(0);
    expect(whole.get('pwrite.bin')).toMatch(/no baseline/);
    expect(logs.join('\n')).toMatch(/no change-tracking store yet/);
    await s.commit();

    const pwrite = (f: string, off: number, buf: Buffer) => {
      const fd = fs.openSync(f, 'r+');
      fs.writeSync(fd, buf, 0, buf.length, off);
      fs.closeSync(fd);
    };
    const size = (f: string) => fs.statSync(f).size;
    for (let round = 1; round <= 3; round++) {
      const before = new Map(files.map((f) => [f, fs.readFileSync(f)]));
      const [fPwrite, fMmap, fDirect, fAppend, fTrunc, fPunch, fZero, fCow, , fMixed] = files;
      for (let i = 0; i < 12; i++)
        pwrite(fPwrite, rnd.int(0, size(fPwrite) - 1), randomBytes(rnd.int(1, 20000)));
      // a large in-place write (requests spanning many bitmap words take the kernel's loop path)
      if (round === 2) pwrite(fPwrite, rnd.int(0, size(fPwrite) - 3 * MiB), randomBytes(3 * MiB));
      if (hasPython())
        for (let i = 0; i < 4; i++)
          mmapWrite(fMmap, rnd.int(0, size(fMmap) - 70000), randomBytes(rnd.int(1, 65536)));
      else pwrite(fMmap, rnd.int(0, size(fMmap) - 100), randomBytes(50));
      for (let i = 0; i < 4; i++)
        directWrite(fDirect, src, rnd.int(0, size(fDirect) / 4096 - 5), rnd.int(1, 4));
      fs.appendFileSync(fAppend, randomBytes(rnd.int(1, 300000)));
      fs.truncateSync(fTrunc, rnd.int(Math.floor(size(fTrunc) / 2), size(fTrunc) - 1));
      if (round === 2) fs.truncateSync(fTrunc, size(fTrunc) + rnd.int(1, 2 * MiB)); // extend with a hole
      execFileSync('fallocate', [
        '-p',
        '-o',
        String(rnd.int(0, 4 * MiB)),
        '-l',
        String(rnd.int(1, 2 * MiB)),
        fPunch,
      ]);
      execFileSync('fallocate', [
        '-z',
        '-o',
        String(rnd.int(0, 4 * MiB)),
        '-l',
        String(rnd.int(1, 2 * MiB)),
        fZero,
      ]);
      const tmp = `${fCow}.tmp`;
      const cow = Buffer.from(before.get(fCow)!);
      randomBytes(1000).copy(cow, rnd.int(0, cow.length - 1000));
      fs.writeFileSync(tmp, cow);
      fs.renameSync(tmp, fCow);
      pwrite(fMixed, rnd.int(0, size(fMixed) - 5000), randomBytes(5000));
      execFileSync('fallocate', [
        '-p',
        '-o',
        String(rnd.int(0, 2 * MiB)),
        '-l',
        String(rnd.int(4096, MiB)),
        fMixed,
      ]);
      fs.appendFileSync(fMixed, randomBytes(rnd.int(1, 10000)));

      s = await BlockChangeSession.begin([data], opts);
      whole.clear();
      m = await computeChangedRanges(files, s, { onWholeFile: (f, r) => whole.set(path.basename(f), r) });
      const differing = new Map<string, number>();
      for (const f of files) {
        const after = fs.readFileSync(f);
        const ranges = m.get(f);
        if (!ranges) continue; // read whole: always correct
        differing.set(
          path.basename(f),
          expectCovered(`round ${round} ${path.basename(f)}`, before.get(f)!, after, ranges),
        );
      }
      expect(differing.get('pwrite.bin')).toBeGreaterThan(0);
      // the incremental path is really taken (except for the file replaced by a new inode)
      expect(whole.get('cow.bin'), `round ${round}`).toMatch(/new inode/);
      for (const n of names.filter((x) => x !== 'cow'))
        expect(m.has(path.join(data, `${n}.bin`)), `${n} round ${round}: ${whole.get(`${n}.bin`)}`).toBe(
          true,
        );
      expect(m.get(path.join(data, 'untouched.bin'))).toEqual([]);
      // (not mmap: the kernel writes back whole large folios, up to 2 MiB, for a one-byte store through a
      // mapping, and the tracker faithfully reports those writes)
      for (const n of ['pwrite', 'direct', 'punch', 'zero']) {
        expect(rangeBytes(m.get(path.join(data, `${n}.bin`))!), n).toBeLessThan(
          size(path.join(data, `${n}.bin`)) / 2,
        );
      }
      await s.commit();
    }
  });

  it('a backup that is never committed keeps the older baseline, so its changes are reported again', async () => {
    const f = path.join(loop.mnt, 'uncommitted.bin');
    fs.writeFileSync(f, randomBytes(4 * MiB));
    const opts = { dir: path.join(loop.dir, 'store'), consumer: 'job-2', tracker, mapper };
    let s = await BlockChangeSession.begin([loop.mnt], opts);
    await computeChangedRanges([f], s);
    await s.commit();
    const v0 = fs.readFileSync(f);
    const fd = fs.openSync(f, 'r+');
    fs.writeSync(fd, Buffer.alloc(100, 1), 0, 100, 1000);
    fs.closeSync(fd);
    s = await BlockChangeSession.begin([loop.mnt], opts); // this backup "fails": no commit
    expect((await computeChangedRanges([f], s)).get(f)).toEqual([{ offset: 0, length: 4096 }]);
    const fd2 = fs.openSync(f, 'r+');
    fs.writeSync(fd2, Buffer.alloc(100, 2), 0, 100, 3 * MiB);
    fs.closeSync(fd2);
    s = await BlockChangeSession.begin([loop.mnt], opts);
    const r = (await computeChangedRanges([f], s)).get(f)!;
    expect(r).toEqual([
      { offset: 0, length: 4096 },
      { offset: 3 * MiB, length: 4096 },
    ]);
    expectCovered('uncommitted', v0, fs.readFileSync(f), r);
  });

  it('a write made while a backup runs (after its swap) is reported by the next backup', async () => {
    const f = path.join(loop.mnt, 'during.bin');
    fs.writeFileSync(f, randomBytes(2 * MiB));
    const opts = { dir: path.join(loop.dir, 'store'), consumer: 'job-3', tracker, mapper };
    let s = await BlockChangeSession.begin([loop.mnt], opts);
    await computeChangedRanges([f], s);
    await s.commit();
    s = await BlockChangeSession.begin([loop.mnt], opts);
    expect((await computeChangedRanges([f], s)).get(f)).toEqual([]);
    // the backup is "reading" now; a buffered write and an O_DIRECT write land meanwhile
    const fd = fs.openSync(f, 'r+');
    fs.writeSync(fd, Buffer.alloc(10, 3), 0, 10, 40960);
    fs.closeSync(fd);
    directWrite(f, f, 300, 1); // copies block 0 over block 300
    await s.commit();
    s = await BlockChangeSession.begin([loop.mnt], opts);
    expect((await computeChangedRanges([f], s)).get(f)).toEqual([
      { offset: 40960, length: 4096 },
      { offset: 300 * 4096, length: 4096 },
    ]);
  });

  it("one job's backup does not consume another job's changes", async () => {
    const f = path.join(loop.mnt, 'shared.bin');
    fs.writeFileSync(f, randomBytes(2 * MiB));
    const a = { dir: path.join(loop.dir, 'store'), consumer: 'job-a', tracker, mapper };
    const b = { ...a, consumer: 'job-b' };
    for (const o of [a, b]) {
      const s = await BlockChangeSession.begin([loop.mnt], o);
      await computeChangedRanges([f], s);
      await s.commit();
    }
    const fd = fs.openSync(f, 'r+');
    fs.writeSync(fd, Buffer.alloc(10, 9), 0, 10, 8192);
    fs.closeSync(fd);
    const sa = await BlockChangeSession.begin([loop.mnt], a);
    expect((await computeChangedRanges([f], sa)).get(f)).toEqual([{ offset: 8192, length: 4096 }]);
    await sa.commit();
    const sb = await BlockChangeSession.begin([loop.mnt], b);
    expect((await computeChangedRanges([f], sb)).get(f)).toEqual([{ offset: 8192, length: 4096 }]);
    await sb.commit();
  });
});
