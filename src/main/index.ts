/**
 * Electron main entry: wires the API over the engine and stores (the one composition root with the
 * headless server, src/main/api/serve.ts) and hands it to the desktop shell.
 */
import './engineHost.js'; // first: libuv's pool size and V8 tiering for the engine
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { app } from 'electron';
import { createApi, defaultDataDir } from './api/wiring.js';
import { SafeStorageSecretStore } from './app/secrets.js';
import { desktop, runDesktopApp } from './app/index.js';

const outDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

// one instance: a second launch focuses the first window (runDesktopApp listens for it)
if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  await app.whenReady(); // safeStorage needs a ready app
  const dataDir = defaultDataDir();
  const { api, close } = createApi({
    mode: 'electron',
    desktop,
    dataDir,
    secrets: SafeStorageSecretStore.create(dataDir),
  });
  await runDesktopApp(api, outDir, async () => {
    await api.close();
    close();
  });
  api.startScheduler();
}
