// One repository shared by several PCs, through the app's wiring (real engine, catalog and its file
// index): two other computers (pc-a, pc-b) back up into the repository of this computer's job.
// snapshots.hosts lists the computers; with `host`, list/browse/search/versions work on that computer's
// snapshots (walked in the repository: the catalog indexes only the job's own), and a file from another
// computer's snapshot restores byte for byte into a folder here, even from a snapshot written after the
// API opened the repository. Without `host` every call still sees only the job's own snapshots.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import { RealEngine } from '../../src/main/api/engine-adapter.js';
import { FakeEngine } from '../../src/main/api/fake-engine.js';
import { TidemarkApi } from '../../src/main/api/api.js';
import { MemoryState } from '../../src/main/api/state.js';
import { MemorySecretStore } from '../../src/main/engine/catalog/secrets.js';
import type { ApiEvent, JobSummary, RestoreStatus } from '../../src/shared/api.js';
import { until } from '../helpers/fixtures.js';

const PW = 'shared office password';
const me = os.hostname();

let tmp: string;
let repoDir: string;
let wired: Wired;
let job: JobSummary;
const engine = new RealEngine();
const events: { event: ApiEvent; payload: any }[] = [];
/** The two other computers' source folders and what they backed up. */
let docsA: string;
let photosB: string;
const catBytes = crypto.randomBytes(300 * 1024);

async function backupAs(host: string, src: string, jobTag: string): Promise<string> {
  const h = await engine.open(repoDir, PW);
  try {
    return (await engine.backup(h, { paths: [src], host, job: jobTag })).snapshotId;
  } finally {
    await h.close();
  }
}

async function restored(id: string): Promise<RestoreStatus> {
  let st = await wired.api.call('restore.get', { id });
  await until(
    async () => (st = await wired.api.call('restore.get', { id })).status !== 'running',
    'the restore to finish',
  );
  return st;
}

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-hosts-'));
  repoDir = path.join(tmp, 'office-repo');
  docsA = path.join(tmp, 'pc-a', 'Documents');
  photosB = path.join(tmp, 'pc-b', 'Photos');
  fs.mkdirSync(docsA, { recursive: true });
  fs.mkdirSync(photosB, { recursive: true });
  fs.writeFileSync(path.join(docsA, 'report.txt'), 'quarterly report of pc-a\n'.repeat(100));
  fs.writeFileSync(path.join(photosB, 'cat.jpg'), catBytes);
  fs.writeFileSync(path.join(photosB, 'notes.txt'), 'first notes of pc-b');
  await (await engine.init(repoDir, PW)).close();
  await backupAs('pc-a', docsA, 'pc-a-docs');
  await backupAs('pc-b', photosB, 'pc-b-photos');
  fs.writeFileSync(path.join(photosB, 'notes.txt'), 'second notes of pc-b, longer');
  await backupAs('pc-b', photosB, 'pc-b-photos');

  // this computer: a job of the app backing up into the same repository
  const mine = path.join(tmp, 'this-pc', 'Work');
  fs.mkdirSync(mine, { recursive: true });
  fs.writeFileSync(path.join(mine, 'plan.txt'), 'this computer');
  wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home'), secrets: new MemorySecretStore() });
  wired.api.on((event, payload) => events.push({ event, payload }));
  job = await wired.api.call('jobs.create', {
    name: 'This PC',
    sources: [mine],
    destination: { kind: 'local', path: repoDir },
    schedule: { kind: 'manual' },
    password: PW,
  });
  const run = await wired.api.call('jobs.runNow', { id: job.id });
  await until(
    () => events.some((e) => e.event === 'run.finished' && e.payload.id === run.id),
    'the run to finish',
    90_000,
  );
  expect((await wired.api.call('runs.get', { id: run.id })).status).toBe('completed');
}, 120_000);

afterAll(async () => {
  await wired?.api.close();
  wired?.close();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

describe('a repository shared by several computers', () => {
  it('lists the computers with their snapshot counts, this computer first', async () => {
    const hosts = await wired.api.call('snapshots.hosts', { jobId: job.id });
    expect(hosts.map((h) => [h.host, h.snapshots, h.thisComputer])).toEqual([
      [me, 1, true],
      ['pc-a', 1, false],
      ['pc-b', 2, false],
    ]);
    const pcB = await wired.api.call('snapshots.list', { jobId: job.id, host: 'pc-b' });
    expect(hosts[2].latest).toBe(pcB[0].time);
  });

  it('lists, browses, searches and shows versions of another computer’s snapshots only when asked', async () => {
    // no host: the job's own snapshots, as before
    const own = await wired.api.call('snapshots.list', { jobId: job.id });
    expect(own.map((s) => s.host)).toEqual([me]);

    const b = await wired.api.call('snapshots.list', { jobId: job.id, host: 'pc-b' });
    expect(b).toHaveLength(2);
    expect(b.every((s) => s.host === 'pc-b' && s.paths[0] === photosB)).toBe(true);
    expect(b[0].time >= b[1].time).toBe(true);
    expect(await wired.api.call('snapshots.list', { jobId: job.id, host: 'nobody' })).toEqual([]);

    const listing = await wired.api.call('snapshots.browse', {
      jobId: job.id,
      snapshotId: b[0].id,
      path: photosB,
      host: 'pc-b',
    });
    expect(listing.map((e) => [e.name, e.type, e.size])).toEqual([
      ['cat.jpg', 'file', catBytes.length],
      ['notes.txt', 'file', 28],
    ]);
    // pc-a's snapshot is not one of pc-b's
    const [a] = await wired.api.call('snapshots.list', { jobId: job.id, host: 'pc-a' });
    await expect(
      wired.api.call('snapshots.browse', { jobId: job.id, snapshotId: a.id, path: docsA, host: 'pc-b' }),
    ).rejects.toMatchObject({ code: 'NOT_FOUND' });

    const hits = await wired.api.call('snapshots.search', { jobId: job.id, query: 'notes', host: 'pc-b' });
    expect(hits.map((h) => [h.snapshotId, h.path, h.size])).toEqual([
      [b[0].id, path.join(photosB, 'notes.txt'), 28],
      [b[1].id, path.join(photosB, 'notes.txt'), 19],
    ]);
    expect(await wired.api.call('snapshots.search', { jobId: job.id, query: 'notes' })).toEqual([]);
    const reports = await wired.api.call('snapshots.search', {
      jobId: job.id,
      query: 'report',
      host: 'pc-a',
    });
    expect(reports.map((h) => h.path)).toEqual([path.join(docsA, 'report.txt')]);

    const notes = path.join(photosB, 'notes.txt');
    const versions = await wired.api.call('snapshots.versions', { jobId: job.id, path: notes, host: 'pc-b' });
    expect(versions.map((v) => [v.snapshotId, v.size, v.changed])).toEqual([
      [b[0].id, 28, true],
      [b[1].id, 19, true],
    ]);
    expect(await wired.api.call('snapshots.versions', { jobId: job.id, path: notes })).toEqual([]);
  });

  it('restores files from another computer’s snapshots into a folder of this computer', async () => {
    const b = await wired.api.call('snapshots.list', { jobId: job.id, host: 'pc-b' });
    const target = path.join(tmp, 'from-pc-b');
    const start = await wired.api.call('restore.start', {
      jobId: job.id,
      snapshotId: b[0].id,
      paths: [path.join(photosB, 'cat.jpg')],
      target: { kind: 'folder', path: target },
      overwrite: 'skip',
    });
    expect(await restored(start.id)).toMatchObject({ status: 'completed', filesDone: 1 });
    expect(fs.readFileSync(path.join(target, photosB, 'cat.jpg')).equals(catBytes)).toBe(true);

    // an older version, from the older snapshot
    const older = await wired.api.call('restore.start', {
      jobId: job.id,
      snapshotId: b[1].id,
      paths: [path.join(photosB, 'notes.txt')],
      target: { kind: 'folder', path: path.join(tmp, 'older') },
      overwrite: 'skip',
    });
    expect((await restored(older.id)).status).toBe('completed');
    expect(fs.readFileSync(path.join(tmp, 'older', photosB, 'notes.txt'), 'utf8')).toBe(
      'first notes of pc-b',
    );
  });

  it('restores a snapshot another computer wrote after the API opened the repository', async () => {
    fs.writeFileSync(path.join(docsA, 'late.txt'), 'written on pc-a later');
    const late = await backupAs('pc-a', docsA, 'pc-a-docs');
    // straight to restore, without listing first: the API's already open handle finds the new blobs
    const target = path.join(tmp, 'late');
    const st = await wired.api.call('restore.start', {
      jobId: job.id,
      snapshotId: late,
      paths: [path.join(docsA, 'late.txt')],
      target: { kind: 'folder', path: target },
      overwrite: 'skip',
    });
    expect(await restored(st.id)).toMatchObject({ status: 'completed', filesDone: 1 });
    expect(fs.readFileSync(path.join(target, docsA, 'late.txt'), 'utf8')).toBe('written on pc-a later');
    const hosts = await wired.api.call('snapshots.hosts', { jobId: job.id });
    expect(hosts.find((h) => h.host === 'pc-a')?.snapshots).toBe(2);
  });
});

describe('the fake engine (for UI tests) records the host it is given', () => {
  it('filters by host the same way', async () => {
    const fake = new FakeEngine();
    const state = new MemoryState();
    const api = new TidemarkApi({
      engine: fake,
      jobs: state,
      runs: state,
      settings: state,
      info: { version: 'test', mode: 'browser', dataDir: tmp, defaultRepoDir: tmp, homeDir: tmp },
    });
    try {
      const repo = path.join(tmp, 'fake-repo');
      const h = await fake.init(repo, PW);
      await fake.backup(h, { paths: [photosB], host: 'pc-b', job: 'x' });
      const j = await api.call('jobs.create', {
        name: 'Fake',
        sources: [docsA],
        destination: { kind: 'local', path: repo },
        schedule: { kind: 'manual' },
        password: PW,
      });
      expect(await api.call('snapshots.hosts', { jobId: j.id })).toMatchObject([
        { host: 'pc-b', snapshots: 1, thisComputer: false },
      ]);
      expect(await api.call('snapshots.list', { jobId: j.id })).toEqual([]);
      const [snap] = await api.call('snapshots.list', { jobId: j.id, host: 'pc-b' });
      const entries = await api.call('snapshots.browse', {
        jobId: j.id,
        snapshotId: snap.id,
        path: photosB,
        host: 'pc-b',
      });
      expect(entries.map((e) => e.name)).toEqual(['cat.jpg', 'notes.txt']);
    } finally {
      await api.close();
    }
  });
});
