/**
 * Where a worker thread's script is, and threads started ahead of their pool. The script is
 * workers/pipelineWorker.ts (the thread's entry: it hands each task to its feature's worker side): in
 * development and tests the TypeScript source loaded through tsx (workers/tsxBoot.mjs), in a build the
 * bundled pipelineWorker.js at the bundle's top.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';
import { defaultWorkerCount, prestartedList, startDeferred } from './early.js';
import { derivingAhead } from '../crypto/kdf.js';
import type { MemoryMode } from '../operations.js';

export function workerEntry(): { file: string; data: Record<string, unknown> } {
  // In a packaged app the worker script is unpacked next to the asar archive (a worker cannot load
  // its script from inside it).
  const here = path
    .dirname(fileURLToPath(import.meta.url))
    .replace(/app\.asar(?=[\\/]|$)/, 'app.asar.unpacked');
  // a bundle (out/cli, out/main) has the worker at its top, and this module there or in chunks/ below it
  if (!import.meta.url.endsWith('.ts'))
    for (const dir of [here, path.dirname(here)]) {
      const built = path.join(dir, 'pipelineWorker.js');
      if (fs.existsSync(built)) return { file: built, data: {} };
    }
  // Development and tests: load the TypeScript source through tsx inside the worker.
  const boot = path.join(here, '../workers/tsxBoot.mjs');
  return {
    file: boot,
    data: { __entry: pathToFileURL(path.join(here, '../workers/pipelineWorker.ts')).href },
  };
}

/**
 * Starts up to n worker threads ahead of the pool an operation is about to make (the next WorkerPool
 * takes them and sends them its settings), unless enough were started already (the bundled CLI's
 * launcher starts a backup's or restore's before it loads anything else: ./early.ts). They never keep
 * the process alive, and stop unused after a while.
 */
export function prestartWorkers(n = defaultWorkerCount(), memory?: MemoryMode): void {
  const entry = workerEntry();
  if (memory !== 'low') return startDeferred(entry.file, entry.data, n);
  // 'low': not while the password's key is derived (scrypt holds 32 MiB): after a derivation started
  // ahead (cli/early.ts), else not at all (the pool starts its threads once the repository is open)
  void derivingAhead()?.then(() => startDeferred(entry.file, entry.data, n));
}

/** Worker threads started ahead and not taken by a pool yet (for tests). */
export function prestartedCount(): number {
  return prestartedList().length;
}
