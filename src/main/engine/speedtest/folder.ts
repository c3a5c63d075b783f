/**
 * The speed test on a folder (a local disk, a USB drive, a NAS share): a test file of the chosen size is
 * laid out with random bytes, then each pattern runs on it for the chosen duration through the I/O engine
 * (./ioRun.ts), and the file is deleted — at the end, on any error, and at once on cancel (the engine's
 * operations in flight finish on a file that is already gone).
 *
 * Safety: it refuses a folder with less free space than the test file plus a margin; a disk that fills
 * up anyway is a DestinationFullError; a destination that goes away (the file vanishes, the drive stops
 * answering) is a DestinationGoneError. It writes nothing but its own test file, whose name no repository
 * object can have (./probes.ts), and removes test files that interrupted tests left behind.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  AbortedError,
  DestinationFullError,
  DestinationGoneError,
  DestinationUnwritableError,
  TidemarkError,
} from '../errors.js';
import { startIoRun, type IoFinal, type IoParams, type IoRun } from './ioRun.js';
import { LatencyHistogram } from './histogram.js';
import { ALIGN, diskPattern, resolveOptions, type DiskPattern, type ResolvedOptions } from './patterns.js';
import { isStale, probeOfFile, testFileName } from './probes.js';
import type {
  LatencyFigures,
  PatternResult,
  SpeedTestOptions,
  SpeedTestProgress,
  SpeedTestResult,
  SpeedTestSample,
} from './types.js';

const MiB = 1024 * 1024;
/** Free space a test leaves at least: 256 MiB, or a tenth of the test file when that is more. */
export const spaceMargin = (fileSize: number) => Math.max(256 * MiB, Math.ceil(fileSize / 10));
/** The test file is laid out in these blocks, this many in flight. */
const LAYOUT_BLOCK = MiB;
const LAYOUT_DEPTH = 8;
const POLL_MS = 250;
const SAMPLE_MS = 500;

const fmt = (n: number) =>
  n >= 1024 * MiB ? `${(n / 1024 / MiB).toFixed(1)} GiB` : `${Math.round(n / MiB)} MiB`;

/** The folder a test runs in: the destination, or — not made yet — its nearest existing parent. */
async function testFolder(folder: string, notes: string[]): Promise<string> {
  let dir = path.resolve(folder);
  for (;;) {
    const st = await fs.stat(dir).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return null;
      throw new DestinationUnwritableError(`cannot open ${dir}: ${err.message}`, { cause: err });
    });
    if (st?.isDirectory()) break;
    if (st && dir === path.resolve(folder))
      throw new DestinationUnwritableError(`${dir} is a file, not a folder`);
    const up = path.dirname(dir);
    if (up === dir)
      throw new DestinationGoneError(`${folder} cannot be reached (no part of its path exists)`);
    dir = up;
  }
  if (dir !== path.resolve(folder))
    notes.push(`${path.resolve(folder)} does not exist yet: tested in ${dir}, where it will be made`);
  return dir;
}

async function statfsFree(dir: string): Promise<{ free: number; total: number }> {
  const s = await fs.statfs(dir);
  return { free: s.bavail * s.bsize, total: s.blocks * s.bsize };
}

const WINDOWS_ERRNO: Record<number, string> = {
  2: 'ENOENT',
  5: 'EIO',
  13: 'EACCES',
  19: 'ENODEV',
  22: 'EINVAL',
  28: 'ENOSPC',
};
function errnoName(errno: number): string {
  if (process.platform === 'win32') return WINDOWS_ERRNO[errno] ?? `error ${errno}`;
  for (const [k, v] of Object.entries(os.constants.errno)) if (v === errno) return k;
  return `error ${errno}`;
}

const FULL = new Set(['ENOSPC', 'EDQUOT', 'EFBIG']);
const GONE = new Set([
  'ENOENT',
  'ENODEV',
  'ENXIO',
  'EIO',
  'ESTALE',
  'ENOTCONN',
  'EHOSTDOWN',
  'EHOSTUNREACH',
  'ENOMEDIUM',
  'ECONNRESET',
  'ETIMEDOUT',
]);
const UNWRITABLE = new Set(['EACCES', 'EPERM', 'EROFS']);

/** The named error for an errno the engine stopped on. */
export function ioError(errno: number, op: string, dir: string): TidemarkError {
  const code = errnoName(errno);
  const during = `${code} during the speed test's ${op === 'open' ? 'opening of its test file' : op}`;
  if (FULL.has(code))
    return new DestinationFullError(
      `${dir} filled up (${during}): free some space there, or choose a smaller test file`,
    );
  if (GONE.has(code))
    return new DestinationGoneError(
      `${dir} stopped answering (${during}): was the drive unplugged, the share unmounted or the network lost?`,
    );
  if (UNWRITABLE.has(code))
    return new DestinationUnwritableError(`${dir} cannot be written (${during}): check its permissions`);
  return new DestinationUnwritableError(`the speed test failed in ${dir} (${during})`);
}

function latency(h: LatencyHistogram): LatencyFigures {
  const us = (q: number) => {
    const ns = h.percentile(q);
    return ns === null ? null : Math.round(ns / 10) / 100;
  };
  return { p50: us(0.5), p95: us(0.95), p99: us(0.99) };
}

export function patternResult(p: DiskPattern, params: IoParams, f: IoFinal, trace: boolean): PatternResult {
  const secs = f.elapsedNs / 1e9 || 1e-9;
  const mib = (b: number) => Math.round((b / MiB / secs) * 100) / 100;
  return {
    pattern: p.id,
    label: p.label,
    blockSize: params.blockSize,
    align: params.align,
    readPercent: params.readPercent,
    random: params.random,
    threads: params.threads,
    depth: params.depth,
    elapsedMs: Math.round(f.elapsedNs / 1e4) / 100,
    reads: f.reads,
    writes: f.writes,
    bytesRead: f.bytesRead,
    bytesWritten: f.bytesWritten,
    mibps: mib(f.bytesRead + f.bytesWritten),
    readMibps: mib(f.bytesRead),
    writeMibps: mib(f.bytesWritten),
    iops: Math.round(((f.reads + f.writes) / secs) * 10) / 10,
    latencyUs: latency(new LatencyHistogram().merge(f.histRead).merge(f.histWrite)),
    readLatencyUs: latency(f.histRead),
    writeLatencyUs: latency(f.histWrite),
    direct: f.direct,
    engine: f.engine,
    ...(f.note ? { note: f.note } : {}),
    misaligned: f.misaligned,
    maxInFlight: f.maxInFlight,
    ...(trace ? { trace: Array.from(f.trace) } : {}),
  };
}

/** The I/O parameters of a pattern on a test file. */
export function patternParams(
  file: string,
  fileSize: number,
  p: DiskPattern,
  r: Pick<ResolvedOptions, 'blockSize' | 'threads' | 'queueDepth' | 'durationMs'>,
  extra: Partial<IoParams> = {},
): IoParams {
  return {
    path: file,
    fileSize,
    blockSize: p.blockSize ?? r.blockSize,
    align: ALIGN,
    readPercent: p.readPercent,
    random: p.random,
    threads: p.threads ?? r.threads,
    depth: p.depth ?? r.queueDepth,
    durationMs: r.durationMs,
    ...extra,
  };
}

/** Watches a run: polls it, samples its rate, notices a cancel and a vanished test file. */
async function watch(
  run: IoRun,
  file: string,
  signal: AbortSignal | undefined,
  onPoll: (bytes: number, ops: number, elapsedNs: number) => void,
): Promise<{ final: IoFinal; vanished: boolean }> {
  let vanished = false;
  let settled = false;
  const done = run.done.finally(() => {
    settled = true;
  });
  while (!settled) {
    await Promise.race([done, new Promise((r) => setTimeout(r, POLL_MS))]);
    if (settled) break;
    const c = run.poll();
    onPoll(c.bytesRead + c.bytesWritten, c.reads + c.writes, c.elapsedNs);
    if (signal?.aborted) {
      run.stop(); // (a run started after the abort listener ran)
      continue;
    }
    if (c.state === 'running' && !vanished) {
      const gone = await fs.stat(file).then(
        () => false,
        (err: NodeJS.ErrnoException) => err.code === 'ENOENT' || err.code === 'ENOTDIR',
      );
      if (gone && !signal?.aborted) {
        vanished = true;
        run.stop();
      }
    }
  }
  return { final: await done, vanished };
}

export async function runFolderSpeedTest(
  folder: string,
  opts: SpeedTestOptions = {},
): Promise<SpeedTestResult> {
  const r = resolveOptions(opts, 'folder');
  const signal = opts.signal;
  const startedAt = Date.now();
  const notes: string[] = [];
  const results: PatternResult[] = [];
  const samples: SpeedTestSample[] = [];
  const count = r.patterns.length;
  const emit = (p: Partial<SpeedTestProgress> & { phase: SpeedTestProgress['phase'] }) =>
    opts.progress?.({
      patternIndex: 0,
      patternCount: count,
      fraction: 0,
      elapsedMs: Date.now() - startedAt,
      results: [...results],
      ...p,
    });
  if (signal?.aborted) throw new AbortedError();
  emit({ phase: 'checking' });

  const dir = await testFolder(folder, notes);
  // first what interrupted tests left: their files take the space this one needs
  let staleRemoved = 0;
  for (const name of await fs.readdir(dir).catch(() => [] as string[])) {
    const probe = probeOfFile(name);
    if (probe && isStale(probe)) {
      await fs.rm(path.join(dir, name), { force: true });
      staleRemoved++;
    }
  }
  if (staleRemoved) notes.push(`removed ${staleRemoved} test file(s) an interrupted test had left`);

  const { free, total } = await (opts.freeSpace ?? statfsFree)(dir).catch((err: NodeJS.ErrnoException) => {
    throw ioError(Math.abs(err.errno ?? 5), 'open', dir);
  });
  const margin = spaceMargin(r.fileSize);
  // a filesystem with no size at all (ramfs, some FUSE mounts) does not know its free space
  if (total === 0) notes.push(`${dir} does not report its free space: it could not be checked first`);
  else if (free < r.fileSize + margin)
    throw new DestinationFullError(
      `not enough free space in ${dir}: ${fmt(free)} free, and the speed test needs ${fmt(r.fileSize)} for its test file and ${fmt(margin)} to spare (choose a smaller test file or free some space)`,
    );

  // the latest this test may still be running (other computers judge its file stale after that)
  const deadline = Date.now() + count * r.durationMs + r.fileSize / (MiB / 1000) + 3_600_000;
  const file = path.join(dir, testFileName(deadline));
  let current: IoRun | undefined;
  let removed: Promise<void> | undefined;
  const remove = () => (removed ??= fs.rm(file, { force: true }).catch(() => {}));
  const onAbort = () => {
    current?.stop();
    void remove(); // at once: operations still in flight finish on a file that is already gone
  };
  signal?.addEventListener('abort', onAbort);
  let unbuffered = opts.unbuffered ?? true;
  let lastSample = 0;
  let sampleBytes = 0;
  let sampleOps = 0;
  try {
    // lay out the test file
    emit({ phase: 'preparing' });
    const layout: IoParams = {
      path: file,
      fileSize: r.fileSize,
      blockSize: LAYOUT_BLOCK,
      align: ALIGN,
      readPercent: 0,
      random: false,
      threads: 1,
      depth: LAYOUT_DEPTH,
      durationMs: 0,
      onePass: true,
      create: true,
      unbuffered,
      engine: opts.engine,
      seed: startedAt % 0x7fffffff,
    };
    for (let attempt = 0; ; attempt++) {
      current = startIoRun(layout);
      if (signal?.aborted) current.stop();
      const { final, vanished } = await watch(current, file, signal, (bytes) =>
        emit({ phase: 'preparing', fraction: bytes / r.fileSize / (count + 1) }),
      );
      if (signal?.aborted) throw new AbortedError('speed test cancelled');
      if (vanished) throw ioError(2, 'write', dir);
      if (final.errno === 22 && final.direct && attempt === 0) {
        // accepted O_DIRECT at open but refused its I/O: measure through the cache instead
        unbuffered = false;
        layout.unbuffered = false;
        notes.push(`${dir} refused direct I/O (EINVAL): measured through the page cache`);
        continue;
      }
      if (final.errno !== undefined) throw ioError(final.errno, final.errorOp ?? 'write', dir);
      if (!final.direct && final.note && !notes.includes(final.note)) notes.push(final.note);
      break;
    }

    for (const [i, id] of r.patterns.entries()) {
      const p = diskPattern(id);
      const params = patternParams(file, r.fileSize, p, r, {
        unbuffered,
        engine: opts.engine,
        trace: opts.trace,
        seed: (startedAt + i * 7919) % 0x7fffffff,
      });
      emit({ phase: 'testing', pattern: id, patternIndex: i, fraction: (i + 1) / (count + 1) });
      current = startIoRun(params);
      if (signal?.aborted) current.stop();
      lastSample = 0;
      sampleBytes = 0;
      sampleOps = 0;
      const base = Date.now() - startedAt;
      const takeSample = (bytes: number, ops: number, ms: number): SpeedTestSample => {
        const secs = (ms - lastSample) / 1000;
        const sample: SpeedTestSample = {
          t: Math.round(base + ms),
          pattern: id,
          mibps: Math.round(((bytes - sampleBytes) / MiB / secs) * 10) / 10,
          iops: Math.round((ops - sampleOps) / secs),
        };
        samples.push(sample);
        [lastSample, sampleBytes, sampleOps] = [ms, bytes, ops];
        return sample;
      };
      const { final, vanished } = await watch(current, file, signal, (bytes, ops, ns) => {
        const ms = ns / 1e6;
        const sample = ms - lastSample >= SAMPLE_MS ? takeSample(bytes, ops, ms) : undefined;
        emit({
          phase: 'testing',
          pattern: id,
          patternIndex: i,
          fraction: (i + 1 + Math.min(1, ms / r.durationMs)) / (count + 1),
          sample,
        });
      });
      // the rest since the last sample (a short pattern has only this one)
      const endMs = final.elapsedNs / 1e6;
      const moved = final.bytesRead + final.bytesWritten - sampleBytes;
      if (final.errno === undefined && endMs - lastSample >= 50 && moved > 0)
        emit({
          phase: 'testing',
          pattern: id,
          patternIndex: i,
          fraction: (i + 2) / (count + 1),
          sample: takeSample(final.bytesRead + final.bytesWritten, final.reads + final.writes, endMs),
        });
      if (signal?.aborted) throw new AbortedError('speed test cancelled');
      if (vanished) throw ioError(2, final.writes ? 'write' : 'read', dir);
      if (final.errno !== undefined) throw ioError(final.errno, final.errorOp ?? 'read', dir);
      results.push(patternResult(p, params, final, !!opts.trace));
      emit({ phase: 'testing', pattern: id, patternIndex: i, fraction: (i + 2) / (count + 1) });
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    emit({ phase: 'cleaning', fraction: 1 });
    await remove();
    // again, now that no run has it open: a cancel can come while a run is still opening (creating) it
    await fs.rm(file, { force: true }).catch(() => {});
  }
  emit({ phase: 'done', fraction: 1, patternIndex: count });
  return {
    kind: 'folder',
    location: dir,
    startedAt,
    endedAt: Date.now(),
    fileSize: r.fileSize,
    results,
    samples,
    notes,
    staleRemoved,
  };
}

/** Lays out a test file with random bytes (the bench hands the same file to fio). */
export async function layOutTestFile(file: string, fileSize: number, unbuffered = true): Promise<IoFinal> {
  const run = startIoRun({
    path: file,
    fileSize,
    blockSize: LAYOUT_BLOCK,
    align: ALIGN,
    readPercent: 0,
    random: false,
    threads: 1,
    depth: LAYOUT_DEPTH,
    durationMs: 0,
    onePass: true,
    create: true,
    unbuffered,
  });
  const f = await run.done;
  if (f.errno !== undefined) throw ioError(f.errno, f.errorOp ?? 'write', path.dirname(file));
  return f;
}
