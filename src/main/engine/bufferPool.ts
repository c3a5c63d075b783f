/**
 * Large buffers reused instead of freed: the pack ranges a restore or a check reads (megabytes each).
 *
 * A fresh multi-MiB buffer is fresh memory from the kernel (the engine's processes map large
 * allocations, so freed ones go straight back), and touching it the first time costs page faults — on a
 * VM whose freed memory returns to the host, a fault on the host too. Reading a restore's packs into
 * fresh buffers cost a noticeable share of its system time; keeping a few buffers gets that back
 * without the heap growth that a higher malloc mmap threshold brought.
 *
 * Only code that knows a buffer is no longer referenced anywhere gives it back: the restore and the
 * check, when a worker returns the (transferred) buffer of a decode task it has finished with.
 */

import { MessageChannel } from 'node:worker_threads';

const MIN_BYTES = 1024 * 1024;
const MAX_KEPT = 4;
const MAX_KEPT_BYTES = 64 * 1024 * 1024;
const spare: ArrayBuffer[] = [];
let keptBytes = 0;
/** The buffers made here: they belong to no one else, so they may move to a worker and back whole. */
const made = new WeakSet<ArrayBuffer>();

/** Whether `ab` was made by takeBuffer (and may be moved to another thread with room to spare). */
export function isPoolBuffer(ab: ArrayBufferLike): boolean {
  return ab instanceof ArrayBuffer && made.has(ab);
}

/** A buffer of `size` bytes (uninitialised): a view of a kept one when one is large enough. */
export function takeBuffer(size: number): Buffer {
  if (size < MIN_BYTES) return Buffer.allocUnsafe(size);
  let best = -1;
  for (let i = 0; i < spare.length; i++)
    if (spare[i].byteLength >= size && (best < 0 || spare[i].byteLength < spare[best].byteLength)) best = i;
  if (best >= 0 && spare[best].byteLength <= 2 * size) {
    const [ab] = spare.splice(best, 1);
    keptBytes -= ab.byteLength;
    return Buffer.from(ab, 0, size);
  }
  // whole MiBs, so a buffer fits the next range of about the same size
  const capacity = Math.ceil(size / MIN_BYTES) * MIN_BYTES;
  const ab = Buffer.allocUnsafeSlow(capacity).buffer as ArrayBuffer;
  made.add(ab);
  return Buffer.from(ab, 0, size);
}

/**
 * Frees a buffer that nothing references any more, now: moved into a message to a closed port, which
 * drops the message and its memory on the next turn, where a buffer merely let go is freed when the
 * garbage collector of its thread finds it dead: rarely in a worker (its heap is tiny), and on the main
 * thread only as often as its own allocations or external memory make it collect. For the buffers the
 * pools have no room for (a test frees 128 MiB this way with no collection). Every view of the buffer
 * is left empty (detached), so only the buffer's owner may call this.
 */
export function discardBuffer(ab: ArrayBuffer): void {
  try {
    sink.postMessage(ab, [ab]);
  } catch {} // not transferable (a WebAssembly memory, already detached): left to the collector
}
const { port1: sink, port2: closed } = new MessageChannel();
closed.close();
sink.unref();

/** Gives back a buffer that nothing references any more (large ones are kept for takeBuffer). */
export function giveBuffer(ab: ArrayBuffer | undefined): void {
  if (!ab || !(ab instanceof ArrayBuffer) || ab.byteLength < MIN_BYTES) return;
  if (spare.includes(ab)) return;
  if (spare.length >= MAX_KEPT || keptBytes + ab.byteLength > MAX_KEPT_BYTES) return discardBuffer(ab);
  made.add(ab); // moved here from a worker: no one else holds it
  spare.push(ab);
  keptBytes += ab.byteLength;
}
