/**
 * Worker threads started before their pool, waiting for its settings (a `deferred` pipelineWorker; see
 * prestartWorkers in ./threads.ts). Booting one (a Node environment, the worker's modules, its addons)
 * takes ~0.1 s of a core, and a pool is made only once the repository is open. The bundled CLI's
 * launcher (scripts/build-cli.mjs) starts them before it loads the CLI at all, so they boot while the
 * main thread loads its modules; the engine's prestartWorkers starts them where that did not happen.
 * Launcher and CLI are separate bundles with their own copy of this module: the list of started
 * threads is one list on globalThis. Nothing here may import more than worker_threads and os (the
 * launcher loads this first).
 */
import { Worker } from 'node:worker_threads';
import os from 'node:os';

/**
 * A worker's JS heap is tiny, but the buffers it allocates (chunks, compressed and sealed copies) are
 * freed only when a collection finds them dead; with V8's default young generation that happens
 * rarely and dead buffers pile up (tens of MB per worker). A small young generation collects them
 * soon after they die: a full backup's peak RSS is tens of MB lower, at no measured cost.
 */
const WORKER_YOUNG_GENERATION_MB = 2;

export const workerOptions = (workerData: Record<string, unknown>) => ({
  workerData,
  resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
});

export function defaultWorkerCount(): number {
  return Math.max(1, Math.min(8, os.availableParallelism?.() ?? os.cpus().length));
}

const LIST = Symbol.for('tidemark.prestartedWorkers');

/** The threads started ahead and not taken by a pool yet. */
export function prestartedList(): Worker[] {
  const g = globalThis as { [LIST]?: Worker[] };
  return (g[LIST] ??= []);
}

/** Prestarted threads no pool took within this time are stopped. */
const PRESTART_UNUSED_MS = 30_000;
let unusedTimer: NodeJS.Timeout | undefined;

/**
 * Starts threads of `file` (with `data` and `deferred`) until n wait. They never keep the process alive,
 * and stop unused after PRESTART_UNUSED_MS. One that fails to boot is dropped (a pool then starts a
 * thread of its own, whose failure it reports).
 */
export function startDeferred(file: string, data: Record<string, unknown>, n: number): void {
  const list = prestartedList();
  while (list.length < n) {
    const worker = new Worker(file, workerOptions({ ...data, deferred: true }));
    worker.unref();
    const drop = () => {
      const i = list.indexOf(worker);
      if (i >= 0) list.splice(i, 1);
    };
    worker.on('error', drop);
    worker.on('exit', drop);
    list.push(worker);
  }
  clearTimeout(unusedTimer);
  unusedTimer = setTimeout(() => {
    for (const w of list.splice(0)) void w.terminate();
  }, PRESTART_UNUSED_MS).unref();
}
