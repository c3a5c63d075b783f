/**
 * Latency histograms of the speed test: log-linear buckets over nanoseconds, exact below 64 ns and then
 * 32 buckets per power of two, so a percentile read from the middle of its bucket is within 1.6% of the
 * true value. The native I/O engine (native/iotest) counts into the same buckets and hands back the
 * non-empty ones as [low, high, count] triples; the JavaScript fallback and the S3 test count here.
 */
const EXACT = 64;
const SUB = 32;
export const BUCKETS = EXACT + 58 * SUB;

export function bucketOf(ns: number): number {
  const v = Math.max(0, Math.floor(ns));
  if (v < EXACT) return v;
  const e = Math.floor(Math.log2(v)) - 5;
  // Math.log2 may land a hair low or high at exact powers of two: correct by the mantissa's range
  let m = Math.floor(v / 2 ** e);
  let ee = e;
  if (m < SUB) {
    ee--;
    m = Math.floor(v / 2 ** ee);
  } else if (m >= 2 * SUB) {
    ee++;
    m = Math.floor(v / 2 ** ee);
  }
  return Math.min(BUCKETS - 1, EXACT + (ee - 1) * SUB + (m - SUB));
}

export function bucketBounds(i: number): [number, number] {
  if (i < EXACT) return [i, i];
  const e = Math.floor((i - EXACT) / SUB) + 1;
  const m = SUB + ((i - EXACT) % SUB);
  return [m * 2 ** e, (m + 1) * 2 ** e - 1];
}

export class LatencyHistogram {
  private counts = new Float64Array(BUCKETS);
  count = 0;

  add(ns: number): void {
    this.counts[bucketOf(ns)]++;
    this.count++;
  }

  /** Adds the native engine's [low, high, count] triples. */
  addTriples(t: ArrayLike<number>): this {
    for (let i = 0; i + 2 < t.length; i += 3) {
      this.counts[bucketOf(t[i])] += t[i + 2];
      this.count += t[i + 2];
    }
    return this;
  }

  merge(other: LatencyHistogram): this {
    for (let i = 0; i < BUCKETS; i++) this.counts[i] += other.counts[i];
    this.count += other.count;
    return this;
  }

  /** The latency (ns) below which a share `q` (0…1) of the operations finished; null when empty. */
  percentile(q: number): number | null {
    if (this.count === 0) return null;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      const n = this.counts[i];
      if (!n) continue;
      if (seen + n >= rank) {
        const [lo, hi] = bucketBounds(i);
        return (lo + hi) / 2;
      }
      seen += n;
    }
    return null;
  }
}
