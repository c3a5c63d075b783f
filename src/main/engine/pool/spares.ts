/**
 * The buffers a pool keeps for its workers between tasks (main thread): worker-made buffers that came
 * back empty and are moved to a worker again to be filled, instead of the worker mapping fresh memory
 * (a fresh 2 MiB buffer costs 512 page faults as it is filled; see ./scratch.ts for the worker's side).
 * Two kinds: emptied raw segments (a block file's, SealedSegment.emptied), handed to a reading worker
 * that asks (QueryReply.spares), and the buffers of sealed segments whose blobs are all written
 * (./ledger.ts), moved with a worker's next task or dedup answer to seal into. They live as long as the
 * pool, so the next backup on it starts with some. What there is no room for is freed at once.
 */
import { discardBuffer } from '../bufferPool.js';

export interface SpareLimits {
  /** Emptied raw segments kept (default 8). */
  segments?: number;
  /** Sealed-segment buffers kept, and their bytes (defaults 32 and 16 MiB). */
  sealed?: number;
  sealedBytes?: number;
}

/** Sealed-segment buffers kept for the workers: two per task that seals (a worker keeps up to 16, see
 *  ./scratch.ts). They come back in bursts, all of a pack's at once when it is written; with room for 16
 *  a full backup of the bench dataset dropped ~170 of them while later tasks found none to take (and
 *  sealed into fresh memory). */
const MAX_SPARE_SEALED = 32;
// 96 MiB before the workers' fresh buffers came in huge pages (./scratch.ts hugeShaped); since, half
// of it made no difference in a full backup's time or faults (three runs each): 277-285 MB peak RSS
// instead of 286-302. 16 MiB since data packs are gathered in buffers of their own (repo/pack.ts): a
// sealed buffer comes back as soon as its blobs are copied, not once their pack is written, so fewer
// are needed, and kept ones sat beside the packs' buffers (48 MiB here and 32 per worker: 309-313 MB
// peak RSS; 16 and 16: 278-296; 8 and 8: 285-295, with more fresh buffers).
const MAX_SPARE_SEALED_BYTES = 16 * 1024 * 1024;
const MAX_SPARE_SEGMENTS = 8;

export class SpareBuffers {
  /** Emptied segment buffers waiting for a reading worker to ask. */
  private readonly segments: ArrayBuffer[] = [];
  /** Emptied buffers of sealed segments, to be moved to workers to seal into again. */
  private readonly sealed: ArrayBuffer[] = [];
  private sealedBytes = 0;
  private readonly maxSegments: number;
  private readonly maxSealed: number;
  private readonly maxSealedBytes: number;

  constructor(limits: SpareLimits = {}) {
    this.maxSegments = limits.segments ?? MAX_SPARE_SEGMENTS;
    this.maxSealed = limits.sealed ?? MAX_SPARE_SEALED;
    this.maxSealedBytes = limits.sealedBytes ?? MAX_SPARE_SEALED_BYTES;
  }

  /** Keeps an emptied segment buffer (SealedSegment.emptied) for a reading worker. */
  keepSegment(buf: ArrayBuffer | undefined): void {
    if (buf && this.segments.length < this.maxSegments) this.segments.push(buf);
  }

  /** Up to n kept segment buffers, for a reading worker's QueryReply.spares (moved to it). */
  takeSegments(n: number | undefined): ArrayBuffer[] | undefined {
    return n && this.segments.length ? this.segments.splice(0, n) : undefined;
  }

  get segmentCount(): number {
    return this.segments.length;
  }

  /** Keeps the buffer of a sealed segment nothing refers to any more (its blobs copied into packs or
   *  written), for a worker's next task; one there is no room for is freed. */
  keepSealed(buf: ArrayBuffer): void {
    if (this.sealed.length >= this.maxSealed || this.sealedBytes + buf.byteLength > this.maxSealedBytes)
      return discardBuffer(buf); // freed now, not at the next collection
    this.sealed.push(buf);
    this.sealedBytes += buf.byteLength;
  }

  get sealedCount(): number {
    return this.sealed.length;
  }

  /** Bytes held now, of both kinds. */
  get bytes(): number {
    return this.sealedBytes + this.segments.reduce((n, b) => n + b.byteLength, 0);
  }

  /**
   * Up to n kept sealed-segment buffers for a worker (moved with a task, ToWorker.spares, or a dedup
   * answer, QueryReply.scratch), no more bytes than it has `room` for. A worker keeps
   * WORKER_SCRATCH_BYTES of them and lets the rest go (which was then freed only when its next collection
   * found it: rarely, its heap is tiny; see discardBuffer since). Moved two at a time with every dedup
   * answer, regardless, one worker let 138 MB of them go in a full backup of the bench dataset's large
   * files, and peak RSS rose by ~60 MB when its reads got faster.
   */
  takeSealed(room: number, n: number): ArrayBuffer[] | undefined {
    const taken: ArrayBuffer[] = [];
    for (let i = 0; i < this.sealed.length && taken.length < n;) {
      const b = this.sealed[i];
      if (b.byteLength > room) {
        i++;
        continue;
      }
      this.sealed.splice(i, 1);
      this.sealedBytes -= b.byteLength;
      room -= b.byteLength;
      taken.push(b);
    }
    return taken.length ? taken : undefined;
  }
}
