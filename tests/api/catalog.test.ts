// The API over the catalog and scheduler (the app's wiring) with an in-memory engine: jobs round-trip
// through the catalog's model (schedules, exclusion presets, destination = repository), runs go through
// the Scheduler/JobRunner and come back as live progress and history, and the file index answers
// browse, search and versions.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import { MemorySecretStore, secretKeys } from '../../src/main/engine/catalog/secrets.js';
import { JobRunner, type JobEngine } from '../../src/main/engine/schedule/runner.js';
import { Scheduler } from '../../src/main/engine/schedule/scheduler.js';
import { createRunEvents } from '../../src/main/engine/schedule/events.js';
import { TidemarkApi } from '../../src/main/api/api.js';
import { CatalogJobs, CatalogRunner, splitExcludes } from '../../src/main/api/catalog-adapter.js';
import { FakeEngine } from '../../src/main/api/fake-engine.js';
import { MemoryState } from '../../src/main/api/state.js';
import type { RepoHandle } from '../../src/main/api/services.js';
import { excludePresetPatterns, type ApiEvent } from '../../src/shared/api.js';
import { until } from '../helpers/fixtures.js';

let tmp: string;
let catalog: Catalog;
let api: TidemarkApi;
const secrets = new MemorySecretStore();
const events: { event: ApiEvent; payload: any }[] = [];

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-catalog-'));
  catalog = new Catalog(path.join(tmp, 'data'));
  const fake = new FakeEngine(20);
  const jobEngine: JobEngine<RepoHandle> = {
    openRepo: async (_job, repository) =>
      fake.open(repository.location, (await secrets.get(secretKeys.repositoryPassword(repository.id)))!),
    backup: (repo, opts) => fake.backup(repo, opts),
  };
  const runEvents = createRunEvents();
  const runner = new JobRunner({ catalog, engine: jobEngine, events: runEvents });
  const scheduler = new Scheduler({ catalog, runner, events: runEvents });
  const jobs = new CatalogJobs(catalog, secrets);
  const settings = new MemoryState();
  api = new TidemarkApi({
    engine: fake,
    jobs,
    runs: jobs,
    fileIndex: jobs,
    settings,
    runner: (emit) => new CatalogRunner(catalog, jobs, scheduler, emit),
    info: {
      version: 'test',
      mode: 'browser',
      dataDir: tmp,
      defaultRepoDir: path.join(tmp, 'repo'),
      homeDir: tmp,
    },
  });
  api.on((event, payload) => events.push({ event, payload }));
});

afterAll(async () => {
  await api?.close();
  catalog?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

describe('API over the catalog', () => {
  it('recognises exclusion presets in stored patterns', () => {
    const stored = [
      ...excludePresetPatterns.trash.patterns,
      '**/*.bak',
      ...excludePresetPatterns.caches.patterns,
    ];
    expect(splitExcludes(stored)).toEqual({ presets: ['caches', 'trash'], own: ['**/*.bak'] });
    expect(splitExcludes(excludePresetPatterns.trash.patterns.slice(1))).toEqual({
      presets: [],
      own: excludePresetPatterns.trash.patterns.slice(1),
    });
  });

  it('creates, runs, indexes, searches, changes the password of and removes a job', async () => {
    const src = path.join(tmp, 'src');
    fs.mkdirSync(path.join(src, 'letters'), { recursive: true });
    for (let i = 0; i < 20; i++) fs.writeFileSync(path.join(src, 'letters', `letter-${i}.txt`), `dear ${i}`);
    fs.mkdirSync(path.join(src, '.cache'));
    fs.writeFileSync(path.join(src, '.cache', 'junk.bin'), 'cached');
    const repo = path.join(tmp, 'repo');

    const created = await api.call('jobs.create', {
      name: 'Letters',
      sources: [src],
      excludes: ['**/*.bak'],
      excludePresets: ['caches', 'temp'],
      destination: { kind: 'local', path: repo },
      schedule: { kind: 'weekly', days: [1, 4], time: '20:15' },
      retention: { keepLast: 5 },
      options: { compressionLevel: 7, readLimitMBps: 4 },
      password: 'letters password',
    });
    expect(created).toMatchObject({
      name: 'Letters',
      excludes: ['**/*.bak'],
      excludePresets: ['caches', 'temp'],
      destination: { kind: 'local', path: repo },
      schedule: { kind: 'weekly', days: [1, 4], time: '20:15' },
      options: { compressionLevel: 7, readLimitMBps: 4 },
      health: 'never-run',
    });
    expect(new Date(created.nextRunAt!).getTime()).toBeGreaterThan(Date.now());
    // the catalog holds the job under its repository, with the presets expanded and no password
    const cjob = catalog.getJob(Number(created.id));
    expect(catalog.getRepository(cjob.repositoryId).location).toBe(repo);
    expect(cjob.excludes).toEqual(
      expect.arrayContaining(['**/*.bak', ...excludePresetPatterns.caches.patterns]),
    );
    expect(cjob.options.readLimitBytesPerSec).toBe(4 * 1024 * 1024);
    expect(JSON.stringify(cjob)).not.toContain('letters password');
    expect(await secrets.get(secretKeys.repositoryPassword(cjob.repositoryId))).toBe('letters password');

    const run = await api.call('jobs.runNow', { id: created.id });
    await until(
      () => events.some((e) => e.event === 'run.finished' && e.payload.id === run.id),
      'the run to finish',
    );
    const progress = events.filter((e) => e.event === 'run.progress').map((e) => e.payload);
    expect(progress.length).toBeGreaterThan(0);
    expect(progress.every((p) => p.run.id === run.id && p.run.jobId === created.id)).toBe(true);
    expect(progress.some((p) => p.run.status === 'running')).toBe(true);

    const [summary] = await api.call('runs.list', { jobId: created.id });
    expect(summary).toMatchObject({ id: run.id, jobName: 'Letters', status: 'completed' });
    expect(summary.counters.filesDone).toBe(20); // .cache left out by the preset
    const detail = await api.call('runs.get', { id: run.id });
    expect(detail.log.join('\n')).toContain('snapshot');
    expect((await api.call('runs.live', {})).length).toBe(0);

    const snaps = await api.call('snapshots.list', { jobId: created.id });
    expect(snaps).toHaveLength(1);
    expect(catalog.listSnapshots(cjob.repositoryId)[0].indexed).toBe(true);
    const hits = await api.call('snapshots.search', { jobId: created.id, query: 'letter-1' });
    expect(hits.map((h) => path.basename(h.path)).sort()).toEqual(
      ['letter-1.txt', ...Array.from({ length: 10 }, (_, i) => `letter-${10 + i}.txt`)].sort(),
    );
    const listing = await api.call('snapshots.browse', {
      jobId: created.id,
      snapshotId: snaps[0].id,
      path: src,
    });
    expect(listing.map((e) => e.name)).toEqual(['letters']);
    const versions = await api.call('snapshots.versions', {
      jobId: created.id,
      path: path.join(src, 'letters', 'letter-3.txt'),
    });
    expect(versions).toHaveLength(1);

    // a second job in the same repository: each job sees only its own snapshots
    const other = await api.call('jobs.create', {
      name: 'Other',
      sources: [path.join(src, 'letters')],
      destination: { kind: 'local', path: repo },
      schedule: { kind: 'manual' },
      password: 'letters password',
    });
    const run2 = await api.call('jobs.runNow', { id: created.id });
    const run3 = await api.call('jobs.runNow', { id: other.id });
    await until(
      () =>
        [run2.id, run3.id].every((id) =>
          events.some((e) => e.event === 'run.finished' && e.payload.id === id),
        ),
      'both runs to finish',
    );
    expect(await api.call('snapshots.list', { jobId: created.id })).toHaveLength(2);
    expect(await api.call('snapshots.list', { jobId: other.id })).toHaveLength(1);
    const otherHits = await api.call('snapshots.search', { jobId: other.id, query: 'letter-3' });
    expect(otherHits).toHaveLength(1);

    // retention preview: nothing is deleted
    const preview = await api.call('jobs.previewRetention', { id: created.id, retention: { keepLast: 1 } });
    expect(preview.keep.map((k) => k.reasons)).toEqual([['last']]);
    expect(preview.remove).toHaveLength(1);
    expect(await api.call('snapshots.list', { jobId: created.id })).toHaveLength(2);

    const check = await api.call('jobs.check', { id: created.id });
    expect(check).toMatchObject({ ok: true, readData: false, problems: [] });
    expect((await api.call('jobs.get', { id: created.id })).lastCheck?.ok).toBe(true);
    await api.call('jobs.remove', { id: other.id });

    const wrong = api.call('jobs.changePassword', {
      id: created.id,
      oldPassword: 'nope',
      newPassword: 'new password 1',
    });
    await expect(wrong).rejects.toMatchObject({ code: 'WRONG_PASSWORD' });
    await api.call('jobs.changePassword', {
      id: created.id,
      oldPassword: 'letters password',
      newPassword: 'new password 1',
    });
    expect(await secrets.get(secretKeys.repositoryPassword(cjob.repositoryId))).toBe('new password 1');

    const updated = await api.call('jobs.update', {
      id: created.id,
      changes: { name: 'Letters (home)', schedule: { kind: 'manual' } },
    });
    expect(updated).toMatchObject({
      name: 'Letters (home)',
      schedule: { kind: 'manual' },
      nextRunAt: null,
      health: 'ok',
    });

    await api.call('jobs.remove', { id: created.id });
    expect(await api.call('jobs.list', {})).toEqual([]);
  });
});
