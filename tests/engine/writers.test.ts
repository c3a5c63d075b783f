import { describe, it, expect, vi } from 'vitest';
import fs from 'node:fs/promises';
import crypto from 'node:crypto';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { forget, prune } from '../../src/main/engine/repo/retention.js';
import { tempDir, writeTree, randomBytes, until } from '../helpers/fixtures.js';

describe('a long-lived repository handle', () => {
  it('sees what another writer added and what another prune moved', async () => {
    const work = await tempDir('tm-writers-');
    const repoDir = path.join(work, 'repo');
    await Repository.init(new LocalBackend(repoDir), 'pw', { kdf: { N: 1024 } });
    const app = await Repository.open(new LocalBackend(repoDir), 'pw'); // e.g. the app, open all day
    const other = await Repository.open(new LocalBackend(repoDir), 'pw'); // e.g. another PC
    const a = path.join(work, 'a');
    const b = path.join(work, 'b');
    await writeTree(a, { 'one.bin': randomBytes(700_000, 1) });
    await writeTree(b, { 'two.bin': randomBytes(700_000, 2), 'shared.bin': randomBytes(400_000, 3) });
    await backup(app, { paths: [a] });
    const fromOther = await backup(other, { paths: [b] });
    // the app restores the other writer's snapshot: its index must learn the new packs
    const out1 = path.join(work, 'out1');
    expect(
      (await restore(app, { snapshot: fromOther.snapshotId, target: out1, relativeTo: b })).errors,
    ).toEqual([]);
    expect(await fs.readFile(path.join(out1, 'two.bin'))).toEqual(randomBytes(700_000, 2));
    // the other writer forgets and prunes (packs are rewritten); the app's handle must follow
    await writeTree(b, { 'two.bin': randomBytes(10, 4) });
    const newer = await backup(other, { paths: [b] });
    await forget(other, { keepLast: 1 }, { groupBy: ['host', 'paths'] });
    await prune(other, { repackThreshold: 0 });
    const out2 = path.join(work, 'out2');
    expect((await restore(app, { snapshot: newer.snapshotId, target: out2, relativeTo: b })).errors).toEqual(
      [],
    );
    expect(await fs.readFile(path.join(out2, 'shared.bin'))).toEqual(randomBytes(400_000, 3));
  });
});

describe('prune after concurrent writers', () => {
  it('drops the second copy of chunks two writers stored at the same time', async () => {
    const work = await tempDir('tm-dups-');
    const repoDir = path.join(work, 'repo');
    await Repository.init(new LocalBackend(repoDir), 'pw', { kdf: { N: 1024 } });
    const shared = randomBytes(3_000_000, 9);
    const trees = ['pc1', 'pc2'].map((n) => path.join(work, n));
    for (const [i, t] of trees.entries())
      await writeTree(t, { 'shared.bin': shared, [`own${i}.txt`]: `own ${i}` });
    // two handles opened before either wrote: neither knows the other's chunks
    const [a, b] = await Promise.all([0, 1].map(() => Repository.open(new LocalBackend(repoDir), 'pw')));
    await Promise.all([backup(a, { paths: [trees[0]] }), backup(b, { paths: [trees[1]] })]);
    const sizeOf = async () => {
      let total = 0;
      for await (const o of a.backend.list('data')) total += o.size;
      return total;
    };
    const before = await sizeOf();
    expect(before).toBeGreaterThan(5_900_000); // the shared file is stored twice
    await prune(a);
    const after = await sizeOf();
    expect(after).toBeLessThan(3_200_000);
    for (const [i, t] of trees.entries()) {
      const out = path.join(work, `out${i}`);
      const snaps = (await a.listSnapshots()).filter((s) => s.paths[0] === t);
      expect((await restore(a, { snapshot: snaps[0].id, target: out, relativeTo: t })).errors).toEqual([]);
      expect((await fs.readFile(path.join(out, 'shared.bin'))).equals(shared)).toBe(true);
    }
  });
});

describe('a long backup', () => {
  it('writes index files as it goes, and the result checks clean', async () => {
    const work = await tempDir('tm-idx-');
    const files: Record<string, Buffer> = {};
    for (let i = 0; i < 120; i++) files[`f${i}.bin`] = randomBytes(2000, 700 + i);
    await writeTree(path.join(work, 'src'), files);
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', {
      kdf: { N: 1024 },
      packSize: 4096,
    });
    const saved = Repository.indexEvery;
    Repository.indexEvery = 10;
    try {
      await backup(repo, { paths: [path.join(work, 'src')] });
    } finally {
      Repository.indexEvery = saved;
    }
    const names: string[] = [];
    for await (const o of repo.backend.list('index')) names.push(o.name);
    expect(names.length).toBeGreaterThan(3);
    const { check } = await import('../../src/main/engine/check/index.js');
    const fresh = await Repository.open(new LocalBackend(path.join(work, 'repo')), 'pw');
    const report = await check(fresh, { readData: true });
    expect(report.problems).toEqual([]);
    expect(report.unreferencedPacks).toEqual([]);
  });
});

describe('prune grace period', () => {
  it('keeps packs no index mentions while they are young, and removes them after the grace period', async () => {
    const work = await tempDir('tm-grace-');
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    await writeTree(path.join(work, 'src'), { 'a.bin': randomBytes(300_000, 1) });
    await backup(repo, { paths: [path.join(work, 'src')] });
    // a pack another backup has uploaded but not indexed yet
    const stray = crypto.randomBytes(32).toString('hex');
    await repo.backend.save('data', stray, crypto.randomBytes(5000));
    await prune(repo, { graceMs: 10 * 60_000 });
    await expect(repo.backend.stat('data', stray)).resolves.toBeDefined();
    await prune(repo, { graceMs: 0 });
    await expect(repo.backend.stat('data', stray)).rejects.toThrow(/not found/);
    const out = path.join(work, 'out');
    expect(
      (await restore(repo, { snapshot: 'latest', target: out, relativeTo: path.join(work, 'src') })).errors,
    ).toEqual([]);
  });
});

describe('a lock whose lease cannot be renewed', () => {
  it('is reported as lapsed, so its holder commits nothing', async () => {
    const { MemoryBackend } = await import('../../src/main/engine/backend/memory/index.js');
    const { FaultyBackend } = await import('../../src/main/engine/backend/faulty/index.js');
    const { acquireLock } = await import('../../src/main/engine/repo/lock.js');
    const faulty = new FaultyBackend(new MemoryBackend());
    const repo = await Repository.init(faulty, 'pw', { kdf: { N: 1024 } });
    // The holder's own clock is a hand-moved one: how long the machine takes between two lines is no
    // part of the test. Its refresh timer (every second) is real and fails to renew.
    let local = 1_000_000;
    const lock = await acquireLock(faulty, repo.key, {
      exclusive: false,
      purpose: 'backup',
      leaseMs: 1000,
      now: () => local,
    });
    faulty.rules = [{ op: 'save', type: 'locks', effect: { throw: () => new Error('network unreachable') } }];
    expect(lock.lapsed).toBe(false);
    await until(() => lock.lastRefreshError !== undefined, 'a failed renewal of the lease');
    expect(lock.lapsed).toBe(false); // a failed renewal alone is no lapse while the lease runs
    local += 1600;
    expect(lock.lapsed).toBe(true);
    expect(() => lock.assertHeld('the backup')).toThrow(/could not be renewed.*network unreachable/);
    faulty.rules = [];
    await lock.release();
  });
});

describe('lock objects', () => {
  it('are written atomically without fsyncs; every other object is fsynced', async () => {
    const work = await tempDir('tm-lockfsync-');
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    // FileHandle is not exported: spy on the prototype of a handle's class
    const probe = await fs.open(path.join(work, 'probe'), 'w');
    const proto = Object.getPrototypeOf(probe) as { sync: () => Promise<void> };
    await probe.close();
    const sync = vi.spyOn(proto, 'sync');
    try {
      const lock = await repo.lock(false, 'test');
      expect(sync).not.toHaveBeenCalled();
      const names = await fs.readdir(path.join(work, 'repo', 'locks'));
      expect(names).toHaveLength(1); // in place under its name, no temporary file left
      await lock.release();
      await writeTree(path.join(work, 'src'), { 'f.bin': randomBytes(10_000, 9) });
      await backup(repo, { paths: [path.join(work, 'src')] });
      expect(sync.mock.calls.length).toBeGreaterThan(0); // packs, index, snapshot
    } finally {
      sync.mockRestore();
    }
  });
});
