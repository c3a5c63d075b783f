/**
 * Pools are reused between operations with the same keys and settings (a scheduler running job after
 * job, tests running many backups) instead of starting threads each time; an idle pool closes after a
 * few seconds and never keeps the process alive.
 */
import { defaultWorkerCount } from './early.js';
import { WorkerPool } from './pool.js';
import type { SpareLimits } from './spares.js';
import type { WorkerInit } from './wire.js';

const shared = new Map<string, { pool: WorkerPool; users: number; timer?: NodeJS.Timeout }>();
const poolKeys = new WeakMap<WorkerPool, string>();

/** A pool that only opens blobs (restore, check --read-data): the repository's keys and chunker, no
 *  compression, no read limit. */
export function acquireDecodePool(
  key: { encryption: Uint8Array; id: Uint8Array },
  config: { chunker: WorkerInit['chunker']; chunkerSeed: string },
  size = defaultWorkerCount(),
): WorkerPool {
  return acquirePool(
    {
      encryptionKey: key.encryption,
      idKey: key.id,
      chunker: config.chunker,
      chunkerSeed: config.chunkerSeed,
      compressionLevel: 0,
      readLimit: 0,
      lowPriority: false,
    },
    size,
  );
}

export function acquirePool(init: WorkerInit, size = defaultWorkerCount(), limits?: SpareLimits): WorkerPool {
  const key = JSON.stringify({
    limits,
    ...init,
    encryptionKey: Buffer.from(init.encryptionKey).toString('hex'),
    idKey: Buffer.from(init.idKey).toString('hex'),
    size,
  });
  const entry = shared.get(key);
  if (entry && entry.pool.healthy) {
    clearTimeout(entry.timer);
    entry.users++;
    entry.pool.setIdle(false);
    return entry.pool;
  }
  const pool = new WorkerPool(init, size, limits);
  shared.set(key, { pool, users: 1 });
  poolKeys.set(pool, key);
  return pool;
}

/** Sealed-segment buffers the shared pools hold for their workers to seal into (for tests). */
export function spareSealedCount(): number {
  let n = 0;
  for (const { pool } of shared.values()) n += pool.spares.sealedCount;
  return n;
}

/** The settings of the shared pools now (for tests): thread count, worker scratch and sealed buffers kept. */
export function sharedPools(): { size: number; scratchBytes?: number; sealedBytes?: number }[] {
  return [...shared.values()].map(({ pool }) => ({
    size: pool.size,
    scratchBytes: pool.init.scratchBytes,
    sealedBytes: pool.spares.maxSealedBytes,
  }));
}

/** Emptied segment buffers the shared pools hold for reading workers (for tests). */
export function spareSegmentCount(): number {
  let n = 0;
  for (const { pool } of shared.values()) n += pool.spares.segmentCount;
  return n;
}

/** Gives a pool back; `discard` (after a cancel or failure, tasks may be left waiting) closes it. */
export async function releasePool(pool: WorkerPool, discard = false): Promise<void> {
  const key = poolKeys.get(pool);
  const entry = key ? shared.get(key) : undefined;
  if (!entry || entry.pool !== pool) return pool.close();
  entry.users--;
  if (discard || !pool.healthy || pool.inflight > 0) {
    if (entry.users <= 0) shared.delete(key!);
    if (entry.users <= 0) await pool.close();
    return;
  }
  if (entry.users > 0) return;
  pool.setIdle(true);
  entry.timer = setTimeout(() => {
    if (shared.get(key!) === entry && entry.users === 0) {
      shared.delete(key!);
      void pool.close();
    }
  }, 5000);
  entry.timer.unref();
}

/**
 * Closes the shared pools no operation is using now, instead of in a few seconds: a process that goes
 * on with other work after an operation (the app's run indexes the catalog and prunes after its backup)
 * gives back the threads' heaps and buffers before that work, rather than holding both at once.
 */
export async function closeIdlePools(): Promise<void> {
  const closing: Promise<void>[] = [];
  for (const [key, entry] of shared) {
    if (entry.users > 0) continue;
    clearTimeout(entry.timer);
    shared.delete(key);
    closing.push(entry.pool.close());
  }
  await Promise.all(closing);
}
