import { describe, expect, it } from 'vitest';
import { acquireDecodePool, closeIdlePools, releasePool, sharedPools } from './shared.js';

const key = { encryption: new Uint8Array(32).fill(1), id: new Uint8Array(32).fill(2) };
const config = {
  chunker: { min: 512 * 1024, avg: 1024 * 1024, max: 8 * 1024 * 1024 },
  chunkerSeed: '00'.repeat(16),
};

describe('shared pools', () => {
  it('closeIdlePools closes the pools nobody uses now, and leaves a pool in use open', async () => {
    const idle = acquireDecodePool(key, config, 1);
    const busy = acquireDecodePool({ ...key, id: new Uint8Array(32).fill(3) }, config, 1);
    await releasePool(idle);
    // released: kept for reuse a few seconds
    expect(sharedPools()).toHaveLength(2);
    await closeIdlePools();
    expect(sharedPools()).toHaveLength(1);
    // the pool in use is handed out again to an acquire with its settings
    const busyAgain = acquireDecodePool({ ...key, id: new Uint8Array(32).fill(3) }, config, 1);
    expect(busyAgain).toBe(busy);
    // the idle pool closed is not: the next acquire with its settings starts a new one
    const fresh = acquireDecodePool(key, config, 1);
    expect(fresh).not.toBe(idle);
    expect(sharedPools()).toHaveLength(2);
    for (const p of [busy, busyAgain, fresh]) await releasePool(p);
    await closeIdlePools();
    expect(sharedPools()).toHaveLength(0);
  });
});
