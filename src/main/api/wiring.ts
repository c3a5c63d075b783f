/**
 * Builds the API's services for a data folder: the one place (with src/main/index.ts) where concrete
 * stores and the engine are chosen (DESIGN.md §1 rule 3). Used by the Electron entry and browser mode.
 */
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { ApiServices, Desktop, Engine } from './services.js';
import { FileState } from './state.js';
import { RealEngine } from './engine-adapter.js';
import { TidemarkApi } from './api.js';

/** `$TIDEMARK_HOME`, or `~/.tidemark`: holds the state and the default local repository. */
export function defaultDataDir(): string {
  return path.resolve(process.env.TIDEMARK_HOME || path.join(os.homedir(), '.tidemark'));
}

function appVersion(): string {
  try {
    const require = createRequire(import.meta.url);
    for (const p of ['../../../package.json', '../../package.json']) {
      try {
        return (require(p) as { version: string }).version;
      } catch {}
    }
  } catch {}
  return '0.0.0';
}

export interface WiringOptions {
  dataDir?: string;
  mode: 'electron' | 'browser';
  desktop?: Desktop;
  /** Replace the engine (tests). */
  engine?: Engine;
}

export function createApi(opts: WiringOptions): {
  api: TidemarkApi;
  services: ApiServices;
  state: FileState;
} {
  const dataDir = opts.dataDir ?? defaultDataDir();
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const state = new FileState(path.join(dataDir, 'state'));
  const services: ApiServices = {
    engine: opts.engine ?? new RealEngine(),
    jobs: state,
    runs: state,
    secrets: state,
    settings: state,
    desktop: opts.desktop,
    info: {
      version: appVersion(),
      mode: opts.mode,
      dataDir,
      defaultRepoDir: path.join(dataDir, 'repository'),
      homeDir: os.homedir(),
    },
  };
  return { api: new TidemarkApi(services), services, state };
}
