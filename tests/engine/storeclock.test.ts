/**
 * Lock leases judged by the store's clock: two PCs whose own clocks are two hours apart (one ahead of
 * the store, one behind) share an in-memory repository with a simulated store clock. The PC ahead must
 * not take over a live lock; the PC behind must not keep a dead lock alive; prune's grace period for
 * young packs is judged on the store's clock too.
 */
import { describe, expect, it } from 'vitest';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { RetryBackend } from '../../src/main/engine/backend/retry/index.js';
import { RequestLogBackend } from '../../src/main/engine/backend/requestlog/index.js';
import { ThrottleBackend } from '../../src/main/engine/backend/throttle/index.js';
import { ReadOnlyBackend } from '../../src/main/engine/backend/readonly/index.js';
import { FaultyBackend } from '../../src/main/engine/backend/faulty/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { acquireLock, clockSkewWarning, listLocks, storeClock } from '../../src/main/engine/repo/lock.js';
import { RepoLockedError } from '../../src/main/engine/errors.js';

const HOUR = 3_600_000;
const LEASE = 60_000;

async function setup() {
  let storeT = Date.UTC(2026, 10, 30, 12, 0, 0);
  const store = new MemoryBackend('memory:office', () => storeT);
  const repo = await Repository.init(store, 'pw', { kdf: { N: 1024 } });
  const ahead = () => storeT + 2 * HOUR; // PC "fast": its clock runs two hours ahead of the store
  const behind = () => storeT - 2 * HOUR; // PC "slow": two hours behind
  return {
    store,
    key: repo.key,
    ahead,
    behind,
    advance: (ms: number) => (storeT += ms),
    storeNow: () => storeT,
  };
}

describe('lock leases on the store clock', () => {
  it('a PC whose clock runs ahead does not take over a live lock', async () => {
    const s = await setup();
    const held = await acquireLock(s.store, s.key, {
      exclusive: true,
      purpose: 'prune',
      leaseMs: LEASE,
      now: s.behind,
      host: 'slow-pc',
    });
    try {
      // written in store time, not in the holder's (wrong) time
      const [l] = await listLocks(s.store, s.key);
      expect(Date.parse(l.info.created)).toBe(s.storeNow());
      expect(Date.parse(l.info.expires)).toBe(s.storeNow() + LEASE);
      expect(held.clockOffsetMs).toBe(2 * HOUR);
      s.advance(LEASE / 2); // the lease is half used: still live by the store's clock
      await expect(
        acquireLock(s.store, s.key, {
          exclusive: true,
          purpose: 'prune',
          leaseMs: LEASE,
          now: s.ahead,
          host: 'fast-pc',
        }),
      ).rejects.toBeInstanceOf(RepoLockedError);
      // the holder's lock is still there and the newcomer withdrew its own
      expect((await listLocks(s.store, s.key)).map((x) => x.info.host)).toEqual(['slow-pc']);
    } finally {
      await held.release();
    }
  });

  it('a PC whose clock runs behind does not keep an expired lock alive', async () => {
    const s = await setup();
    const crashed = await acquireLock(s.store, s.key, {
      exclusive: false,
      purpose: 'backup',
      leaseMs: LEASE,
      now: s.ahead,
      host: 'fast-pc',
    });
    try {
      expect(crashed.clockOffsetMs).toBe(-2 * HOUR);
      s.advance(LEASE + 1000); // the holder "crashed": no refresh, the lease ran out in store time
      const taker = await acquireLock(s.store, s.key, {
        exclusive: true,
        purpose: 'prune',
        leaseMs: LEASE,
        now: s.behind,
        host: 'slow-pc',
      });
      // the expired lock was cleared by the newcomer
      expect((await listLocks(s.store, s.key)).map((x) => x.info.host)).toEqual(['slow-pc']);
      await taker.release();
    } finally {
      await crashed.release();
    }
  });

  it('the holder times its own lease with its local clock (elapsed time only)', async () => {
    const s = await setup();
    let local = 5_000; // a clock that has nothing to do with the store's
    const lock = await acquireLock(s.store, s.key, {
      exclusive: true,
      purpose: 'prune',
      leaseMs: LEASE,
      now: () => local,
      host: 'odd-pc',
    });
    expect(lock.lapsed).toBe(false);
    local += LEASE + 1;
    expect(lock.lapsed).toBe(true);
    await lock.release();
  });

  it('every wrapper forwards the store clock; a large skew is worth a warning', async () => {
    const s = await setup();
    const stacked = new ReadOnlyBackend(
      new RetryBackend(new RequestLogBackend(new ThrottleBackend(new FaultyBackend(s.store)))),
    );
    const c = await storeClock(stacked, s.ahead);
    expect(c.now).toBe(s.storeNow());
    expect(c.offsetMs).toBe(-2 * HOUR);
    expect(clockSkewWarning(c.offsetMs, 'memory:office')).toMatch(
      /120 minute\(s\) ahead of the clock of memory:office/,
    );
    expect(clockSkewWarning(60_000, 'x')).toBeUndefined();
    // a backend with no clock of its own is judged by the local one (offset 0)
    const plain = { ...s.store, storeNow: undefined } as unknown as MemoryBackend;
    expect((await storeClock(plain, () => 42)).offsetMs).toBe(0);
    // a store reading taken between our two readings (a folder: our own clock, a slow await) is no offset
    let t = 1000;
    const tick = () => (t += 5);
    const sameClock = { storeNow: async () => tick() } as unknown as MemoryBackend;
    expect((await storeClock(sameClock, tick)).offsetMs).toBe(0);
    const behind = { storeNow: async () => 10 } as unknown as MemoryBackend;
    expect((await storeClock(behind, () => 1000)).offsetMs).toBe(-990);
  });
});
