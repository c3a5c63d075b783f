// Shared pieces of the end-to-end tests: building the renderer, finding a browser, artifact folder.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import type { Wired } from '../../src/main/api/wiring.js';
import type { RunningServer } from '../../src/main/api/server.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const ARTIFACTS = path.join(ROOT, 'test-artifacts');

/** Flags for a quiet, reproducible headless Chromium (the profile is a fresh --user-data-dir per test). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

export function chromiumPath(): string | null {
  for (const p of [
    process.env.CHROMIUM_PATH,
    '/usr/bin/chromium',
    '/usr/bin/chromium-browser',
    '/usr/bin/google-chrome',
  ]) {
    if (p && fs.existsSync(p)) return p;
  }
  return null;
}

/** Builds the renderer (production mode) into `outDir` and returns it. */
export async function buildRenderer(outDir: string): Promise<string> {
  await build({
    configFile: path.join(ROOT, 'src/renderer/vite.config.ts'),
    logLevel: 'error',
    build: { outDir, emptyOutDir: true },
  });
  return outDir;
}

/** Headless Chromium (at `executablePath`) on a fresh profile under `dir`; the page's console errors and
 *  uncaught exceptions are collected in `consoleErrors` (tests expect it empty). */
export async function openBrowser(
  executablePath: string,
  dir: string,
  viewport = { width: 1360, height: 900 },
): Promise<{ context: BrowserContext; page: Page; consoleErrors: string[] }> {
  const context = await chromium.launchPersistentContext(path.join(dir, 'chromium-profile'), {
    executablePath,
    args: CHROMIUM_ARGS,
    headless: true,
    viewport,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const consoleErrors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
  return { context, page, consoleErrors };
}

/** Tears down what an e2e suite started (any part may be missing when its setup failed). */
export async function closeAll(parts: {
  context?: BrowserContext;
  wired?: Wired;
  server?: RunningServer;
  tmp?: string;
}): Promise<void> {
  await parts.context?.close();
  await parts.wired?.api.close();
  parts.wired?.close();
  await parts.server?.close();
  if (parts.tmp) fs.rmSync(parts.tmp, { recursive: true, force: true });
}
