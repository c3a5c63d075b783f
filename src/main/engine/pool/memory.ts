/**
 * How much memory a backup or restore may use (BackupOptions.memory, RestoreOptions.memory): the worker
 * count and the budgets of the buffers in flight for each mode. 'low' is for old PCs: one worker and
 * fewer, smaller buffers, at the cost of speed (docs/performance.md has both modes' figures and where
 * the memory goes). Nothing here may import more than ./early.ts and types (the CLI's launcher loads it).
 */
import v8 from 'node:v8';
import type { MemoryMode } from '../operations.js';
import { defaultWorkerCount } from './early.js';

export const MEMORY_MODES: readonly MemoryMode[] = ['normal', 'low'];

const MiB = 1024 * 1024;

export interface MemoryProfile {
  workers: number;
  /** Backup: file tasks in flight per worker (each may hold a read block of 6 MiB: backup/worker/settings.ts). */
  tasksPerWorker: number;
  /** Backup: data packs held in memory at once (repo/repository.ts packBuffers; unset: the backend's
   *  writes at once and one filling). */
  packBuffers?: number;
  /** Backup: bytes a folder repository's streamed pack writes may hold at once (their stages; unset: the
   *  store's default, backend/local/stream.ts). */
  packWriteBytes?: number;
  /** Backup: bytes of new chunks waiting to be sealed before the readers pause (backup/sealer.ts). */
  sealBudget: number;
  /** Backup: small files read or waiting in batches at most (backup/fileSaver.ts; each holds its node,
   *  path and result on the main thread). */
  smallFilesWaiting: number;
  /** Sealed-segment buffers a worker keeps to seal into, and the pool keeps for its workers (bytes). */
  scratchBytes: number;
  /** Restore: loops reading packs at once (restore/packQueue.ts). */
  restoreLoops: number;
  /** Restore: pieces planned and not written at most (restore/plan.ts; a small file's ~0.5 KB of heap). */
  planLimit: number;
}

const NORMAL: Omit<MemoryProfile, 'workers'> = {
  tasksPerWorker: 2,
  sealBudget: 8 * MiB,
  smallFilesWaiting: 4096,
  scratchBytes: 8 * MiB,
  restoreLoops: 4,
  planLimit: 16384,
};

const LOW: Omit<MemoryProfile, 'workers'> = {
  tasksPerWorker: 1,
  packBuffers: 1,
  packWriteBytes: 2 * MiB,
  sealBudget: 4 * MiB,
  smallFilesWaiting: 1024,
  scratchBytes: 2 * MiB,
  restoreLoops: 1,
  planLimit: 4096,
};

/** The worker threads a backup or restore starts: the caller's count, else one per core (up to 8), one
 *  in 'low' mode. */
export function workersFor(mode: MemoryMode | undefined, workers?: number): number {
  if (workers !== undefined && workers > 0) return workers;
  return mode === 'low' ? 1 : defaultWorkerCount();
}

/** The budgets of a mode ('normal' when absent); a worker count of the caller's wins over the mode's. */
export function memoryProfile(mode: MemoryMode | undefined, workers?: number): MemoryProfile {
  return { ...(mode === 'low' ? LOW : NORMAL), workers: workersFor(mode, workers) };
}

/** What a backup or restore in `mode` sets for its process as it starts: in 'low', V8 favours size over
 *  speed from then on (its heap grows less between collections: ~4 MiB off the peak; in the app's
 *  process it stays set once a "Use less memory" job ran). */
export function enterMemoryMode(mode: MemoryMode | undefined): void {
  if (mode === 'low') v8.setFlagsFromString('--optimize-for-size');
}
