// End to end, browser mode with the real engine and catalog: Debian's Chromium (playwright-core) creates a
// job in the wizard on a temporary folder, runs it and watches the live graph receive samples, browses the
// snapshot, searches a file, restores it to another folder and compares its bytes. Screenshots of every
// page go to test-artifacts/screenshots; any console error fails the test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { buildRenderer, chromiumPath, closeAll, openBrowser, ARTIFACTS } from './helpers.js';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import { startServer, type RunningServer } from '../../src/main/api/server.js';

const browserPath = chromiumPath();
const suite = browserPath ? describe : describe.skip;
if (!browserPath)
  console.warn('e2e skipped: no Chromium found (/usr/bin/chromium; install the "chromium" package)');

let tmp: string;
let wired: Wired;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let consoleErrors: string[] = [];
const shotDir = path.join(ARTIFACTS, 'screenshots');

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: path.join(shotDir, `${name}.png`) });
}

suite('browser mode, end to end with the real engine', () => {
  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-e2e-'));
    fs.mkdirSync(shotDir, { recursive: true });
    const staticDir = await buildRenderer(path.join(tmp, 'renderer'));

    // the folder to back up: a few documents and 40 files of random data (so the run lasts over ten seconds
    // under the job's read limit, long enough to draw a graph)
    const src = path.join(tmp, 'Documents');
    fs.mkdirSync(path.join(src, 'reports', '2026'), { recursive: true });
    fs.mkdirSync(path.join(src, 'photos'), { recursive: true });
    fs.writeFileSync(
      path.join(src, 'reports', '2026', 'quarterly-report.txt'),
      'Q3 revenue grew 12 %\n'.repeat(500),
    );
    fs.writeFileSync(path.join(src, 'notes.md'), '# Notes\n\nremember the milk\n');
    for (let i = 0; i < 40; i++)
      fs.writeFileSync(path.join(src, 'photos', `IMG_${1000 + i}.jpg`), crypto.randomBytes(300 * 1024));
    // a folder of 10,000 entries: the restore view must render only what is visible
    fs.mkdirSync(path.join(src, 'mail'));
    for (let i = 0; i < 10_000; i++)
      fs.writeFileSync(path.join(src, 'mail', `msg-${String(i).padStart(5, '0')}.eml`), `mail ${i}`);

    wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home') });
    server = await startServer({ api: wired.api, staticDir });

    ({ context, page, consoleErrors } = await openBrowser(browserPath!, tmp, { width: 1360, height: 900 }));
  });

  afterAll(() => closeAll({ context, wired, server, tmp }));

  it('creates a job in the wizard, backs up with a live graph, browses, searches and restores', async () => {
    const src = path.join(tmp, 'Documents');
    const repo = path.join(tmp, 'Backups', 'tidemark-repo');
    const target = path.join(tmp, 'Restored');

    await page.goto(server.tokenUrl);
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    await page.getByText('No backup jobs yet').waitFor();
    // the first Tab reaches the skip link
    await page.keyboard.press('Tab');
    await expect
      .poll(() =>
        page
          .getByRole('link', { name: 'Skip to content' })
          .evaluate((el) => el === el.ownerDocument.activeElement),
      )
      .toBe(true);
    await shot('01-dashboard-empty');

    // --- wizard
    await page.getByRole('button', { name: 'New backup job' }).click();
    await page.getByRole('heading', { name: 'New backup job' }).waitFor();
    // validation: "Next" on an empty first step shows what is missing
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('add at least one folder to back up').waitFor();
    // keyboard: the folder browser opens with Enter, closes with Escape and gives focus back
    const browse = page.getByRole('button', { name: 'Browse for folder to add' });
    await browse.focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog', { name: 'Folder to add' }).waitFor();
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    await expect.poll(() => browse.evaluate((el) => el === el.ownerDocument.activeElement)).toBe(true);
    // the directory browser served by the engine
    await page.getByRole('button', { name: 'Browse for folder to add' }).click();
    const dialog = page.getByRole('dialog', { name: 'Folder to add' });
    // the first listing (the home folder) shows its path; typing before it came back raced with it
    await expect.poll(() => dialog.getByLabel('Folder path').inputValue()).not.toBe('');
    await dialog.getByLabel('Folder path').fill(tmp);
    await dialog.getByRole('button', { name: 'Go', exact: true }).click();
    await dialog.getByRole('button', { name: 'Documents', exact: true }).click();
    await expect.poll(() => dialog.getByLabel('Folder path').inputValue()).toBe(src);
    await shot('02-wizard-folder-browser');
    await dialog.getByRole('button', { name: 'Choose this folder' }).click();
    await page.getByRole('button', { name: 'Add folder' }).click();
    await page.getByRole('list', { name: 'Selected folders' }).getByText(src).waitFor();
    await page.getByLabel('Job name').fill('My documents');
    await page.getByLabel('Build folders (node_modules, target)').check();
    await shot('03-wizard-sources');
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByLabel('Destination folder', { exact: true }).fill(repo);
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('When to back up').waitFor();
    await page.getByText('Daily', { exact: true }).click();
    await page.getByLabel('Time of day').fill('21:30');
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByLabel('Daily snapshots for (days)').fill('14');
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByLabel('Password', { exact: true }).fill('correct horse battery');
    await page.getByLabel('Confirm password').fill('correct horse');
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('the passwords do not match').waitFor();
    await page.getByLabel('Confirm password').fill('correct horse battery');
    // a read limit makes the run last over ten seconds, so the graph gets its samples while the run is
    // still going even when a loaded machine draws them seconds late (at 2 MB/s the margin was ~3 s)
    await page.getByLabel('Read limit (MB/s, 0 = unlimited)').fill('1');
    // open files: a snapshot where the disk has one (the default), and a pre-command
    await page.getByRole('radio', { name: /Use a snapshot: When possible/ }).waitFor();
    expect(await page.getByRole('radio', { name: /Use a snapshot: When possible/ }).isChecked()).toBe(true);
    await page.getByLabel('Before the backup, run').fill('echo e2e-pre-command');
    await shot('04a-wizard-open-files');
    await page.getByRole('button', { name: 'Next' }).click();
    await page.getByText('Daily at 21:30').waitFor();
    await page.getByText('Snapshot: When possible · before: echo e2e-pre-command').waitFor();
    await shot('04-wizard-review');
    await page.getByRole('button', { name: 'Create job' }).click();

    // --- dashboard with the job
    await page.getByRole('heading', { name: 'My documents' }).waitFor();
    await shot('05-dashboard-job');
    const jobs = await wired.api.call('jobs.list', {});
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ name: 'My documents', sources: [src], destination: { path: repo } });
    expect(jobs[0].excludePresets).toEqual(
      expect.arrayContaining(['caches', 'temp', 'trash', 'node_modules']),
    );
    expect(jobs[0].nextRunAt).not.toBeNull();
    expect(jobs[0].options).toMatchObject({ snapshot: 'when-possible', preCommand: 'echo e2e-pre-command' });
    expect(fs.existsSync(path.join(repo, 'config'))).toBe(true);

    // --- live run: at least two samples arrive while the run is still going
    await page.getByRole('button', { name: 'Back up now' }).click();
    await page.getByRole('button', { name: 'Cancel' }).waitFor();
    await expect
      .poll(async () => Number(await page.locator('.charts').getAttribute('data-samples')), {
        timeout: 60_000,
      })
      .toBeGreaterThanOrEqual(2);
    const stillRunning = await page.getByRole('button', { name: 'Cancel' }).isVisible();
    expect(stillRunning).toBe(true);
    await page.waitForTimeout(500);
    await shot('06-live-run');
    // the run ends (whatever its outcome; a failure is reported with its message below)
    await expect
      .poll(async () => (await wired.api.call('runs.list', { limit: 1 }))[0]?.status, { timeout: 120_000 })
      .not.toMatch(/^(queued|running)$/);
    const [run] = await wired.api.call('runs.list', { limit: 1 });
    const warnings = (await wired.api.call('runs.get', { id: run.id })).warningList;
    expect({ status: run.status, error: run.error?.message }, JSON.stringify(warnings)).toEqual({
      status: 'completed',
      error: undefined,
    });
    await page.getByText('Completed').first().waitFor();
    const detail = await wired.api.call('runs.get', { id: run.id });
    expect(detail.samples.length).toBeGreaterThanOrEqual(2);
    expect(detail.counters.filesDone).toBe(10_042);
    await shot('07-live-run-finished');

    // --- restore: browse the snapshot
    await page.locator('#main').getByRole('button', { name: 'Restore', exact: true }).click();
    await page.getByRole('heading', { name: 'Restore' }).waitFor();
    const grid = page.getByRole('grid', { name: 'Folder contents' });
    await grid.getByRole('button', { name: 'Open folder reports' }).click();
    await grid.getByRole('button', { name: 'Open folder 2026' }).click();
    await grid.getByText('quarterly-report.txt').waitFor();
    await shot('08-restore-browse');

    // the 10,000-entry folder is virtualised: every row is counted, only the visible ones exist
    await page
      .getByRole('navigation', { name: 'Folder path' })
      .getByRole('button', { name: 'Documents' })
      .click();
    await grid.getByRole('button', { name: 'Open folder mail' }).click();
    await expect.poll(() => grid.getAttribute('aria-rowcount')).toBe('10000');
    await grid.getByText('msg-00000.eml').waitFor();
    expect(await grid.getByRole('row').count()).toBeLessThan(100);
    await grid.evaluate((el) => el.scrollTo(0, el.scrollHeight));
    await grid.getByText('msg-09999.eml').waitFor();
    expect(await grid.getByRole('row').count()).toBeLessThan(100);
    await shot('08b-restore-10000-entries');

    // search across snapshots, then restore the hit into another folder
    await page.getByLabel('Search files in all snapshots').fill('quarterly');
    const results = page.getByRole('list', { name: 'Search results' });
    await results.getByText(path.join(src, 'reports', '2026', 'quarterly-report.txt')).waitFor();
    await shot('09-restore-search');
    await results.getByRole('button', { name: 'Versions' }).first().click();
    await page
      .getByRole('complementary', { name: 'Versions' })
      .getByRole('button', { name: 'Restore' })
      .first()
      .waitFor();
    await results.getByRole('button', { name: 'Restore…' }).first().click();
    const rd = page.getByRole('dialog', { name: 'Restore' });
    await rd.getByLabel('Another folder').check();
    await rd.getByRole('textbox', { name: 'Restore into folder' }).fill(target);
    await rd.getByLabel('Keep both (restore under a new name)').check();
    await rd.getByRole('button', { name: 'Start restore' }).click();
    const status = rd.locator('[data-restore-status]:not([data-restore-status="running"])');
    await status.waitFor({ timeout: 60_000 });
    expect({
      status: await status.getAttribute('data-restore-status'),
      text: await status.textContent(),
    }).toMatchObject({
      status: 'completed',
    });
    await shot('10-restore-done');
    const original = fs.readFileSync(path.join(src, 'reports', '2026', 'quarterly-report.txt'));
    const restored = fs.readFileSync(path.join(target, src, 'reports', '2026', 'quarterly-report.txt'));
    expect(restored.equals(original)).toBe(true);
    await rd.getByRole('button', { name: 'Done' }).click();

    // --- verify the repository from the dashboard, and preview retention when editing the job
    const main = page.getByRole('navigation', { name: 'Main' });
    await main.getByRole('button', { name: 'Dashboard' }).click();
    await page.getByRole('button', { name: 'Check', exact: true }).click();
    await page.getByText(/Repository verified: 1 snapshot/).waitFor({ timeout: 60_000 });
    await page.getByText(/Verified .*: no problems/).waitFor();
    await page.getByRole('button', { name: 'Edit My documents' }).click();
    await page.getByRole('button', { name: 'Retention' }).click();
    await page.getByText('With this policy all 1 existing snapshot(s) stay.').waitFor();
    await shot('12a-wizard-retention-preview');
    await page.getByRole('button', { name: 'Cancel' }).click();

    // --- history and settings, and the dark theme
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'History' }).click();
    await page.getByRole('button', { name: 'My documents' }).first().click();
    await page.getByLabel('Run log').waitFor();
    // the run's repository requests, as the run history stored them
    const lastRun = (await wired.services.runs.listRuns({ limit: 1 }))[0];
    const stored = (await wired.services.runs.getRun(lastRun.id))!.requests!;
    expect(stored.requests).toBeGreaterThan(0);
    expect(stored.byOp.save).toBeGreaterThan(0);
    const requestsCard = page.getByRole('region', { name: 'Repository requests' });
    await requestsCard.getByText(`${stored.requests.toLocaleString('en-US')} requests`).waitFor();
    await requestsCard
      .getByText(`save ${stored.byOp.save.toLocaleString('en-US')}`, { exact: false })
      .waitFor();
    await requestsCard.getByText(/^Slowest: /).waitFor();
    // how the source was read (a snapshot, or live and why) and the pre-command's output
    const snapCard = page.getByRole('region', { name: 'Snapshots' });
    await snapCard.getByText('Use a snapshot: When possible').waitFor();
    await snapCard.getByText(/^(read from snapshot|read live — )/).waitFor();
    await page
      .getByLabel('Run log')
      .getByText(/pre: e2e-pre-command/)
      .waitFor();
    await snapCard.screenshot({ path: path.join(shotDir, '11c-history-snapshots.png') });
    await requestsCard.screenshot({ path: path.join(shotDir, '11b-history-requests.png') });
    await shot('11-history');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Settings' }).click();
    // the backup claimed maintenance of its repository for this computer (nobody had it)
    await page
      .getByRole('status', { name: 'Maintenance owner' })
      .getByText(`Maintained by ${os.hostname()}`)
      .waitFor();
    // "Clean up now": the job's retention applied and the space nobody needs freed, the result said
    await page.getByRole('button', { name: 'Clean up now' }).click();
    await page
      .getByRole('status', { name: 'Clean-up result' })
      .getByText(/^Removed \d+ snapshot\(s\), kept \d+/)
      .waitFor();
    // the change tracking in effect, as the tracker reports it (fanotify/inotify; blocks on or off with why)
    const tracking = wired.services.tracking!();
    const trackingCard = page.getByRole('status', { name: 'Change tracking' });
    if (tracking.journal) await trackingCard.getByText(`${tracking.journal} change journal over`).waitFor();
    await trackingCard
      .getByText(tracking.blockLevel ? /^on: VM disks and databases/ : /^off — file-level tracking only \(/)
      .waitFor();
    await page.getByLabel('Theme', { exact: true }).selectOption('dark');
    await expect.poll(() => page.locator('html').getAttribute('data-theme')).toBe('dark');
    await shot('12-settings-dark');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Dashboard' }).click();
    await page.getByRole('heading', { name: 'My documents' }).waitFor();
    await shot('13-dashboard-dark');

    expect(consoleErrors).toEqual([]);
  }, 180_000);
});
