// Speed tests through the API with the app's wiring (real engine, SQLite catalog): progress events with
// live samples, results and an estimate from a new job's folders, the record kept in the catalog across a
// restart; a job's test estimates from its last real run; one test per destination, cancel recorded and
// the test file gone, a destination being backed up to refused; bad input refused at the boundary.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import type { ApiEvent, SpeedTestStatus } from '../../src/shared/api.js';
import { until } from '../helpers/fixtures.js';

let tmp: string;
let src: string;
let srcBytes = 0;
let wired: Wired;
const events: { event: ApiEvent; payload: any }[] = [];
const quick = { fileSizeMiB: 16, durationSec: 0.3 };

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-speed-'));
  src = path.join(tmp, 'src');
  fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
  for (let i = 0; i < 5; i++) {
    const b = crypto.randomBytes(200_000 + i);
    fs.writeFileSync(path.join(src, i % 2 ? 'sub' : '', `f${i}.bin`), b);
    srcBytes += b.length;
  }
  wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home') });
  wired.api.on((event, payload) => events.push({ event, payload }));
});
afterAll(async () => {
  await wired.api.close();
  wired.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function finished(id: string): Promise<SpeedTestStatus> {
  await until(
    () =>
      events.some(
        (e) => e.event === 'speedtest.progress' && e.payload.id === id && e.payload.status !== 'running',
      ),
    `speed test ${id} to end`,
    120_000,
  );
  return events.filter((e) => e.event === 'speedtest.progress' && e.payload.id === id).at(-1)!.payload;
}

describe('speed tests through the API', () => {
  it("a new job's destination: live progress, results, an estimate from its folders, kept in the catalog", async () => {
    const dest = path.join(tmp, 'usb');
    fs.mkdirSync(dest);
    const st = await wired.api.call('speedtests.start', {
      destination: { kind: 'local', path: dest },
      sources: [src],
      settings: { ...quick, patterns: ['active-full', 'restore'], blockSizeKiB: 256 },
    });
    expect(st).toMatchObject({ status: 'running', location: dest });
    const end = await finished(st.id);
    expect(end.status).toBe('completed');
    expect(end.results.map((r) => r.pattern)).toEqual(['active-full', 'restore']);
    expect(end.results.every((r) => r.mibps > 0 && r.blockSize === 256 * 1024)).toBe(true);
    const live = events
      .filter((e) => e.event === 'speedtest.progress' && e.payload.id === st.id)
      .map((e) => e.payload);
    expect(live.some((p) => p.phase === 'testing' && p.samples.length > 0)).toBe(true);
    expect(end.estimate).toMatchObject({
      sourceBytes: srcBytes,
      sourceComplete: true,
      storedRatio: null,
      backup: { basis: 'active-full' },
      restore: { basis: 'restore' },
      lastFull: null,
      lastRun: null,
    });
    expect(end.estimate!.backup!.ms).toBeGreaterThanOrEqual(0);
    expect(fs.readdirSync(dest)).toEqual([]);
    expect(await wired.api.call('speedtests.get', { id: st.id })).toMatchObject({ status: 'completed' });

    // kept in the catalog: a restarted app shows it in the destination's history
    await wired.api.call('speedtests.history', { destination: { kind: 'local', path: dest } });
    await wired.api.close();
    wired.close();
    wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home') });
    wired.api.on((event, payload) => events.push({ event, payload }));
    const history = await wired.api.call('speedtests.history', {
      destination: { kind: 'local', path: dest },
    });
    expect(history).toHaveLength(1);
    expect(history[0]).toMatchObject({
      status: 'completed',
      location: dest,
      settings: {
        patterns: ['active-full', 'restore'],
        fileSizeMiB: 16,
        blockSizeKiB: 256,
        durationSec: 0.3,
      },
      estimate: { sourceBytes: srcBytes },
    });
    expect(history[0].results).toEqual(end.results);
    // another destination has its own history
    expect(await wired.api.call('speedtests.history', { destination: { kind: 'local', path: tmp } })).toEqual(
      [],
    );
  });

  it("a job's destination: the estimate sets the measured rates next to the job's last run", async () => {
    const repo = path.join(tmp, 'repo');
    const job = await wired.api.call('jobs.create', {
      name: 'Docs',
      sources: [src],
      destination: { kind: 'local', path: repo },
      schedule: { kind: 'manual' },
      password: 'correct horse battery',
    });
    const run = await wired.api.call('jobs.runNow', { id: job.id });
    await until(
      () => events.some((e) => e.event === 'run.finished' && e.payload.id === run.id),
      'the backup',
    );
    const [done] = await wired.api.call('runs.list', { jobId: job.id });
    expect(done.status).toBe('completed');
    const before = fs.readdirSync(repo).sort();

    const st = await wired.api.call('speedtests.start', {
      destination: job.destination,
      jobId: job.id,
      settings: { ...quick, patterns: ['pack', 'restore'] },
    });
    const end = await finished(st.id);
    expect(end.status).toBe('completed');
    const e = end.estimate!;
    expect(e.sourceBytes).toBe(done.counters.bytesScanned);
    expect(e.lastFull).toMatchObject({
      bytesRead: done.counters.bytesRead,
      bytesStored: done.counters.bytesStored,
      full: true,
    });
    expect(e.lastRun).toEqual(e.lastFull);
    expect(e.storedRatio).toBeCloseTo(done.counters.bytesStored / done.counters.bytesRead, 3);
    expect(e.backup).toMatchObject({ basis: 'pack', inFlight: 1 });
    expect(e.backup!.ms).toBe(Math.round((e.storedBytes! / (e.backup!.mibps * 1024 * 1024)) * 1000));
    // only its own file came and went: the repository's folder is as it was
    expect(fs.readdirSync(repo).sort()).toEqual(before);
    const byJob = await wired.api.call('speedtests.history', { jobId: job.id });
    expect(byJob.map((h) => h.jobId)).toEqual([job.id]);

    // while the job backs up to it (slowly: a read limit), the destination is not tested
    await wired.api.call('jobs.update', { id: job.id, changes: { options: { readLimitMBps: 0.05 } } });
    const full = await wired.api.call('jobs.runNow', { id: job.id, full: true });
    await until(() => wired.api.runs.isRunning(job.id), 'the backup to run');
    await expect(
      wired.api.call('speedtests.start', { destination: job.destination, jobId: job.id, settings: quick }),
    ).rejects.toMatchObject({ code: 'ALREADY_RUNNING', message: /"Docs" is backing up to this destination/ });
    await wired.api.call('runs.cancel', { id: full.id });
    await until(
      () => events.some((e) => e.event === 'run.finished' && e.payload.id === full.id),
      'the cancel',
    );
  });

  it('one test per destination; cancel ends it, removes its file and is recorded; bad input is refused', async () => {
    const dest = path.join(tmp, 'nas');
    fs.mkdirSync(dest);
    const d = { kind: 'local' as const, path: dest };
    const st = await wired.api.call('speedtests.start', {
      destination: d,
      settings: { fileSizeMiB: 16, durationSec: 60 },
    });
    await expect(wired.api.call('speedtests.start', { destination: d })).rejects.toMatchObject({
      code: 'ALREADY_RUNNING',
    });
    await until(
      () =>
        events.some(
          (e) => e.event === 'speedtest.progress' && e.payload.id === st.id && e.payload.phase === 'testing',
        ),
      'the test to start testing',
    );
    await wired.api.call('speedtests.cancel', { id: st.id });
    const end = await finished(st.id);
    expect(end.status).toBe('cancelled');
    expect(fs.readdirSync(dest)).toEqual([]);
    const [rec] = await wired.api.call('speedtests.history', { destination: d });
    expect(rec.status).toBe('cancelled');

    await expect(
      wired.api.call('speedtests.start', { destination: { kind: 'local', path: 'relative/dir' } }),
    ).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(
      wired.api.call('speedtests.start', {
        destination: {
          kind: 's3',
          endpoint: 'http://127.0.0.1:9',
          bucket: 'b',
          prefix: '',
          accessKeyId: 'k',
        },
      }),
    ).rejects.toMatchObject({ code: 'VALIDATION', message: /secret access key to test its speed/ });
    await expect(
      wired.api.call('speedtests.start', { destination: d, settings: { blockSizeKiB: 6 } as never }),
    ).rejects.toMatchObject({ code: 'VALIDATION' });
    await expect(wired.api.call('speedtests.get', { id: 'nope' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
    });
    // a test the engine refuses (no room for 1 TiB) ends as failed with the engine's error, and is recorded
    const big = await wired.api.call('speedtests.start', {
      destination: d,
      settings: { fileSizeMiB: 1_048_576 },
    });
    const failed = await finished(big.id);
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'DESTINATION_FULL' } });
  });
});
