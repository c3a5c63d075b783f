import { describe, expect, it } from 'vitest';
import type { RunSample, SpeedTestSample } from './api';
import {
  BoundedSeries,
  boundSeries,
  mergeRunSamples,
  mergeSpeedSamples,
  RUN_SAMPLES_MAX,
  SPEED_SAMPLES_MAX,
} from './series';

/** A day-long run sampled every second: 100 MB/s for the first half, 10 MB/s for the second. */
const sampleAt = (i: number, n: number): RunSample => ({
  t: (i + 1) * 1000,
  readBps: i < n / 2 ? 100e6 : 10e6,
  writeBps: i < n / 2 ? 50e6 : 5e6,
  filesPerSec: i % 2 ? 20 : 0,
  dedupRatio: 1 + i / n,
});

describe('bounded series', () => {
  it('keeps a 100k-sample run within the cap, with its whole shape and the latest point exact', () => {
    const n = 100_000;
    const bounded = new BoundedSeries(RUN_SAMPLES_MAX, mergeRunSamples);
    const series = bounded.points;
    let longest = 0;
    for (let i = 0; i < n; i++) {
      bounded.push(sampleAt(i, n));
      longest = Math.max(longest, series.length);
    }
    expect(longest).toBeLessThanOrEqual(RUN_SAMPLES_MAX);
    expect(series.length).toBeGreaterThan(RUN_SAMPLES_MAX / 2);
    // the chart reaches the latest sample (and its dedup ratio, which is cumulative)
    expect(series.at(-1)).toMatchObject({ t: n * 1000, dedupRatio: sampleAt(n - 1, n).dedupRatio });
    // time runs forward over the whole run, from its first minutes to its end, in equal steps
    for (let i = 1; i < series.length; i++) expect(series[i].t).toBeGreaterThan(series[i - 1].t);
    expect(series[0].t).toBeLessThanOrEqual((n / (RUN_SAMPLES_MAX / 2)) * 1000);
    const step = series[1].t - series[0].t;
    for (let i = 1; i < series.length - 1; i++) expect(series[i].t - series[i - 1].t).toBe(step);
    // the shape: fast first half, slow second half; the rates averaged, not picked
    const firstHalf = series.filter((s) => s.t <= (n / 2) * 1000);
    const secondHalf = series.filter((s) => s.t > (n / 2 + n / 100) * 1000);
    expect(firstHalf.length).toBeGreaterThan(series.length / 3);
    for (const s of firstHalf) expect(s.readBps).toBe(100e6);
    for (const s of secondHalf) expect(s.readBps).toBe(10e6);
    for (const s of series) expect(s.filesPerSec).toBeCloseTo(10, 5);
    // the bytes the chart stands for are the bytes read (rate × time summed over the points)
    let prev = 0;
    let bytes = 0;
    for (const s of series) {
      bytes += (s.readBps * (s.t - prev)) / 1000;
      prev = s.t;
    }
    expect(bytes).toBeCloseTo((n / 2) * 100e6 + (n / 2) * 10e6, -6);
  });

  it('bounds a stored series as appending would, and leaves a short one as it is', () => {
    const n = 5000;
    const all = Array.from({ length: n }, (_, i) => sampleAt(i, n));
    const bounded = boundSeries(all, RUN_SAMPLES_MAX, mergeRunSamples);
    expect(bounded.length).toBeLessThanOrEqual(RUN_SAMPLES_MAX);
    expect(bounded.at(-1)?.t).toBe(all.at(-1)?.t);
    expect(all).toHaveLength(n); // the input is not changed
    const short = all.slice(0, 10);
    expect(boundSeries(short, RUN_SAMPLES_MAX, mergeRunSamples)).toEqual(short);
  });

  it('thins a long speed test without mixing its patterns', () => {
    const series = new BoundedSeries<SpeedTestSample>(SPEED_SAMPLES_MAX, mergeSpeedSamples);
    const patterns = ['active-full', 'restore', 'pack'] as const;
    for (let i = 0; i < 30_000; i++) {
      const k = Math.floor(i / 10_000);
      series.push({ t: i * 500, pattern: patterns[k], mibps: (i % 3) + 100 * k, iops: 10 });
    }
    const samples = series.points;
    expect(samples.length).toBeLessThanOrEqual(SPEED_SAMPLES_MAX);
    expect(samples.at(-1)).toMatchObject({ t: 29_999 * 500, pattern: 'pack', iops: 10 });
    for (const [k, p] of patterns.entries()) {
      const mine = samples.filter((s) => s.pattern === p);
      expect(mine.length).toBeGreaterThan(SPEED_SAMPLES_MAX / 10);
      for (const s of mine) {
        expect(s.mibps).toBeGreaterThanOrEqual(100 * k);
        expect(s.mibps).toBeLessThanOrEqual(100 * k + 2);
      }
    }
  });
});
