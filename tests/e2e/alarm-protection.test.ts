// End to end, browser mode with the real engine and catalog: the mass-change alarm in the app. A job backs
// up a simulated home folder; then half its files are encrypted the way ransomware does and the job runs
// again. The API raises `alarm.raised`; the dashboard (Debian's Chromium, playwright-core) shows the
// banner with what changed and the job as needing attention, the Restore page marks the suspect snapshot,
// and "These changes were mine" → "Dismiss the alarm" removes the banner and records the dismissal in
// the repository.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { buildRenderer, chromiumPath, closeAll, openBrowser, ARTIFACTS } from './helpers.js';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import { startServer, type RunningServer } from '../../src/main/api/server.js';
import { MemorySecretStore } from '../../src/main/engine/catalog/secrets.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { until } from '../helpers/fixtures.js';
import { encryptFiles, makeHomePc } from '../helpers/homepc.js';
import type { AlarmInfo } from '../../src/shared/api.js';

const browserPath = chromiumPath();
const suite = browserPath ? describe : describe.skip;
if (!browserPath)
  console.warn('e2e skipped: no Chromium found (/usr/bin/chromium; install the "chromium" package)');

const PW = 'alarm e2e password';
let tmp: string;
let wired: Wired;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let consoleErrors: string[] = [];
let jobId: string;
let home: string;
let repoDir: string;
const finished = new Set<string>();
const raised: AlarmInfo[] = [];
const shotDir = path.join(ARTIFACTS, 'screenshots');
// one build of the UI for both suites
let built: Promise<string> | undefined;
const renderer = () =>
  (built ??= buildRenderer(fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-e2e-alarm-ui-')) + '/renderer'));

suite('browser mode: the mass-change alarm', () => {
  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-e2e-alarm-'));
    fs.mkdirSync(shotDir, { recursive: true });
    const staticDir = await renderer();
    home = path.join(tmp, 'Home');
    repoDir = path.join(tmp, 'repo');
    await makeHomePc(home, { scale: 0.15, size: 0.2, seed: 11 });
    wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'data'), secrets: new MemorySecretStore() });
    wired.api.on((event, payload) => {
      if (event === 'run.finished') finished.add((payload as { id: string }).id);
      if (event === 'alarm.raised') raised.push(payload as AlarmInfo);
    });
    const job = await wired.api.call('jobs.create', {
      name: 'Home folder',
      sources: [home],
      destination: { kind: 'local', path: repoDir },
      schedule: { kind: 'manual' },
      retention: { keepLast: 1 },
      password: PW,
    });
    jobId = job.id;
    const first = await wired.api.call('jobs.runNow', { id: jobId });
    await until(() => finished.has(first.id), 'the first run to finish', 90_000);
    await encryptFiles(home, 0.5, 'rename', 4);
    const second = await wired.api.call('jobs.runNow', { id: jobId });
    await until(() => finished.has(second.id), 'the second run to finish', 90_000);
    await until(() => raised.length > 0, 'the alarm to be raised', 30_000);
    server = await startServer({ api: wired.api, staticDir });
    ({ context, page, consoleErrors } = await openBrowser(browserPath!, tmp, { width: 1360, height: 1000 }));
  }, 180_000);

  afterAll(() => closeAll({ context, wired, server, tmp }));

  it('shows the alarm on the dashboard and in the timeline, and dismisses it', async () => {
    expect(raised[0]).toMatchObject({ jobId, jobName: 'Home folder', held: 2 });
    expect(raised[0].suspicious).toBeGreaterThanOrEqual(raised[0].threshold);
    const listed = await wired.api.call('alarms.list', {});
    expect(listed.map((a) => a.snapshotId)).toEqual([raised[0].snapshotId]);
    // the retention preview shows what forget will do: the held snapshots stay
    const preview = await wired.api.call('jobs.previewRetention', { id: jobId, retention: { keepLast: 1 } });
    expect(preview.remove).toEqual([]);
    expect(
      preview.keep.filter((k) => k.reasons.some((r) => /held by the mass-change alarm/.test(r))),
    ).toHaveLength(1);

    await page.goto(server.tokenUrl);
    const banner = page.getByRole('alert').filter({ hasText: 'Possible ransomware: Home folder' });
    await banner.waitFor();
    expect(await banner.textContent()).toMatch(/changed \d+ files the way encryption changes files/);
    expect(await banner.textContent()).toMatch(/2 backup\(s\) up to it are protected from deletion/);
    expect(await banner.textContent()).toMatch(/replaced by unreadable copies under a new extension/);
    await banner.getByText('Files that changed this way').click();
    await banner
      .getByText(/\.locked/)
      .first()
      .waitFor();
    await expect.poll(() => page.getByText('1 need attention').count()).toBe(1);
    await page.screenshot({ path: path.join(shotDir, '30-dashboard-alarm.png') });

    // the restore page marks the suspect snapshot; the one before it is there to restore from
    await banner.getByRole('button', { name: 'Restore from an earlier backup' }).click();
    const timeline = page.getByRole('complementary', { name: 'Snapshots' });
    await expect.poll(() => timeline.getByRole('button').count()).toBe(2);
    expect(await timeline.getByText('mass-change alarm').count()).toBe(1);

    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Dashboard' }).click();
    await banner.getByRole('button', { name: 'These changes were mine' }).click();
    const dialog = page.getByRole('dialog', { name: 'Dismiss the alarm?' });
    await dialog.getByRole('button', { name: 'Dismiss the alarm' }).click();
    await expect
      .poll(() => page.getByRole('alert').filter({ hasText: 'Possible ransomware' }).count())
      .toBe(0);

    // the dismissal is in the repository, where the CLI, other computers and forget see it
    const repo = await Repository.open(new LocalBackend(repoDir), PW);
    try {
      expect((await repo.listDismissals()).map((d) => d.snapshot)).toEqual([raised[0].snapshotId]);
    } finally {
      await repo.close();
    }
    expect(await wired.api.call('alarms.list', {})).toEqual([]);
    expect((await wired.api.call('alarms.list', { includeDismissed: true }))[0].dismissed).toBeTruthy();
    expect(consoleErrors).toEqual([]);
  });
});

suite('browser mode: an append-only destination chosen in the wizard', () => {
  let t: string;
  let w: Wired;
  let srv: RunningServer;
  let ctx: BrowserContext;
  let pg: Page;
  let errors: string[] = [];
  beforeAll(async () => {
    t = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-e2e-append-'));
    const staticDir = await renderer();
    fs.mkdirSync(path.join(t, 'Papers'));
    fs.writeFileSync(path.join(t, 'Papers', 'tax.txt'), 'numbers');
    w = createApi({ mode: 'browser', dataDir: path.join(t, 'data'), secrets: new MemorySecretStore() });
    srv = await startServer({ api: w.api, staticDir });
    ({ context: ctx, page: pg, consoleErrors: errors } = await openBrowser(browserPath!, t));
  }, 180_000);
  afterAll(async () => {
    await closeAll({ context: ctx, wired: w, server: srv, tmp: t });
    if (built) fs.rmSync(path.dirname(await built), { recursive: true, force: true });
  });

  it('creates the job with a maintenance password the app does not keep', async () => {
    const repo = path.join(t, 'nas-share');
    await pg.goto(srv.tokenUrl);
    await pg.getByRole('button', { name: 'New backup job' }).click();
    await pg.getByLabel('Job name').fill('Papers');
    await pg.locator('#source-add').fill(path.join(t, 'Papers'));
    await pg.getByRole('button', { name: 'Add folder' }).click();
    await pg.getByRole('button', { name: 'Next' }).click();
    await pg.getByLabel('Destination folder', { exact: true }).fill(repo);
    await pg.getByLabel(/Append-only: backups never delete or overwrite anything here/).check();
    for (let i = 0; i < 3; i++) await pg.getByRole('button', { name: 'Next' }).click();
    await pg.getByLabel('Password', { exact: true }).fill('repository password');
    await pg.getByLabel('Confirm password', { exact: true }).fill('repository password');
    await pg.getByLabel('Maintenance password', { exact: true }).fill('maintenance only');
    await pg.getByLabel('Confirm maintenance password').fill('maintenance typo');
    await pg.getByRole('button', { name: 'Next' }).click();
    await pg.getByText('the passwords do not match').waitFor(); // the step stays until they match
    await pg.getByLabel('Confirm maintenance password').fill('maintenance only');
    await pg.getByRole('button', { name: 'Next' }).click();
    await pg.getByText('Append-only (pruning needs the maintenance password)').waitFor();
    await pg.getByRole('button', { name: 'Create job' }).click();
    await pg.getByText(/· append-only/).waitFor();
    await pg.screenshot({ path: path.join(shotDir, '31-dashboard-append-only.png') });

    const r = await Repository.open(new LocalBackend(repo), 'repository password');
    try {
      expect(r.immutability?.appendOnly).toBeDefined();
      await expect(r.unlockMaintenance('maintenance only')).resolves.toBeUndefined();
    } finally {
      await r.close();
    }
    // never stored by the app: not in its data folder
    const stored = fs
      .readdirSync(path.join(t, 'data'))
      .filter((f) => fs.statSync(path.join(t, 'data', f)).isFile())
      .map((f) => fs.readFileSync(path.join(t, 'data', f)));
    for (const b of stored) expect(b.includes(Buffer.from('maintenance only'))).toBe(false);
    expect(errors).toEqual([]);
  });
});
