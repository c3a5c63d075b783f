/**
 * The repository's maintenance owner (repo/maintenance.ts) against the in-memory backend with a
 * simulated store clock: concurrent claims resolve to exactly one owner (also on a store whose
 * conditional create is not atomic), only the owner prunes on schedule, another host takes over
 * when the owner has been idle for twice its interval, and old records are cleared.
 */
import { describe, expect, it } from 'vitest';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { FaultyBackend } from '../../src/main/engine/backend/faulty/index.js';
import type { Backend, ObjectInfo, ObjectType, SaveOptions } from '../../src/main/engine/backend/types.js';
import { ObjectExistsError } from '../../src/main/engine/errors.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import {
  claimMaintenance,
  maintenanceDue,
  readMaintenance,
  recordPrune,
  writeMaintenanceGeneration,
} from '../../src/main/engine/repo/maintenance.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

async function setup() {
  let storeT = Date.UTC(2026, 10, 30, 12, 0, 0);
  const mem = new MemoryBackend('memory:office', () => storeT);
  const repo = await Repository.init(mem, 'pw', { kdf: { N: 1024 } });
  // every operation may be held back a little, so concurrent claimers really interleave
  const jittery = new FaultyBackend(mem, [
    { effect: { delayMs: 3 }, when: () => Math.random() < 0.5 },
    { effect: { delayMs: 1 }, when: () => Math.random() < 0.5 },
  ]);
  return { mem, backend: jittery as Backend, key: repo.key, advance: (ms: number) => (storeT += ms) };
}

/** A store whose "create if absent" is a racy check-then-write (like S3 without If-None-Match). */
class RacyStore implements Backend {
  readonly location = 'racy:';
  constructor(private readonly mem: MemoryBackend) {}
  async conditionalWrites(): Promise<boolean> {
    return false;
  }
  async save(type: ObjectType, name: string, data: Uint8Array, options?: SaveOptions): Promise<void> {
    if (options?.ifNotExists) {
      const there = await this.mem.stat(type, name).then(
        () => true,
        () => false,
      );
      if (there) throw new ObjectExistsError(`${type}/${name}`);
      await new Promise((r) => setTimeout(r, 5)); // the window in which another writer also passes
    }
    return this.mem.save(type, name, data);
  }
  load(type: ObjectType, name: string, offset?: number, length?: number): Promise<Buffer> {
    return this.mem.load(type, name, offset, length);
  }
  stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    return this.mem.stat(type, name);
  }
  remove(type: ObjectType, name: string): Promise<void> {
    return this.mem.remove(type, name);
  }
  list(type: ObjectType): AsyncIterable<ObjectInfo> {
    return this.mem.list(type);
  }
  exists(): Promise<boolean> {
    return this.mem.exists();
  }
  init(): Promise<void> {
    return this.mem.init();
  }
  close(): Promise<void> {
    return this.mem.close();
  }
  storeNow(): Promise<number> {
    return this.mem.storeNow();
  }
}

async function maintenanceObjects(b: Backend): Promise<string[]> {
  const names: string[] = [];
  for await (const o of b.list('maintenance')) names.push(o.name);
  return names.sort();
}

describe('maintenance owner', () => {
  it('several hosts claiming a new repository at once: exactly one becomes owner', async () => {
    for (let round = 0; round < 5; round++) {
      const s = await setup();
      const hosts = Array.from({ length: 8 }, (_, i) => `pc${i}`);
      const results = await Promise.all(
        hosts.map((host) => claimMaintenance(s.backend, s.key, { host, intervalMs: 7 * DAY })),
      );
      const winners = results.filter((r) => r.owner);
      expect(winners).toHaveLength(1);
      const owner = winners[0].record.owner;
      // every claimer agrees on who won, and the repository says so
      for (const r of results) expect(r.record.owner).toBe(owner);
      expect((await readMaintenance(s.backend, s.key))!.record).toMatchObject({
        owner,
        generation: 1,
        event: 'claim',
        lastPruneAt: null,
      });
      expect(await maintenanceObjects(s.backend)).toEqual(['000000000001']);
    }
  });

  it('also exactly one owner on a store whose conditional create is not atomic (claims take the lock)', async () => {
    const s = await setup();
    const racy = new RacyStore(s.mem);
    const hosts = Array.from({ length: 4 }, (_, i) => `pc${i}`);
    const results = await Promise.all(
      hosts.map((host) => claimMaintenance(racy, s.key, { host, intervalMs: DAY })),
    );
    expect(results.filter((r) => r.owner)).toHaveLength(1);
    expect(await maintenanceObjects(racy)).toEqual(['000000000001']);
  });

  it('on such a store, other PCs checking an active owner take no lock and write nothing', async () => {
    const s = await setup();
    const racy = new RacyStore(s.mem);
    await claimMaintenance(racy, s.key, { host: 'pc1', intervalMs: DAY });
    let writes = 0;
    const counted = new FaultyBackend(racy, [
      { op: ['save', 'remove'], effect: { delayMs: 0 }, when: () => (writes++, false) },
    ]);
    const d = await maintenanceDue(counted, s.key, { host: 'pc2', intervalMs: DAY });
    expect(d).toMatchObject({ prune: false, reason: expect.stringMatching(/pc1 maintains this repository/) });
    expect(writes).toBe(0);
  });

  it('only the owner prunes on schedule, on its interval, and records it', async () => {
    const s = await setup();
    const interval = 7 * DAY;
    const first = await maintenanceDue(s.backend, s.key, { host: 'pc1', intervalMs: interval });
    expect(first).toMatchObject({ prune: true, claimed: 'claim' });
    expect(await recordPrune(s.backend, s.key, { host: 'pc1', intervalMs: interval })).toBe(true);
    // another host does not prune while the owner keeps at it
    const other = await maintenanceDue(s.backend, s.key, { host: 'pc2', intervalMs: interval });
    expect(other.prune).toBe(false);
    expect(other.reason).toMatch(/pc1 maintains this repository/);
    expect(await recordPrune(s.backend, s.key, { host: 'pc2', intervalMs: interval })).toBe(false);
    // the owner itself waits for its interval
    s.advance(3 * DAY);
    expect((await maintenanceDue(s.backend, s.key, { host: 'pc1', intervalMs: interval })).prune).toBe(false);
    s.advance(4 * DAY);
    expect((await maintenanceDue(s.backend, s.key, { host: 'pc1', intervalMs: interval })).prune).toBe(true);
    expect(await recordPrune(s.backend, s.key, { host: 'pc1', intervalMs: interval })).toBe(true);
    const r = (await readMaintenance(s.backend, s.key))!.record;
    expect(r).toMatchObject({ owner: 'pc1', event: 'prune', generation: 3 });
    expect(Date.parse(r.lastPruneAt!)).toBe(Date.UTC(2026, 10, 30, 12) + 7 * DAY);
    // old generations are cleared: the current one and the one before stay
    expect(await maintenanceObjects(s.backend)).toEqual(['000000000002', '000000000003']);
  });

  it('an idle owner is taken over after twice its interval, by exactly one host, and the takeover is recorded', async () => {
    const s = await setup();
    const interval = 2 * DAY;
    await claimMaintenance(s.backend, s.key, { host: 'gone-pc', intervalMs: interval });
    await recordPrune(s.backend, s.key, { host: 'gone-pc', intervalMs: interval });
    s.advance(3 * DAY); // 1.5 intervals: the owner may just be late
    const early = await maintenanceDue(s.backend, s.key, { host: 'pc1', intervalMs: interval });
    expect(early.prune).toBe(false);
    s.advance(1 * DAY + 1); // 2 intervals and a bit: the owner is gone
    const results = await Promise.all(
      ['pc1', 'pc2', 'pc3', 'pc4', 'pc5'].map((host) =>
        maintenanceDue(s.backend, s.key, { host, intervalMs: interval }),
      ),
    );
    const pruners = results.filter((r) => r.prune);
    expect(pruners).toHaveLength(1);
    expect(pruners[0].claimed).toBe('takeover');
    const r = (await readMaintenance(s.backend, s.key))!.record;
    expect(r.owner).toBe(pruners[0].record!.owner);
    expect(r.event).toBe('takeover');
    expect(r.takeover).toMatchObject({ from: 'gone-pc' });
    expect(r.takeover!.reason).toMatch(
      /gone-pc has not pruned since .* \(interval 2 days, takeover after 4 days\)/,
    );
    // the old owner, back again, learns it no longer maintains the repository
    expect(await recordPrune(s.backend, s.key, { host: 'gone-pc', intervalMs: interval })).toBe(false);
    expect((await maintenanceDue(s.backend, s.key, { host: 'gone-pc', intervalMs: interval })).prune).toBe(
      false,
    );
  });

  it('a record written while a PC was deciding proves its writer alive: no takeover in the same breath', async () => {
    // minimal takeover time and a 1 ms interval: any record looks idle a moment after it is written, so
    // only the generation a PC judged keeps a PC that lost a takeover race from taking over the winner
    const s = await setup();
    const fast = { intervalMs: 1, minTakeoverMs: 0 };
    await claimMaintenance(s.backend, s.key, { host: 'gone-pc', ...fast });
    s.advance(1000);
    // pc1 and pc2 both judged generation 1 idle; pc1 wrote the takeover first
    expect(
      await claimMaintenance(s.backend, s.key, { host: 'pc1', ...fast, judgedGeneration: 1 }),
    ).toMatchObject({
      owner: true,
      changed: true,
    });
    s.advance(1000);
    const late = await claimMaintenance(s.backend, s.key, { host: 'pc2', ...fast, judgedGeneration: 1 });
    expect(late).toMatchObject({
      owner: false,
      changed: false,
      reason: 'pc1 took over maintenance at the same time',
    });
    expect((await readMaintenance(s.backend, s.key))!.record).toMatchObject({ owner: 'pc1', generation: 2 });
    // judged afresh (a later scheduled run), pc1's record is idle by its 1 ms interval: pc2 may take over
    expect(await claimMaintenance(s.backend, s.key, { host: 'pc2', ...fast })).toMatchObject({ owner: true });
  });

  it('a forced claim takes over from a live owner and says so', async () => {
    const s = await setup();
    await claimMaintenance(s.backend, s.key, { host: 'pc1', intervalMs: DAY });
    const refused = await claimMaintenance(s.backend, s.key, { host: 'pc2', intervalMs: DAY });
    expect(refused).toMatchObject({ owner: false, changed: false });
    const forced = await claimMaintenance(s.backend, s.key, { host: 'pc2', intervalMs: DAY, force: true });
    expect(forced).toMatchObject({ owner: true, changed: true });
    expect(forced.record.takeover).toMatchObject({ from: 'pc1', reason: 'claimed on pc2 by the user' });
  });

  it('a writer that read a stale record and recreates a removed generation withdraws', async () => {
    const s = await setup();
    await claimMaintenance(s.backend, s.key, { host: 'pc1', intervalMs: DAY });
    for (let i = 0; i < 3; i++) await recordPrune(s.backend, s.key, { host: 'pc1', intervalMs: DAY });
    expect(await maintenanceObjects(s.backend)).toEqual(['000000000003', '000000000004']);
    // a slow host still believes generation 1 is current: its create of generation 2 succeeds (that
    // object was removed), but the listing afterwards shows generation 4, so it withdraws
    const stale = await writeMaintenanceGeneration(
      s.backend,
      s.key,
      {
        owner: 'slow-pc',
        intervalMs: DAY,
        claimedAt: new Date().toISOString(),
        lastPruneAt: null,
        event: 'takeover',
        writtenAt: new Date().toISOString(),
      },
      1,
    );
    expect(stale).toBeUndefined();
    expect(await maintenanceObjects(s.backend)).toEqual(['000000000003', '000000000004']);
    expect((await readMaintenance(s.backend, s.key))!.record).toMatchObject({ owner: 'pc1', generation: 4 });
  });
});
