/**
 * Restore tests of jobs (schedule/restoreTests.ts, the JobRunner, the catalog's restore_tests): a job's
 * test runs after a backup when due (its every-N-days, every block file monthly), is recorded with its
 * run, fails the run when files did not restore (RESTORE_TEST_FAILED, each file a problem), and when it
 * could not be made is a warning that does not count (the next backup tries again). On demand: recorded
 * without a run. A fake engine stands in for the repository (the engine's own test is
 * tests/engine/restore-test.test.ts).
 */
import { beforeEach, afterEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import type { Job, JobSpec, RestoreTestRecord } from '../../src/main/engine/catalog/types.js';
import { JobRunner, type JobEngine } from '../../src/main/engine/schedule/runner.js';
import { createRunEvents } from '../../src/main/engine/schedule/events.js';
import type { RestoreTestOptions, RestoreTestResult } from '../../src/main/engine/restoretest/index.js';
import { RestoreTestError } from '../../src/main/engine/restoretest/index.js';
import { FakeRepo } from './fakeRepo.js';

const DAY = 86_400_000;

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

function passed(o: RestoreTestOptions): RestoreTestResult {
  return {
    snapshot: o.snapshot,
    ok: true,
    filesChecked: o.files ?? 20,
    bytesChecked: 1000,
    blockFilesChecked: o.allBlockFiles ? 1 : 0,
    allBlockFiles: !!o.allBlockFiles,
    candidates: 100,
    failures: [],
    skipped: [],
    durationMs: 5,
  };
}

function fakeEngine(repo: FakeRepo, clock: TestClock) {
  const tests: RestoreTestOptions[] = [];
  let answer: (o: RestoreTestOptions) => RestoreTestResult = passed;
  const engine: JobEngine<FakeRepo & { close(): Promise<void> }> = {
    async openRepo() {
      return Object.assign(repo, { async close() {} });
    },
    async backup(r, opts) {
      const snap = r.addSnapshot(
        { home: { 'a.txt': String(clock.now()) } },
        new Date(clock.now()).toISOString(),
        {
          job: opts.job,
          paths: opts.paths,
        },
      );
      return { snapshotId: snap.id, snapshot: snap, skipped: [], status: 'completed' as const };
    },
    async restoreTest(_r, o) {
      tests.push(o);
      return answer(o);
    },
  };
  return { engine, tests, answer: (f: typeof answer) => (answer = f) };
}

let catalog: Catalog;
let repoId: number;
beforeEach(() => {
  catalog = new Catalog('', { memory: true });
  repoId = catalog.addRepository({ name: 'usb', location: '/mnt/usb', options: {} }).id;
});
afterEach(() => catalog.close());

function addJob(extra: Partial<JobSpec['options']> = {}): Job {
  return catalog.addJob({
    name: 'docs',
    repositoryId: repoId,
    sources: ['/home'],
    excludes: [],
    schedule: { kind: 'manual' },
    retention: {},
    compressionLevel: 3,
    options: { restoreTest: { everyDays: 7, files: 5 }, ...extra },
    enabled: true,
  });
}

describe('restore tests of jobs', () => {
  it('run after a backup when due: every N days, every block file monthly; recorded with the run', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T21:00:00Z'));
    const f = fakeEngine(new FakeRepo(), clock);
    const events = createRunEvents();
    const seen: RestoreTestRecord[] = [];
    events.on('restore-test', (e) => seen.push(e.test));
    const phases: string[] = [];
    events.on('run-phase', (e) => phases.push(e.phase));
    const runner = new JobRunner({ catalog, engine: f.engine, events, clock });
    const job = addJob();
    const days: number[] = [];
    for (let day = 0; day <= 35; day++) {
      const run = await runner.run(job);
      expect(run.status).toBe('completed');
      if (f.tests.length > days.length) days.push(day);
      clock.t += DAY + 60_000; // a minute later each day: the test stays due on its day
    }
    expect(days).toEqual([0, 7, 14, 21, 28, 35]);
    expect(f.tests.map((t) => t.allBlockFiles)).toEqual([true, false, false, false, false, true]);
    expect(f.tests.every((t) => t.files === 5)).toBe(true);
    expect(phases.filter((p) => p === 'restore-test')).toHaveLength(6);
    const rows = catalog.restoreTests.list({ jobId: job.id });
    expect(rows).toHaveLength(6);
    expect(seen.map((t) => t.id)).toEqual(rows.map((r) => r.id).reverse());
    const first = rows.at(-1)!;
    expect(first).toMatchObject({ status: 'passed', trigger: 'schedule', files: 5, allBlockFiles: true });
    const run = catalog.getRun(first.runId!);
    expect(run.snapshotId).toBe(first.snapshotId);
    expect(catalog.runLog(run.id).some((l) => l.line.startsWith('restore test: 5 file(s)'))).toBe(true);
  });

  it('after every backup with everyDays 0; never without settings', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T21:00:00Z'));
    const f = fakeEngine(new FakeRepo(), clock);
    const runner = new JobRunner({ catalog, engine: f.engine, clock });
    const every = addJob({ restoreTest: { everyDays: 0, files: 3 } });
    await runner.run(every);
    clock.t += 1000;
    await runner.run(every);
    expect(f.tests).toHaveLength(2);
    const none = catalog.addJob({ ...every, name: 'none', options: {} });
    await runner.run(none);
    expect(f.tests).toHaveLength(2);
  });

  it('a failed test fails the run, naming each file; a test that could not be made is a warning and is tried again', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T21:00:00Z'));
    const f = fakeEngine(new FakeRepo(), clock);
    const runner = new JobRunner({ catalog, engine: f.engine, clock });
    const job = addJob();
    f.answer((o) => ({
      ...passed(o),
      ok: false,
      failures: [{ path: '/home/a.txt', message: 'bytes 0–9 (piece 1 of 1) differ from the stored hash' }],
    }));
    const failed = await runner.run(job);
    expect(failed.status).toBe('failed');
    expect(failed.error?.code).toBe('RESTORE_TEST_FAILED');
    expect(failed.error?.message).toContain('/home/a.txt');
    expect(catalog.runProblems(failed.id)).toContainEqual({
      severity: 'error',
      path: '/home/a.txt',
      message: 'bytes 0–9 (piece 1 of 1) differ from the stored hash',
      code: 'RESTORE_TEST',
    });
    expect(catalog.restoreTests.list({ jobId: job.id })[0].status).toBe('failed');

    // could not be made: a warning, recorded as an error, not counted as the last test
    clock.t += 7 * DAY;
    f.answer(() => {
      throw new RestoreTestError('not enough free space in /tmp');
    });
    const warned = await runner.run(job);
    expect(warned.status).toBe('completed-with-warnings');
    expect(catalog.restoreTests.list({ jobId: job.id })[0]).toMatchObject({
      status: 'error',
      error: { code: 'RESTORE_TEST_ERROR', message: 'not enough free space in /tmp' },
    });
    f.answer(passed);
    clock.t += 60_000;
    const next = await runner.run(job);
    expect(next.status).toBe('completed');
    expect(f.tests).toHaveLength(3);
  });

  it('on demand: tests the newest snapshot of the job, recorded without a run', async () => {
    const clock = new TestClock(Date.parse('2025-05-01T21:00:00Z'));
    const repo = new FakeRepo();
    const f = fakeEngine(repo, clock);
    const runner = new JobRunner({ catalog, engine: f.engine, clock });
    const job = addJob({ restoreTest: undefined });
    await expect(runner.testRestore(job)).rejects.toThrow(/run a backup first/);
    await runner.run(job);
    clock.t += 1000;
    const second = await runner.run(job);
    repo.addSnapshot({ other: { x: '1' } }, new Date(clock.t + 5000).toISOString(), { job: 'someone-else' });
    const t = await runner.testRestore(job);
    expect(t).toMatchObject({
      trigger: 'manual',
      runId: null,
      snapshotId: second.snapshotId,
      status: 'passed',
    });
    expect(f.tests[0]).toMatchObject({ files: 20, allBlockFiles: true }); // defaults; no block-file test yet
    expect(catalog.restoreTests.last(job.id)?.id).toBe(t.id);
  });
});
