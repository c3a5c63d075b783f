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
 *  ./scratch.ts). They come back in bursts, all of a pack's at once when it is written; with room for
 *  only 16, a full backup dropped many of them while later tasks found none to take (and sealed into
 *  fresh memory). */
const MAX_SPARE_SEALED = 32;
// 16 MiB: with the workers' fresh buffers in huge pages (./scratch.ts hugeShaped) more made no
// difference in a full backup's time or faults, only in peak RSS; and since data packs are gathered in
// buffers of their own (repo/pack.ts), a sealed buffer comes back as soon as its blobs are copied, so
// fewer are needed, while kept ones sit beside the packs' buffers (more raised peak RSS; less took more
// fresh buffers for no lower peak).
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
   * found it: rarely, its heap is tiny; see discardBuffer). Moved two at a time with every dedup answer,
   * regardless, a worker reading large files let a hundred MB or more of them go in a full backup, and
   * peak RSS rose with its reading speed.
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
