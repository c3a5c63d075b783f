// End to end in Chromium (browser mode, the real engine and catalog): in the job wizard's destination step
// "Test speed" runs the speed test on the destination folder (a small test file, a second per pattern); the
// live chart receives samples while it runs, the results table lists every pattern with its MiB/s and the
// verdict estimates the new job's full backup from its folder's size; the test is kept in the catalog and
// shown in the destination's history — in the wizard, and on the job's settings once the job is saved.
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
const skip = browserPath ? null : 'no Chromium found (/usr/bin/chromium; install the "chromium" package)';
if (skip) console.warn(`speed test e2e skipped: ${skip}`);

let tmp: string;
let wired: Wired;
let server: RunningServer;
let context: BrowserContext;
let page: Page;
let consoleErrors: string[] = [];
const shotDir = path.join(ARTIFACTS, 'screenshots');

describe.skipIf(!!skip)(
  `the speed test in the wizard, end to end${skip ? ` (skipped: ${skip})` : ''}`,
  () => {
    beforeAll(async () => {
      tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-e2e-speed-'));
      fs.mkdirSync(shotDir, { recursive: true });
      fs.mkdirSync(path.join(tmp, 'Documents'));
      for (let i = 0; i < 8; i++)
        fs.writeFileSync(path.join(tmp, 'Documents', `scan-${i}.pdf`), crypto.randomBytes(256 * 1024));
      fs.mkdirSync(path.join(tmp, 'NAS'));
      const staticDir = await buildRenderer(path.join(tmp, 'renderer'));
      wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home') });
      server = await startServer({ api: wired.api, staticDir });
      ({ context, page, consoleErrors } = await openBrowser(browserPath!, tmp, {
        width: 1360,
        height: 1400,
      }));
    });

    afterAll(() => closeAll({ context, wired, server, tmp }));

    it('tests the destination with a live chart, shows the results and keeps them in the history', async () => {
      const src = path.join(tmp, 'Documents');
      const nas = path.join(tmp, 'NAS');
      await page.goto(server.tokenUrl);
      await page.getByRole('button', { name: 'New backup job' }).click();
      await page.locator('#source-add').fill(src);
      await page.getByRole('button', { name: 'Add folder' }).click();
      await page.getByLabel('Job name').fill('Scans');
      await page.getByRole('button', { name: 'Next' }).click();
      await page.getByLabel('Destination folder', { exact: true }).fill(nas);

      const panel = page.getByRole('region', { name: 'Speed test' });
      await panel.getByText('None yet.').waitFor();
      await panel.getByText('Options').click();
      await panel.getByLabel('Test file').selectOption('64');
      await panel.getByLabel('Seconds per pattern').fill('1');
      await panel.getByText('Local 4 MiB').click();
      await panel.getByRole('button', { name: 'Test speed' }).click();

      // live: the chart fills while the test runs
      const live = panel.locator('.speed-live');
      const chart = panel.getByRole('figure', { name: /Speed test live chart/ });
      await expect
        .poll(async () => ({
          status: await live.getAttribute('data-status'),
          samples: Number((await chart.getAttribute('data-samples').catch(() => null)) ?? 0) > 0,
        }))
        .toEqual({ status: 'running', samples: true });
      await panel.getByRole('progressbar', { name: 'Speed test progress' }).waitFor();
      // while it runs, the test file sits in the destination
      expect(fs.readdirSync(nas).some((n) => n.startsWith('.tidemark-speedtest-'))).toBe(true);
      await page.screenshot({ path: path.join(shotDir, '30-speed-test-live.png') });

      await panel.getByText('Speed test done').waitFor({ timeout: 120_000 });
      const rows = panel.getByRole('table', { name: 'Speed test results' }).locator('tbody tr');
      await expect.poll(() => rows.count()).toBe(6);
      const patterns = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-pattern')));
      expect(patterns).toEqual([
        'active-full',
        'synthetic-full',
        'reverse-incremental',
        'restore',
        'pack',
        'small-file-restore',
      ]);
      for (const mibps of await rows.locator('td:nth-child(4)').allTextContents())
        expect(Number(mibps)).toBeGreaterThan(0);
      // the verdict from the new job's folder (2 MiB): a full backup and a full restore
      const verdict = panel.getByLabel('Speed test verdict');
      await expect
        .poll(() => verdict.locator('[data-estimate="backup"]').textContent())
        .toMatch(/Next full backup \(2\.0 MB\): (about [\dhms ]+|under a second) at [\d.]+ MiB\/s, packs/);
      await expect
        .poll(() => verdict.locator('[data-estimate="restore"]').textContent())
        .toMatch(/Full restore from here: (about [\dhms ]+|under a second) at [\d.]+ MiB\/s, restore/);
      // the test file is gone; the history shows the test
      expect(fs.readdirSync(nas)).toEqual([]);
      const history = panel.getByRole('table', { name: 'Earlier speed tests' });
      await expect.poll(() => history.locator('tbody tr').count()).toBe(1);
      expect(await history.locator('tbody tr').first().textContent()).toMatch(/Completed/);
      await history.scrollIntoViewIfNeeded();
      await page.screenshot({ path: path.join(shotDir, '31-speed-test-results.png') });

      // kept in the catalog, with the settings it ran with
      const [kept] = await wired.services.speedTests!.listSpeedTests({ limit: 10 });
      expect(kept).toMatchObject({
        location: nas,
        status: 'completed',
        settings: { fileSizeMiB: 64, blockSizeKiB: 4096, durationSec: 1 },
      });
      expect(kept.results.map((r) => r.pattern)).toEqual(patterns);

      // save the job; its settings show the same history
      await page.getByRole('button', { name: 'Next' }).click();
      await page.getByText('Manually', { exact: true }).click();
      await page.getByRole('button', { name: 'Next' }).click();
      await page.getByRole('button', { name: 'Next' }).click();
      await page.getByLabel('Password', { exact: true }).fill('correct horse battery');
      await page.getByLabel('Confirm password').fill('correct horse battery');
      await page.getByRole('button', { name: 'Next' }).click();
      await page.getByRole('button', { name: 'Create job' }).click();
      await page.getByRole('heading', { name: 'Scans' }).waitFor();
      await page.getByRole('button', { name: 'Edit Scans' }).click();
      await page.getByRole('button', { name: 'Destination' }).click();
      const again = page.getByRole('region', { name: 'Speed test' });
      await expect
        .poll(() => again.getByRole('table', { name: 'Earlier speed tests' }).locator('tbody tr').count())
        .toBe(1);
      await again.getByRole('button', { name: 'Test speed' }).waitFor();
      expect(consoleErrors).toEqual([]);
    });
  },
);
