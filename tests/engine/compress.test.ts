/**
 * The pipeline's per-thread compression buffers give the same bytes as the allocating variants, store
 * data raw when compression saves under 3%, and report damaged or mis-sized input as errors.
 */
import { describe, it, expect } from 'vitest';
import crypto from 'node:crypto';
import {
  CompressionProbe,
  maybeCompress,
  worthCompressing,
  maybeCompressTransient,
  decompress,
  decompressTransient,
} from '../../src/main/engine/compress/index.js';

const text = Buffer.from('the quick brown fox jumps over the lazy dog 1234\n'.repeat(40_000));

describe('compression with reused buffers', () => {
  it('equals maybeCompress, round-trips, and keeps random data raw', () => {
    for (const data of [text, text.subarray(0, 5000), Buffer.concat([text, crypto.randomBytes(300_000)])]) {
      const a = maybeCompress(data, 3);
      const b = maybeCompressTransient(data, 3);
      expect(b.compressed).toBe(a.compressed);
      expect(Buffer.compare(b.data, a.data)).toBe(0);
      expect(b.compressed).toBe(true);
      const copy = Buffer.from(b.data);
      expect(decompressTransient(copy, data.length).equals(data)).toBe(true);
      expect(decompress(copy, data.length).equals(data)).toBe(true);
    }
    const random = crypto.randomBytes(1 << 20);
    const r = maybeCompressTransient(random, 3);
    expect(r.compressed).toBe(false);
    expect(r.data.equals(random)).toBe(true);
    // a buffer that compresses by less than 3% is stored raw as well
    const almost = Buffer.concat([crypto.randomBytes(98_000), Buffer.alloc(1_000)]);
    expect(maybeCompressTransient(almost, 3).compressed).toBe(maybeCompress(almost, 3).compressed);
    expect(maybeCompressTransient(text, 0).compressed).toBe(false);
  });

  it('gives the same bytes for inputs of every size class mixed (one zstd context per class and level)', () => {
    // sizes from 64 B to 300 KiB, in an order that moves between the classes at every step
    const sizes = [64, 200_000, 1_000, 9_000, 130_000, 2_048, 16_384, 16_385, 4_000, 300_000, 700, 60_000];
    for (let round = 0; round < 3; round++)
      for (const n of sizes)
        for (const level of [1, 3]) {
          const data = text.subarray(round * 7, round * 7 + n);
          const a = maybeCompress(data, level);
          const b = maybeCompressTransient(data, level);
          expect(b.compressed).toBe(a.compressed);
          expect(Buffer.compare(b.data, a.data)).toBe(0);
          if (n >= 1_000) expect(b.compressed).toBe(true); // (64 B of text saves under 3%)
          if (b.compressed) expect(decompressTransient(Buffer.from(b.data), n).equals(data)).toBe(true);
        }
  });

  it('handles blocks larger than the per-thread buffers (huge block files) the same way', () => {
    const big = Buffer.concat(Array.from({ length: 5 }, () => text)); // ~9.6 MB
    const a = maybeCompress(big, 1);
    const b = maybeCompressTransient(big, 1);
    expect(b.compressed).toBe(true);
    expect(Buffer.compare(b.data, a.data)).toBe(0);
    const small = maybeCompressTransient(text.subarray(0, 100_000), 1); // the thread's buffer still works
    expect(decompressTransient(Buffer.from(small.data), 100_000).equals(text.subarray(0, 100_000))).toBe(
      true,
    );
    expect(decompressTransient(Buffer.from(b.data), big.length).equals(big)).toBe(true);
  });

  it('rejects a wrong expected length and damaged input', () => {
    const c = Buffer.from(maybeCompressTransient(text, 3).data);
    expect(() => decompressTransient(c, text.length - 1)).toThrow();
    expect(() => decompressTransient(c, text.length + 1)).toThrow(/expected/);
    const bad = Buffer.from(c);
    bad.fill(0x55, 10, 60);
    expect(() => decompressTransient(bad, text.length)).toThrow();
  });

  it("probes one file's blocks: incompressible runs get an attempt every PROBE-th block, compressible ones every block", () => {
    // a block file's 8 KiB blocks in file order: 300 random, then 100 of text, then 50 random again
    const blocks = [
      ...Array.from({ length: 300 }, () => crypto.randomBytes(8192)),
      ...Array.from({ length: 100 }, (_, i) => text.subarray(i * 100, i * 100 + 8192)),
      ...Array.from({ length: 50 }, () => crypto.randomBytes(8192)),
    ];
    const probe = new CompressionProbe();
    const tried: boolean[] = [];
    const compressed: boolean[] = [];
    for (const b of blocks) {
      const t = probe.shouldTry();
      tried.push(t);
      const c = t ? maybeCompressTransient(b, 3) : { compressed: false };
      if (t) probe.record(c.compressed);
      compressed.push(c.compressed);
    }
    const count = (xs: boolean[], from: number, to: number) => xs.slice(from, to).filter(Boolean).length;
    const { MISSES, PROBE } = CompressionProbe;
    // the random run: the first MISSES blocks, then one in PROBE
    expect(count(tried, 0, 300)).toBe(MISSES + Math.floor((300 - MISSES) / PROBE));
    // the text: found within PROBE blocks, every block after that tried and compressed
    const firstText = compressed.indexOf(true);
    expect(firstText).toBeGreaterThanOrEqual(300);
    expect(firstText).toBeLessThan(300 + PROBE);
    expect(count(compressed, firstText, 400)).toBe(400 - firstText);
    // random again: tried until MISSES misses, then probed
    expect(count(tried, 400, 450)).toBe(MISSES + Math.floor((50 - MISSES) / PROBE));
    expect(count(compressed, 400, 450)).toBe(0);
  });

  it('judges a large buffer worth compressing from samples: random no, a run of repeats yes', () => {
    const MiB = 1024 * 1024;
    const random = crypto.randomBytes(8 * MiB);
    expect(worthCompressing(random, 1)).toBe(false);
    // a block list with one zero-block ID repeated over a quarter of it (a partly empty VM disk)
    const id = crypto.randomBytes(32);
    const partly = Buffer.from(random);
    for (let o = 3 * MiB; o < 5 * MiB; o += 32) id.copy(partly, o);
    expect(worthCompressing(partly, 1)).toBe(true);
    expect(maybeCompress(partly, 1).compressed).toBe(true);
    // under 1 MiB: always tried; level 0: never
    expect(worthCompressing(random.subarray(0, MiB - 1), 1)).toBe(true);
    expect(worthCompressing(partly, 0)).toBe(false);
  });
});
