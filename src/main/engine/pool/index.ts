/**
 * pool/ — the engine's worker threads and the buffers that move between them and the main thread.
 *
 * - pool.ts: WorkerPool (tasks spread by load, mid-task questions answered by the task's handler);
 *   shared.ts: pools reused between operations with the same settings; threads.ts and early.ts: where a
 *   thread's script is, and threads started ahead of their pool.
 * - wire.ts: the wire format, every message between the threads in one module.
 * - Buffer ownership: spares.ts (main thread: buffers kept for the workers between tasks), ledger.ts
 *   (a backup's sealed buffers, handed back to the workers once nothing refers to them), scratch.ts
 *   (worker side: the buffers a thread keeps to seal and read into).
 * - thread.ts: the worker side of a thread (its settings, questions to the main thread, the task loop);
 *   the tasks themselves are their features' (backup/worker, restore/worker, scan/listDir.ts), put
 *   together by workers/pipelineWorker.ts.
 * Guarantees: a buffer moved to another thread is never touched again by its sender; what a pool has
 * no room for is freed at once. Not here: what any task does.
 */
export { WorkerPool, type EventHandler } from './pool.js';
export {
  acquirePool,
  acquireDecodePool,
  releasePool,
  closeIdlePools,
  spareSealedCount,
  spareSegmentCount,
  sharedPools,
} from './shared.js';
export { prestartWorkers, prestartedCount } from './threads.js';
export { defaultWorkerCount } from './early.js';
export { MEMORY_MODES, enterMemoryMode, memoryProfile, workersFor, type MemoryProfile } from './memory.js';
export { BufferLedger } from './ledger.js';
export { SpareBuffers, type SpareLimits } from './spares.js';
