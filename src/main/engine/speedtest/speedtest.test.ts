import { describe, expect, it } from 'vitest';
import { BUCKETS, LatencyHistogram, bucketBounds, bucketOf } from './histogram.js';
import { DEFAULTS, parseSize, resolveOptions } from './patterns.js';
import { estimate } from './estimate.js';
import type { PatternResult } from './types.js';

const MiB = 1024 * 1024;

describe('latency histogram', () => {
  it('every bucket holds exactly the values between its bounds, each at most 1/32 of its value wide', () => {
    for (let i = 0; i < BUCKETS; i++) {
      const [lo, hi] = bucketBounds(i);
      if (lo > 2 ** 50) break;
      expect(bucketOf(lo), `bucket ${i} low`).toBe(i);
      expect(bucketOf(hi), `bucket ${i} high`).toBe(i);
      if (i >= 64) expect((hi - lo + 1) / lo).toBeLessThanOrEqual(1 / 32);
    }
  });

  it('percentiles are within 1.6% of the exact ones', () => {
    const h = new LatencyHistogram();
    const values: number[] = [];
    for (let i = 1; i <= 20_000; i++) {
      const v = Math.round(1000 * Math.exp((i % 997) / 100)); // 1 µs … 20 ms, skewed
      values.push(v);
      h.add(v);
    }
    values.sort((a, b) => a - b);
    for (const q of [0.5, 0.95, 0.99]) {
      const exact = values[Math.ceil(q * values.length) - 1];
      expect(Math.abs(h.percentile(q)! - exact) / exact).toBeLessThan(0.016);
    }
    expect(new LatencyHistogram().percentile(0.5)).toBeNull();
    // the native engine's [low, high, count] triples land in the same buckets
    const t = new LatencyHistogram().addTriples([1000, 1000, 3, 65536, 67583, 1]);
    expect(t.count).toBe(4);
    expect(Math.abs(t.percentile(0.5)! - 1000)).toBeLessThan(16);
  });
});

describe('options', () => {
  it("defaults are DiskSpd's (-c1G -b512K -t1 -o2) and 10 s per pattern", () => {
    const r = resolveOptions({}, 'folder');
    expect(r).toMatchObject({
      fileSize: 1024 * MiB,
      blockSize: 512 * 1024,
      threads: 1,
      queueDepth: 2,
      durationMs: 10_000,
    });
    expect(r.patterns).toHaveLength(6);
    expect(resolveOptions({}, 's3')).toMatchObject({
      patterns: ['pack-put', 'pack-get', 'small-get'],
      inFlight: [1, 4, 8],
    });
    expect(DEFAULTS.inFlight).toEqual([1, 4, 8]);
  });

  it('refuses what cannot run, saying why', () => {
    const bad = (o: Parameters<typeof resolveOptions>[0], kind: 'folder' | 's3', msg: RegExp) =>
      expect(() => resolveOptions(o, kind)).toThrow(msg);
    bad({ patterns: ['pack-put'] }, 'folder', /pack-put cannot run on a folder/);
    bad({ patterns: ['restore'] }, 's3', /restore cannot run on S3/);
    bad({ blockSize: 6 * 1024 }, 'folder', /multiple of 4 KiB/);
    bad({ fileSize: 8 * MiB }, 'folder', /at least 16 MiB/);
    bad({ fileSize: 16 * MiB + 1 }, 'folder', /whole number of MiB/);
    bad({ fileSize: 16 * MiB, threads: 4, blockSize: 8 * MiB }, 'folder', /too small for active-full/);
    bad(
      { threads: 64, queueDepth: 256, blockSize: 4 * MiB, fileSize: 1024 * 1024 * MiB },
      'folder',
      /buffers/,
    );
    bad({ durationMs: 10 }, 'folder', /between 0.1 s and one hour/);
    bad({ inFlight: [0] }, 's3', /whole numbers from 1 to 64/);
  });

  it('parses sizes', () => {
    expect(parseSize('512K')).toBe(512 * 1024);
    expect(parseSize('4M')).toBe(4 * MiB);
    expect(parseSize('1G')).toBe(1024 * MiB);
    expect(parseSize('16MiB')).toBe(16 * MiB);
    expect(parseSize('4096')).toBe(4096);
    expect(() => parseSize('lots')).toThrow(/not a size/);
  });
});

describe('estimate', () => {
  const result = (pattern: PatternResult['pattern'], mibps: number, depth = 1, write = true) =>
    ({ pattern, depth, writeMibps: write ? mibps : 0, readMibps: write ? 0 : mibps }) as PatternResult;

  it("a full backup at the pack pattern's rate, a restore at the restore pattern's, stored as the last full run stored", () => {
    const e = estimate({
      results: [result('active-full', 400), result('pack', 200), result('restore', 500, 2, false)],
      sourceBytes: 10_000 * MiB,
      runs: [
        { endedAt: 3, durationMs: 10_000, bytesRead: 100 * MiB, bytesStored: 20 * MiB, full: false },
        { endedAt: 2, durationMs: 100_000, bytesRead: 8000 * MiB, bytesStored: 4000 * MiB, full: true },
      ],
    });
    expect(e.storedRatio).toBe(0.5);
    expect(e.storedBytes).toBe(5000 * MiB);
    expect(e.backup).toEqual({ ms: 25_000, mibps: 200, basis: 'pack', inFlight: 1 });
    expect(e.restore).toEqual({ ms: 10_000, mibps: 500, basis: 'restore', inFlight: 2 });
    expect(e.lastFull).toMatchObject({ readMibps: 80, storedMibps: 40 });
    expect(e.lastRun).toMatchObject({ readMibps: 10, storedMibps: 2 });
  });

  it('on S3: the in-flight counts the engine uses (the nearest measured, the lower on a tie)', () => {
    const e = estimate({
      results: [
        result('pack-put', 10, 1),
        result('pack-put', 30, 4),
        result('pack-put', 50, 8),
        result('pack-get', 20, 1, false),
        result('pack-get', 60, 4, false),
      ],
      sourceBytes: 600 * MiB,
    });
    expect(e.backup).toMatchObject({ basis: 'pack-put', inFlight: 1, ms: 60_000 }); // 2 in flight: 1 and 4 tie
    expect(e.restore).toMatchObject({ basis: 'pack-get', inFlight: 4, ms: 10_000 });
    expect(e.storedRatio).toBeNull();
    expect(estimate({ results: [], sourceBytes: null })).toMatchObject({ backup: null, restore: null });
  });
});
