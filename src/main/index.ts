/**
 * Electron main entry: wires the API over the engine and stores (the one composition root with the
 * headless server, src/main/api/serve.ts) and hands it to the desktop shell.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createApi } from './api/wiring.js';
import { desktop, runDesktopApp } from './app/index.js';

const outDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { api, close } = createApi({ mode: 'electron', desktop });
const started = await runDesktopApp(api, outDir, async () => {
  await api.close();
  close();
});
if (started) api.startScheduler();
