// The app's wiring (real engine, catalog, scheduler) with immutable destinations: an append-only folder
// is created with a maintenance password the app does not keep; its runs back up, and their retention
// and prune are not applied (said in the run log, not a warning: the app cannot, by design); asking
// for one without a maintenance password, or in a folder that holds an unprotected repository, is a
// validation error naming the field.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import { MemorySecretStore } from '../../src/main/engine/catalog/secrets.js';
import { until } from '../helpers/fixtures.js';

let tmp: string;
let wired: Wired;
const finished = new Map<string, string>();

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-protect-'));
  fs.mkdirSync(path.join(tmp, 'src'));
  fs.writeFileSync(path.join(tmp, 'src', 'a.txt'), 'a');
  wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'data'), secrets: new MemorySecretStore() });
  wired.api.on((event, payload) => {
    if (event === 'run.finished')
      finished.set((payload as { id: string }).id, (payload as { status: string }).status);
  });
});
afterAll(async () => {
  await wired.api.close();
  wired.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

const job = (dest: string, extra: Record<string, unknown> = {}) => ({
  name: `job ${path.basename(dest)}`,
  sources: [path.join(tmp, 'src')],
  destination: { kind: 'local' as const, path: dest, appendOnly: true },
  schedule: { kind: 'manual' as const },
  retention: { keepLast: 1 },
  password: 'repository pw',
  ...extra,
});

describe('protected destinations through the app', () => {
  it('an append-only folder: created with its maintenance password, retention left to the user', async () => {
    await expect(wired.api.call('jobs.create', job(path.join(tmp, 'r0')))).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [{ path: 'maintenancePassword' }],
    });
    const j = await wired.api.call(
      'jobs.create',
      job(path.join(tmp, 'r1'), { maintenancePassword: 'maint pw 1' }),
    );
    expect(j.destination).toMatchObject({ kind: 'local', appendOnly: true });
    const runs: string[] = [];
    for (let i = 0; i < 2; i++) {
      fs.writeFileSync(path.join(tmp, 'src', 'a.txt'), `a${i}`);
      const run = await wired.api.call('jobs.runNow', { id: j.id });
      await until(() => finished.has(run.id), 'the run to finish');
      runs.push(run.id);
    }
    expect(runs.map((r) => finished.get(r))).toEqual(['completed', 'completed']);
    const detail = await wired.api.call('runs.get', { id: runs[1] });
    expect(detail.log.join('\n')).toMatch(/retention: not applied: the repository is append-only/);
    expect(detail.warningList).toEqual([]);
    expect((await wired.api.call('snapshots.list', { jobId: j.id })).length).toBe(2); // keep-last 1 not applied
    // the maintenance password is nowhere in the app's data
    const catalog = fs.readFileSync(path.join(tmp, 'data', 'catalog.sqlite'));
    expect(catalog.includes(Buffer.from('maint pw 1'))).toBe(false);
  });

  it('"clean up now" and repair of an append-only folder take its maintenance password, for that call only', async () => {
    const j = await wired.api.call(
      'jobs.create',
      job(path.join(tmp, 'r5'), { maintenancePassword: 'maint pw 5', name: 'cleanup' }),
    );
    for (let i = 0; i < 2; i++) {
      fs.writeFileSync(path.join(tmp, 'src', 'a.txt'), `c${i}`);
      const run = await wired.api.call('jobs.runNow', { id: j.id });
      await until(() => finished.has(run.id), 'the run to finish');
    }
    const files = () => fs.readdirSync(path.join(tmp, 'r5', 'snapshots')).sort();
    const before = files();
    expect(before.length).toBe(2);
    await expect(wired.api.call('jobs.cleanUp', { id: j.id })).rejects.toMatchObject({ code: 'APPEND_ONLY' });
    await expect(
      wired.api.call('jobs.cleanUp', { id: j.id, maintenancePassword: 'wrong one' }),
    ).rejects.toMatchObject({ code: 'WRONG_MAINTENANCE_PASSWORD' });
    await expect(wired.api.call('jobs.repair', { id: j.id })).rejects.toMatchObject({ code: 'APPEND_ONLY' });
    expect(files()).toEqual(before);

    const r = await wired.api.call('jobs.cleanUp', { id: j.id, maintenancePassword: 'maint pw 5' });
    expect(r).toMatchObject({ snapshotsRemoved: 1, snapshotsKept: 1, snapshotsHeld: 0 });
    expect(files()).toEqual([before.find((f) => files().includes(f))]);
    expect((await wired.api.call('snapshots.list', { jobId: j.id })).length).toBe(1);
    // the unlock did not outlive the call: the next one without the password is refused again
    await expect(wired.api.call('jobs.cleanUp', { id: j.id })).rejects.toMatchObject({ code: 'APPEND_ONLY' });
    const repaired = await wired.api.call('jobs.repair', { id: j.id, maintenancePassword: 'maint pw 5' });
    expect(repaired.clean).toBe(true);
  });

  it('refuses to call an unprotected repository append-only', async () => {
    const plain = await wired.api.call('jobs.create', {
      ...job(path.join(tmp, 'r2')),
      destination: { kind: 'local', path: path.join(tmp, 'r2') },
      name: 'plain',
    });
    expect(plain.destination).toEqual({ kind: 'local', path: path.join(tmp, 'r2') });
    await expect(
      wired.api.call('jobs.create', {
        ...job(path.join(tmp, 'r2'), { maintenancePassword: 'maint pw 2' }),
        name: 'again',
      }),
    ).rejects.toMatchObject({ code: 'VALIDATION', issues: [{ path: 'destination.appendOnly' }] });
  });
});
