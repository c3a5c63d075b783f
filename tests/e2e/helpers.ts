// Shared pieces of the end-to-end tests: building the renderer, finding a browser, artifact folder.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

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
