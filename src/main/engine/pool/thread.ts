/**
 * The worker side of a pool's thread: the pool's settings (in workerData, or for a thread started ahead of
 * its pool, prestartWorkers in ./threads.ts, in an 'init' message that comes before any task), questions to
 * the main thread during a task (`ask`, answered through the task's event handler; `tell` needs no answer),
 * the per-thread read limit, and the loop that hands each task to its handler (`serve`, called once by
 * the thread's entry, workers/pipelineWorker.ts, with every feature's handlers).
 * Buffers moved in with a task or an answer (ToWorker.spares, QueryReply.scratch) go to ./scratch.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import os from 'node:os';
import { readlinkSync } from 'node:fs';
import { giveScratch, scratchRoom } from './scratch.js';
import { segmentBuffers } from './wire.js';
import type { FromWorker, QueryReply, Task, TaskEvent, ToWorker, WorkerInit } from './wire.js';

/** The pool's settings, and the keys made from them, once configured. */
export let settings: WorkerInit;
export let encKey: Buffer;
export let idKey: Buffer;
const configured: ((s: WorkerInit) => void)[] = [];

/** Calls `fn` with the settings whenever they are set (now, if they are already). */
export function onConfigure(fn: (s: WorkerInit) => void): void {
  configured.push(fn);
  if (settings) fn(settings);
}

function configure(s: WorkerInit): void {
  settings = s;
  encKey = Buffer.from(settings.encryptionKey);
  idKey = Buffer.from(settings.idKey);
  for (const fn of configured) fn(s);
  if (settings.lowPriority) {
    try {
      os.setPriority(0, 19); // this thread only (Linux: setpriority on the calling thread)
      const tid = readlinkSync('/proc/thread-self').split('/').pop();
      // child_process is loaded only here: ~3 ms of every worker's start-up otherwise
      if (tid)
        void import('node:child_process').then(
          ({ execFile }) => execFile('ionice', ['-c', '3', '-p', tid], () => {}),
          () => {},
        );
    } catch {}
  }
}

const port = parentPort!;
const waiting = new Map<string, (v: unknown) => void>();
let seqCounter = 0;

export function ask(taskId: number, event: TaskEvent): Promise<unknown> {
  const seq = ++seqCounter;
  return new Promise((resolve) => {
    waiting.set(`${taskId}:${seq}`, resolve);
    // raw chunks and segments each own their ArrayBuffers: moved, not copied
    const transfer =
      event.kind === 'raw'
        ? event.chunks.map((c) => c.data.buffer as ArrayBuffer)
        : event.kind === 'segments' || event.kind === 'sealedSegments'
          ? event.segments.flatMap(segmentBuffers)
          : [];
    port.postMessage(
      { type: 'event', taskId, seq, event, room: scratchRoom() } satisfies FromWorker,
      transfer,
    );
  });
}

export function tell(taskId: number, event: TaskEvent): void {
  port.postMessage({ type: 'event', taskId, seq: 0, event } satisfies FromWorker);
}

// Token bucket for the read limit, per worker: bytes already read are paid for by waiting until the
// bucket is no longer in debt (at most one second of burst is kept).
let tokens = 0;
let lastRefill = Date.now();
export async function throttle(bytes: number): Promise<void> {
  if (!settings.readLimit || !bytes) return;
  const now = Date.now();
  tokens = Math.min(settings.readLimit, tokens + ((now - lastRefill) / 1000) * settings.readLimit) - bytes;
  lastRefill = now;
  if (tokens < 0) await new Promise((r) => setTimeout(r, (-tokens / settings.readLimit) * 1000));
}

/** What a task's handler answers: its result, and the buffers in it to move (not copy) back. */
export interface Done {
  result: unknown;
  transfer: ArrayBuffer[];
}
export type TaskHandler<T extends Task = Task> = (taskId: number, task: T) => Promise<Done> | Done;
/** A handler for every task of the wire format, by its op. */
export type TaskHandlers = { [Op in Task['op']]: TaskHandler<Extract<Task, { op: Op }>> };

/** Configures the thread (unless it waits for an 'init' message) and runs the tasks it is sent. */
export function serve(handlers: TaskHandlers): void {
  if (!(workerData as { deferred?: boolean }).deferred) configure(workerData as WorkerInit);
  port.on('message', (msg: ToWorker) => {
    if (msg.type === 'init') {
      configure(msg.init);
      return;
    }
    if (msg.type === 'reply') {
      for (const ab of (msg.value as QueryReply | null)?.scratch ?? []) giveScratch(ab);
      const key = `${msg.taskId}:${msg.seq}`;
      const r = waiting.get(key);
      waiting.delete(key);
      r?.(msg.value);
      return;
    }
    const { taskId, task } = msg;
    for (const ab of msg.spares ?? []) giveScratch(ab);
    const handler = handlers[task.op] as TaskHandler;
    const run = async (): Promise<Done> => handler(taskId, task);
    run().then(
      ({ result, transfer }) =>
        port.postMessage(
          { type: 'done', taskId, result, room: scratchRoom() } satisfies FromWorker,
          transfer,
        ),
      (err: NodeJS.ErrnoException) =>
        port.postMessage({
          type: 'error',
          taskId,
          error: { message: err.message, code: err.code, name: err.name },
        } satisfies FromWorker),
    );
  });
}
