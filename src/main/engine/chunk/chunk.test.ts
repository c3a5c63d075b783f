import { describe, it, expect } from 'vitest';
import crypto from 'node:crypto';
import { FastCDC, gearTable, DEFAULT_CHUNKER, nativeChunker } from './index.js';

function prng(seed: number, n: number): Buffer {
  // deterministic pseudo-random bytes
  const out = Buffer.alloc(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

describe('FastCDC', () => {
  const cdc = new FastCDC(DEFAULT_CHUNKER, gearTable('test'));

  it('covers the input exactly with chunks inside the bounds and near the average', () => {
    const data = prng(7, 64 * 1024 * 1024);
    const lens = cdc.chunkAll(data);
    expect(lens.reduce((a, b) => a + b, 0)).toBe(data.length);
    for (const l of lens.slice(0, -1)) {
      expect(l).toBeGreaterThanOrEqual(DEFAULT_CHUNKER.min);
      expect(l).toBeLessThanOrEqual(DEFAULT_CHUNKER.max);
    }
    const avg = data.length / lens.length;
    expect(avg).toBeGreaterThan(0.6 * DEFAULT_CHUNKER.avg);
    expect(avg).toBeLessThan(1.6 * DEFAULT_CHUNKER.avg);
  });

  it('is deterministic and independent of how the input is fed', () => {
    const data = prng(3, 20 * 1024 * 1024);
    const whole = cdc.chunkAll(data);
    // feed in pieces: the caller must keep >= max bytes available unless at EOF
    const lens: number[] = [];
    let pos = 0;
    let avail = 5 * 1024 * 1024;
    while (pos < data.length) {
      const end = Math.min(data.length, avail);
      const l = cdc.nextCut(data, pos, end, end === data.length);
      if (l === 0) {
        avail += 3 * 1024 * 1024;
        continue;
      }
      lens.push(l);
      pos += l;
      if (avail - pos < DEFAULT_CHUNKER.max) avail += 3 * 1024 * 1024;
    }
    expect(lens).toEqual(whole);
  });

  it('an inserted byte changes only the chunks near it', () => {
    const data = prng(11, 32 * 1024 * 1024);
    const edited = Buffer.concat([
      data.subarray(0, 10_000_000),
      Buffer.from([42]),
      data.subarray(10_000_000),
    ]);
    const hashes = (buf: Buffer) => {
      const out = new Set<string>();
      let pos = 0;
      for (const l of cdc.chunkAll(buf)) {
        out.add(
          crypto
            .createHash('sha256')
            .update(buf.subarray(pos, pos + l))
            .digest('hex'),
        );
        pos += l;
      }
      return out;
    };
    const a = hashes(data);
    const b = hashes(edited);
    const fresh = [...b].filter((h) => !a.has(h));
    expect(fresh.length).toBeGreaterThanOrEqual(1);
    expect(fresh.length).toBeLessThanOrEqual(2);
  });

  it('cuts runs of zeros at the maximum size', () => {
    const lens = cdc.chunkAll(Buffer.alloc(10 * 1024 * 1024));
    expect(lens.slice(0, 2)).toEqual([DEFAULT_CHUNKER.max, DEFAULT_CHUNKER.max]);
  });

  it('depends on the seed', () => {
    const data = prng(5, 16 * 1024 * 1024);
    const other = new FastCDC(DEFAULT_CHUNKER, gearTable('other'));
    expect(other.chunkAll(data)).not.toEqual(cdc.chunkAll(data));
  });

  // The native cut-point search (native/cdc) must cut exactly where the JavaScript one does, for every
  // parameter set the engine uses (content-defined chunks, the small ones of tests), fed whole or in pieces.
  it.skipIf(!nativeChunker)('native and JavaScript chunkers cut at the same places', () => {
    const data = Buffer.concat([
      prng(3, 24 * 1024 * 1024),
      Buffer.alloc(5 * 1024 * 1024),
      prng(4, 3_000_001),
    ]);
    for (const params of [
      DEFAULT_CHUNKER,
      { min: 2048, avg: 8192, max: 32768 },
      { min: 64, avg: 64, max: 64 },
    ]) {
      const gear = gearTable(crypto.randomBytes(16));
      const js = new FastCDC(params, gear, { native: false });
      const nat = new FastCDC(params, gear);
      expect(nat.chunkAll(data)).toEqual(js.chunkAll(data));
      // partial buffers: the same 'need more data' answers
      for (let end = 0; end < 3 * params.max; end += Math.max(1, Math.floor(params.max / 7)))
        for (const eof of [false, true])
          expect(nat.nextCut(data, 17, 17 + end, eof)).toBe(js.nextCut(data, 17, 17 + end, eof));
    }
  });
  if (!nativeChunker)
    console.warn('chunk.test: native/cdc is not built here; only the JavaScript chunker is tested');
});
