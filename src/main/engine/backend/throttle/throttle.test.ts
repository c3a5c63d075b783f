import { describe, expect, it } from 'vitest';
import { ThrottleBackend, TokenBucket, type Clock } from './index.js';
import { MemoryBackend } from '../memory/index.js';
import { backendConformance } from '../conformance.js';

/** A simulated clock: sleeping advances time instantly, so tests check rates without waiting. */
function fakeClock(): Clock & { t: number } {
  const c = {
    t: 0,
    now: () => c.t,
    sleep: async (ms: number) => {
      c.t += ms;
    },
  };
  return c;
}

describe('bandwidth limit', () => {
  it('holds uploads to the configured rate over many objects of mixed sizes', async () => {
    const clock = fakeClock();
    const b = new ThrottleBackend(new MemoryBackend(), { uploadBytesPerSec: 1_000_000 }, clock);
    let total = 0;
    for (let i = 0; i < 40; i++) {
      const size = 50_000 + ((i * 37_000) % 400_000);
      total += size;
      await b.save('data', `o${i}`, Buffer.alloc(size));
    }
    // The bucket starts full (0.5 s of burst); everything after that is paid at 1 MB/s.
    const expectedMs = ((total - 500_000) / 1_000_000) * 1000;
    expect(clock.t).toBeGreaterThanOrEqual(expectedMs - 1);
    expect(clock.t).toBeLessThanOrEqual(expectedMs + 1);
  });

  it('serves concurrent transfers in arrival order and at the same total rate', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket(100, 0.5, clock);
    const order: number[] = [];
    await Promise.all([0, 1, 2, 3].map((i) => bucket.take(100).then(() => order.push(i))));
    expect(order).toEqual([0, 1, 2, 3]);
    expect(clock.t).toBeCloseTo(3500, 5); // 400 tokens, 50 in the bucket, 350 at 100/s
  });

  it('limits downloads by the bytes actually received, and can be changed during a run', async () => {
    const clock = fakeClock();
    const mem = new MemoryBackend();
    await mem.save('data', 'big', Buffer.alloc(3_000_000));
    const b = new ThrottleBackend(mem, { downloadBytesPerSec: 1_000_000 }, clock);
    await b.load('data', 'big');
    expect(clock.t).toBeCloseTo(2500, 0);
    b.setLimits({ downloadBytesPerSec: 0 });
    const before = clock.t;
    await b.load('data', 'big');
    expect(clock.t).toBe(before);
  });

  it('costs nothing when unlimited', async () => {
    const clock = fakeClock();
    const b = new ThrottleBackend(new MemoryBackend(), {}, clock);
    await b.save('data', 'x', Buffer.alloc(10_000_000));
    await b.load('data', 'x');
    expect(clock.t).toBe(0);
  });
});

backendConformance(
  'throttle over memory (generous limits)',
  async () =>
    new ThrottleBackend(new MemoryBackend(), {
      uploadBytesPerSec: 2 ** 40,
      downloadBytesPerSec: 2 ** 40,
      requestsPerSec: 1e9,
    }),
);
