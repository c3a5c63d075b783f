// Benchmark of block-level change tracking (issue 5). Run as root: `npm run bench:cbt`.
//
// 1. A 2 GiB page-structured file (4 KiB pages, like a database or VM disk) on a loop-mounted ext4 image
//    (direct I/O to the backing file, so reads after dropping the file's cache really hit the disk), backed
//    up once; then 1% of its pages are rewritten at random. Compared, all from a cold cache:
//    a. the tracker alone: sync + swap + FIEMAP + reading only the changed ranges, vs reading the whole file;
//    b. the real engine: an incremental backup given ChangeHint.changedRanges vs one without (which reads
//       the changed file whole) — bytes read and wall time. The file is named pages.db, so the engine cuts it
//       into fixed-size blocks (4 KiB for 2 GiB: a "block file", src/main/engine/backup/blockFiles.ts);
//    plus what widening every range to the enclosing FastCDC chunks of the previous version costs (1 MiB and
//    64 KiB averages), and what coarser tracking granularities would read.
// 2. Tracker overhead on write throughput: fio sequential (1 MiB) and random (4 KiB) O_DIRECT writes on
//    the same filesystem, alternating runs without and with the tracker (median of 4, ABBA order), plus the
//    CPU time the eBPF programs themselves spend per write (kernel.bpf_stats_enabled), which noise cannot hide.
//
// Environment: CBT_BENCH_MIB (file size, default 2048), CBT_BENCH_DIR (where the image lives, default tmp),
// CBT_BENCH_ON=DIR (no loop device: use the filesystem of DIR and its disk), CBT_BENCH_FIO=0 skips the
// write-overhead part, CBT_BENCH_REPEAT=N adds N more nights of 1% each (block-tracked incrementals, each
// from the one before) and two more whole-file runs, and compares the medians.
import '../src/main/engineHost.js'; // the process settings of the app's engine processes (pool size, V8 tiering)
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { makeLoopExt4 } from '../tests/cbt/helpers.js';
import { BlockTracker } from '../src/main/tracking/blocks/tracker.js';
import {
  BlockChangeSession,
  computeChangedRanges,
  windowsTouched,
} from '../src/main/tracking/blocks/store.js';
import { loadCbtNative } from '../src/main/tracking/blocks/native.js';
import type { ByteRange } from '../src/main/tracking/blocks/ranges.js';
import { DEFAULT_CHUNKER, FastCDC, gearTable } from '../src/main/engine/chunk/index.js';
import { LocalBackend } from '../src/main/engine/backend/local/index.js';
import { Repository } from '../src/main/engine/repo/repository.js';
import { backup } from '../src/main/engine/backup/index.js';
import { restore } from '../src/main/engine/restore/index.js';
import { lookup } from '../src/main/engine/repo/browse.js';
import { contentIds } from '../src/main/engine/repo/tree.js';
import { nativeScatteredReads, readScattered } from '../src/main/engine/backup/scatterRead.js';
import { directIoFilesystem, giveAligned, O_DIRECT, takeAligned } from '../src/main/engine/aligned.js';

const MiB = 1 << 20;
const PAGE = 4096;
const SIZE = Number(process.env.CBT_BENCH_MIB ?? 2048) * MiB;
const fmt = (b: number) =>
  b >= 1 << 30 ? `${(b / (1 << 30)).toFixed(2)} GiB` : `${(b / MiB).toFixed(1)} MiB`;
const ms = (t: number) => `${t.toFixed(0)} ms`;
const now = () => performance.now();

if (process.getuid?.() !== 0) {
  console.error('bench:cbt needs root (eBPF, loop devices, mount)');
  process.exit(1);
}
const load = loadCbtNative();
if (!load.ok) {
  console.error(`bench:cbt: ${load.reason}`);
  process.exit(1);
}
const native = load.native;

function dropFileCache(file: string): void {
  // write back dirty pages first (a dirty page cannot be dropped), then drop the whole page cache
  // (we run as root); GNU dd iflag=nocache count=0 also drops the file's own pages
  execFileSync('sync');
  fs.writeFileSync('/proc/sys/vm/drop_caches', '3');
  execFileSync('dd', [`if=${file}`, 'iflag=nocache', 'count=0', 'status=none']);
}

/** Reads the ranges through the page cache with `depth` reads in flight (fs reads: the libuv pool), in
 *  pieces of at most 4 MiB; returns the bytes read. (The whole file, the plain way; the changed ranges are
 *  read as the engine reads them: readLikeEngine.) */
async function readRanges(file: string, ranges: ByteRange[], depth: number): Promise<number> {
  const fh = await fs.promises.open(file, 'r');
  const pieces: [number, number][] = [];
  for (const r of ranges)
    for (let o = r.offset; o < r.offset + r.length; o += 4 * MiB)
      pieces.push([o, Math.min(4 * MiB, r.offset + r.length - o)]);
  let next = 0;
  let total = 0;
  const worker = async () => {
    const buf = Buffer.allocUnsafe(4 * MiB);
    while (next < pieces.length) {
      const [off, len] = pieces[next++];
      const { bytesRead } = await fh.read(buf, 0, len, off);
      total += bytesRead;
    }
  };
  try {
    await Promise.all(Array.from({ length: depth }, worker));
  } finally {
    await fh.close();
  }
  return total;
}

/** Reads the ranges as the engine reads a block file's changed blocks (src/main/engine/backup/scatterRead.ts):
 *  past the page cache where the filesystem allows (O_DIRECT into aligned buffers, AIO in the addon), in
 *  batches of up to 256 pieces / 4 MiB, two batches at once; returns the bytes read and how. */
async function readLikeEngine(file: string, ranges: ByteRange[]): Promise<{ got: number; how: string }> {
  const direct = (await directIoFilesystem(file)) && O_DIRECT !== undefined;
  const pieces: ByteRange[] = [];
  for (const r of [...ranges].sort((a, b) => a.offset - b.offset)) {
    // direct reads take whole 4 KiB units
    const start = direct ? Math.floor(r.offset / PAGE) * PAGE : r.offset;
    const end = direct ? Math.ceil((r.offset + r.length) / PAGE) * PAGE : r.offset + r.length;
    for (let o = start; o < end; o += MiB) pieces.push({ offset: o, length: Math.min(MiB, end - o) });
  }
  const batches: ByteRange[][] = [];
  let bytes = 0;
  for (const r of pieces) {
    const last = batches[batches.length - 1];
    if (last && last.length < 256 && bytes + r.length <= 4 * MiB) {
      last.push(r);
      bytes += r.length;
    } else {
      batches.push([r]);
      bytes = r.length;
    }
  }
  const fd = fs.openSync(file, direct ? fs.constants.O_RDONLY | O_DIRECT! : fs.constants.O_RDONLY);
  let got = 0;
  let next = 0;
  const via = new Set<string>();
  try {
    await Promise.all(
      [0, 1].map(async () => {
        const into = direct ? takeAligned(4 * MiB) : undefined;
        try {
          while (next < batches.length) {
            const r = await readScattered(fd, batches[next++], 24, { into });
            via.add(r.via);
            for (const n of r.got) got += n;
          }
        } finally {
          if (into) giveAligned(into);
        }
      }),
    );
  } finally {
    fs.closeSync(fd);
  }
  return {
    got,
    how: `${direct ? 'direct I/O, ' : ''}${[...via].join('/')}${nativeScatteredReads ? ', native batches' : ''}`,
  };
}

/** CPU time the tracker's eBPF programs spent (kernel.bpf_stats_enabled): {ns, runs} summed over them. */
function bpfStats(): { ns: number; runs: number } {
  try {
    const progs = JSON.parse(execFileSync('bpftool', ['prog', 'show', '--json'], { encoding: 'utf8' })) as {
      name?: string;
      run_time_ns?: number;
      run_cnt?: number;
    }[];
    let ns = 0;
    let runs = 0;
    for (const p of progs)
      if (p.name?.startsWith('cbt_')) {
        ns += p.run_time_ns ?? 0;
        runs += p.run_cnt ?? 0;
      }
    return { ns, runs };
  } catch {
    return { ns: 0, runs: 0 };
  }
}

/** CBT_PROFILE=FILE: a CPU profile of the main thread during the tracked incremental (.cpuprofile). */
async function startProfile() {
  const { Session } = await import('node:inspector/promises');
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 200 });
  await session.post('Profiler.start');
  return {
    stop: async (file: string) => {
      const { profile } = await session.post('Profiler.stop');
      fs.writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
    },
  };
}

/** Rewrites k distinct random pages of the file with new random content (fsynced); returns their numbers. */
function rewritePages(file: string, k: number): Set<number> {
  const pages = SIZE / PAGE;
  const chosen = new Set<number>();
  while (chosen.size < k) chosen.add(Math.floor(Math.random() * pages));
  const fd = fs.openSync(file, 'r+');
  for (const p of chosen) {
    const b = randomBytes(PAGE);
    b.writeBigUInt64LE(BigInt(p), 0);
    fs.writeSync(fd, b, 0, PAGE, p * PAGE);
  }
  fs.fsyncSync(fd);
  fs.closeSync(fd);
  return chosen;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** CBT_BENCH_ON=DIR: the file lives in DIR on the filesystem already there (its real disk, shared with
 *  everything else) instead of on a loop device; the loop device's random reads are much slower. */
function onExistingFs(dir: string) {
  const base = fs.mkdtempSync(path.join(dir, 'tm-cbt-'));
  const mnt = path.join(base, 'src');
  fs.mkdirSync(mnt);
  const dev = execFileSync('findmnt', ['-n', '-o', 'SOURCE', '--target', base], { encoding: 'utf8' }).trim();
  return { mnt, dir: base, loopDev: dev, cleanup: () => fs.rmSync(base, { recursive: true, force: true }) };
}

const loop = process.env.CBT_BENCH_ON
  ? onExistingFs(process.env.CBT_BENCH_ON)
  : makeLoopExt4(Math.ceil(SIZE / MiB) + 1024, {
      directIo: true,
      parentDir: process.env.CBT_BENCH_DIR ?? os.tmpdir(),
    });
let tracker: BlockTracker | undefined;
try {
  const file = path.join(loop.mnt, 'pages.db');
  console.log(
    `bench:cbt — ${fmt(SIZE)} page-structured file on ${loop.loopDev} ${process.env.CBT_BENCH_ON ? `(the filesystem of ${process.env.CBT_BENCH_ON})` : '(ext4 on a loop device, direct I/O to the image)'}`,
  );

  // --- the file, and the FastCDC chunk boundaries of this first version (what a previous snapshot holds)
  // the default chunker (1 MiB average) and a small one (64 KiB average) for comparison
  const chunkers = [
    { label: '1 MiB-avg', cdc: new FastCDC(DEFAULT_CHUNKER, gearTable('bench-cbt')), ends: [] as number[] },
    {
      label: '64 KiB-avg',
      cdc: new FastCDC({ min: 16 * 1024, avg: 64 * 1024, max: 256 * 1024 }, gearTable('bench-cbt')),
      ends: [] as number[],
    },
  ];
  const chunkEnds = chunkers[0].ends;
  {
    const fd = fs.openSync(file, 'w');
    const batch = 8 * MiB;
    // each chunker keeps its own unconsumed tail; both see the same byte stream
    const state = chunkers.map(() => ({ pending: Buffer.alloc(0), pos: 0 }));
    for (let off = 0; off < SIZE; off += batch) {
      const b = randomBytes(batch);
      for (let p = 0; p < batch; p += PAGE) b.writeBigUInt64LE(BigInt((off + p) / PAGE), p); // page header
      fs.writeSync(fd, b, 0, b.length, off);
      const eof = off + batch >= SIZE;
      chunkers.forEach((c, i) => {
        const st = state[i];
        st.pending = st.pending.length ? Buffer.concat([st.pending, b]) : b;
        let start = 0;
        for (;;) {
          const n = c.cdc.nextCut(st.pending, start, st.pending.length, eof);
          if (n === 0) break;
          st.pos += n;
          c.ends.push(st.pos);
          start += n;
          if (start >= st.pending.length) break;
        }
        st.pending = st.pending.subarray(start);
      });
    }
    fs.fsyncSync(fd);
    fs.closeSync(fd);
  }
  console.log(`  previous version: ${chunkEnds.length} FastCDC chunks (avg ${fmt(SIZE / chunkEnds.length)})`);

  const t = await BlockTracker.start([loop.mnt]);
  if (!t.ok) throw new Error(t.reason);
  tracker = t.tracker;
  const opts = { dir: path.join(loop.dir, 'store'), consumer: 'bench', tracker, mapper: native };
  const repo = await Repository.init(new LocalBackend(path.join(loop.dir, 'repo')), 'pw', {
    kdf: { N: 1024 },
  });
  let s = await BlockChangeSession.begin([loop.mnt], opts);
  await computeChangedRanges([file], s);
  dropFileCache(file);
  let tb = now();
  const first = await backup(repo, { paths: [loop.mnt], job: 'bench', blockFiles: {} });
  const firstTime = now() - tb;
  await s.commit(first.snapshotId, [file]);
  console.log(`  first (full) backup: ${fmt(first.snapshot.stats.bytesRead)} read in ${ms(firstTime)}`);

  // --- rewrite 1% of the pages at random
  const k = Math.round((SIZE / PAGE) * 0.01);
  const chosen = rewritePages(file, k);
  const written = k * PAGE;
  console.log(`  rewrote ${k} random pages = ${fmt(written)} (1% of the file)`);

  // --- incremental with block tracking (cold cache)
  dropFileCache(file);
  const t0 = now();
  s = await BlockChangeSession.begin([loop.mnt], { ...opts, parentSnapshot: first.snapshotId });
  const t1 = now();
  const ranges = (await computeChangedRanges([file], s)).get(file);
  const t2 = now();
  if (!ranges) throw new Error('block tracking fell back to a whole-file read');
  const { got: readCbt, how: readHow } = await readLikeEngine(file, ranges);
  const t3 = now();
  // (not committed: the engine runs below start again from the first backup's baseline)
  const missed = [...chosen].filter(
    (p) => !ranges.some((r) => r.offset <= p * PAGE && p * PAGE + PAGE <= r.offset + r.length),
  );
  if (missed.length) throw new Error(`BUG: ${missed.length} rewritten pages not in the ranges`);

  // --- without: read the whole file (cold cache)
  dropFileCache(file);
  const t4 = now();
  const readFull = await readRanges(file, [{ offset: 0, length: SIZE }], 4);
  const t5 = now();

  // --- the engine: incremental with the ranges vs without (both from the first snapshot, cold cache)
  dropFileCache(file);
  // as the app runs it (src/main/tracking/service.ts journalBackup): the tracker's sync, swap and FIEMAP
  // go on while the backup opens the repository and loads the previous trees
  const prof = process.env.CBT_PROFILE ? await startProfile() : undefined;
  tb = now();
  const rangesReady = (async () => {
    s = await BlockChangeSession.begin([loop.mnt], { ...opts, parentSnapshot: first.snapshotId });
    return computeChangedRanges([file], s);
  })();
  const withCbt = await backup(repo, {
    paths: [loop.mnt],
    job: 'bench',
    blockFiles: {},
    parent: first.snapshotId,
    changeHint: { dirtyDirs: new Set([loop.mnt]), cursor: {}, changedRanges: rangesReady },
  });
  const engineCbtTime = now() - tb;
  const changedRanges = await rangesReady;
  if (prof) await prof.stop(process.env.CBT_PROFILE!);
  await s.commit(withCbt.snapshotId, [file]);
  dropFileCache(file);
  tb = now();
  const withoutCbt = await backup(repo, {
    paths: [loop.mnt],
    job: 'bench',
    blockFiles: {},
    parent: first.snapshotId,
  });
  const engineFullTime = now() - tb;
  const blockSize = (await lookup(repo, withCbt.snapshot, file)).node?.blockSize;
  const lookupFile = async (snap: typeof withCbt.snapshot) => {
    const node = (await lookup(repo, snap, file)).node;
    return node ? contentIds(node) : [];
  };
  const listed = await lookupFile(withCbt.snapshot);
  const same = listed.length > 0 && listed.join() === (await lookupFile(withoutCbt.snapshot)).join();

  // --- CBT_BENCH_REPEAT=N: N more nights, each rewriting another 1% of the pages (new content) and
  // backing up with the ranges from the night before (as the app runs it), cold cache each time
  const series: number[] = [];
  let last = withCbt.snapshotId;
  for (let night = 0; night < Number(process.env.CBT_BENCH_REPEAT ?? 0); night++) {
    rewritePages(file, k);
    dropFileCache(file);
    const tn = now();
    const arriving = (async () => {
      s = await BlockChangeSession.begin([loop.mnt], { ...opts, parentSnapshot: last });
      return computeChangedRanges([file], s);
    })();
    const r = await backup(repo, {
      paths: [loop.mnt],
      job: 'bench',
      blockFiles: {},
      parent: last,
      changeHint: { dirtyDirs: new Set([loop.mnt]), cursor: {}, changedRanges: arriving },
    });
    series.push(now() - tn);
    await arriving;
    await s.commit(r.snapshotId, [file]);
    if (r.snapshot.scanMode?.mode !== 'blocks')
      throw new Error(`night ${night + 1}: not a block-level incremental`);
    last = r.snapshotId;
  }
  // ... and the whole-file incremental twice more (another 1% each, no ranges), so that both sides of the
  // ratio are medians: this host reads the 2 GiB file in 1.3–2.0 s from one run to the next
  const wholeRuns = [engineFullTime];
  for (let i = 0; series.length && i < 2; i++) {
    rewritePages(file, k);
    dropFileCache(file);
    const tw = now();
    const r = await backup(repo, { paths: [loop.mnt], job: 'bench', blockFiles: {}, parent: last });
    wholeRuns.push(now() - tw);
    if (r.snapshot.stats.bytesRead < SIZE) throw new Error('the whole-file run did not read the whole file');
  }
  // --- a restore of the block-tracked snapshot (the file from its base list, patch and blocks), cold,
  // into a folder next to the image (the file has changed since: byte-exact restores are the tests' job)
  const restoreDir = path.join(loop.dir, 'restored');
  execFileSync('sync');
  fs.writeFileSync('/proc/sys/vm/drop_caches', '3');
  const tr0 = now();
  const restored = await restore(repo, {
    snapshot: withCbt.snapshotId,
    target: restoreDir,
    relativeTo: loop.mnt,
  });
  const restoreTime = now() - tr0;
  execFileSync('sync');
  const restoreSync = now() - tr0 - restoreTime;
  if (restored.errors.length) throw new Error(`restore: ${restored.errors[0].message}`);
  const restoredSize = fs.statSync(path.join(restoreDir, 'pages.db')).size;
  fs.rmSync(restoreDir, { recursive: true, force: true });
  await repo.close();

  // --- what the engine would read when widening ranges to the enclosing previous chunks
  const widen = (ends: number[]) => {
    let widened = 0;
    let ri = 0;
    let start = 0;
    const sorted = [...ranges].sort((a, b) => a.offset - b.offset);
    for (const end of ends) {
      while (ri < sorted.length && sorted[ri].offset + sorted[ri].length <= start) ri++;
      if (ri < sorted.length && sorted[ri].offset < end) widened += end - start;
      start = end;
    }
    return widened;
  };
  const coarse = (g: number) => {
    const blocks = new Set<number>();
    for (const r of ranges)
      for (let b = Math.floor(r.offset / g); b * g < r.offset + r.length; b++) blocks.add(b);
    return blocks.size * g;
  };

  const cbtTime = t3 - t0;
  const fullTime = t5 - t4;
  console.log('');
  console.log('  incremental of the changed file            bytes read        wall time');
  console.log(`    without block tracking (whole file)      ${fmt(readFull).padEnd(16)}  ${ms(fullTime)}`);
  console.log(
    `    with block tracking (ranges only)        ${fmt(readCbt).padEnd(16)}  ${ms(cbtTime)}  (sync+swap ${ms(t1 - t0)}, FIEMAP+ranges ${ms(t2 - t1)}, reads ${ms(t3 - t2)}: ${readHow})`,
  );
  console.log(
    `    → ${(readCbt / written).toFixed(2)}× the bytes written, ${(fullTime / cbtTime).toFixed(1)}× faster (the tracker and plain reads alone; the targets are the engine's, below), ${ranges.length} ranges`,
  );
  console.log('');
  console.log('  the engine: incremental backup of the same change          bytes read        wall time');
  console.log(
    `    without block tracking (changed file read whole)        ${fmt(withoutCbt.snapshot.stats.bytesRead).padEnd(16)}  ${ms(engineFullTime)}`,
  );
  console.log(
    `    with ChangeHint.changedRanges (scan mode ${withCbt.snapshot.scanMode?.mode})           ${fmt(withCbt.snapshot.stats.bytesRead).padEnd(16)}  ${ms(engineCbtTime)}`,
  );
  console.log(
    `    → ${(withCbt.snapshot.stats.bytesRead / written).toFixed(2)}× the bytes written (target ≤ 3×), ${(engineFullTime / engineCbtTime).toFixed(1)}× faster (target ≥ 10×); same chunk list for the file: ${same}`,
  );
  if (series.length)
    console.log(
      `    ${series.length} more nights (another 1% each, ranges from the night before): ${series.map((t) => t.toFixed(0)).join(' / ')} ms → median ${ms(median(series))}\n` +
        `    whole-file runs (the one above and two more): ${wholeRuns.map((t) => t.toFixed(0)).join(' / ')} ms → median ${ms(median(wholeRuns))}\n` +
        `    → medians: ${(median(wholeRuns) / median(series)).toFixed(1)}× faster (target ≥ 10×)`,
    );
  console.log(
    `    restore of the block-tracked snapshot's file (${fmt(restoredSize)}, cold, to ${path.dirname(loop.dir)}): ${ms(restoreTime)} + ${ms(restoreSync)} to sync`,
  );
  {
    // the floor: reading just the blocks the engine read (cold), nothing else
    const B = blockSize ?? MiB;
    const blocks = new Set<number>();
    for (const r of changedRanges.get(file) ?? [])
      for (let b = Math.floor(r.offset / B); b * B < r.offset + r.length; b++) blocks.add(b);
    const blockRanges: ByteRange[] = [];
    for (const b of [...blocks].sort((x, y) => x - y)) {
      const last = blockRanges[blockRanges.length - 1];
      if (last && last.offset + last.length === b * B) last.length += B;
      else blockRanges.push({ offset: b * B, length: B });
    }
    dropFileCache(file);
    const tr = now();
    const { got, how } = await readLikeEngine(file, blockRanges);
    const floor = now() - tr;
    console.log(
      `    reading just those ${blocks.size} blocks (${fmt(got)}; as the engine reads them: ${how}; no hashing, no repository), cold: ${ms(floor)} → on this storage an incremental of this change can be at most ${(engineFullTime / floor).toFixed(1)}× faster than the whole-file one`,
    );
  }
  const win = blockSize ?? MiB;
  console.log(
    `    the file is cut into ${blockSize ? `fixed ${blockSize / 1024} KiB blocks (a block file: *.db, 64 MiB+)` : 'content-defined chunks'}; spread guard (${win / 1024} KiB windows, > 50%): changes touch ${(100 * windowsTouched(ranges, SIZE, win)).toFixed(0)}% of them → ${windowsTouched(ranges, SIZE, win) > 0.5 ? 'left to one plain read' : 'ranges kept'}`,
  );
  for (const c of chunkers) {
    const w = widen(c.ends);
    console.log(
      `    if widened to the previous ${c.label} FastCDC chunks (${c.ends.length}): ${fmt(w)} (${((100 * w) / SIZE).toFixed(1)}% of the file, ${(w / written).toFixed(0)}× the bytes written)`,
    );
  }
  console.log('    granularity (tracked block → bytes read, bitmap size per TiB of disk):');
  for (const g of [4096, 16384, 65536, 262144, MiB])
    console.log(
      `      ${String(g / 1024).padStart(5)} KiB → ${fmt(coarse(g)).padEnd(11)} bitmap ${fmt(2 ** 40 / g / 8)}/TiB`,
    );

  // --- tracker overhead on write throughput
  const fio = process.env.CBT_BENCH_FIO !== '0' && spawnSync('sh', ['-c', 'command -v fio']).status === 0;
  console.log('');
  if (!fio) {
    console.log('  tracker overhead: skipped (CBT_BENCH_FIO=0, or fio not installed: apt-get install fio)');
  } else {
    const job = (name: string, rw: string, bs: string, size: string) => {
      const out = execFileSync(
        'fio',
        [
          `--name=${name}`,
          `--filename=${path.join(loop.mnt, 'fio.dat')}`,
          `--rw=${rw}`,
          `--bs=${bs}`,
          `--size=${size}`,
          '--direct=1',
          '--ioengine=psync',
          '--runtime=6',
          '--time_based',
          '--output-format=json',
        ],
        { encoding: 'utf8' },
      );
      return JSON.parse(out).jobs[0].write.bw_bytes as number;
    };
    tracker.stop();
    tracker = undefined;
    const results: Record<string, { off: number[]; on: number[] }> = {
      seq: { off: [], on: [] },
      rand: { off: [], on: [] },
    };
    job('warm', 'write', '1M', '512M');
    const statsWas = fs.readFileSync('/proc/sys/kernel/bpf_stats_enabled', 'utf8').trim();
    fs.writeFileSync('/proc/sys/kernel/bpf_stats_enabled', '1');
    let bpfNs = 0;
    let bpfRuns = 0;
    let ios = 0;
    try {
      for (let rep = 0; rep < 4; rep++) {
        // ABBA order, so drift in the machine's load does not favour either side
        for (const on of rep % 2 ? [true, false] : [false, true]) {
          let tr: BlockTracker | undefined;
          if (on) {
            const st = await BlockTracker.start([loop.mnt]);
            if (!st.ok) throw new Error(st.reason);
            tr = st.tracker;
          }
          const before = bpfStats();
          const seq = job('seq', 'write', '1M', '512M');
          const rand = job('rand', 'randwrite', '4k', '512M');
          results.seq[on ? 'on' : 'off'].push(seq);
          results.rand[on ? 'on' : 'off'].push(rand);
          if (on) {
            const after = bpfStats();
            bpfNs += after.ns - before.ns;
            bpfRuns += after.runs - before.runs;
            ios += (seq * 6) / MiB + (rand * 6) / PAGE;
          }
          tr?.stop();
        }
      }
    } finally {
      fs.writeFileSync('/proc/sys/kernel/bpf_stats_enabled', statsWas);
    }
    console.log(
      '  tracker overhead on O_DIRECT write throughput (fio psync, median of 4 runs × 6 s each, ABBA order):',
    );
    for (const [name, r] of Object.entries(results)) {
      const off = median(r.off);
      const on = median(r.on);
      const unit =
        name === 'seq'
          ? `${(off / MiB).toFixed(0)} → ${(on / MiB).toFixed(0)} MiB/s`
          : `${(off / PAGE).toFixed(0)} → ${(on / PAGE).toFixed(0)} IOPS`;
      const spread = (xs: number[]) =>
        `${((100 * (Math.max(...xs) - Math.min(...xs))) / median(xs)).toFixed(0)}%`;
      console.log(
        `    ${name === 'seq' ? 'sequential 1 MiB' : 'random 4 KiB    '}  ${unit}  overhead ${((100 * (off - on)) / off).toFixed(1)}% (target < 3%; run-to-run spread off ${spread(r.off)}, on ${spread(r.on)})`,
      );
    }
    if (bpfRuns > 0) {
      const perIo = bpfNs / ios;
      const randIoNs = 1e9 / (median(results.rand.off) / PAGE);
      console.log(
        `    eBPF CPU time (kernel.bpf_stats_enabled): ${(bpfNs / bpfRuns).toFixed(0)} ns per program run, ${perIo.toFixed(0)} ns per write I/O ` +
          `= ${((100 * perIo) / randIoNs).toFixed(2)}% of a random 4 KiB write's ${(randIoNs / 1000).toFixed(0)} µs`,
      );
    }
  }
} finally {
  tracker?.stop();
  loop.cleanup();
}
