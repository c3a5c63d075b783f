/**
 * Content-defined chunking with FastCDC (gear rolling hash, normalized chunking level 2).
 * Cut points depend only on the bytes near them, so inserting a byte moves just the nearby
 * boundaries and the rest of a file deduplicates. Chunks are min ≤ size ≤ max, about avg on average.
 * The gear table is derived from a per-repository seed so boundaries do not reveal content to
 * someone who knows a common file. Pure function of (params, seed, bytes): no I/O, no state kept
 * between calls except what the caller passes in.
 */
import crypto from 'node:crypto';
import { loadNativeAddon } from '../native.js';

/** The cut-point search in C++ (native/cdc): the same arithmetic, several times faster. */
interface CdcAddon {
  cut(
    buf: Uint8Array,
    start: number,
    end: number,
    eof: boolean,
    min: number,
    avg: number,
    max: number,
    maskS: number,
    maskL: number,
    gear: Uint32Array,
  ): number;
}

const addon =
  process.env.TIDEMARK_NO_NATIVE_CDC === '1' ? undefined : loadNativeAddon<CdcAddon>('cdc', 'tidemark_cdc');

/** Whether chunking runs in the native addon (else in JavaScript: same cuts, slower). */
export const nativeChunker = !!addon;

export interface ChunkerParams {
  min: number;
  avg: number;
  max: number;
}

export const DEFAULT_CHUNKER: ChunkerParams = { min: 256 * 1024, avg: 1024 * 1024, max: 4 * 1024 * 1024 };

/** 256 pseudo-random 32-bit values from a seed (SHA-256 in counter mode). */
export function gearTable(seed: Buffer | string): Uint32Array {
  const out = new Uint32Array(256);
  const bytes = Buffer.alloc(1024);
  for (let block = 0; block < 32; block++) {
    crypto
      .createHash('sha256')
      .update(seed)
      .update(Buffer.from([block]))
      .digest()
      .copy(bytes, block * 32);
  }
  for (let i = 0; i < 256; i++) out[i] = bytes.readUInt32LE(i * 4);
  return out;
}

export class FastCDC {
  private readonly maskS: number;
  private readonly maskL: number;
  private readonly native?: CdcAddon;

  constructor(
    readonly params: ChunkerParams,
    private readonly gear: Uint32Array,
    opts: { native?: boolean } = {},
  ) {
    if (opts.native !== false) this.native = addon;
    const bits = Math.round(Math.log2(params.avg));
    if (params.min < 64 || params.min > params.avg || params.avg > params.max)
      throw new Error('invalid chunker parameters');
    // Top bits of the 32-bit gear hash depend on the most bytes; normalization: 2 more bits before avg, 2 fewer after.
    this.maskS = topBits(Math.min(31, bits + 2));
    this.maskL = topBits(Math.max(1, bits - 2));
  }

  /**
   * Returns the length of the next chunk starting at buf[start], looking at most at buf[start..end).
   * When fewer than `max` bytes are available and `eof` is false, returns 0 if no cut point was found
   * (the caller must supply more data first).
   */
  nextCut(buf: Uint8Array, start: number, end: number, eof: boolean): number {
    const { min, avg, max } = this.params;
    if (this.native)
      return this.native.cut(buf, start, end, eof, min, avg, max, this.maskS, this.maskL, this.gear);
    const n = end - start;
    if (n <= min) return eof ? n : n >= max ? n : 0;
    const gear = this.gear;
    const maskS = this.maskS;
    const maskL = this.maskL;
    const normal = Math.min(avg, n);
    const limit = Math.min(max, n);
    let h = 0;
    let i = start + min;
    const normalEnd = start + normal;
    const limitEnd = start + limit;
    for (; i < normalEnd; i++) {
      h = ((h << 1) + gear[buf[i]]) | 0;
      if ((h & maskS) === 0) return i + 1 - start;
    }
    for (; i < limitEnd; i++) {
      h = ((h << 1) + gear[buf[i]]) | 0;
      if ((h & maskL) === 0) return i + 1 - start;
    }
    if (limit === max || eof) return limit;
    return 0;
  }

  /** All chunk lengths of a complete buffer (convenience for tests and small inputs). */
  chunkAll(buf: Uint8Array): number[] {
    const out: number[] = [];
    let pos = 0;
    while (pos < buf.length) {
      const len = this.nextCut(buf, pos, buf.length, true);
      out.push(len);
      pos += len;
    }
    return out;
  }
}

function topBits(n: number): number {
  return (0xffffffff << (32 - n)) | 0;
}
