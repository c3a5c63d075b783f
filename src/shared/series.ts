/**
 * Bounded time series for what the app keeps in memory and sends to the UI: a run's throughput samples
 * and a speed test's live samples. A backup may run for a day and the app may stay open for weeks, so a
 * series never grows past its cap; once full it halves its resolution (neighbours merged), so the chart
 * still shows the whole run's shape from the first second to the last, only coarser.
 */
import type { RunSample, SpeedTestSample } from './api';

/** Merges two neighbouring points into one; `before` is the point preceding `a`, when there is one. */
export type Merge<T> = (a: T, b: T, before: T | undefined) => T;

/** Points a live or stored run's throughput chart gets (a day's run: one per ~3 minutes). */
export const RUN_SAMPLES_MAX = 480;
/** Points a speed test keeps for its live chart. */
export const SPEED_SAMPLES_MAX = 1200;

/**
 * A time series of at most `max` points (`max` even, at least 2) that covers everything pushed into
 * it at one resolution: each point stands for `stride` pushed items (the last one for up to that many,
 * filling). When a new point would make it longer than `max`, neighbouring pairs are merged and the
 * stride doubles, so old and new parts of a long run stay equally fine. `points` is the one array, kept
 * in place (it may be handed out as it is).
 */
export class BoundedSeries<T> {
  readonly points: T[] = [];
  private stride = 1;
  /** Items in the last point so far. */
  private fill = 0;

  constructor(
    private readonly max: number,
    private readonly merge: Merge<T>,
  ) {
    if (max < 2 || max % 2) throw new RangeError('a bounded series needs an even size of at least 2');
  }

  push(item: T): void {
    const pts = this.points;
    if (this.fill > 0 && this.fill < this.stride) {
      pts[pts.length - 1] = this.merge(pts[pts.length - 1], item, pts[pts.length - 2]);
      this.fill++;
      return;
    }
    if (pts.length === this.max) {
      for (let i = 0; i < this.max / 2; i++) pts[i] = this.merge(pts[2 * i], pts[2 * i + 1], pts[2 * i - 1]);
      pts.length = this.max / 2;
      this.stride *= 2;
    }
    pts.push(item);
    this.fill = 1;
  }
}

/** A copy of `list` as a BoundedSeries of `max` points would hold it. */
export function boundSeries<T>(list: readonly T[], max: number, merge: Merge<T>): T[] {
  if (list.length <= max) return list.slice();
  const s = new BoundedSeries(max, merge);
  for (const x of list) s.push(x);
  return s.points;
}

/**
 * Two neighbouring throughput samples as one over both intervals: rates averaged by the time each
 * covers (from the previous point), the cumulative dedup ratio and the time of the later one.
 */
export function mergeRunSamples(a: RunSample, b: RunSample, before?: RunSample): RunSample {
  const da = Math.max(0, a.t - (before?.t ?? 0));
  const db = Math.max(0, b.t - a.t);
  const w = da + db;
  const avg = (x: number, y: number) => (w > 0 ? (x * da + y * db) / w : (x + y) / 2);
  return {
    t: b.t,
    readBps: avg(a.readBps, b.readBps),
    writeBps: avg(a.writeBps, b.writeBps),
    filesPerSec: avg(a.filesPerSec, b.filesPerSec),
    dedupRatio: b.dedupRatio,
  };
}

/** Two neighbouring speed-test samples as one: of the same pattern, their rates averaged at the later
 *  time; across a change of pattern, the later one (the new pattern's first point). */
export function mergeSpeedSamples(
  a: SpeedTestSample,
  b: SpeedTestSample,
  before?: SpeedTestSample,
): SpeedTestSample {
  if (a.pattern !== b.pattern) return b;
  // weighted by the time each covers (a pattern's first point: as long as the next)
  const db = Math.max(0, b.t - a.t);
  const da = before && before.pattern === a.pattern ? Math.max(0, a.t - before.t) : db;
  const w = da + db;
  const avg = (x: number, y: number) => (w > 0 ? (x * da + y * db) / w : (x + y) / 2);
  return { ...b, mibps: Math.round(avg(a.mibps, b.mibps) * 10) / 10, iops: Math.round(avg(a.iops, b.iops)) };
}
