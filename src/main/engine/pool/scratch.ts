/**
 * The worker side of buffer ownership: the buffers a worker thread seals into and reads small files into,
 * kept and used again instead of freed (the main thread's side: ./spares.ts, ./ledger.ts).
 *
 * Buffers of whole MiBs to seal into and to read small files into, used again instead of freed. A fresh
 * multi-MiB buffer is fresh memory from the kernel (the engine maps large allocations and unmaps them when
 * freed): AES writing sealed blobs into new buffers, reading small files into new ones and unmapping them
 * afterwards cost a full backup about half a CPU-second, most of it page faults (perf). A sealed
 * segment's buffer comes back from the main thread once its blobs are copied into their data
 * pack's buffer, or once a pack holding one as a view is written (./ledger.ts, SpareBuffers.keepSealed), with
 * a later task (ToWorker.spares) or dedup answer (QueryReply.scratch); a small-file batch's read buffer is
 * free as soon as it is sealed.
 * Every buffer from 128 KiB on (glibc maps those afresh, see bin/malloc-env.mjs) gets whole MiBs: a batch
 * of small files (0.1–0.5 MiB read, as much sealed) given exactly its size would get a buffer no later
 * batch fits, so each batch would map two new ones; in whole MiBs the buffers come back in time.
 * A kept buffer up to four times the request's size serves it: with only close fits, a worker still took
 * a fresh buffer for a large share of its requests while kept ones sat here too large. Keeping buffers
 * costs some peak RSS (a kept buffer has been written to whole), paid for in fewer faults and a faster
 * full backup (docs/performance.md).
 */
import { discardBuffer } from '../bufferPool.js';
import { WORKER_SCRATCH_BYTES } from './wire.js';

const scratch: ArrayBuffer[] = [];
const MAX_SCRATCH = 16;
// WorkerInit.scratchBytes sets it (pool/memory.ts: 8 MiB, 2 in low mode; 4 MiB had a full backup take
// fresh buffers for a third more page faults): with fresh buffers in huge pages
// (hugeShaped below) a fresh buffer is cheap enough that keeping more made no difference in time or
// faults, only in peak RSS; and sealed buffers come back as soon as their blobs are in a pack's buffer
// (repo/pack.ts)
let MAX_SCRATCH_BYTES = WORKER_SCRATCH_BYTES; // shared with the pool, which moves no more (FromWorker.room)
/** Sets what the thread keeps (WorkerInit.scratchBytes, from its pool's settings: ./thread.ts). */
export function setScratchLimit(bytes = WORKER_SCRATCH_BYTES): void {
  MAX_SCRATCH_BYTES = bytes;
}
/** Bytes this thread keeps to seal and read into now (for TIDEMARK_MEMTRACE). */
export const scratchBytes = () => scratch.reduce((n, b) => n + b.byteLength, 0);
export const scratchRoom = () =>
  Math.max(0, MAX_SCRATCH_BYTES - scratch.reduce((n, b) => n + b.byteLength, 0));
const MiB = 1024 * 1024;
/** The capacity a buffer of `size` bytes gets: the exact size below 128 KiB, else whole 2 MiB less 4 KiB
 *  (hugeShaped) when at least 60% of that is used, else whole MiBs. A huge page is resident whole once
 *  touched at all, and sealed buffers were held until their pack was written (since repo/pack.ts gathers
 *  data packs, until their blobs are copied): whole 2 MiB for every size from 1 MiB on raised a full
 *  backup's peak RSS, and at three quarters used or more it saved about no faults over whole MiBs alone;
 *  60% keeps most of the saved faults at a lower peak. */
const capacityFor = (size: number) => {
  if (size < 128 * 1024) return Math.max(1, size);
  const huge = hugeShaped(size);
  return size >= 0.6 * huge ? huge : Math.ceil(size / MiB) * MiB;
};
/**
 * The smallest size of at least `size` bytes that glibc maps as whole 2 MiB: its chunk header and the
 * rounding to pages make a mapping 4 KiB larger than the request, and Linux places an anonymous mapping of
 * whole 2 MiB on a 2 MiB boundary, where (with the launchers' glibc.malloc.hugetlb=1, bin/malloc-env.mjs)
 * transparent huge pages back it. A fresh 2 MiB then costs one page fault instead of 512 (filling one is
 * about six times faster than filling a buffer of exactly 2 MiB, which is mapped across two huge pages).
 */
const hugeShaped = (size: number) => Math.ceil((size + 4096) / (2 * MiB)) * 2 * MiB - 4096;
const isScratchShape = (n: number) => n >= MiB && (n % MiB === 0 || (n + 4096) % (2 * MiB) === 0);
/** A buffer of `size` bytes and an ArrayBuffer of its own (it may move to another thread): a kept one at
 *  most four times the capacity it needs, or a new one. */
export function takeScratch(size: number): Buffer {
  const want = capacityFor(size);
  let best = -1;
  if (want >= MiB)
    for (let i = 0; i < scratch.length; i++) {
      const n = scratch[i].byteLength;
      if (n >= want && n <= 4 * want && (best < 0 || n < scratch[best].byteLength)) best = i;
    }
  const ab = best >= 0 ? scratch.splice(best, 1)[0] : (Buffer.allocUnsafeSlow(want).buffer as ArrayBuffer);
  return Buffer.from(ab, 0, size);
}
/** Keeps a buffer nothing refers to any more (the smallest go when there are too many, the largest when
 *  they hold too much). */
export function giveScratch(ab: ArrayBuffer | undefined): void {
  if (!ab || !isScratchShape(ab.byteLength) || scratch.includes(ab)) return;
  scratch.push(ab);
  scratch.sort((a, b) => b.byteLength - a.byteLength);
  while (scratch.length > MAX_SCRATCH) discardBuffer(scratch.pop()!);
  let bytes = scratch.reduce((n, b) => n + b.byteLength, 0);
  while (bytes > MAX_SCRATCH_BYTES) {
    const gone = scratch.shift()!;
    bytes -= gone.byteLength;
    discardBuffer(gone); // freed now: this thread collects rarely
  }
}
