/**
 * Reading many scattered pieces of one file at once: the changed blocks of a large file (block-level
 * tracking), or its blocks in order (a whole block file).
 *
 * Node's fs reads go to the libuv pool one call at a time. For thousands of small random reads that is
 * slow on a two-core PC: every submission wakes a pool thread, which preempts the JavaScript thread
 * issuing the reads, so the reads spend longer being scheduled than the disk takes to answer them
 * (`npm run bench:cbt`: reads waited 2.3–3.3 ms each at 32 in flight while the disk answered in about
 * 0.2 ms and was busy for a third of the time). The native addon (native/fsmeta, readScattered) takes a
 * whole batch in one call and keeps `depth` reads in flight with threads of its own. Without the addon
 * (not built, Windows) the same batch is read with fs reads, `depth` at a time: always correct, slower.
 */
import fs from 'node:fs';
import os from 'node:os';
import { loadNativeAddon } from '../native.js';

interface FsIo {
  readScattered(
    fd: number,
    offsets: Float64Array,
    lengths: Uint32Array,
    target: Buffer,
    depth: number,
  ): Promise<Uint32Array>;
}

const addon =
  process.platform === 'win32' || process.env.TIDEMARK_NO_NATIVE_READS === '1'
    ? undefined
    : loadNativeAddon<FsIo>('fsmeta', 'tidemark_fsmeta');

/** Whether batches are read by the native addon (else by fs reads). */
export const nativeScatteredReads = !!addon?.readScattered;

export interface Piece {
  offset: number;
  length: number;
}

/**
 * Reads the pieces into one buffer (`into` when given and large enough, else a new one), piece after
 * piece from its start; returns it and the bytes read per piece (fewer than asked only at the end of the
 * file). Throws the first read error.
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
  } = {},
): Promise<{ buffer: Buffer; got: Uint32Array }> {
  const { into, native: useNative = nativeScatteredReads } = opts;
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
      return { buffer, got: await addon.readScattered(fd, offsets, lengths, buffer, depth) };
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
  return { buffer, got };
}

function codeOf(errno: number | undefined): string | undefined {
  if (!errno) return undefined;
  for (const [name, value] of Object.entries(os.constants.errno)) if (value === errno) return name;
  return undefined;
}
