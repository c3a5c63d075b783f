/**
 * Builds the API's services for a data folder: the one place (with src/main/index.ts) where concrete
 * stores and the engine are chosen (docs/architecture.md §1 rule 3). Used by the Electron entry and browser mode.
 */
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import type { ApiServices, Desktop, Engine } from './services.js';
import { FileState } from './state.js';
import { RealEngine } from './engine-adapter.js';
import { TrackerService, journalBackup } from '../tracking/service.js';
import { TidemarkApi } from './api.js';
import { Catalog } from '../engine/catalog/catalog.js';
import { KeyFileSecretStore, type SecretStore } from '../engine/catalog/secrets.js';
import { JobRunner } from '../engine/schedule/runner.js';
import { Scheduler } from '../engine/schedule/scheduler.js';
import { createJobEngine } from '../engine/schedule/engine.js';
import { createRunEvents } from '../engine/schedule/events.js';
import { CatalogJobs, CatalogRunner } from './catalog-adapter.js';
import { snapshotRecordDir } from '../engine/snapshot/index.js';
import { CatalogRestoreTests } from './catalog-restore-tests.js';
import { CatalogSpeedTests } from './speedtests.js';

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
  /** Replace the engine (tests; with it, jobs and runs are kept by the API's own stores). */
  engine?: Engine;
  /** Where repository passwords go (Electron: the OS keychain); default: a 0600 key file. */
  secrets?: SecretStore;
}

export interface Wired {
  api: TidemarkApi;
  services: ApiServices;
  /** Flushes and closes the stores (after api.close()). */
  close(): void;
}

/**
 * The app's wiring: jobs, runs, samples and the file index in the SQLite catalog shared with the CLI,
 * runs and schedules through the catalog's Scheduler/JobRunner over the real engine, settings in a
 * small state file. With `engine` given (tests), everything but settings stays in the API's own stores.
 */
export function createApi(opts: WiringOptions): Wired {
  const dataDir = opts.dataDir ?? defaultDataDir();
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const state = new FileState(path.join(dataDir, 'state'));
  const info = {
    version: appVersion(),
    mode: opts.mode,
    dataDir,
    defaultRepoDir: path.join(dataDir, 'repository'),
    homeDir: os.homedir(),
  };
  if (opts.engine) {
    const services: ApiServices = {
      engine: opts.engine,
      jobs: state,
      runs: state,
      settings: state,
      desktop: opts.desktop,
      info,
    };
    return { api: new TidemarkApi(services), services, close: () => state.flush() };
  }
  const catalog = new Catalog(dataDir);
  catalog.failInterruptedRuns();
  const secrets = opts.secrets ?? new KeyFileSecretStore(dataDir);
  const jobs = new CatalogJobs(catalog, secrets);
  const events = createRunEvents();
  // The change tracker runs in the app for exactly the jobs' sources (docs/architecture.md §3): every backup is
  // planned from its journal (and block tracking for large files), or scans fully and says why.
  const tracker = new TrackerService({ dataDir, log: (line) => console.log(`tidemark: ${line}`) });
  const sources = () => catalog.listJobs().flatMap((j) => j.sources);
  void tracker.setRoots(sources()).catch(() => {});
  // a job added or edited is tracked within half a minute, not only from its first backup
  const retrack = setInterval(() => void tracker.setRoots(sources()).catch(() => {}), 30_000);
  retrack.unref();
  const engine = createJobEngine({
    secrets,
    backup: async (repo, o) => {
      await tracker.setRoots(sources());
      if (!tracker.blockLevel() && tracker.blockReason)
        o.log?.(`block-level tracking off (${tracker.blockReason}): large files that changed are read whole`);
      return journalBackup(
        await tracker.journal(),
        repo,
        o,
        o.job ?? 'default',
        undefined,
        tracker.blockLevel(),
      );
    },
  });
  const runner = new JobRunner({ catalog, engine, events, snapshotDir: snapshotRecordDir(dataDir) });
  const scheduler = new Scheduler({ catalog, runner, events });
  const services: ApiServices = {
    engine: new RealEngine(),
    jobs,
    runs: jobs,
    fileIndex: jobs,
    settings: state,
    desktop: opts.desktop,
    runner: (emit) => new CatalogRunner(catalog, jobs, scheduler, emit),
    restoreTests: new CatalogRestoreTests(catalog, runner),
    info,
    tracking: () => tracker.status(),
    speedTests: new CatalogSpeedTests(catalog.db),
  };
  return {
    api: new TidemarkApi(services),
    services,
    close: () => {
      state.flush();
      clearInterval(retrack);
      catalog.close();
      void tracker.stop();
    },
  };
}
