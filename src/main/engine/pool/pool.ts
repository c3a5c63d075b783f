/**
 * A pool of CPU worker threads (docs/architecture.md §1 rule 5: chunking, hashing, compression and
 * encryption never run on the thread that serves the UI), each running workers/pipelineWorker.ts, which
 * hands a task to the feature it belongs to. Tasks are spread over the workers by load; each worker runs
 * several tasks at once so file reads overlap with CPU work. Mid-task questions from a worker (dedup
 * queries, blobs to store) go to the handler given with the task and its answer is sent back — this is
 * how backpressure reaches the readers. Buffers kept for the workers between tasks: ./spares.ts.
 */
import { Worker } from 'node:worker_threads';
import { WORKER_SCRATCH_BYTES } from './wire.js';
import { defaultWorkerCount, prestartedList, workerOptions } from './early.js';
import { workerEntry } from './threads.js';
import { SpareBuffers, type SpareLimits } from './spares.js';
import type { FromWorker, QueryReply, TaskEvent, Task, ToWorker, WorkerInit } from './wire.js';

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

/** What reading files weighs, in CPU tasks, when a pure CPU task picks its worker (see run). */
const FILE_LOAD = 2;
const SPARES_PER_TASK = 2;
const SPARES_PER_QUERY = 2;

const prestarted = prestartedList();

export class WorkerPool {
  private readonly workers: PooledWorker[] = [];
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private failed?: Error;
  readonly size: number;
  /** The buffers kept for the workers between tasks (./spares.ts). */
  readonly spares: SpareBuffers;

  /** Up to n kept sealed-segment buffers for `pw`, as many bytes as it has room for. */
  private takeSpareSealedFor(pw: PooledWorker, n: number): ArrayBuffer[] | undefined {
    const taken = this.spares.takeSealed(pw.room, n);
    for (const b of taken ?? []) pw.room -= b.byteLength;
    return taken;
  }

  constructor(init: WorkerInit, size = defaultWorkerCount(), limits?: SpareLimits) {
    this.size = size;
    this.spares = new SpareBuffers(limits);
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
    // took CPU from the reads and hashing everything waits for (a block file's incremental is a few
    // percent faster). Where every worker reads files it changes nothing.
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
