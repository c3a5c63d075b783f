// End to end, browser mode with the real engine and catalog (Debian's Chromium via playwright-core):
// the restore test option in the job wizard, the dashboard's restore test verdict and "Test restore",
// a failed test after damage (its toast, the card's failure line and the "Repair…" button), the Repair
// dialog (progress, then what was saved and what could not), the clean check after it, and the restore
// tests in History. Screenshots go to test-artifacts/screenshots; any console error fails the test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { buildRenderer, chromiumPath, closeAll, openBrowser, ARTIFACTS } from './helpers.js';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import { startServer, type RunningServer } from '../../src/main/api/server.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { contentIds } from '../../src/main/engine/repo/tree.js';

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

suite('restore tests and repair in the app', () => {
  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-e2e-protect-'));
    fs.mkdirSync(shotDir, { recursive: true });
    const staticDir = await buildRenderer(path.join(tmp, 'renderer'));
    wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home') });
    server = await startServer({ api: wired.api, staticDir });
    ({ context, page, consoleErrors } = await openBrowser(browserPath!, tmp, { width: 1360, height: 900 }));
  });

  afterAll(() => closeAll({ context, wired, server, tmp }));

  it('tests restores, shows a failure, repairs the job and lists the tests in History', async () => {
    const src = path.join(tmp, 'Pictures');
    fs.mkdirSync(src);
    for (let i = 0; i < 12; i++) fs.writeFileSync(path.join(src, `IMG_${i}.jpg`), crypto.randomBytes(50_000));
    fs.writeFileSync(path.join(src, 'album.txt'), 'holiday album\n'.repeat(200));
    const repoDir = path.join(tmp, 'repo');
    const job = await wired.api.call('jobs.create', {
      name: 'Pictures',
      sources: [src],
      destination: { kind: 'local', path: repoDir },
      schedule: { kind: 'manual' },
      password: 'correct horse battery',
      options: { restoreTest: { everyDays: 7, files: 20 } },
    });

    await page.goto(server.tokenUrl);
    await page.getByRole('heading', { name: 'Pictures' }).waitFor();

    // the wizard shows the option and changes it
    await page.getByRole('button', { name: 'Edit Pictures' }).click();
    await page.getByRole('button', { name: 'Security' }).click();
    await expect.poll(() => page.getByLabel('Test restores').isChecked()).toBe(true);
    await page.getByLabel('Test every (days, 0 = after each backup)').fill('0');
    await page.getByLabel('Files per test').fill('5');
    await page.screenshot({ path: path.join(shotDir, '30-wizard-restore-tests.png') });
    await page.getByRole('button', { name: 'Review' }).click();
    await page.getByText('5 random files after every backup').waitFor();
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    expect((await wired.api.call('jobs.get', { id: job.id })).options.restoreTest).toEqual({
      everyDays: 0,
      files: 5,
    });

    // a backup: its restore test's verdict appears on the card
    await page.getByRole('button', { name: 'Back up now' }).click();
    await expect
      .poll(async () => (await wired.api.call('runs.list', { limit: 1 }))[0]?.status, { timeout: 60_000 })
      .toBe('completed');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Dashboard' }).click();
    await page.getByText(/Restore test .*: 5 file\(s\), .* restored and matched/).waitFor();
    await page.screenshot({ path: path.join(shotDir, '31-dashboard-restore-test.png') });

    // damage the data of album.txt, gone from the disk too: "Test restore" fails, "Repair…" appears
    const [snap] = await wired.api.call('snapshots.list', { jobId: job.id });
    const repo = await Repository.open(new LocalBackend(repoDir), 'correct horse battery');
    await repo.loadIndex();
    const { node } = await lookup(repo, await repo.loadSnapshot(snap.id), path.join(src, 'album.txt'));
    const loc = repo.index.get(contentIds(node!)[0])!;
    const pack = repo.backend.localFile!('data', loc.pack)!;
    await repo.close();
    fs.chmodSync(pack, 0o644);
    const bytes = fs.readFileSync(pack);
    bytes[loc.offset + 5] ^= 0xff;
    fs.writeFileSync(pack, bytes);
    fs.rmSync(path.join(src, 'album.txt'));
    // every file, so the damaged one is drawn
    await wired.api.call('jobs.update', {
      id: job.id,
      changes: { options: { restoreTest: { everyDays: 0, files: 100 } } },
    });
    await page.getByRole('button', { name: 'Test restore' }).click();
    await page.getByText(/Pictures: restore test FAILED/).waitFor({ timeout: 60_000 });
    await page.getByText(/Restore test .* FAILED: \d+ problem\(s\)/).waitFor();
    await page.screenshot({ path: path.join(shotDir, '32-dashboard-restore-test-failed.png') });

    await page.getByRole('button', { name: 'Repair…' }).click();
    const dialog = page.getByRole('dialog', { name: 'Repair Pictures' });
    await dialog.getByRole('button', { name: 'Repair now' }).click();
    await dialog.getByText('Could not be saved (1):').waitFor({ timeout: 60_000 });
    await dialog
      .getByRole('list', { name: 'Could not be saved' })
      .getByText(`${snap.id.slice(0, 8)}:${path.join(src, 'album.txt')}`)
      .waitFor();
    await dialog.getByText('The repository checks clean now.').waitFor();
    await page.screenshot({ path: path.join(shotDir, '33-repair-done.png') });
    await dialog.getByRole('button', { name: 'Close' }).first().click();
    await page.getByText(/Verified .*: no problems/).waitFor();
    const check = await wired.api.call('jobs.check', { id: job.id, readData: true });
    expect(check.problems).toEqual([]);

    // History lists the two tests
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'History' }).click();
    const tests = page.getByRole('region', { name: 'Restore tests' });
    await tests.getByText('Failed', { exact: true }).waitFor();
    await tests.getByText('Passed', { exact: true }).waitFor();
    await tests.getByText(path.join(src, 'album.txt')).waitFor(); // the failure, by name
    await page.screenshot({ path: path.join(shotDir, '34-history-restore-tests.png') });

    expect(consoleErrors).toEqual([]);
  }, 180_000);
});
