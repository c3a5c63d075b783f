// The job option "Use less memory" through the API to the engine: with the app's own wiring (catalog,
// scheduler, real engine) a low-memory job's backup, its restore test and a restore from the Restore
// page each reach the engine with memory 'low' (the engine's own backup and restore are wrapped to
// record their options, then run as they are: the files really are backed up and restored); the
// option survives the catalog, shows in the run log, and unticking it gives normal runs again. The
// API's own runner (memory stores) passes it too, without the Settings' worker count.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BackupOptions, RestoreOptions } from '../../src/main/engine/operations.js';
import type { ApiEvent } from '../../src/shared/api.js';
import { randomBytes } from '../helpers/fixtures.js';

const seen = vi.hoisted(() => ({
  backups: [] as { memory?: string; workers?: number }[],
  restores: [] as { memory?: string; target: string }[],
}));

vi.mock('../../src/main/engine/backup/index.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/main/engine/backup/index.js')>();
  return {
    ...real,
    backup: (repo: Parameters<typeof real.backup>[0], o: BackupOptions) => {
      seen.backups.push({ memory: o.memory, workers: o.workers });
      return real.backup(repo, o);
    },
  };
});
vi.mock('../../src/main/engine/restore/index.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/main/engine/restore/index.js')>();
  return {
    ...real,
    restore: (repo: Parameters<typeof real.restore>[0], o: RestoreOptions) => {
      seen.restores.push({ memory: o.memory, target: o.target });
      return real.restore(repo, o);
    },
  };
});

const { createApi } = await import('../../src/main/api/wiring.js');
const { RealEngine } = await import('../../src/main/api/engine-adapter.js');
const { memoryApi } = await import('../helpers/api.js');

let tmp: string;
let wired: ReturnType<typeof createApi>;
const events: { event: ApiEvent; payload: any }[] = [];
const finished = (id: string) => events.some((e) => e.event === 'run.finished' && e.payload.id === id);

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-memory-issue-31b-'));
  wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home') });
  wired.api.on((event, payload) => events.push({ event, payload }));
});

afterAll(async () => {
  await wired?.api.close();
  wired?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

function sources(name: string): string {
  const src = path.join(tmp, name);
  fs.mkdirSync(src, { recursive: true });
  for (let i = 0; i < 4; i++) fs.writeFileSync(path.join(src, `f${i}.bin`), randomBytes(30_000 + i, i));
  return src;
}

describe('"Use less memory" reaches the engine', () => {
  it('through the catalog and scheduler (the app)', async () => {
    const api = wired.api;
    const src = sources('Documents');
    const job = await api.call('jobs.create', {
      name: 'Old PC',
      sources: [src],
      destination: { kind: 'local', path: path.join(tmp, 'repo') },
      schedule: { kind: 'manual' },
      password: 'a good password',
      options: { memory: 'low', restoreTest: { everyDays: 0, files: 2 } },
    });
    expect(job.options.memory).toBe('low');
    expect((await api.call('jobs.get', { id: job.id })).options.memory).toBe('low');

    const run = await api.call('jobs.runNow', { id: job.id });
    await expect.poll(() => finished(run.id), { timeout: 60_000 }).toBe(true);
    const detail = await api.call('runs.get', { id: run.id });
    expect(detail.status).toBe('completed');
    expect(detail.log.some((l) => l.includes('using less memory'))).toBe(true);
    expect(seen.backups).toEqual([{ memory: 'low', workers: undefined }]);
    // the restore test after the backup restored its sample in low memory too
    expect(seen.restores.length).toBe(1);
    expect(seen.restores[0].memory).toBe('low');

    const [snap] = await api.call('snapshots.list', { jobId: job.id });
    const out = path.join(tmp, 'out');
    const r = await api.call('restore.start', {
      jobId: job.id,
      snapshotId: snap.id,
      paths: [src],
      target: { kind: 'folder', path: out },
      overwrite: 'overwrite',
    });
    await expect
      .poll(async () => (await api.call('restore.get', { id: r.id })).status, { timeout: 60_000 })
      .toBe('completed');
    expect(seen.restores.at(-1)).toEqual({ memory: 'low', target: out });
    const restored = path.join(out, src, 'f3.bin');
    expect(fs.readFileSync(restored).equals(fs.readFileSync(path.join(src, 'f3.bin')))).toBe(true);

    // unticked: the job's next backup runs in the normal mode
    const { id, createdAt, snapshotTag, nextRunAt, missed, health, snapshotCount, ...rest } = await api.call(
      'jobs.get',
      { id: job.id },
    );
    void [id, createdAt, snapshotTag, nextRunAt, missed, health, snapshotCount];
    const edited = await api.call('jobs.update', {
      id: job.id,
      changes: {
        name: rest.name,
        sources: rest.sources,
        excludes: rest.excludes,
        excludePresets: rest.excludePresets,
        destination: rest.destination,
        schedule: rest.schedule,
        retention: rest.retention,
        options: { ...rest.options, memory: undefined, restoreTest: undefined },
      },
    });
    expect(edited.options.memory).toBeUndefined();
    const again = await api.call('jobs.runNow', { id: job.id });
    await expect.poll(() => finished(again.id), { timeout: 60_000 }).toBe(true);
    expect(seen.backups.at(-1)?.memory).toBeUndefined();
  });

  it("through the API's own runner (memory stores), without the Settings' worker count", async () => {
    const dir = path.join(tmp, 'memory-api');
    fs.mkdirSync(dir);
    const api = memoryApi(new RealEngine(), dir);
    const own: { event: ApiEvent; payload: any }[] = [];
    api.on((event, payload) => own.push({ event, payload }));
    try {
      const job = await api.call('jobs.create', {
        name: 'Low',
        sources: [sources('Pictures')],
        destination: { kind: 'local', path: path.join(dir, 'repo') },
        schedule: { kind: 'manual' },
        password: 'a good password',
        options: { memory: 'low' },
      });
      const before = seen.backups.length;
      const run = await api.call('jobs.runNow', { id: job.id });
      await expect
        .poll(() => own.some((e) => e.event === 'run.finished' && e.payload.id === run.id), {
          timeout: 60_000,
        })
        .toBe(true);
      expect((await api.call('runs.get', { id: run.id })).status).toBe('completed');
      expect(seen.backups.slice(before)).toEqual([{ memory: 'low', workers: undefined }]);
    } finally {
      await api.close();
    }
  });
});
