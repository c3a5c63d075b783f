// The API's engine adapter over the real repository format: a snapshot written by another process
// (here: a second handle, as the CLI or another computer would) after the API opened the repository is
// listed and browsable, and restores byte for byte through the API.
import { afterAll, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { memoryApi } from '../helpers/api.js';
import { RealEngine } from '../../src/main/api/engine-adapter.js';
import type { ApiEvent } from '../../src/shared/api.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-real-'));
const engine = new RealEngine();
const api = memoryApi(engine, tmp);
const events: { event: ApiEvent; payload: any }[] = [];
api.on((event, payload) => events.push({ event, payload }));

afterAll(async () => {
  await api.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

it('sees snapshots written elsewhere after it opened the repository, and restores them', async () => {
  const src = path.join(tmp, 'src');
  fs.mkdirSync(path.join(src, 'a'), { recursive: true });
  fs.writeFileSync(path.join(src, 'a', 'one.txt'), 'first version');
  const repoDir = path.join(tmp, 'repo');
  const job = await api.call('jobs.create', {
    name: 'Real',
    sources: [src],
    destination: { kind: 'local', path: repoDir },
    schedule: { kind: 'manual' },
    password: 'real password',
  });
  const run = await api.call('jobs.runNow', { id: job.id });
  await expect
    .poll(() => events.some((e) => e.event === 'run.finished' && e.payload.id === run.id), {
      timeout: 60_000,
    })
    .toBe(true);
  expect((await api.call('runs.get', { id: run.id })).status).toBe('completed');
  const [first] = await api.call('snapshots.list', { jobId: job.id });
  // browsing loads the repository index into the API's open handle
  expect(
    (await api.call('snapshots.browse', { jobId: job.id, snapshotId: first.id, path: src })).map(
      (e) => e.name,
    ),
  ).toEqual(['a']);

  // another writer adds a snapshot of the same job
  fs.writeFileSync(path.join(src, 'a', 'one.txt'), 'second version, longer');
  fs.writeFileSync(path.join(src, 'a', 'two.txt'), 'new file');
  const other = await engine.open(repoDir, 'real password');
  await engine.backup(other, { paths: [src], job: job.snapshotTag });
  await other.close();

  const snaps = await api.call('snapshots.list', { jobId: job.id });
  expect(snaps).toHaveLength(2);
  const listing = await api.call('snapshots.browse', {
    jobId: job.id,
    snapshotId: snaps[0].id,
    path: path.join(src, 'a'),
  });
  expect(listing.map((e) => [e.name, e.size])).toEqual([
    ['one.txt', 22],
    ['two.txt', 8],
  ]);
  const versions = await api.call('snapshots.versions', {
    jobId: job.id,
    path: path.join(src, 'a', 'one.txt'),
  });
  expect(versions.map((v) => [v.size, v.changed])).toEqual([
    [22, true],
    [13, true],
  ]);

  const target = path.join(tmp, 'out');
  const r = await api.call('restore.start', {
    jobId: job.id,
    snapshotId: snaps[1].id,
    paths: [path.join(src, 'a', 'one.txt')],
    target: { kind: 'folder', path: target },
    overwrite: 'skip',
  });
  await expect
    .poll(async () => (await api.call('restore.get', { id: r.id })).status, { timeout: 60_000 })
    .not.toBe('running');
  expect((await api.call('restore.get', { id: r.id })).status).toBe('completed');
  expect(fs.readFileSync(path.join(target, src, 'a', 'one.txt'), 'utf8')).toBe('first version');
  expect(fs.existsSync(path.join(target, src, 'a', 'two.txt'))).toBe(false);
});
