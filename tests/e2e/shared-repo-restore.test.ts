// End to end, browser mode with the real engine and catalog: a repository shared by several PCs. Two
// other computers (pc-a, pc-b) have backed up into the repository of this computer's job; on the
// Restore page, Debian's Chromium (playwright-core) picks pc-b in the Computer selector, sees its
// snapshots (marked with its host name), searches and browses one, and restores a file into a folder of
// this computer, byte for byte. A job whose repository only this computer uses shows no selector. The
// page keeps up: a run of the job being browsed adds its snapshot (and any computer that backed up
// meanwhile) without a reload, and the page shown again lists what other computers backed up since.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { buildRenderer, chromiumPath, closeAll, openBrowser, ARTIFACTS } from './helpers.js';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import { startServer, type RunningServer } from '../../src/main/api/server.js';
import { RealEngine } from '../../src/main/api/engine-adapter.js';
import { MemorySecretStore } from '../../src/main/engine/catalog/secrets.js';
import { until } from '../helpers/fixtures.js';

const browserPath = chromiumPath();
const suite = browserPath ? describe : describe.skip;
if (!browserPath)
  console.warn('e2e skipped: no Chromium found (/usr/bin/chromium; install the "chromium" package)');

const PW = 'shared office password';
let tmp: string;
let wired: Wired;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let photosB: string;
let repoDir: string;
let officeJobId: string;
const finished = new Set<string>();
const beach = crypto.randomBytes(256 * 1024);
let consoleErrors: string[] = [];
const shotDir = path.join(ARTIFACTS, 'screenshots');

suite('browser mode: restoring from another computer of a shared repository', () => {
  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-e2e-hosts-'));
    fs.mkdirSync(shotDir, { recursive: true });
    const staticDir = await buildRenderer(path.join(tmp, 'renderer'));

    // the other computers' backups, written by the engine as their own Tidemark would
    repoDir = path.join(tmp, 'office-repo');
    const docsA = path.join(tmp, 'pc-a', 'Documents');
    photosB = path.join(tmp, 'pc-b', 'Photos');
    fs.mkdirSync(docsA, { recursive: true });
    fs.mkdirSync(path.join(photosB, 'holiday'), { recursive: true });
    fs.writeFileSync(path.join(docsA, 'budget.txt'), 'pc-a budget');
    fs.writeFileSync(path.join(photosB, 'holiday', 'beach.jpg'), beach);
    fs.writeFileSync(path.join(photosB, 'shopping-list.txt'), 'milk');
    const engine = new RealEngine();
    const h = await engine.init(repoDir, PW);
    try {
      await engine.backup(h, { paths: [docsA], host: 'pc-a', job: 'pc-a-docs' });
      await engine.backup(h, { paths: [photosB], host: 'pc-b', job: 'pc-b-photos' });
      fs.writeFileSync(path.join(photosB, 'shopping-list.txt'), 'milk, bread');
      await engine.backup(h, { paths: [photosB], host: 'pc-b', job: 'pc-b-photos' });
    } finally {
      await h.close();
    }

    // this computer: a job into the shared repository, and one into a repository of its own
    const work = path.join(tmp, 'this-pc', 'Work');
    fs.mkdirSync(work, { recursive: true });
    fs.writeFileSync(path.join(work, 'plan.txt'), 'this computer');
    wired = createApi({
      mode: 'browser',
      dataDir: path.join(tmp, 'home'),
      secrets: new MemorySecretStore(),
    });
    wired.api.on((event, payload) => {
      if (event === 'run.finished') finished.add((payload as { id: string }).id);
    });
    for (const [name, dest] of [
      ['Office share', repoDir],
      ['Solo', path.join(tmp, 'solo-repo')],
    ]) {
      const job = await wired.api.call('jobs.create', {
        name,
        sources: [work],
        destination: { kind: 'local', path: dest },
        schedule: { kind: 'manual' },
        password: PW,
      });
      if (name === 'Office share') officeJobId = job.id;
      const run = await wired.api.call('jobs.runNow', { id: job.id });
      await until(() => finished.has(run.id), 'the run to finish', 90_000);
    }
    server = await startServer({ api: wired.api, staticDir });

    ({ context, page, consoleErrors } = await openBrowser(browserPath!, tmp, { width: 1360, height: 900 }));
  }, 180_000);

  afterAll(() => closeAll({ context, wired, server, tmp }));

  it('picks the other computer, browses its snapshot and restores one of its files', async () => {
    const target = path.join(tmp, 'Restored from pc-b');
    await page.goto(server.tokenUrl);
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Restore' }).click();
    await page.getByRole('heading', { name: 'Restore' }).waitFor();
    await page.getByLabel('Job', { exact: true }).selectOption({ label: 'Office share' });

    // this computer first, then the others with their snapshot counts
    const computer = page.getByLabel('Computer', { exact: true });
    await computer.waitFor();
    expect(await computer.locator('option').allTextContents()).toEqual([
      `This computer (${os.hostname()})`,
      'pc-a — 1 snapshot',
      'pc-b — 2 snapshots',
    ]);
    const timeline = page.getByRole('complementary', { name: 'Snapshots' });
    // this computer's own snapshot: no host shown
    await expect.poll(() => timeline.getByRole('button').count()).toBe(1);
    expect(await timeline.locator('.snap-host').count()).toBe(0);

    await computer.selectOption({ label: 'pc-b — 2 snapshots' });
    await expect.poll(() => timeline.getByRole('button').count()).toBe(2);
    expect(await timeline.locator('.snap-host').allTextContents()).toEqual(['pc-b', 'pc-b']);

    // search finds pc-b's files in both of its snapshots
    await page.getByLabel('Search files in all snapshots').fill('shopping');
    const results = page.getByRole('list', { name: 'Search results' });
    await expect
      .poll(() => results.getByText(path.join(photosB, 'shopping-list.txt')).count(), { timeout: 30_000 })
      .toBe(2);
    await page.getByRole('button', { name: 'Clear search' }).click();

    // browse the newest snapshot of pc-b (opened at its backed-up folder)
    const grid = page.getByRole('grid', { name: 'Folder contents' });
    await grid.getByRole('button', { name: 'Open folder holiday' }).click();
    await grid.getByText('beach.jpg').waitFor();
    await grid.getByRole('button', { name: 'Versions of beach.jpg' }).click();
    await expect
      .poll(() =>
        page
          .getByRole('complementary', { name: 'Versions' })
          .getByRole('button', { name: 'Restore' })
          .count(),
      )
      .toBe(2);
    await page.getByRole('button', { name: 'Close versions' }).click();
    await grid.getByLabel('Select beach.jpg').check();
    await page.screenshot({ path: path.join(shotDir, 'restore-other-computer.png') });

    await page.getByRole('button', { name: 'Restore…' }).click();
    const rd = page.getByRole('dialog', { name: 'Restore' });
    await rd.getByText('taken on pc-b').waitFor();
    await rd.getByLabel('Another folder').check();
    await rd.getByRole('textbox', { name: 'Restore into folder' }).fill(target);
    await rd.getByRole('button', { name: 'Start restore' }).click();
    const status = rd.locator('[data-restore-status]:not([data-restore-status="running"])');
    await status.waitFor({ timeout: 60_000 });
    expect(await status.getAttribute('data-restore-status')).toBe('completed');
    const restored = fs.readFileSync(path.join(target, photosB, 'holiday', 'beach.jpg'));
    expect(restored.equals(beach)).toBe(true);
    await rd.getByRole('button', { name: 'Done' }).click();

    // back to this computer: its own snapshot again
    await computer.selectOption({ index: 0 });
    await expect.poll(() => timeline.getByRole('button').count()).toBe(1);
    await grid.getByText('plan.txt').waitFor();

    // a repository only this computer writes to: no selector
    await page.getByLabel('Job', { exact: true }).selectOption({ label: 'Solo' });
    await grid.getByText('plan.txt').waitFor();
    await expect.poll(() => timeline.getByRole('button').count()).toBe(1);
    await expect.poll(() => timeline.getAttribute('data-computers')).toBe('1'); // hosts loaded
    expect(await page.getByLabel('Computer', { exact: true }).count()).toBe(0);
    expect(consoleErrors).toEqual([]);
  });

  it('shows what was backed up since: after this job runs, and when the page is shown again', async () => {
    await page.getByLabel('Job', { exact: true }).selectOption({ label: 'Office share' });
    const computer = page.getByLabel('Computer', { exact: true });
    const timeline = page.getByRole('complementary', { name: 'Snapshots' });
    await expect.poll(() => computer.locator('option').count()).toBe(3);
    await expect.poll(() => timeline.getByRole('button').count()).toBe(1);
    const backUpElsewhere = async (host: string) => {
      const dir = path.join(tmp, host, 'Notes');
      fs.mkdirSync(dir, { recursive: true });
      fs.writeFileSync(path.join(dir, 'note.txt'), host);
      const engine = new RealEngine();
      const h = await engine.open(repoDir, PW);
      try {
        await engine.backup(h, { paths: [dir], host, job: `${host}-notes` });
      } finally {
        await h.close();
      }
    };

    // another computer backs up, then this computer's job runs: the page shows both without a reload
    await backUpElsewhere('pc-c');
    const run = await wired.api.call('jobs.runNow', { id: officeJobId });
    await until(() => finished.has(run.id), 'the run to finish', 90_000);
    await expect.poll(() => timeline.getByRole('button').count()).toBe(2);
    await expect
      .poll(() => computer.locator('option').allTextContents())
      .toEqual([
        `This computer (${os.hostname()})`,
        'pc-a — 1 snapshot',
        'pc-b — 2 snapshots',
        'pc-c — 1 snapshot',
      ]);

    // away from the page while yet another computer backs up; shown again, it lists that computer too
    const nav = page.getByRole('navigation', { name: 'Main' });
    await nav.getByRole('button', { name: 'Dashboard' }).click();
    await backUpElsewhere('pc-d');
    await nav.getByRole('button', { name: 'Restore' }).click();
    await page.getByRole('heading', { name: 'Restore' }).waitFor();
    await expect.poll(() => computer.locator('option').allTextContents()).toContain('pc-d — 1 snapshot');
    await expect.poll(() => timeline.getByRole('button').count()).toBe(2);
    expect(consoleErrors).toEqual([]);
  });
});
