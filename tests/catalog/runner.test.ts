import { beforeEach, afterEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import type { Job, JobSpec } from '../../src/main/engine/catalog/types.js';
import { JobRunner, Sampler, type JobEngine } from '../../src/main/engine/schedule/runner.js';
import { applyRetentionPolicy } from '../../src/main/engine/repo/retentionPolicy.js';
import { createRunEvents } from '../../src/main/engine/schedule/events.js';
import type { BackupOptions, BackupProgress, CheckReport } from '../../src/main/engine/operations.js';
import { AbortedError, WrongPasswordError } from '../../src/main/engine/errors.js';
import { FakeRepo, type FakeDir } from './fakeRepo.js';

class TestClock {
  constructor(public t: number) {}
  now() {
    return this.t;
  }
  setTimer() {
    return 0;
  }
  clearTimer() {}
}

const DAY = 86_400_000;

function progress(elapsedMs: number, n: number): BackupProgress {
  return {
    phase: 'backing-up',
    filesScanned: n,
    bytesScanned: n * 1000,
    filesRead: n,
    bytesRead: n * 1000,
    filesDone: n,
    bytesDone: n * 1000,
    bytesNew: n * 250,
    bytesStored: n * 200,
    errors: 0,
    scanComplete: true,
    elapsedMs,
  };
}

/** A fake engine over FakeRepo: each backup stores `tree` as a snapshot of the job. */
function fakeEngine(repo: FakeRepo, clock: TestClock) {
  const calls = { backup: [] as BackupOptions[], prune: 0, check: 0, closed: 0 };
  let tree: FakeDir = { home: { 'a.txt': 'a' } };
  let checkReport: CheckReport | undefined;
  let failWith: Error | undefined;
  const engine: JobEngine<FakeRepo & { close(): Promise<void> }> = {
    async openRepo() {
      if (failWith) throw failWith;
      return Object.assign(repo, {
        async close() {
          calls.closed++;
        },
      });
    },
    async backup(r, opts) {
      calls.backup.push(opts);
      // 3.5 s of progress, one call every 250 ms: 10 files per second
      for (let i = 1; i <= 14; i++) {
        if (opts.signal?.aborted) throw new AbortedError();
        opts.progress?.(progress(i * 250, i * 2.5));
      }
      opts.log?.('scan: full scan (no journal)');
      const snap = r.addSnapshot(tree, new Date(clock.now()).toISOString(), {
        job: opts.job,
        paths: opts.paths,
      });
      const skipped = [{ path: '/home/locked.db', reason: 'permission denied', code: 'EACCES' }];
      return { snapshotId: snap.id, snapshot: snap, skipped, status: 'completed-with-warnings' as const };
    },
    async forget(r, policy, opts) {
      const mine = r.snapshots.filter((s) => s.job === opts.job);
      const d = applyRetentionPolicy(mine, policy, new Date(clock.now()), { timeZone: 'UTC' });
      if (!opts.dryRun) {
        const gone = new Set(d.remove.map((s) => s.id));
        const keep = r.snapshots.filter((s) => !gone.has(s.id));
        r.snapshots.splice(0, r.snapshots.length, ...keep);
      }
      return d;
    },
    async prune() {
      calls.prune++;
      return { packsRemoved: 1, packsRewritten: 0, bytesFreed: 100, blobsRemoved: 3 };
    },
    async check() {
      calls.check++;
      return (
        checkReport ?? {
          ok: true,
          problems: [],
          unreferencedPacks: [],
          unusedBlobs: 0,
          snapshots: 1,
          packs: 1,
          blobs: 1,
        }
      );
    },
  };
  return {
    engine,
    calls,
    setTree: (t: FakeDir) => (tree = t),
    setCheck: (c: CheckReport) => (checkReport = c),
    failOpen: (e: Error | undefined) => (failWith = e),
  };
}

let catalog: Catalog;
let repoId: number;
beforeEach(() => {
  catalog = new Catalog('', { memory: true });
  repoId = catalog.addRepository({ name: 'usb', location: '/mnt/usb', options: {} }).id;
});
afterEach(() => catalog.close());

function addJob(extra: Partial<JobSpec> = {}, now = Date.now()): Job {
  return catalog.addJob(
    {
      name: 'docs',
      repositoryId: repoId,
      sources: ['/home'],
      excludes: ['*.tmp'],
      schedule: { kind: 'manual' },
      retention: {},
      compressionLevel: 5,
      options: {},
      enabled: true,
      ...extra,
    },
    now,
  );
}

describe('JobRunner', () => {
  it('records the run: status, skipped entries with paths, per-second samples, log; indexes the snapshot', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T12:00:00Z'));
    const repo = new FakeRepo();
    const f = fakeEngine(repo, clock);
    const events = createRunEvents();
    const seen: string[] = [];
    for (const e of ['run-started', 'run-progress', 'run-phase', 'run-finished', 'run-failed'] as const)
      events.on(e, () => seen.push(e));
    const runner = new JobRunner({ catalog, engine: f.engine, events, clock });
    const job = addJob();
    f.setTree({ home: { 'report.pdf': 'r', sub: { 'notes.txt': 'n' } } });
    const run = await runner.run(job);

    expect(run.status).toBe('completed-with-warnings');
    expect(run.snapshotId).toBe(repo.snapshots[0].id);
    expect(run.kind).toBe('backup');
    expect(f.calls.backup[0]).toMatchObject({
      paths: ['/home'],
      excludes: ['*.tmp'],
      job: job.key,
      compressionLevel: 5,
      forceFull: false,
    });
    expect(f.calls.closed).toBe(1);
    expect(catalog.runProblems(run.id)).toEqual([
      { severity: 'warning', path: '/home/locked.db', message: 'permission denied', code: 'EACCES' },
    ]);
    const samples = catalog.runSamples(run.id);
    expect(samples.map((s) => s.t)).toEqual([1000, 2000, 3000, 3500]);
    expect(samples[0]).toEqual({
      t: 1000,
      readBps: 10_000,
      writtenBps: 2000,
      filesPerSec: 10,
      dedupRatio: 5,
    });
    expect(samples[3].filesPerSec).toBeCloseTo(10);
    expect(catalog.runLog(run.id).map((l) => l.line)).toContain('scan: full scan (no journal)');
    // the new snapshot is in the catalog and browsable
    const snaps = catalog.listSnapshots(repoId);
    expect(snaps.map((s) => [s.snapId, s.indexed, s.job])).toEqual([[run.snapshotId, true, job.key]]);
    expect(catalog.files.search('notes').map((h) => h.path)).toEqual(['/home/sub/notes.txt']);
    expect(seen[0]).toBe('run-started');
    expect(seen.filter((e) => e === 'run-progress').length).toBe(14);
    expect(seen[seen.length - 1]).toBe('run-finished');
    expect(seen).toContain('run-phase');
  });

  it('applies retention to its own snapshots only, then prunes on the repository schedule', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T12:00:00Z'));
    const repo = new FakeRepo();
    repo.addSnapshot({ other: { x: '1' } }, '2025-04-01T00:00:00Z', { job: 'someone-else' });
    const f = fakeEngine(repo, clock);
    const runner = new JobRunner({ catalog, engine: f.engine, clock });
    const job = addJob({ retention: { keepLast: 2 } });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      f.setTree({ home: { 'a.txt': `v${i}` } });
      const r = await runner.run(job);
      ids.push(r.snapshotId!);
      clock.t += DAY / 2;
    }
    expect(repo.snapshots.map((s) => s.id)).toEqual([repo.snapshots[0].id, ids[3], ids[4]]);
    expect(repo.snapshots[0].job).toBe('someone-else');
    expect(catalog.listSnapshots(repoId).map((s) => s.snapId)).toEqual(repo.snapshots.map((s) => s.id));
    expect(catalog.files.history('/home/a.txt').map((h) => h.snapId)).toEqual([ids[3], ids[4]]);
    // prune ran on the first run, then not again within 7 days
    expect(f.calls.prune).toBe(1);
    expect(catalog.getRepository(repoId).lastPruneAt).toBe(Date.parse('2025-05-01T12:00:00Z'));
    const last = catalog.listRuns({ jobId: job.id })[0];
    expect(last.retention).toMatchObject({ kept: 2, removed: [ids[2]] });
    // dry-run preview changes nothing
    const preview = await runner.previewRetention(catalog.getJob(job.id));
    expect(preview.remove).toEqual([]);
    expect(repo.snapshots).toHaveLength(3);
  });

  it("gives back the backup's memory before indexing, retention and prune", async () => {
    const clock = new TestClock(Date.parse('2025-05-01T12:00:00Z'));
    const repo = new FakeRepo();
    const f = fakeEngine(repo, clock);
    const order: string[] = [];
    const wrap =
      <A extends unknown[], R>(name: string, fn: (...a: A) => Promise<R>) =>
      async (...a: A) => {
        order.push(name);
        return fn(...a);
      };
    const loadTree = repo.loadTree.bind(repo);
    repo.loadTree = async (id) => {
      if (order.at(-1) !== 'index') order.push('index');
      return loadTree(id);
    };
    const engine: typeof f.engine = {
      ...f.engine,
      backup: wrap('backup', f.engine.backup),
      forget: wrap('forget', f.engine.forget!),
      prune: wrap('prune', f.engine.prune!),
      releaseMemory: async () => {
        order.push('release');
      },
    };
    const runner = new JobRunner({ catalog, engine, clock });
    const job = addJob({ retention: { keepLast: 2 } });
    const run = await runner.run(job);
    expect(run.status).toBe('completed-with-warnings');
    expect(order).toEqual(['backup', 'release', 'forget', 'index', 'prune']);
    // a failure to give memory back never fails the run
    engine.releaseMemory = async () => {
      throw new Error('no');
    };
    clock.t += DAY;
    expect((await runner.run(catalog.getJob(job.id))).status).toBe('completed-with-warnings');
  });

  it('makes a full backup on demand and when the last full one is older than fullEveryDays', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T12:00:00Z'));
    const f = fakeEngine(new FakeRepo(), clock);
    const runner = new JobRunner({ catalog, engine: f.engine, clock });
    const job = addJob({ options: { fullEveryDays: 30 } });
    const kinds: string[] = [];
    for (const days of [0, 1, 10, 29, 31, 32]) {
      clock.t = Date.parse('2025-05-01T12:00:00Z') + days * DAY;
      kinds.push((await runner.run(job)).kind);
    }
    expect(kinds).toEqual(['full', 'backup', 'backup', 'backup', 'full', 'backup']);
    const plain = addJob({ name: 'plain' });
    expect((await runner.run(plain, { full: true })).kind).toBe('full');
    expect(f.calls.backup.map((o) => o.forceFull)).toEqual([true, false, false, false, true, false, true]);
  });

  it('verifies after backup and fails the run when verification finds problems', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T12:00:00Z'));
    const f = fakeEngine(new FakeRepo(), clock);
    const runner = new JobRunner({ catalog, engine: f.engine, clock });
    const job = addJob({ options: { verifyAfterBackup: true } });
    expect((await runner.run(job)).verify).toEqual({ ok: true, problems: 0, readData: false });
    f.setCheck({
      ok: false,
      problems: [
        { kind: 'missing-blob', object: 'abc', message: 'blob abc missing', affects: ['s:/home/a.txt'] },
      ],
      unreferencedPacks: [],
      unusedBlobs: 0,
      snapshots: 2,
      packs: 1,
      blobs: 1,
    });
    const bad = await runner.run(job);
    expect(bad.status).toBe('failed');
    expect(bad.error?.code).toBe('VERIFY_FAILED');
    expect(bad.snapshotId).not.toBeNull();
    expect(catalog.runProblems(bad.id).filter((p) => p.severity === 'error')).toEqual([
      { severity: 'error', path: 's:/home/a.txt', message: 'blob abc missing', code: 'missing-blob' },
    ]);
    expect(f.calls.check).toBe(2);
  });

  it('records failures and cancellations', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T12:00:00Z'));
    const f = fakeEngine(new FakeRepo(), clock);
    const events = createRunEvents();
    const failed: unknown[] = [];
    events.on('run-failed', (e) => failed.push(e.error));
    const runner = new JobRunner({ catalog, engine: f.engine, clock, events });
    const job = addJob();
    f.failOpen(new WrongPasswordError());
    const r = await runner.run(job);
    expect(r.status).toBe('failed');
    expect(r.error).toMatchObject({ name: 'WrongPasswordError', code: 'WRONG_PASSWORD' });
    expect(failed).toHaveLength(1);
    f.failOpen(undefined);
    const ac = new AbortController();
    ac.abort();
    const c = await runner.run(job, { signal: ac.signal });
    expect(c.status).toBe('cancelled');
    expect(c.error).toBeNull();
  });

  it('Sampler computes rates from cumulative counters', () => {
    const s = new Sampler(1000);
    expect(s.offer(progress(500, 1))).toBeUndefined();
    const a = s.offer(progress(1000, 4))!;
    expect(a).toMatchObject({ t: 1000, filesPerSec: 4, readBps: 4000 });
    const b = s.offer(progress(3000, 10))!;
    expect(b).toMatchObject({ t: 3000, filesPerSec: 3, readBps: 3000, writtenBps: 600 });
    expect(s.take()).toHaveLength(2);
  });
});
