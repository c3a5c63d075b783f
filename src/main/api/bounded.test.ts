// The main process's per-run and per-operation state over a long session: a day-long run's live
// throughput series (10k samples through the scheduler's events; series.test.ts takes 100k) stays within its cap in what the
// runner keeps and sends; finished operations are dropped oldest first, never a running one.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Catalog } from '../engine/catalog/catalog.js';
import { MemorySecretStore } from '../engine/catalog/secrets.js';
import { createRunEvents } from '../engine/schedule/events.js';
import { newBackupProgress } from '../engine/operations.js';
import type { Scheduler } from '../engine/schedule/scheduler.js';
import { CatalogJobs, CatalogRunner } from './catalog-adapter.js';
import { boundLog, dropOldFinished } from './bounded.js';
import { RUN_SAMPLES_MAX } from '../../shared/series.js';
import type { LiveRun } from '../../shared/api.js';

describe('dropOldFinished', () => {
  it('drops the oldest finished entries, never a running one', () => {
    const m = new Map<number, { done: boolean }>();
    for (let i = 0; i < 100; i++) m.set(i, { done: i !== 3 && i !== 97 });
    dropOldFinished(m, 10, (v) => v.done);
    expect([...m.keys()]).toEqual([3, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99]);
  });
});

describe('the live run series', () => {
  let catalog: Catalog;
  beforeEach(() => {
    catalog = new Catalog('', { memory: true });
  });
  afterEach(() => catalog.close());

  it('keeps and sends at most RUN_SAMPLES_MAX points of a 10k-second run, up to its latest', () => {
    const repositoryId = catalog.addRepository({ name: 'usb', location: '/mnt/usb', options: {} }).id;
    const job = catalog.addJob({
      name: 'docs',
      repositoryId,
      sources: ['/home'],
      excludes: [],
      schedule: { kind: 'manual' },
      retention: {},
      compressionLevel: 3,
      options: {},
      enabled: true,
    });
    const runId = catalog.createRun({ jobId: job.id, trigger: 'manual', status: 'running' }).id;
    const events = createRunEvents();
    const scheduler = { events, isPaused: () => false } as unknown as Scheduler;
    const sent: LiveRun[] = [];
    const runner = new CatalogRunner(
      catalog,
      new CatalogJobs(catalog, new MemorySecretStore()),
      scheduler,
      (event, payload) => {
        if (event === 'run.progress') sent.push(payload as LiveRun);
      },
    );
    events.emit('run-started', { jobId: job.id, runId, trigger: 'manual', full: false, at: Date.now() });
    const progress = newBackupProgress();
    let most = 0;
    const n = 10_000;
    for (let i = 1; i <= n; i++) {
      events.emit('run-progress', {
        jobId: job.id,
        runId,
        progress,
        sample: { t: i * 1000, readBps: 1e6, writtenBps: 5e5, filesPerSec: 3, dedupRatio: 1.5 },
      });
      // what was sent is the runner's own array: its length now is what that event carried
      if (i % 97 === 0) most = Math.max(most, sent.at(-1)!.samples.length);
      sent.length = Math.min(sent.length, 1);
    }
    const [live] = runner.liveRuns();
    expect(most).toBeLessThanOrEqual(RUN_SAMPLES_MAX);
    expect(live.samples.length).toBeLessThanOrEqual(RUN_SAMPLES_MAX);
    expect(live.samples.length).toBeGreaterThan(RUN_SAMPLES_MAX / 2);
    expect(live.samples.at(-1)).toMatchObject({ t: n * 1000, readBps: 1e6, writeBps: 5e5, filesPerSec: 3 });
    expect(live.samples[0].t).toBeLessThanOrEqual((n / (RUN_SAMPLES_MAX / 2)) * 1000);
  });
});

describe('boundLog', () => {
  it('sends a long log as its start and end, saying how much is left out', () => {
    const lines = Array.from({ length: 10_000 }, (_, i) => `line ${i}`);
    const out = boundLog(lines, 100);
    expect(out).toHaveLength(101);
    expect(out[0]).toBe('line 0');
    expect(out[50]).toMatch(/^… 9900 lines left out/);
    expect(out.at(-1)).toBe('line 9999');
    expect(boundLog(lines.slice(0, 100), 100)).toEqual(lines.slice(0, 100));
  });
});
