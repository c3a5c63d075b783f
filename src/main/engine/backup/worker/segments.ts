/**
 * A block file's new blocks copied into segments of ~2 MiB as they are hashed (see ChunkSegment), and
 * stored a batch of segments at a time (worker side). The read buffers are reused at once and one buffer
 * per segment, not per block, moves between threads; an emptied segment comes back to be filled again.
 */
import { ask, settings } from '../../pool/thread.js';
import type { ChunkSegment, QueryReply } from '../../pool/wire.js';
import { memtraceGauge } from '../../pool/memtrace.js';
import { sealSegment } from './seal.js';

/**
 * Segment buffers to fill again (SealedSegment.emptied, QueryReply.spares). A 2 MiB buffer of fresh memory
 * costs 512 page faults as blocks are copied into it: in an incremental of a 2 GiB block file (~5,000
 * changed 8 KiB blocks, `npm run bench:cbt`) that was the reading thread's largest cost.
 */
const spareSegments: ArrayBuffer[] = [];
const MAX_SPARE_SEGMENTS = 8;
memtraceGauge('segments kept', () => spareSegments.reduce((n, b) => n + b.byteLength, 0));
function keepSpare(buf: ArrayBuffer, capacity: number): void {
  if (buf.byteLength === capacity && spareSegments.length < MAX_SPARE_SEGMENTS) spareSegments.push(buf);
}

/** A segment being filled with a block file's blocks (see ChunkSegment). */
export class SegmentBuilder {
  readonly data: Buffer;
  readonly ids: Buffer;
  readonly offsets: number[] = [];
  readonly lengths: number[] = [];
  readonly hex: string[] = [];
  used = 0;
  constructor(
    readonly capacity: number,
    maxBlocks: number,
  ) {
    const spare = spareSegments.findIndex((b) => b.byteLength === capacity);
    this.data =
      spare >= 0 ? Buffer.from(spareSegments.splice(spare, 1)[0]) : Buffer.allocUnsafeSlow(capacity);
    this.ids = Buffer.allocUnsafeSlow(32 * maxBlocks);
  }
  fits(len: number): boolean {
    return this.used + len <= this.capacity && this.offsets.length < this.ids.length / 32;
  }
  add(id: Buffer, hex: string, block: Uint8Array): void {
    this.data.set(block, this.used);
    id.copy(this.ids, 32 * this.offsets.length);
    this.offsets.push(this.used);
    this.lengths.push(block.length);
    this.hex.push(hex);
    this.used += block.length;
  }
  get count(): number {
    return this.offsets.length;
  }
  /** The segment of the chunks `keep` says to keep (all when omitted). */
  take(keep?: (i: number) => boolean): ChunkSegment {
    const idx = [...this.offsets.keys()].filter((i) => !keep || keep(i));
    const ids = new Uint8Array(32 * idx.length);
    idx.forEach((i, k) => ids.set(this.ids.subarray(32 * i, 32 * i + 32), 32 * k));
    return {
      data: new Uint8Array(this.data.buffer, this.data.byteOffset, this.used),
      ids,
      offsets: Uint32Array.from(idx, (i) => this.offsets[i]),
      lengths: Uint32Array.from(idx, (i) => this.lengths[i]),
      oneFile: true,
    };
  }
  /** Gives the buffer back for another segment (none of its blocks are needed any more). */
  recycle(): void {
    keepSpare(this.data.buffer as ArrayBuffer, this.capacity);
  }
}

/** Asks the main thread which of the segments' chunks the repository lacks (one dedup query) and stores
 *  those: moved raw to be sealed by any free worker, or sealed here. */
export async function storeSegmentsIfNew(taskId: number, segs: SegmentBuilder[]): Promise<void> {
  if (!segs.length) return;
  const { store, handOver, spares } = (await ask(taskId, {
    kind: 'query',
    ids: segs.flatMap((s) => s.hex),
    spares: MAX_SPARE_SEGMENTS - spareSegments.length, // as many as it may keep
  })) as QueryReply;
  for (const b of spares ?? []) keepSpare(b, segs[0].capacity);
  const out: ChunkSegment[] = [];
  const taken: SegmentBuilder[] = [];
  let k = 0;
  for (const s of segs) {
    const base = k;
    k += s.count;
    if (!store.slice(base, k).some(Boolean)) {
      s.recycle(); // nothing new in it
      continue;
    }
    out.push(s.take((i) => store[base + i]));
    taken.push(s);
  }
  if (!out.length) return;
  if (settings.distributeSeal && handOver) await ask(taskId, { kind: 'segments', segments: out });
  else {
    const sealed = out.map(sealSegment);
    for (const s of taken) s.recycle(); // sealed here, into buffers of their own: free again
    await ask(taskId, { kind: 'sealedSegments', segments: sealed });
  }
}

/** New blocks copied into segments of ~2 MiB as they are hashed (see ChunkSegment): the read buffers are
 *  reused at once and one buffer per segment, not per block, moves between threads. */
export class SegmentQueue {
  private pending: SegmentBuilder[] = [];
  private current: SegmentBuilder;
  pendingBytes = 0;
  constructor(
    private readonly capacity: number,
    private readonly blockSize: number,
  ) {
    this.current = this.fresh();
  }
  private fresh(): SegmentBuilder {
    return new SegmentBuilder(
      this.capacity,
      Math.ceil(this.capacity / Math.min(this.blockSize, this.capacity)) + 1,
    );
  }
  add(id: Buffer, hex: string, data: Uint8Array): void {
    if (!this.current.fits(data.length)) {
      this.pending.push(this.current);
      this.current = this.fresh();
    }
    this.current.add(id, hex, data);
    this.pendingBytes += data.length;
  }
  /** The full segments, and with `all` the one being filled too (else it stays, so that no buffer
   *  moves between threads with a few blocks in it). */
  take(all: boolean): SegmentBuilder[] {
    if (all && this.current.count) {
      this.pending.push(this.current);
      this.current = this.fresh();
    }
    const taken = this.pending;
    this.pending = [];
    this.pendingBytes = this.current.used;
    return taken;
  }
}
