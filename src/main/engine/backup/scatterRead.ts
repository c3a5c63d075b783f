/**
 * Reading many scattered pieces of one file at once: the changed blocks of a large file (block-level
 * tracking), or its blocks in order (a whole block file).
 *
 * Node's fs reads go to the libuv pool one call at a time. For thousands of small random reads that is
 * slow on a two-core PC: every submission wakes a pool thread, which preempts the JavaScript thread
 * issuing the reads, so the reads spend longer being scheduled than the disk takes to answer them
 * (`npm run bench:cbt`: at 32 in flight a read waited about ten times as long as the disk took to
 * answer it, and the disk sat idle most of the time). The native addon (native/fsmeta, readScattered) takes a
 * whole batch in one call and keeps `depth` reads in flight with threads of its own. Without the addon
 * (not built, Windows) the same batch is read with fs reads, `depth` at a time: always correct, slower.
 */
import fs from 'node:fs';
import os from 'node:os';
import { errnoError, loadNativeAddon, useRing } from '../native.js';
import { mtimeMsOf } from '../scan/stat.js';

interface FsIo {
  readFiles?(
    paths: Buffer,
    limits: Uint32Array,
    target: Buffer,
    depth: number,
    ring: boolean,
  ): Promise<{ results: Float64Array; ring: boolean }>;
  /** Threads the addon started for batches in all: kept, and used again by later batches. */
  readThreadsStarted?(): number;
  readScattered(
    fd: number,
    offsets: Float64Array,
    lengths: Uint32Array,
    target: Buffer,
    depth: number,
    aio: boolean,
  ): Promise<{ got: Uint32Array; aio: boolean }>;
}

const addon =
  process.platform === 'win32' || process.env.TIDEMARK_NO_NATIVE_READS === '1'
    ? undefined
    : loadNativeAddon<FsIo>('fsmeta', 'tidemark_fsmeta');

/** Whether batches are read by the native addon (else by fs reads). */
export const nativeScatteredReads = !!addon?.readScattered;

/** How many threads the addon has started for batches (0 without it). */
export const readThreadsStarted = (): number => addon?.readThreadsStarted?.() ?? 0;

export interface Piece {
  offset: number;
  length: number;
}

/** Whether files opened for direct I/O are read with the kernel's AIO (TIDEMARK_NO_AIO=1: threads). */
const aioDefault = process.env.TIDEMARK_NO_AIO !== '1';

/**
 * Reads the pieces into one buffer (`into` when given and large enough, else a new one), piece after
 * piece from its start; returns it, the bytes read per piece (fewer than asked only at the end of the
 * file) and how it was read. Throws the first read error.
 *
 * A file opened with O_DIRECT (pieces and buffer aligned) is read by the addon with Linux's AIO: the
 * whole batch in flight at once from one thread, where threads blocking in pread cost two context
 * switches a piece (`npm run bench:cbt`: a faster incremental, with about half the system time). Files
 * read through the page cache keep the threads (AIO would read them one by one).
 */
export async function readScattered(
  fd: number,
  pieces: Piece[],
  depth: number,
  opts: {
    /** A buffer to read into (reused by the caller) when it is large enough. */
    into?: Buffer;
    /** Read with the native addon (default: when it was built). */
    native?: boolean;
    /** Let the addon use AIO for a direct-I/O file (default: unless TIDEMARK_NO_AIO=1). */
    aio?: boolean;
  } = {},
): Promise<{ buffer: Buffer; got: Uint32Array; via: 'aio' | 'threads' | 'fs' }> {
  const { into, native: useNative = nativeScatteredReads, aio = aioDefault } = opts;
  let total = 0;
  for (const p of pieces) total += p.length;
  const buffer = into && into.length >= total ? into : Buffer.allocUnsafeSlow(total);
  if (useNative && addon) {
    const offsets = new Float64Array(pieces.length);
    const lengths = new Uint32Array(pieces.length);
    pieces.forEach((p, i) => {
      offsets[i] = p.offset;
      lengths[i] = p.length;
    });
    try {
      const r = await addon.readScattered(fd, offsets, lengths, buffer, depth, aio);
      return { buffer, got: r.got, via: r.aio ? 'aio' : 'threads' };
    } catch (err) {
      const e = err as Error & { errno?: number; code?: string };
      throw Object.assign(new Error(e.message), { code: codeOf(e.errno) });
    }
  }
  const got = new Uint32Array(pieces.length);
  const starts: number[] = [];
  let pos = 0;
  for (const p of pieces) {
    starts.push(pos);
    pos += p.length;
  }
  let next = 0;
  const reader = async () => {
    while (next < pieces.length) {
      const i = next++;
      const { offset, length } = pieces[i];
      let n = 0;
      while (n < length) {
        const r = await new Promise<number>((resolve, reject) =>
          fs.read(fd, buffer, starts[i] + n, length - n, offset + n, (err, bytes) =>
            err ? reject(err) : resolve(bytes),
          ),
        );
        if (r === 0) break;
        n += r;
      }
      got[i] = n;
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(depth, pieces.length)) }, reader));
  return { buffer, got, via: 'fs' };
}

/** One file read by readFiles: its bytes are buffer[start, start + n). */
export type FileRead =
  | { start: number; n: number; size: number; mtimeMs: number; error?: undefined }
  | { start: number; error: { message: string; code?: string } };

/**
 * Reads whole (small) files, each into one buffer at the sum of the limits before it, at most `limit`
 * bytes (its expected size + 1 shows that it grew), and fstat()s each after reading. The native addon
 * keeps `depth` files in flight on threads of its own: a backup's small files were read one synchronous
 * open/read/close at a time per worker, two reads in flight on a two-core PC, and a cold read of the
 * bench dataset's 30,000 small files waits on the disk (at 32 in flight about half as long as at two). On Linux
 * it reads them through an io_uring instead (`ring`, the default where the kernel allows one: fewer
 * requests to the disk, less CPU; see native/fsmeta ReadFiles). Without the addon (Windows, not built)
 * the same is done synchronously, one file after another. `via` says which way was taken.
 */
export async function readFiles(
  paths: Uint8Array[],
  limits: number[],
  depth: number,
  opts: { native?: boolean; into?: Buffer; ring?: boolean } = {},
): Promise<{ buffer: Buffer; files: FileRead[]; via: 'ring' | 'threads' | 'fs' }> {
  let total = 0;
  for (const l of limits) total += l;
  if (opts.into && opts.into.length < total) throw new RangeError('readFiles: `into` is too small');
  const buffer = opts.into ?? Buffer.allocUnsafeSlow(Math.max(1, total));
  const files: FileRead[] = [];
  const useNative = (opts.native ?? true) && !!addon?.readFiles;
  if (useNative && !paths.some((p) => p.includes(0))) {
    const joined = Buffer.concat(paths.flatMap((p) => [p, NUL]));
    const { results: r, ring } = await addon!.readFiles!(
      joined,
      Uint32Array.from(limits),
      buffer,
      depth,
      opts.ring ?? useRing,
    );
    let start = 0;
    paths.forEach((p, i) => {
      const n = r[3 * i];
      if (n < 0) files.push({ start, error: errnoError(n, 'open', p) });
      else files.push({ start, n, size: r[3 * i + 1], mtimeMs: r[3 * i + 2] });
      start += limits[i];
    });
    return { buffer, files, via: ring ? 'ring' : 'threads' };
  }
  let start = 0;
  paths.forEach((p, i) => {
    let fd = -1;
    try {
      fd = fs.openSync(
        Buffer.from(p.buffer, p.byteOffset, p.byteLength),
        fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW,
      );
      let n = 0;
      for (;;) {
        const r = fs.readSync(fd, buffer, start + n, limits[i] - n, null);
        if (r === 0 || (n += r) === limits[i]) break;
      }
      const st = fs.fstatSync(fd, { bigint: true });
      files.push({ start, n, size: Number(st.size), mtimeMs: mtimeMsOf(st.mtimeNs) });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      files.push({ start, error: { message: e.message, code: e.code } });
    } finally {
      if (fd >= 0) fs.closeSync(fd);
    }
    start += limits[i];
  });
  return { buffer, files, via: 'fs' };
}

const NUL = Buffer.alloc(1);

function codeOf(errno: number | undefined): string | undefined {
  if (!errno) return undefined;
  for (const [name, value] of Object.entries(os.constants.errno)) if (value === errno) return name;
  return undefined;
}
