/**
 * Wiring in one call: the catalog, the run events, the JobRunner over the real engine, and the
 * Scheduler, sharing one event emitter (so the app forwards every run event from one place).
 */
import { Catalog } from '../catalog/catalog.js';
import { KeyFileSecretStore, type SecretStore } from '../catalog/secrets.js';
import type { BackendOptions } from '../backend/open.js';
import type { Repository } from '../repo/repository.js';
import { createJobEngine } from './engine.js';
import { createRunEvents, type RunEventEmitter } from './events.js';
import { JobRunner, type JobEngine } from './runner.js';
import { Scheduler, type Clock } from './scheduler.js';
import { snapshotRecordDir } from '../snapshot/index.js';

export interface JobSystemOptions {
  /** The app's data folder (catalog.sqlite, and secrets.json when no SecretStore is given). */
  dataDir: string;
  /** Keychain-backed store in the app; default: the 0600 key file in dataDir. */
  secrets?: SecretStore;
  /** Runs in parallel across repositories (default 1). */
  concurrency?: number;
  clock?: Clock;
  /** Extra backend options for every repository (e.g. bandwidth limits). */
  backendOptions?: BackendOptions;
  /** Replace the real engine (tests). */
  engine?: JobEngine<Repository>;
}

export interface JobSystem {
  catalog: Catalog;
  secrets: SecretStore;
  events: RunEventEmitter;
  runner: JobRunner<Repository>;
  scheduler: Scheduler;
  /** Stops the scheduler (cancelling runs) and closes the catalog. */
  close(): Promise<void>;
}

export function createJobSystem(opts: JobSystemOptions): JobSystem {
  const catalog = new Catalog(opts.dataDir);
  const secrets = opts.secrets ?? new KeyFileSecretStore(opts.dataDir);
  const events = createRunEvents();
  const engine = opts.engine ?? createJobEngine({ secrets, backendOptions: opts.backendOptions });
  const runner = new JobRunner({
    catalog,
    engine,
    events,
    clock: opts.clock,
    snapshotDir: snapshotRecordDir(opts.dataDir),
  });
  const scheduler = new Scheduler({
    catalog,
    runner,
    events,
    clock: opts.clock,
    concurrency: opts.concurrency,
  });
  return {
    catalog,
    secrets,
    events,
    runner,
    scheduler,
    async close() {
      await scheduler.stop({ cancelRuns: true });
      catalog.close();
    },
  };
}
