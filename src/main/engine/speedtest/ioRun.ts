/**
 * One run of an I/O pattern against the test file: the native engine (native/iotest: Linux AIO with
 * O_DIRECT, else threads with one synchronous operation each; its own threads, never the JavaScript
 * thread's), or — where the addon was not built — a JavaScript fallback on Node's asynchronous fs with
 * `depth` operations in flight per worker (O_DIRECT with aligned memory from ../aligned.ts on Linux; the
 * page cache elsewhere, said in `note`). Both count the same things, so a test can check what was issued.
 */
import { constants as fsConstants, promises as fsp } from 'node:fs';
import { loadNativeAddon } from '../native.js';
import { O_DIRECT, giveAligned, takeAligned } from '../aligned.js';
import { LatencyHistogram } from './histogram.js';

export interface IoParams {
  path: string;
  fileSize: number;
  blockSize: number;
  /** Offsets of random operations are multiples of this (DiskSpd's -r4K); lengths and memory too. */
  align: number;
  /** Share of reads, 0…100 (DiskSpd's -w is 100 minus this). */
  readPercent: number;
  random: boolean;
  threads: number;
  /** Operations each thread keeps in flight (DiskSpd's -o). */
  depth: number;
  durationMs: number;
  /** One pass over each thread's share of the file, then stop (laying the file out). */
  onePass?: boolean;
  /** Create the file (laying it out). A pattern opens the file that is there: one removed meanwhile (a
   *  cancel, a vanished destination) is not made again. */
  create?: boolean;
  /** Bypass the caches where the platform allows (default true). */
  unbuffered?: boolean;
  /** 'threads': the native engine without AIO; 'node': the JavaScript fallback (tests, comparisons). */
  engine?: 'auto' | 'threads' | 'node';
  /** Record the first N operations issued (kind, offset, length, thread) for tests. */
  trace?: number;
  seed?: number;
}

export interface IoCounters {
  state: 'opening' | 'running' | 'done';
  reads: number;
  writes: number;
  bytesRead: number;
  bytesWritten: number;
  /** Operations whose offset, length or memory was not aligned to `align`. */
  misaligned: number;
  /** The most operations one thread had in flight at once. */
  maxInFlight: number;
  elapsedNs: number;
  /** Whether the caches were bypassed (known once running). */
  direct?: boolean;
  engine?: 'aio' | 'threads' | 'node';
  /** Why the caches could not be bypassed. */
  note?: string;
  errno?: number;
  errorOp?: 'open' | 'read' | 'write' | 'sync' | 'setup';
}

export interface IoFinal extends IoCounters {
  /** Time of the flush at the end of a buffered run with writes (counted in elapsedNs). */
  syncNs: number;
  histRead: LatencyHistogram;
  histWrite: LatencyHistogram;
  /** [write ? 1 : 0, offset, length, thread] per traced operation. */
  trace: Float64Array;
}

export interface IoRun {
  poll(): IoCounters;
  /** Stops issuing; what is in flight completes, then `done` resolves. */
  stop(): void;
  done: Promise<IoFinal>;
}

interface NativeRun {
  poll(): IoCounters;
  stop(): void;
  done: Promise<
    IoCounters & { syncNs: number; histRead: Float64Array; histWrite: Float64Array; trace: Float64Array }
  >;
}
interface IoTestAddon {
  IoRun: new (p: IoParams) => NativeRun;
}

let addon: IoTestAddon | null | undefined;
/** The native engine, or null where it was not built (or TIDEMARK_NO_NATIVE_IOTEST=1). */
export function nativeIoTest(): IoTestAddon | null {
  if (addon === undefined)
    addon =
      process.env.TIDEMARK_NO_NATIVE_IOTEST === '1'
        ? null
        : (loadNativeAddon<IoTestAddon>('iotest', 'tidemark_iotest') ?? null);
  return addon;
}

export function startIoRun(p: IoParams): IoRun {
  const native = p.engine === 'node' ? null : nativeIoTest();
  if (!native) return jsIoRun(p);
  const run = new native.IoRun({ ...p, unbuffered: p.unbuffered ?? true, engine: p.engine ?? 'auto' });
  return {
    poll: () => run.poll(),
    stop: () => run.stop(),
    done: run.done.then((f) => ({
      ...f,
      histRead: new LatencyHistogram().addTriples(f.histRead),
      histWrite: new LatencyHistogram().addTriples(f.histWrite),
    })),
  };
}

/** xorshift, as the native engine draws its offsets and read/write choices. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 0x9e3779b9;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s;
  };
}

const errnoOf = (err: unknown): number => Math.abs((err as { errno?: number }).errno ?? 5);

/** The fallback: Node's fs (libuv's pool does the I/O), `depth` operations in flight per thread. */
function jsIoRun(p: IoParams): IoRun {
  const c: IoCounters = {
    state: 'opening',
    reads: 0,
    writes: 0,
    bytesRead: 0,
    bytesWritten: 0,
    misaligned: 0,
    maxInFlight: 0,
    elapsedNs: 0,
    engine: 'node',
  };
  const histRead = new LatencyHistogram();
  const histWrite = new LatencyHistogram();
  const trace = new Float64Array((p.trace ?? 0) * 4);
  let traced = 0;
  let stopped = false;
  let start = 0n;
  let firstIssue = 0n;
  let lastDone = 0n;
  let syncNs = 0;
  const regionLen = Math.floor(p.fileSize / p.threads / p.blockSize) * p.blockSize;
  const blocksPerRegion = regionLen / p.blockSize;
  const randomSlots = Math.floor((p.fileSize - p.blockSize) / p.align) + 1;
  const fail = (errno: number, op: NonNullable<IoCounters['errorOp']>) => {
    if (c.errno === undefined) Object.assign(c, { errno, errorOp: op });
    stopped = true;
  };

  const done = (async (): Promise<IoFinal> => {
    const flags = fsConstants.O_RDWR | (p.create ? fsConstants.O_CREAT : 0);
    let fh: fsp.FileHandle | undefined;
    c.direct = false;
    if ((p.unbuffered ?? true) && O_DIRECT !== undefined) {
      try {
        fh = await fsp.open(p.path, flags | O_DIRECT, 0o600);
        c.direct = true;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EINVAL') {
          fail(errnoOf(err), 'open');
          c.state = 'done';
          return { ...c, syncNs, histRead, histWrite, trace };
        }
        c.note = 'the filesystem refused O_DIRECT (EINVAL): measured through the page cache';
      }
    } else if (p.unbuffered ?? true)
      c.note = 'without the native I/O engine the caches cannot be bypassed here: measured through them';
    try {
      fh ??= await fsp.open(p.path, flags, 0o600);
    } catch (err) {
      fail(errnoOf(err), 'open');
      c.state = 'done';
      return { ...c, syncNs, histRead, histWrite, trace };
    }
    const buffers: Buffer[] = [];
    const memSize = Math.ceil(p.blockSize / 65536) * 65536;
    try {
      start = process.hrtime.bigint();
      const deadline = start + BigInt(Math.round(p.durationMs * 1e6));
      c.state = 'running';
      const lane = async (w: number, j: number, cursor: { k: number }, inFlight: { n: number }) => {
        const aligned = takeAligned(memSize);
        if (aligned) buffers.push(aligned);
        const mem = aligned ?? Buffer.allocUnsafe(memSize);
        const buf = mem.subarray(0, p.blockSize);
        const next = rng(((p.seed ?? 1) * 977 + w * 131 + j * 17 + 3) >>> 0);
        for (let i = 0; i < buf.length; i += 4) buf.writeUInt32LE(next(), i);
        // (the first operation whatever the time, as the native engine does)
        for (
          let first = true;
          !stopped && (first || p.onePass || process.hrtime.bigint() < deadline);
          first = false
        ) {
          let offset: number;
          if (p.random) offset = (next() % randomSlots) * p.align;
          else {
            const k = cursor.k++;
            if (p.onePass && k >= blocksPerRegion) break;
            offset = w * regionLen + (k % blocksPerRegion) * p.blockSize;
          }
          const write =
            p.readPercent <= 0 ? true : p.readPercent >= 100 ? false : next() % 100 >= p.readPercent;
          if (offset % p.align || p.blockSize % p.align) c.misaligned++;
          c.maxInFlight = Math.max(c.maxInFlight, ++inFlight.n);
          if (traced < (p.trace ?? 0)) trace.set([write ? 1 : 0, offset, p.blockSize, w], traced++ * 4);
          const t0 = process.hrtime.bigint();
          firstIssue ||= t0;
          let n: number;
          try {
            n = write
              ? (await fh!.write(buf, 0, p.blockSize, offset)).bytesWritten
              : (await fh!.read(buf, 0, p.blockSize, offset)).bytesRead;
          } catch (err) {
            inFlight.n--;
            fail(errnoOf(err), write ? 'write' : 'read');
            break;
          }
          inFlight.n--;
          lastDone = process.hrtime.bigint();
          const ns = Number(lastDone - t0);
          if (n !== p.blockSize) {
            fail(write ? 28 /* ENOSPC */ : 5 /* EIO */, write ? 'write' : 'read');
            break;
          }
          if (write) {
            c.writes++;
            c.bytesWritten += n;
            histWrite.add(ns);
          } else {
            c.reads++;
            c.bytesRead += n;
            histRead.add(ns);
          }
        }
      };
      const lanes: Promise<void>[] = [];
      for (let w = 0; w < p.threads; w++) {
        const cursor = { k: 0 };
        const inFlight = { n: 0 };
        for (let j = 0; j < p.depth; j++) lanes.push(lane(w, j, cursor, inFlight));
      }
      await Promise.all(lanes);
      if (!c.direct && c.writes > 0 && c.errno === undefined) {
        const t0 = process.hrtime.bigint();
        await fh.datasync().catch((err) => fail(errnoOf(err), 'sync'));
        syncNs = Number(process.hrtime.bigint() - t0);
      }
    } finally {
      // first operation issued to the last one finished (and a buffered run's flush), as the native engine
      c.elapsedNs = firstIssue && lastDone ? Number(lastDone - firstIssue) + syncNs : 0;
      await fh.close().catch(() => {});
      for (const b of buffers) giveAligned(b);
      c.state = 'done';
    }
    return { ...c, syncNs, histRead, histWrite, trace };
  })();
  return {
    poll: () => ({
      ...c,
      elapsedNs:
        c.state === 'running' && firstIssue ? Number(process.hrtime.bigint() - firstIssue) : c.elapsedNs,
    }),
    stop: () => {
      stopped = true;
    },
    done,
  };
}
