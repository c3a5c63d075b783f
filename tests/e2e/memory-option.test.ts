// End to end, browser mode with the real engine and catalog (Debian's Chromium via playwright-core): the
// job option "Use less memory" in the wizard. Ticked on the Security step, the review says so and the
// saved job keeps it; the job's settings show it ticked again; a backup from the dashboard runs in the
// engine's low-memory mode (its log says so); unticked, the job is back to normal. Any console error
// fails the test; screenshots go to test-artifacts/screenshots.
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

suite('"Use less memory" in the job wizard', () => {
  beforeAll(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-e2e-memory-issue-31b-'));
    fs.mkdirSync(shotDir, { recursive: true });
    const staticDir = await buildRenderer(path.join(tmp, 'renderer'));
    wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'home') });
    server = await startServer({ api: wired.api, staticDir });
    ({ context, page, consoleErrors } = await openBrowser(browserPath!, tmp));
  });

  afterAll(() => closeAll({ context, wired, server, tmp }));

  it('ticks the option, runs a low-memory backup, and unticks it', async () => {
    const src = path.join(tmp, 'Letters');
    fs.mkdirSync(src);
    for (let i = 0; i < 5; i++)
      fs.writeFileSync(path.join(src, `letter-${i}.bin`), crypto.randomBytes(40_000));
    const job = await wired.api.call('jobs.create', {
      name: 'Letters',
      sources: [src],
      destination: { kind: 'local', path: path.join(tmp, 'repo') },
      schedule: { kind: 'manual' },
      password: 'correct horse battery',
    });
    expect(job.options.memory).toBeUndefined();

    await page.goto(server.tokenUrl);
    await page.getByRole('heading', { name: 'Letters' }).waitFor();
    await page.getByRole('button', { name: 'Edit Letters' }).click();
    await page.getByRole('button', { name: 'Security' }).click();
    const box = page.getByLabel('Use less memory');
    await expect.poll(() => box.isChecked()).toBe(false);
    await box.check();
    await page.screenshot({ path: path.join(shotDir, '40-wizard-use-less-memory.png') });
    await page.getByRole('button', { name: 'Review' }).click();
    await expect
      .poll(() => page.getByTestId('review-memory').textContent())
      .toBe('Less memory (slower backups and restores)');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    expect((await wired.api.call('jobs.get', { id: job.id })).options.memory).toBe('low');

    // the job's settings show it
    await page.getByRole('button', { name: 'Edit Letters' }).click();
    await page.getByRole('button', { name: 'Security' }).click();
    await expect.poll(() => page.getByLabel('Use less memory').isChecked()).toBe(true);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();

    // a backup from the dashboard runs in the low-memory mode
    await page.getByRole('button', { name: 'Back up now' }).click();
    await expect
      .poll(async () => (await wired.api.call('runs.list', { limit: 1 }))[0]?.status, { timeout: 60_000 })
      .toBe('completed');
    const [run] = await wired.api.call('runs.list', { limit: 1 });
    expect((await wired.api.call('runs.get', { id: run.id })).log.join('\n')).toContain('using less memory');

    // unticked: normal again
    await page.getByRole('navigation', { name: 'Main' }).getByRole('button', { name: 'Dashboard' }).click();
    await page.getByRole('button', { name: 'Edit Letters' }).click();
    await page.getByRole('button', { name: 'Security' }).click();
    await expect.poll(() => page.getByLabel('Use less memory').isChecked()).toBe(true);
    await page.getByLabel('Use less memory').uncheck();
    await page.getByRole('button', { name: 'Review' }).click();
    await expect.poll(() => page.getByTestId('review-memory').textContent()).toBe('Normal');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByRole('heading', { name: 'Dashboard' }).waitFor();
    expect((await wired.api.call('jobs.get', { id: job.id })).options.memory).toBeUndefined();
    expect(consoleErrors).toEqual([]);
  });
});
