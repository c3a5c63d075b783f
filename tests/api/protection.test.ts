// Restore tests and repair through the API with the app's own wiring (catalog, scheduler, real engine):
// a job with restore tests on is tested after its backup (recorded with the run, announced with
// restoreTest.finished), on demand too; after damage a test fails and the job's health says so; repair
// reports its progress, saves the snapshot again without the lost file, brings the catalog's index in
// line (search finds the repaired snapshot, not the removed one) and leaves a clean check behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { contentIds } from '../../src/main/engine/repo/tree.js';
import type { ApiEvent } from '../../src/shared/api.js';
import { randomBytes } from '../helpers/fixtures.js';

let tmp: string;
let wired: Wired;
const events: { event: ApiEvent; payload: any }[] = [];

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-protect-'));
  wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home') });
  wired.api.on((event, payload) => events.push({ event, payload }));
});

afterAll(async () => {
  await wired?.api.close();
  wired?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const seen = (event: ApiEvent, pred: (p: any) => boolean = () => true) =>
  events.filter((e) => e.event === event && pred(e.payload)).map((e) => e.payload);

describe('restore tests and repair through the API', () => {
  it('tests after a backup and on demand, fails on damage, and repairs', async () => {
    const api = wired.api;
    const src = path.join(tmp, 'Documents');
    fs.mkdirSync(src);
    for (let i = 0; i < 6; i++) fs.writeFileSync(path.join(src, `doc${i}.bin`), randomBytes(40_000 + i, i));
    fs.writeFileSync(path.join(src, 'report-final.txt'), 'the report\n'.repeat(100));
    const repoDir = path.join(tmp, 'repo');
    const job = await api.call('jobs.create', {
      name: 'Docs',
      sources: [src],
      destination: { kind: 'local', path: repoDir },
      schedule: { kind: 'manual' },
      password: 'a good password',
      options: { restoreTest: { everyDays: 0, files: 5 } },
    });
    expect(job.options.restoreTest).toEqual({ everyDays: 0, files: 5 });

    const run = await api.call('jobs.runNow', { id: job.id });
    await expect.poll(() => seen('run.finished', (r) => r.id === run.id).length, { timeout: 60_000 }).toBe(1);
    const afterRun = seen('restoreTest.finished');
    expect(afterRun).toHaveLength(1);
    expect(afterRun[0]).toMatchObject({ status: 'passed', trigger: 'schedule', runId: run.id, files: 5 });
    expect(
      (await api.call('runs.get', { id: run.id })).log.some((l) => l.includes('restore test: 5 file(s)')),
    ).toBe(true);
    expect((await api.call('jobs.get', { id: job.id })).lastRestoreTest?.id).toBe(afterRun[0].id);

    const manual = await api.call('jobs.testRestore', { id: job.id });
    expect(manual).toMatchObject({ status: 'passed', trigger: 'manual', files: 5 });
    expect(seen('restoreTest.finished')).toHaveLength(2);
    expect((await api.call('restoreTests.list', { jobId: job.id })).map((t) => t.trigger)).toEqual([
      'manual',
      'schedule',
    ]);

    // damage: a byte of report-final.txt's only chunk, and the file is gone from the source
    const [snap] = await api.call('snapshots.list', { jobId: job.id });
    const repo = await Repository.open(new LocalBackend(repoDir), 'a good password');
    await repo.loadIndex();
    const { node } = await lookup(repo, await repo.loadSnapshot(snap.id), path.join(src, 'report-final.txt'));
    const loc = repo.index.get(contentIds(node!)[0])!;
    const pack = repo.backend.localFile!('data', loc.pack)!;
    await repo.close();
    fs.chmodSync(pack, 0o644);
    const bytes = fs.readFileSync(pack);
    bytes[loc.offset + 3] ^= 0xff;
    fs.writeFileSync(pack, bytes);
    fs.rmSync(path.join(src, 'report-final.txt'));

    // every file, so the damaged one is drawn
    await api.call('jobs.update', {
      id: job.id,
      changes: { options: { restoreTest: { everyDays: 0, files: 100 } } },
    });
    const failed = await api.call('jobs.testRestore', { id: job.id });
    expect(failed.status).toBe('failed');
    expect(failed.failures.map((f) => f.path)).toContain(path.join(src, 'report-final.txt'));
    expect((await api.call('jobs.get', { id: job.id })).health).toBe('error');
    expect((await api.call('snapshots.search', { jobId: job.id, query: 'report-final' }))[0].snapshotId).toBe(
      snap.id,
    );

    const r = await api.call('jobs.repair', { id: job.id });
    expect(r).toMatchObject({ clean: false, damagedPacks: 1, snapshotsRebuilt: 1, lostCount: 1 });
    expect(r.lost[0].where).toBe(`${snap.id.slice(0, 8)}:${path.join(src, 'report-final.txt')}`);
    expect(r.check?.ok).toBe(true);
    expect(seen('repair.progress', (p) => p.jobId === job.id && p.phase === 'packs').length).toBeGreaterThan(
      0,
    );
    const after = await api.call('jobs.get', { id: job.id });
    expect(after.lastCheck?.ok).toBe(true);
    const snaps = await api.call('snapshots.list', { jobId: job.id });
    expect(snaps).toHaveLength(1);
    expect(snaps[0].id).not.toBe(snap.id);
    expect(snaps[0].tags).toContain('repaired');
    // the catalog's index follows: the repaired snapshot is there, without the lost file
    expect(await api.call('snapshots.search', { jobId: job.id, query: 'report-final' })).toEqual([]);
    expect((await api.call('snapshots.search', { jobId: job.id, query: 'doc3' }))[0].snapshotId).toBe(
      snaps[0].id,
    );
    const again = await api.call('jobs.testRestore', { id: job.id });
    expect(again.status).toBe('passed');
  });
});
