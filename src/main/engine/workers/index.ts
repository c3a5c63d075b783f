/**
 * A pool of CPU worker threads running pipelineWorker (docs/architecture.md §1 rule 5: chunking, hashing,
 * compression and encryption never run on the thread that serves the UI). Tasks are spread over the
 * workers by load; each worker runs several tasks at once so file reads overlap with CPU work.
 * Mid-task questions from a worker (dedup queries, blobs to store) go to the handler given with the
 * task and its answer is sent back — this is how backpressure reaches the readers.
 * In development the worker is TypeScript loaded through tsx; in a build it is the bundled .js.
 */
import { discardBuffer, isPoolBuffer } from '../bufferPool.js';
import { Worker } from 'node:worker_threads';
import { fileURLToPath, pathToFileURL } from 'node:url';
import path from 'node:path';
import fs from 'node:fs';
import { WORKER_SCRATCH_BYTES } from './protocol.js';
import { defaultWorkerCount, prestartedList, startDeferred, workerOptions } from './early.js';
import type { FromWorker, QueryReply, TaskEvent, Task, ToWorker, WorkerInit } from './protocol.js';

export type EventHandler = (event: TaskEvent) => unknown | Promise<unknown>;

interface Pending {
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  onEvent?: EventHandler;
  worker: PooledWorker;
  cpu: boolean;
}

interface PooledWorker {
  worker: Worker;
  inflight: number;
  /** Pure CPU tasks queued (seal, decode): what decides where the next one goes. */
  cpu: number;
  /** Bytes of sealed-segment buffers it would keep, as it last said, less what was moved to it since. */
  room: number;
}

function workerEntry(): { file: string; data: Record<string, unknown> } {
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
  const boot = path.join(here, 'tsxBoot.mjs');
  return { file: boot, data: { __entry: pathToFileURL(path.join(here, 'pipelineWorker.ts')).href } };
}

/** Wraps bytes for a decode task: the buffer is transferred when it owns its memory, copied otherwise
 *  (a slice of Node's shared pool must never be detached). */
export function decodeBuffer(data: Buffer): { buffer: Uint8Array; transfer: ArrayBuffer[] } {
  // a buffer of its own moves as it is; one of bufferPool's even with room to spare (nothing else shares
  // it — unlike, say, a view into a buffer a network library reads into)
  if (
    data.byteOffset === 0 &&
    data.buffer instanceof ArrayBuffer &&
    (data.byteLength === data.buffer.byteLength || isPoolBuffer(data.buffer))
  )
    return { buffer: new Uint8Array(data.buffer, 0, data.byteLength), transfer: [data.buffer] };
  const own = new Uint8Array(data.byteLength);
  own.set(data);
  return { buffer: own, transfer: [own.buffer] };
}

/** What reading files weighs, in CPU tasks, when a pure CPU task picks its worker (see run). */
const FILE_LOAD = 2;

/** Sealed-segment buffers kept for the workers (keepSpareSealed): two per task that seals (a worker keeps
 *  up to 16, see pipelineWorker's scratch). They come back in bursts, all of a pack's at once when it is
 *  written; with room for 16 a full backup of the bench dataset dropped ~170 of them while later tasks
 *  found none to take (and sealed into fresh memory). */
const MAX_SPARE_SEALED = 32;
// 96 MiB before the workers' fresh buffers came in huge pages (pipelineWorker's hugeShaped); since, half
// of it made no difference in a full backup's time or faults (three runs each): 277-285 MB peak RSS
// instead of 286-302. 16 MiB since data packs are gathered in buffers of their own (repo/pack.ts): a
// sealed buffer comes back as soon as its blobs are copied, not once their pack is written, so fewer
// are needed, and kept ones sat beside the packs' buffers (48 MiB here and 32 per worker: 309-313 MB
// peak RSS; 16 and 16: 278-296; 8 and 8: 285-295, with more fresh buffers).
const MAX_SPARE_SEALED_BYTES = 16 * 1024 * 1024;
const SPARES_PER_TASK = 2;
const SPARES_PER_QUERY = 2;

export { defaultWorkerCount };

/**
 * Starts up to n worker threads ahead of the pool an operation is about to make (the next WorkerPool
 * takes them and sends them its settings), unless enough were started already (the bundled CLI's
 * launcher starts a backup's or restore's before it loads anything else: ./early.ts). They never keep
 * the process alive, and stop unused after a while.
 */
export function prestartWorkers(n = defaultWorkerCount()): void {
  const entry = workerEntry();
  startDeferred(entry.file, entry.data, n);
}
const prestarted = prestartedList();

/** Worker threads started ahead and not taken by a pool yet (for tests). */
export function prestartedCount(): number {
  return prestarted.length;
}

export class WorkerPool {
  private readonly workers: PooledWorker[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failed?: Error;
  readonly size: number;
  /** Emptied segment buffers waiting for a reading worker to ask (QueryReply.spares); they live as long
   *  as the pool, so the next backup on it starts with some. */
  readonly spareSegments: ArrayBuffer[] = [];

  /** Keeps an emptied segment buffer (SealedSegment.emptied) for a reading worker, up to eight. */
  keepSpareSegment(buf: ArrayBuffer | undefined): void {
    if (buf && this.spareSegments.length < 8) this.spareSegments.push(buf);
  }

  /** Up to n kept segment buffers, for a reading worker's QueryReply.spares (moved to it). */
  takeSpareSegments(n: number | undefined): ArrayBuffer[] | undefined {
    return n && this.spareSegments.length ? this.spareSegments.splice(0, n) : undefined;
  }

  /** Emptied buffers of sealed segments (all their blobs written: Repository.returnBuffers), moved to the
   *  workers with their next tasks to seal into again. */
  private readonly spareSealed: ArrayBuffer[] = [];
  private spareSealedBytes = 0;

  /** Keeps the buffer of a sealed segment nothing refers to any more (its blobs copied into packs or
   *  written), for a worker's next task; one there is no room for is freed. */
  keepSpareSealed(buf: ArrayBuffer): void {
    if (
      this.spareSealed.length >= MAX_SPARE_SEALED ||
      this.spareSealedBytes + buf.byteLength > MAX_SPARE_SEALED_BYTES
    )
      return discardBuffer(buf); // freed now, not at the next collection
    this.spareSealed.push(buf);
    this.spareSealedBytes += buf.byteLength;
  }

  get spareSealedCount(): number {
    return this.spareSealed.length;
  }

  /**
   * Up to n kept sealed-segment buffers for a worker (moved with a task, ToWorker.spares, or a dedup
   * answer, QueryReply.scratch), no more bytes than it has room for. A worker keeps
   * WORKER_SCRATCH_BYTES of them and lets the rest go (which was then freed only when its next collection
   * found it: rarely, its heap is tiny; see discardBuffer since). Moved two at a time with every dedup
   * answer, regardless, one worker let 138 MB of them go in a full backup of the bench dataset's large
   * files, and peak RSS rose by ~60 MB when its reads got faster.
   */
  private takeSpareSealedFor(pw: PooledWorker, n: number): ArrayBuffer[] | undefined {
    const taken: ArrayBuffer[] = [];
    for (let i = 0; i < this.spareSealed.length && taken.length < n;) {
      const b = this.spareSealed[i];
      if (b.byteLength > pw.room) {
        i++;
        continue;
      }
      this.spareSealed.splice(i, 1);
      this.spareSealedBytes -= b.byteLength;
      pw.room -= b.byteLength;
      taken.push(b);
    }
    return taken.length ? taken : undefined;
  }

  constructor(init: WorkerInit, size = defaultWorkerCount()) {
    this.size = size;
    const entry = workerEntry();
    for (let i = 0; i < size; i++) {
      let worker = prestarted.shift();
      if (worker) {
        worker.ref();
        worker.postMessage({ type: 'init', init } satisfies ToWorker); // before any task
      } else worker = new Worker(entry.file, workerOptions({ ...init, ...entry.data }));
      const pw: PooledWorker = { worker, inflight: 0, cpu: 0, room: WORKER_SCRATCH_BYTES };
      worker.on('message', (m: FromWorker) => this.onMessage(pw, m));
      worker.on('error', (err) => this.fail(err));
      worker.on('exit', (code) => {
        if (code !== 0) this.fail(new Error(`a pipeline worker exited with code ${code}`));
      });
      this.workers.push(pw);
    }
  }

  private fail(err: Error): void {
    this.failed ??= err;
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      p.reject(err);
    }
  }

  private onMessage(pw: PooledWorker, m: FromWorker): void {
    if (m.type !== 'error' && m.room !== undefined) pw.room = m.room;
    const p = this.pending.get(m.taskId);
    if (!p) return;
    if (m.type === 'event') {
      const reply = (value: unknown) => {
        if (m.event.kind === 'query' && value)
          (value as QueryReply).scratch = this.takeSpareSealedFor(pw, SPARES_PER_QUERY);
        if (m.seq)
          pw.worker.postMessage({ type: 'reply', taskId: m.taskId, seq: m.seq, value } satisfies ToWorker, [
            ...((value as QueryReply | null)?.spares ?? []),
            ...((value as QueryReply | null)?.scratch ?? []),
          ]);
      };
      try {
        const r = p.onEvent?.(m.event);
        if (r instanceof Promise) r.then(reply, (err) => this.rejectTask(m.taskId, err));
        else reply(r ?? null);
      } catch (err) {
        this.rejectTask(m.taskId, err);
      }
      return;
    }
    this.pending.delete(m.taskId);
    pw.inflight--;
    if (p.cpu) pw.cpu--;
    if (m.type === 'done') p.resolve(m.result);
    else p.reject(Object.assign(new Error(m.error.message), { code: m.error.code }));
  }

  private rejectTask(taskId: number, err: unknown): void {
    const p = this.pending.get(taskId);
    if (!p) return;
    this.pending.delete(taskId);
    p.worker.inflight--;
    if (p.cpu) p.worker.cpu--;
    p.reject(err);
    // The worker still waits for a reply to this task; it is abandoned (its file handle closes when
    // the pool is terminated at the end of the run).
  }

  /** Number of tasks running now. */
  get inflight(): number {
    return this.pending.size;
  }

  /** Number of workers reading no file (idle, or only compressing and sealing). */
  get withoutFiles(): number {
    return this.workers.filter((w) => w.inflight === w.cpu).length;
  }

  run<T>(task: Task, onEvent?: EventHandler, transfer: ArrayBuffer[] = []): Promise<T> {
    if (this.failed) return Promise.reject(this.failed);
    // Pure CPU tasks go where the fewest CPU tasks wait; other tasks spread by count. A worker reading
    // files counts as FILE_LOAD more CPU tasks however many files it has (they mostly wait for I/O or
    // replies, so counting each would send compression to a busy thread): while one worker reads a file
    // the other one is idle, the idle one takes most of the sealing instead of every other segment, which
    // took CPU from the reads and hashing everything waits for (bench:cbt's incremental of one block
    // file repeated 12 times in one process with a warm pool, a loop not kept in the repository: mean
    // 241 → 227 ms). Where every worker reads files it changes nothing.
    const cpu = task.op === 'seal' || task.op === 'sealSegment' || task.op === 'decode';
    const load = (w: PooledWorker) => w.cpu + (w.inflight > w.cpu ? FILE_LOAD : 0);
    const pw = cpu
      ? this.workers.reduce((a, b) => {
          const la = load(a);
          const lb = load(b);
          return lb < la || (lb === la && b.inflight < a.inflight) ? b : a;
        })
      : this.workers.reduce((a, b) => (b.inflight < a.inflight ? b : a));
    const taskId = this.nextId++;
    pw.inflight++;
    if (cpu) pw.cpu++;
    const spares =
      task.op !== 'decode' && task.op !== 'listDir'
        ? this.takeSpareSealedFor(pw, SPARES_PER_TASK)
        : undefined;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(taskId, {
        resolve: resolve as (v: unknown) => void,
        reject,
        onEvent,
        worker: pw,
        cpu,
      });
      pw.worker.postMessage(
        { type: 'task', taskId, task, spares } satisfies ToWorker,
        spares ? [...transfer, ...spares] : transfer,
      );
    });
  }

  get healthy(): boolean {
    return !this.failed;
  }

  /** Idle pools must not keep the process alive. */
  setIdle(idle: boolean): void {
    for (const w of this.workers) {
      if (idle) w.worker.unref();
      else w.worker.ref();
    }
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.worker.terminate()));
  }
}

/**
 * Pools are reused between operations with the same keys and settings (a scheduler running job after
 * job, tests running many backups) instead of starting threads each time; an idle pool closes after a
 * few seconds and never keeps the process alive.
 */
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

export function acquirePool(init: WorkerInit, size = defaultWorkerCount()): WorkerPool {
  const key = JSON.stringify({
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
  const pool = new WorkerPool(init, size);
  shared.set(key, { pool, users: 1 });
  poolKeys.set(pool, key);
  return pool;
}

/** Sealed-segment buffers the shared pools hold for their workers to seal into (for tests). */
export function spareSealedCount(): number {
  let n = 0;
  for (const { pool } of shared.values()) n += pool.spareSealedCount;
  return n;
}

/** Emptied segment buffers the shared pools hold for reading workers (for tests). */
export function spareSegmentCount(): number {
  let n = 0;
  for (const { pool } of shared.values()) n += pool.spareSegments.length;
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
