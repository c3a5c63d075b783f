/**
 * The CPU worker of the backup/restore pipeline. Backup: reads a file in large sequential reads,
 * cuts it with FastCDC, hashes chunks with keyed BLAKE3, asks the main thread which chunks are new
 * (dedup), then compresses and seals only those and hands them over (transferred, not copied).
 * Restore: reads a folder repository's pack ranges (only those: writing the repository is the main
 * thread's), opens, decompresses and verifies their blobs and writes the files. Several tasks interleave
 * on one worker so reads overlap with CPU work.
 */
import { parentPort, workerData } from 'node:worker_threads';
import fs, { type FileHandle } from 'node:fs/promises';
import type { BigIntStats } from 'node:fs';
import os from 'node:os';
import { readlinkSync, openSync, closeSync, writeSync, constants as FS } from 'node:fs';
import { allZero, writeWholeFile } from '../restore/wholeFile.js';
import { discardBuffer } from '../bufferPool.js';
import { mtimeMsOf, sameMtime } from '../scan/stat.js';
import { listDir } from '../scan/listDir.js';
import { FastCDC, gearTable } from '../chunk/index.js';
import { blobId, blobIdHex, openTransient, seal, sealInto, OVERHEAD } from '../crypto/index.js';
import {
  CompressionProbe,
  maybeCompressTransient,
  decompressTransient,
  scratchOf,
  compressBound,
  compressInto,
} from '../compress/index.js';
import { readFiles, readScattered, type Piece } from '../backup/scatterRead.js';
import { BlockSource, SourceReader } from '../backup/sourceRead.js';
import { ALIGN, O_DIRECT, giveAligned, takeAligned } from '../aligned.js';
import type {
  BackupFileResult,
  BackupFileTask,
  ChunkSegment,
  SealedSegment,
  DecodeResult,
  DecodeTask,
  FromWorker,
  ListDirResult,
  ListDirTask,
  QueryReply,
  SealedBlobMsg,
  SmallFileResult,
  SmallFilesResult,
  SmallFilesTask,
  TaskEvent,
  ToWorker,
  WorkerInit,
} from './protocol.js';
import { segmentBuffers, WORKER_SCRATCH_BYTES } from './protocol.js';
import { BLOB_FIELDS, PART_FIELDS, WRITE_FIELDS, type DecodeFailures } from './decodeBatch.js';

// The pool's settings: in workerData, or, for a thread started ahead of its pool (prestartWorkers in
// ./index.ts: booting a thread overlaps with opening the repository), in an 'init' message that comes
// before any task.
let init: WorkerInit;
let encKey: Buffer;
let idKey: Buffer;
let cdc: FastCDC;
let READ_BLOCK: number;
const ID_BYTES = 32;

function configure(settings: WorkerInit): void {
  init = settings;
  encKey = Buffer.from(init.encryptionKey);
  idKey = Buffer.from(init.idKey);
  cdc = new FastCDC(init.chunker, gearTable(Buffer.from(init.chunkerSeed, 'hex')));
  READ_BLOCK = Math.max(8 * 1024 * 1024, 2 * init.chunker.max);
  if (init.lowPriority) {
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
if (!(workerData as { deferred?: boolean }).deferred) configure(workerData as WorkerInit);

// Read blocks are reused from file to file: a fresh multi-MiB buffer per file is freed only when this
// thread's garbage collector gets round to it (its JS heap is tiny, so rarely), and dead buffers pile
// up as resident memory. Files that fit in a much smaller buffer get one of their own.
const freeBlocks: Buffer[] = [];
function takeBlock(size: number): Buffer {
  if (size + 1 < READ_BLOCK / 8) return Buffer.allocUnsafe(Math.max(1, size + 1));
  return freeBlocks.pop() ?? Buffer.allocUnsafeSlow(READ_BLOCK);
}
function giveBlock(buf: Buffer): void {
  if (buf.length === READ_BLOCK && freeBlocks.length < 4) freeBlocks.push(buf);
}
/** A read block for direct reads (../aligned.ts: whole 64 KiB pages): the unfinished chunk (under
 *  chunker.max) and at least 2 MiB more. Direct reads fill a block whole, where buffered ones stopped once
 *  chunker.max bytes were in it: with 8 MiB blocks a full backup of the bench dataset peaked at 272-284 MB
 *  RSS, with 6 MiB at 270-272 (three runs each), as fast. */
const alignedBlockBytes = () => Math.ceil((init.chunker.max + 2 * MiB) / 65536) * 65536;

/**
 * Buffers of whole MiBs to seal into and to read small files into, used again instead of freed. A fresh
 * multi-MiB buffer is fresh memory from the kernel (the engine maps large allocations and unmaps them when
 * freed): AES writing sealed blobs into new buffers, reading small files into new ones and unmapping them
 * afterwards were ~0.5 CPU-s of a full backup of `npm run bench`'s dataset (perf: 346,000 page faults, then
 * ~180,000). A sealed segment's buffer comes back from the main thread once its blobs are copied into their data
 * pack's buffer, or once a pack holding one as a view is written (Repository.returnBuffers,
 * WorkerPool.keepSpareSealed), with a later task (ToWorker.spares) or dedup answer (QueryReply.scratch); a small-file batch's read buffer is free as soon as it is sealed.
 * Every buffer from 128 KiB on (glibc maps those afresh, see bin/malloc-env.mjs) gets whole MiBs: a batch
 * of small files (0.1–0.5 MiB read, as much sealed) used to get exactly its size, a buffer no later batch
 * fitted, so each batch mapped two new ones. With that and room for six buffers here (and 32 at the main
 * thread) the buffers come back in time: a CLI full backup of the bench dataset faulted 114,000–127,000
 * pages instead of 171,000–186,000 and took 6.7–7.1 s instead of 7.2–7.5 s (five runs alternating, with
 * zstd's contexts by size, compress/index.ts cctxFor), peak RSS ~265 MB instead of ~245.
 * Later, counted per worker: ~130 of ~470 buffers were still fresh ones, most while six or more kept ones
 * sat here too large for the request (over twice its size) or just after a pack's worth had come back at
 * once and all but six were let go. A kept buffer up to four times the request's size serves it, and up to
 * 16 (64 MiB) are kept: ~50 fresh of ~470, a CLI full backup faulting 84,000–88,000 pages instead of
 * 104,000–106,000, 6.72–7.14 s instead of 7.03–7.26 (three pairs alternating), at a peak RSS of 263–274 MB
 * instead of 233–238 (the buffers it keeps have been written to whole).
 */
const scratch: ArrayBuffer[] = [];
const MAX_SCRATCH = 16;
// 64 MiB before fresh buffers came in huge pages (hugeShaped below): with those a fresh buffer is cheap
// enough that keeping half as much made no difference in time or faults, and ~10 MB less peak RSS; 16
// MiB since sealed buffers come back as soon as their blobs are in a pack's buffer (repo/pack.ts)
const MAX_SCRATCH_BYTES = WORKER_SCRATCH_BYTES; // shared with the pool, which moves no more (FromWorker.room)
const scratchRoom = () => Math.max(0, MAX_SCRATCH_BYTES - scratch.reduce((n, b) => n + b.byteLength, 0));
const MiB = 1024 * 1024;
/** The capacity a buffer of `size` bytes gets: the exact size below 128 KiB, else whole 2 MiB less 4 KiB
 *  (hugeShaped) when at least 60% of that is used, else whole MiBs. A huge page is resident whole once
 *  touched at all, and sealed buffers were held until their pack was written (since repo/pack.ts gathers
 *  data packs, until their blobs are copied): whole 2 MiB for every size
 *  from 1 MiB on took a full backup of the bench dataset to 272-310 MB peak RSS (twelve runs), this rule
 *  to 267-291 (four runs alternating; 46,000-49,000 page faults instead of 38,000-41,000; at three
 *  quarters used or more, 51,000-58,000, about what whole MiBs alone cost). */
const capacityFor = (size: number) => {
  if (size < 128 * 1024) return Math.max(1, size);
  const huge = hugeShaped(size);
  return size >= 0.6 * huge ? huge : Math.ceil(size / MiB) * MiB;
};
/**
 * The smallest size of at least `size` bytes that glibc maps as whole 2 MiB: its chunk header and the
 * rounding to pages make a mapping 4 KiB larger than the request, and Linux places an anonymous mapping of
 * whole 2 MiB on a 2 MiB boundary, where (with the launchers' glibc.malloc.hugetlb=1, bin/malloc-env.mjs)
 * transparent huge pages back it. A fresh 2 MiB then costs one page fault instead of 512: here 8 fresh
 * buffers of 2 MiB were filled in 61-64 ms, of 2 MiB less 4 KiB in 10.6 ms.
 */
const hugeShaped = (size: number) => Math.ceil((size + 4096) / (2 * MiB)) * 2 * MiB - 4096;
const isScratchShape = (n: number) => n >= MiB && (n % MiB === 0 || (n + 4096) % (2 * MiB) === 0);
/** A buffer of `size` bytes and an ArrayBuffer of its own (it may move to another thread): a kept one at
 *  most four times the capacity it needs, or a new one. */
function takeScratch(size: number): Buffer {
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
function giveScratch(ab: ArrayBuffer | undefined): void {
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

const port = parentPort!;
const waiting = new Map<string, (v: unknown) => void>();
let seqCounter = 0;

function ask(taskId: number, event: TaskEvent): Promise<unknown> {
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

function tell(taskId: number, event: TaskEvent): void {
  port.postMessage({ type: 'event', taskId, seq: 0, event } satisfies FromWorker);
}

// Token bucket for the read limit, per worker: bytes already read are paid for by waiting until the
// bucket is no longer in debt (at most one second of burst is kept).
let tokens = 0;
let lastRefill = Date.now();
async function throttle(bytes: number): Promise<void> {
  if (!init.readLimit || !bytes) return;
  const now = Date.now();
  tokens = Math.min(init.readLimit, tokens + ((now - lastRefill) / 1000) * init.readLimit) - bytes;
  lastRefill = now;
  if (tokens < 0) await new Promise((r) => setTimeout(r, (-tokens / init.readLimit) * 1000));
}

/** A file's size and modification time after reading it, to compare with the scan's (sameMtime). */
async function statAfter(fh: { stat(o: { bigint: true }): Promise<BigIntStats> }) {
  const st = await fh.stat({ bigint: true });
  return { size: Number(st.size), mtimeMs: mtimeMsOf(st.mtimeNs) };
}

function sealChunk(id: Buffer, data: Uint8Array): SealedBlobMsg {
  const c = maybeCompressTransient(data, init.compressionLevel); // sealed (copied) right away
  const sealed = seal(encKey, c.data, id);
  // an ArrayBuffer of its own, so it can be transferred (copied when it is a slice of a shared pool)
  let own: Uint8Array = sealed;
  if (sealed.byteOffset !== 0 || sealed.byteLength !== sealed.buffer.byteLength) {
    own = new Uint8Array(sealed.length);
    own.set(sealed);
  }
  return { id: new Uint8Array(id), sealed: own, rawLength: data.length, compressed: c.compressed };
}

/** Compresses and seals a segment of chunks into one buffer. */
function sealSegment(seg: ChunkSegment): SealedSegment {
  const data = Buffer.from(seg.data.buffer, seg.data.byteOffset, seg.data.byteLength);
  const ids = Buffer.from(seg.ids.buffer, seg.ids.byteOffset, seg.ids.byteLength);
  return sealEach(
    seg.lengths.length,
    (i) => data.subarray(seg.offsets[i], seg.offsets[i] + seg.lengths[i]),
    ids,
    !!seg.oneFile,
  );
}

/** Compresses and seals chunks (views, wherever they are) into one buffer, as a sealed segment: one
 *  allocation and one move between threads, not one per chunk. */
function sealChunks(chunks: { id: Uint8Array; data: Uint8Array }[]): SealedSegment {
  const ids = Buffer.allocUnsafe(32 * chunks.length);
  chunks.forEach((c, k) => ids.set(c.id, 32 * k));
  const views = chunks.map((c) => Buffer.from(c.data.buffer, c.data.byteOffset, c.data.byteLength));
  return sealEach(chunks.length, (i) => views[i], ids, false);
}

/** Seals n chunks (`plainOf(i)`, ID ids[32i, 32i + 32)) into one buffer; see CompressionProbe for oneFile.
 *  The chunks are compressed first, into the thread's staging buffer, so that the sealed buffer has just
 *  the size it needs (no copy to shrink it, no room pinned until its pack is written). */
function sealEach(n: number, plainOf: (i: number) => Buffer, ids: Buffer, oneFile: boolean): SealedSegment {
  let bound = 0;
  for (let i = 0; i < n; i++) bound += compressBound(plainOf(i).length);
  const stage = stageOf(bound);
  const packed = new Uint32Array(n); // compressed length in the stage, 0: stored raw
  const rawLengths = new Uint32Array(n);
  const compressed = new Uint8Array(n);
  const probe = oneFile ? new CompressionProbe() : undefined;
  let at = 0;
  let cap = 0;
  for (let i = 0; i < n; i++) {
    const plain = plainOf(i);
    rawLengths[i] = plain.length;
    if (!probe || probe.shouldTry()) {
      packed[i] = compressInto(plain, init.compressionLevel, stage.subarray(at));
      probe?.record(packed[i] > 0);
    }
    compressed[i] = packed[i] > 0 ? 1 : 0;
    cap += (packed[i] || plain.length) + OVERHEAD;
    at += packed[i];
  }
  const out = takeScratch(cap);
  const offsets = new Uint32Array(n);
  const lengths = new Uint32Array(n);
  let pos = 0;
  at = 0;
  for (let i = 0; i < n; i++) {
    const data = packed[i] ? stage.subarray(at, at + packed[i]) : plainOf(i);
    at += packed[i];
    const len = sealInto(encKey, data, ids.subarray(32 * i, 32 * i + 32), out, pos);
    offsets[i] = pos;
    lengths[i] = len;
    pos += len;
  }
  return {
    data: new Uint8Array(out.buffer, out.byteOffset, pos),
    ids: new Uint8Array(ids),
    offsets,
    lengths,
    rawLengths,
    compressed,
  };
}

/** The thread's staging buffer for compressed chunks, at least `size` bytes (kept up to 16 MiB). */
let staging: Buffer | undefined;
function stageOf(size: number): Buffer {
  const b = scratchOf(staging, size, STAGE_MAX); // allocated once at its largest (see scratchOf)
  if (b.length <= STAGE_MAX) staging = b;
  return b;
}
const STAGE_MAX = 16 * MiB;

/**
 * Segment buffers to fill again (SealedSegment.emptied, QueryReply.spares). A 2 MiB buffer of fresh memory
 * costs 512 page faults as blocks are copied into it: in an incremental of a 2 GiB block file (~5,000
 * changed 8 KiB blocks, `npm run bench:cbt`) that was the reading thread's largest cost.
 */
const spareSegments: ArrayBuffer[] = [];
const MAX_SPARE_SEGMENTS = 8;
function keepSpare(buf: ArrayBuffer, capacity: number): void {
  if (buf.byteLength === capacity && spareSegments.length < MAX_SPARE_SEGMENTS) spareSegments.push(buf);
}

/** A segment being filled with a block file's blocks (see ChunkSegment). */
class SegmentBuilder {
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
async function storeSegmentsIfNew(taskId: number, segs: SegmentBuilder[]): Promise<void> {
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
  if (init.distributeSeal && handOver) await ask(taskId, { kind: 'segments', segments: out });
  else {
    const sealed = out.map(sealSegment);
    for (const s of taken) s.recycle(); // sealed here, into buffers of their own: free again
    await ask(taskId, { kind: 'sealedSegments', segments: sealed });
  }
}

/**
 * Backs up a large file of which only some byte ranges changed: previous chunks that touch no changed
 * range are reused unread; from the previous chunk boundary before a change the file is read and
 * re-chunked until a cut falls on a previous boundary again (FastCDC cuts depend only on the bytes
 * since the chunk start, so from there the old cuts repeat). The result equals chunking the whole file.
 */
async function backupFileRanges(
  taskId: number,
  task: BackupFileTask,
  fh: fs.FileHandle,
): Promise<BackupFileResult> {
  const inc = task.incremental!;
  const size = task.size;
  const starts = new Map<number, number>(); // previous chunk start → index
  const ends: number[] = [];
  let off = 0;
  inc.prevSizes.forEach((len, i) => {
    starts.set(off, i);
    off += len;
    ends.push(off);
  });
  const oldSize = off;
  const ranges = [...inc.changed].sort((a, b) => a.offset - b.offset);
  const touched = (s: number, e: number) => ranges.some((r) => r.offset < e && r.offset + r.length > s);
  // may a previous chunk starting at `s` be reused as is?
  const reusable = (i: number) => {
    const s = i === 0 ? 0 : ends[i - 1];
    const e = ends[i];
    if (e > size || touched(s, e)) return false;
    if (i === inc.prevSizes.length - 1 && size !== oldSize) return false; // cut by EOF, not by content
    return true;
  };
  const content: string[] = [];
  let bytesRead = 0;
  let pos = 0;
  const buf = Buffer.allocUnsafe(Math.max(1, Math.min(READ_BLOCK, size + 1)));
  while (pos < size) {
    const k = starts.get(pos);
    if (k !== undefined && reusable(k)) {
      content.push(inc.prevIds[k]);
      pos = ends[k];
      continue;
    }
    // re-chunk from pos until back in step with the previous boundaries, reading two average chunks
    // at a time so little is read beyond the point where the cuts fall back into step; new chunks go
    // to the main thread in batches (one dedup query per batch, not per chunk)
    const step = 2 * init.chunker.avg;
    let start = 0;
    let end = 0;
    let fileOff = pos; // file offset of buf[0]
    let eof = false;
    let pendingCuts: { off: number; len: number; id: Buffer }[] = [];
    const flush = async () => {
      if (!pendingCuts.length) return;
      const cuts = pendingCuts;
      pendingCuts = [];
      await storeIfNew(
        taskId,
        cuts.map((c) => ({ id: c.id, data: buf.subarray(c.off, c.off + c.len) })),
      );
    };
    for (;;) {
      const len = start < end ? cdc.nextCut(buf, start, end, eof) : 0;
      if (len === 0) {
        if (eof) break;
        if (end + step > buf.length) {
          await flush(); // cut offsets point into buf: settle them before moving its bytes
          buf.copy(buf, 0, start, end);
          fileOff += start;
          end -= start;
          start = 0;
        }
        const want = Math.min(step, buf.length - end, size - (fileOff + end));
        const { bytesRead: n } = want > 0 ? await fh.read(buf, end, want, fileOff + end) : { bytesRead: 0 };
        end += n;
        bytesRead += n;
        if (n === 0 || fileOff + end >= size) eof = true;
        if (n) tell(taskId, { kind: 'read', bytes: n });
        await throttle(n);
        continue;
      }
      const id = blobId(idKey, buf.subarray(start, start + len));
      content.push(id.toString('hex'));
      pendingCuts.push({ off: start, len, id });
      start += len;
      pos = fileOff + start;
      const j = starts.get(pos);
      if (j !== undefined && reusable(j)) break; // back in step: the previous chunks from here on are valid
      if (eof && start >= end) break;
    }
    await flush();
    if (eof && start >= end) pos = Math.max(pos, fileOff + end);
  }
  const after = await statAfter(fh);
  const changedWhileReading = after.size !== size || !sameMtime(after.mtimeMs, task.mtimeMs);
  return { content, bytesRead, size, changedWhileReading, blobs: [] };
}

/** New blocks copied into segments of ~2 MiB as they are hashed (see ChunkSegment): the read buffers are
 *  reused at once and one buffer per segment, not per block, moves between threads. */
class SegmentQueue {
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

type BlockRun = { first: number; count: number };

/** The bytes of the file a run of blocks covers (a file's last block may be short). */
function extentOf(p: BlockRun, B: number, size: number): Piece {
  return { offset: p.first * B, length: Math.min(p.count * B, size - p.first * B) };
}

/*
 * The loops over a block file's blocks (up to 512 Ki) and over a batch's blocks are functions of their
 * own. Inside the large async backupFileBlocks they made V8 optimize all of it, on-stack replacement
 * included (~100 ms of a helper thread's time per incremental of a 2 GiB file, thrown away when a rarely
 * taken path deoptimized it, so paid again next run); on a two-core PC that is time the reads and the
 * hashing wait for. `node --trace-opt`, bench:cbt's incremental: ~150 → ~90 ms compiling per run.
 */

/** Which blocks to read of a file of n blocks, in ascending order: all of them (undefined), or for an
 *  incremental the blocks the changed ranges touch and those the previous version does not have whole.
 *  Built from the ranges, not from a flag per block: an incremental of a 2 GiB file reads ~5,000 of its
 *  256 Ki blocks, and a loop over all of them ran ~15 ms before V8 had optimized it (`npm run bench:cbt`). */
function blocksToRead(
  n: number,
  B: number,
  size: number,
  inc: BackupFileTask['incremental'],
): Uint32Array | undefined {
  if (!inc || inc.prevSize === undefined) return undefined;
  const oldSize = inc.prevSize;
  const prevCount = inc.prevCount ?? 0;
  const whole = Math.floor(Math.min(oldSize, size) / B); // blocks whole in both versions
  const list: number[] = [];
  let tailEnd = n;
  if (oldSize === size && n > 0 && n === prevCount) tailEnd = n - 1; // same short last block
  for (let i = Math.min(whole, prevCount, n); i < tailEnd; i++) list.push(i);
  for (const r of inc.changed) {
    if (r.length <= 0) continue;
    const last = Math.min(n - 1, Math.floor((r.offset + r.length - 1) / B));
    for (let i = Math.floor(r.offset / B); i <= last; i++) list.push(i);
  }
  const sorted = Uint32Array.from(list).sort();
  let u = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[u - 1]) sorted[u++] = sorted[i];
  return sorted.subarray(0, u);
}

/** The blocks to read (all n when `blocks` is undefined) as runs of consecutive blocks of at most
 *  maxPiece bytes. */
function piecesOf(blocks: Uint32Array | undefined, n: number, B: number, maxPiece: number): BlockRun[] {
  const per = Math.max(1, Math.floor(maxPiece / B));
  const pieces: BlockRun[] = [];
  if (!blocks) {
    for (let i = 0; i < n; i += per) pieces.push({ first: i, count: Math.min(per, n - i) });
    return pieces;
  }
  for (let k = 0; k < blocks.length;) {
    const first = blocks[k];
    let count = 1;
    while (k + count < blocks.length && blocks[k + count] === first + count && count < per) count++;
    pieces.push({ first, count });
    k += count;
  }
  return pieces;
}

/** A striped task's blocks (BackupFileTask.stripes) as runs of at most maxPiece bytes, stripe by stripe,
 *  and how many blocks they hold. */
function stripedPieces(
  n: number,
  B: number,
  maxPiece: number,
  st: NonNullable<BackupFileTask['stripes']>,
): { pieces: BlockRun[]; count: number } {
  const per = Math.max(1, Math.floor(maxPiece / B));
  const pieces: BlockRun[] = [];
  let count = 0;
  for (let first = st.part * st.blocks; first < n; first += st.parts * st.blocks) {
    const end = Math.min(n, first + st.blocks);
    for (let i = first; i < end; i += per) pieces.push({ first: i, count: Math.min(per, end - i) });
    count += end - first;
  }
  return { pieces, count };
}

/** Runs grouped into batches of at most `limit` bytes and 256 runs (one scattered read each). */
function batchesOf(pieces: BlockRun[], B: number, limit: number): BlockRun[][] {
  const batches: BlockRun[][] = [];
  let cur: BlockRun[] = [];
  let bytes = 0;
  for (const p of pieces) {
    if (cur.length && (bytes + p.count * B > limit || cur.length >= 256)) {
      batches.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(p);
    bytes += p.count * B;
  }
  if (cur.length) batches.push(cur);
  return batches;
}

/**
 * Hashes the blocks of one batch of reads into `segs`, noting each block's ID and length in `ids` and
 * `lens` in the order the blocks are read, from index `at` (the blocks of the batches before it).
 * Returns the bytes read and whether a piece came back short (the file shrank while it was read).
 */
function hashBlocks(
  segs: SegmentQueue,
  ids: Buffer,
  lens: Int32Array,
  at: number,
  B: number,
  size: number,
  pieces: BlockRun[],
  asked: Piece[],
  buffer: Buffer,
  got: Uint32Array,
): { read: number; short: boolean } {
  let pos = 0;
  let read = 0;
  let short = false;
  for (let j = 0; j < pieces.length; j++) {
    const piece = pieces[j];
    const want = extentOf(piece, B, size).length;
    const n = Math.min(got[j], want); // a direct read may return bytes past the block list's end
    const buf = buffer.subarray(pos, pos + n);
    pos += asked[j].length;
    if (n < want) short = true;
    read += n;
    for (let k = 0; k < piece.count; k++) {
      const data = buf.subarray(k * B, Math.min(buf.length, (k + 1) * B));
      if (!data.length) break; // its slots keep length 0 (a file that shrank: see the caller)
      const id = blobId(idKey, data);
      id.copy(ids, (at + k) * ID_BYTES);
      lens[at + k] = data.length;
      segs.add(id, id.toString('hex'), data);
    }
    at += piece.count; // the next piece's slots, however much of this one came back
  }
  return { read, short };
}

/**
 * Backs up a file cut into fixed-size blocks (large files that change in place: VM disks, databases).
 * Without `incremental` every block is read, in large sequential reads. With it, a previous block is
 * reused unread unless a changed range touches it or it is not a whole block in both versions (the
 * last block of a file that grew or shrank); the others are read exactly, several reads in flight, so
 * scattered page writes cost a few random reads instead of a pass over the whole file. Block cuts do
 * not depend on content, so the result equals reading the whole file.
 */
async function backupFileBlocks(
  taskId: number,
  task: BackupFileTask,
  src: BlockSource,
): Promise<BackupFileResult> {
  const B = task.blockSize!;
  const size = task.size;
  const n = Math.ceil(size / B);
  const inc = task.incremental;
  const blocks = blocksToRead(n, B, size, inc); // undefined: all n (or this task's stripes of them)
  const PIECE = Math.max(B, Math.floor((4 * 1024 * 1024) / B) * B);
  // Direct reads of consecutive blocks go 1 MiB at a time, several in flight: without the kernel's
  // read-ahead, two 4 MiB reads at a time took 1.8–2.0 s for a whole 2 GiB file, 1 MiB pieces 1.56–1.59 s
  // (through the page cache: ~1.53 s; `npm run bench:cbt`, the whole-file incremental).
  const maxPiece = src.direct ? Math.max(B, Math.min(PIECE, 1024 * 1024)) : PIECE;
  const striped = !inc && task.stripes ? stripedPieces(n, B, maxPiece, task.stripes) : undefined;
  const toRead = blocks ? blocks.length : striped ? striped.count : n;
  // the IDs and lengths of the blocks read, in the order they are read (for a whole file: at their places)
  const ids = Buffer.allocUnsafeSlow(toRead * ID_BYTES);
  const lens = new Int32Array(toRead);
  // The blocks to read, as pieces of consecutive blocks of at most maxPiece bytes, in batches of at most
  // PIECE bytes (below).
  const pieces = striped ? striped.pieces : piecesOf(blocks, n, B, maxPiece);
  let bytesRead = 0;
  let short = false;
  let unreported = 0;
  const report = () => {
    if (unreported) tell(taskId, { kind: 'read', bytes: unreported });
    unreported = 0;
  };
  // New blocks go to the main thread in batches of up to 4 MiB (one dedup query per batch). Up to three
  // batches are with the main thread at once (dedup query, then sealing by any free worker) while
  // reading and hashing go on: waiting for each batch stalled the reads behind it.
  const segs = new SegmentQueue(Math.max(2 * 1024 * 1024, B), B);
  const storing = new Set<Promise<void>>();
  let storeError: unknown;
  const flush = async (all = false) => {
    const batch = segs.take(all);
    if (batch.length) {
      const p: Promise<void> = storeSegmentsIfNew(taskId, batch)
        .catch((err) => {
          storeError ??= err;
        })
        .finally(() => storing.delete(p));
      storing.add(p);
    }
    while (storing.size >= 3) await Promise.race(storing);
    if (storeError) throw storeError;
  };
  const flushAll = async () => {
    await flush(true);
    while (storing.size) await Promise.race(storing);
    if (storeError) throw storeError;
  };
  // The pieces are read in batches of up to 4 MiB and 256 pieces, each in one call that keeps up to 24
  // reads in flight (scattered blocks need a deep queue: random reads one at a time are slow), two
  // batches at once, so the next batch is being read while this thread hashes the one before.
  const batches = batchesOf(pieces, B, PIECE);
  const batchAt = new Int32Array(batches.length); // the index (in `ids`) of each batch's first block
  for (let i = 1; i < batches.length; i++)
    batchAt[i] = batchAt[i - 1] + batches[i - 1].reduce((c, p) => c + p.count, 0);
  // Direct reads ask for whole 4 KiB units: only a file's last block can be shorter, and past the end of
  // the file a direct read stops short like any other.
  const asked = (p: Piece): Piece =>
    src.direct ? { offset: p.offset, length: Math.ceil(p.length / ALIGN) * ALIGN } : p;
  const reads: { pieces: Piece[]; read: Promise<{ buffer: Buffer; got: Uint32Array }> }[] = [];
  let spareReads: Buffer[] = []; // read buffers are reused: their blocks are copied out as they are hashed
  let issued = 0;
  let stopped = false;
  const issue = () => {
    while (!stopped && issued < batches.length && reads.length < 2) {
      const pieces = batches[issued++].map((p) => asked(extentOf(p, B, size)));
      // a batch holds at most PIECE bytes (rounded up to 4 KiB units, it still fits: B is a multiple)
      const into = spareReads.pop() ?? src.readBuffer(PIECE);
      const read = readScattered(src.fh.fd, pieces, 24, { into });
      read.catch(() => {}); // a failed batch is rethrown where it is awaited, in order
      reads.push({ pieces, read });
    }
  };
  try {
    issue();
    for (let bi = 0; reads.length; bi++) {
      let buffer: Buffer;
      let got: Uint32Array;
      const { pieces: askedPieces } = reads[0];
      try {
        ({ buffer, got } = await reads[0].read);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EINVAL' || !src.direct) throw err;
        // the filesystem opened the file for direct I/O but does not read it so: on through the cache
        await Promise.allSettled(reads.map((r) => r.read));
        reads.length = 0;
        spareReads.forEach((b) => src.giveBuffer(b));
        spareReads = [];
        await src.toBuffered();
        issued = bi--;
        issue();
        continue;
      }
      reads.shift();
      issue();
      const hashed = hashBlocks(segs, ids, lens, batchAt[bi], B, size, batches[bi], askedPieces, buffer, got);
      if (hashed.short) short = true; // shrank while we read: reported as changed below
      const batchRead = hashed.read;
      spareReads.push(buffer); // its blocks are copied into segments: free for the next batch
      bytesRead += batchRead;
      unreported += batchRead;
      if (unreported >= 1024 * 1024) report(); // progress in MiB steps, not a message per block
      await throttle(batchRead);
      if (segs.pendingBytes >= 4 * 1024 * 1024) await flush();
    }
    await flushAll();
  } finally {
    // settle reads in flight and batches being stored (after an error) before the caller closes the file
    stopped = true;
    await Promise.allSettled([...reads.map((r) => r.read), ...storing]);
    spareReads.forEach((b) => src.giveBuffer(b));
    report();
  }
  const after = await statAfter(src.fh);
  const changedWhileReading = short || after.size !== size || !sameMtime(after.mtimeMs, task.mtimeMs);
  if (striped) return { content: [], blockIds: ids, bytesRead, size, changedWhileReading, blobs: [], short };
  if (!short) {
    if (!blocks) return { content: [], blockIds: ids, bytesRead, size, changedWhileReading, blobs: [] };
    return {
      content: [],
      blockIds: ids,
      readBlocks: blocks,
      blockCount: n,
      bytesRead,
      size,
      changedWhileReading,
      blobs: [],
    };
  }
  // It shrank while we read. Reused blocks may now lie past its end: read it again, whole, and keep
  // what was there (blocks up to the first short one), so the content always matches the size.
  if (inc) {
    const again = await backupFileBlocks(taskId, { ...task, size: after.size, incremental: undefined }, src);
    return { ...again, bytesRead: bytesRead + again.bytesRead, changedWhileReading: true };
  }
  let kept = 0;
  let count = 0;
  for (; count < n && lens[count] > 0; count++) {
    kept += lens[count];
    if (lens[count] < B) {
      count++;
      break;
    }
  }
  return {
    content: [],
    blockIds: ids.subarray(0, count * ID_BYTES),
    bytesRead,
    size: kept,
    changedWhileReading: true,
    blobs: [],
  };
}

/** Asks the main thread which of these chunks the repository lacks (one dedup query for the batch) and
 *  stores those. */
async function storeIfNew(taskId: number, chunks: { id: Buffer; data: Uint8Array }[]): Promise<void> {
  if (!chunks.length) return;
  const { store, handOver } = (await ask(taskId, {
    kind: 'query',
    ids: chunks.map((c) => c.id.toString('hex')),
  })) as QueryReply;
  await storeNew(
    taskId,
    chunks.filter((_, i) => store[i]),
    handOver,
  );
}

/** Stores new chunks: sealed here, or handed over raw so that any free worker compresses them. */
async function storeNew(
  taskId: number,
  chunks: { id: Buffer; data: Uint8Array }[],
  handOver: boolean,
): Promise<void> {
  if (!chunks.length) return;
  if (init.distributeSeal && handOver) {
    const raw = chunks.map((c) => {
      const data = new Uint8Array(c.data.length);
      data.set(c.data);
      return { id: new Uint8Array(c.id), data };
    });
    await ask(taskId, { kind: 'raw', chunks: raw });
    return;
  }
  await ask(taskId, { kind: 'sealedSegments', segments: [sealChunks(chunks)] });
}

async function backupFile(taskId: number, task: BackupFileTask): Promise<BackupFileResult> {
  if (task.blockSize) {
    // a block file's blocks, all or the changed ones: past the page cache where the filesystem allows
    const src = await BlockSource.open(Buffer.from(task.path), task.size);
    try {
      return await backupFileBlocks(taskId, task, src);
    } finally {
      await src.close();
    }
  }
  if (task.incremental && task.size >= init.chunker.min) {
    // positioned reads of some parts of the file, through the page cache
    const fh = await fs.open(Buffer.from(task.path), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      return await backupFileRanges(taskId, task, fh);
    } finally {
      await fh.close();
    }
  }
  // the whole file, start to end: large files past the page cache (backup/sourceRead.ts)
  const fh = await SourceReader.open(Buffer.from(task.path), task.size);
  let block: Buffer | undefined;
  let blockAligned = false;
  try {
    const content: string[] = [];
    let bytesRead = 0;
    const speculative: SealedBlobMsg[] = [];
    // Small files: one read, one chunk, no round trip — the blob travels with the result.
    const small = task.size < init.chunker.min;
    // Direct reads go straight into an aligned block at aligned offsets (SourceReader.readAligned)
    const aligned = fh.direct && !small ? takeAligned(alignedBlockBytes()) : undefined;
    const buf = (block = aligned ?? takeBlock(task.size));
    blockAligned = !!aligned;
    let start = 0; // first unconsumed byte in buf
    let end = 0; // end of valid data
    let eof = false;
    let cuts: { off: number; len: number; id: Buffer }[] = [];
    let cutBytes = 0;
    /** Stores the chunks cut so far (they point into buf: settled before its bytes move). */
    const settle = async () => {
      const batch = cuts;
      cuts = [];
      cutBytes = 0;
      for (const c of batch) content.push(c.id.toString('hex'));
      if (small) {
        for (const c of batch) speculative.push(sealChunk(c.id, buf.subarray(c.off, c.off + c.len)));
      } else if (batch.length) {
        await storeIfNew(
          taskId,
          batch.map((c) => ({ id: c.id, data: buf.subarray(c.off, c.off + c.len) })),
        );
      }
    };
    for (;;) {
      // every chunk the data in buf holds; nextCut answers 0 when the next cut needs more data
      const len = start < end ? cdc.nextCut(buf, start, end, eof) : 0;
      if (len > 0) {
        // one dedup query (and one sealed segment) per up to chunker.max bytes of chunks
        if (cutBytes + len > init.chunker.max) await settle();
        cuts.push({ off: start, len, id: blobId(idKey, buf.subarray(start, start + len)) });
        start += len;
        cutBytes += len;
        continue;
      }
      await settle();
      if (eof) break;
      // The unfinished chunk (under chunker.max bytes) moves to the front, ending at an aligned offset
      // for direct reads, and the rest of the block is filled. Refilling only when no cut can be made
      // moves ~one chunk per block; refilling whenever under chunker.max was left moved up to 4 MiB per
      // 4 MiB read (another ~0.25 CPU-s of memmove in a full backup of the bench dataset).
      const keep = end - start;
      const to = aligned ? (ALIGN - (keep % ALIGN)) % ALIGN : 0;
      if (keep && start !== to) buf.copy(buf, to, start, end);
      start = to;
      end = to + keep;
      const n = aligned
        ? await fh.readAligned(buf, end, buf.length - end)
        : await fh.read(buf, end, buf.length - end);
      if (n === 0) eof = true;
      end += n;
      bytesRead += n;
      if (n) tell(taskId, { kind: 'read', bytes: n });
      await throttle(n);
    }
    const after = await statAfter(fh);
    const changedWhileReading =
      after.size !== bytesRead || after.size !== task.size || !sameMtime(after.mtimeMs, task.mtimeMs);
    return { content, bytesRead, size: bytesRead, changedWhileReading, blobs: speculative };
  } finally {
    // two aligned blocks kept (a worker reads two files at a time at most): four sat idle through the
    // small files of a full backup of the bench dataset, 12 MiB of its peak RSS
    if (block && blockAligned) giveAligned(block, 2);
    else if (block) giveBlock(block);
    await fh.close();
  }
}

/** Small files: read in one call per batch, several in flight (backup/scatterRead.ts, readFiles), then
 *  hashed and sealed together straight from the buffer they were read into; another task of this worker
 *  computes while a batch is being read. */
async function backupSmallFiles(taskId: number, task: SmallFilesTask): Promise<SmallFilesResult> {
  // one byte more than expected shows that a file grew
  const limits = task.files.map((f) => f.size + 1);
  const { buffer, files } = await readFiles(
    task.files.map((f) => f.path),
    limits,
    8,
    { into: takeScratch(limits.reduce((a, b) => a + b, 0)) },
  );
  let readTotal = 0;
  for (const r of files) if (!r.error) readTotal += r.n;
  await throttle(readTotal);
  const out: SmallFileResult[] = [];
  // every file's chunks, as places in `buffer`, sealed together into one buffer (see ChunkSegment)
  const ids: Buffer[] = [];
  const offsets: number[] = [];
  const lengths: number[] = [];
  const add = (id: Buffer, offset: number, length: number) => {
    ids.push(id);
    offsets.push(offset);
    lengths.push(length);
    return ids.length - 1;
  };
  task.files.forEach((f, i) => {
    const r = files[i];
    if (r.error) {
      out.push({ error: r.error });
      return;
    }
    const n = r.n;
    const changed = n !== f.size || r.size !== n || !sameMtime(r.mtimeMs, f.mtimeMs);
    // a file that grew past one chunk while we looked is chunked properly
    const lens =
      n === 0 ? [] : n > init.chunker.min ? cdc.chunkAll(buffer.subarray(r.start, r.start + n)) : [n];
    const content: string[] = [];
    const blobRefs: number[] = [];
    let off = r.start;
    for (const len of lens) {
      const id = blobId(idKey, buffer.subarray(off, off + len));
      content.push(id.toString('hex'));
      blobRefs.push(add(id, off, len));
      off += len;
    }
    out.push({ content, bytesRead: n, size: n, changedWhileReading: changed, blobs: [], blobRefs });
  });
  if (readTotal) tell(taskId, { kind: 'read', bytes: readTotal });
  let sealed: SealedSegment | undefined;
  if (ids.length) {
    const segment: ChunkSegment = {
      data: buffer,
      ids: new Uint8Array(32 * ids.length),
      offsets: Uint32Array.from(offsets),
      lengths: Uint32Array.from(lengths),
    };
    ids.forEach((id, k) => segment.ids.set(id, 32 * k));
    sealed = sealSegment(segment);
  }
  giveScratch(buffer.buffer as ArrayBuffer); // sealed into a buffer of its own: free again
  return { files: out, sealed };
}

/** A folder's names and their lstat (scan/listDir.ts: native, off this thread, where built). */
async function listFolder(task: ListDirTask): Promise<ListDirResult> {
  const { names, stats, error } = await listDir(Buffer.from(task.path));
  return error ? { error, names, stats } : { names, stats };
}

let stagingBuf: Buffer | undefined; // reused from task to task
let alignedStaging: Buffer | undefined; // the same for runs written past the page cache, kept for good
let directRefused = false; // the target's filesystem or device said no to O_DIRECT: buffered from then on

/**
 * Writes restored blobs into files the main thread created and sized; all-zero blobs are left as holes.
 * Blobs of one decode task that follow each other in a file (a block file's blocks, packed in file order)
 * are gathered into one write, and each file is opened once per task: a restore of a 2 GiB block file at
 * 4 KiB blocks opened, wrote and closed the file 512 Ki times, two workers contending for its inode lock.
 *
 * With `direct` (the target is on a local disk), a run of DIRECT_RUN_MIN bytes or more has the whole
 * blocks it covers written past the page cache (O_DIRECT), its partial first and last block through it.
 * The run is gathered into aligned memory at the position its file offset has within a block, so that
 * memory and file line up. Writing into the page cache is most of what a restore's workers spend: in the
 * VM the bench runs in each fresh page-cache page costs the host a fault (restore of the bench dataset,
 * perf: 35% of the workers' time in pwrite, 28% copying into fresh pages; `dd` of 512 MiB to the bench's
 * loop-mounted ext4: 0.54 s of system time buffered, 0.10 s direct, at ~1 GB/s either way). A block
 * written direct is written by no one else: runs never share one, and the partial blocks at their ends
 * always go through the cache.
 */
class PartWriter {
  /** `direct`: the task's DecodeTask.direct. */
  constructor(private readonly direct = false) {}
  private fds = new Map<string, number>();
  private directFds = new Map<string, number>();
  /** Bytes written past the page cache. */
  directBytes = 0;
  private run?: {
    key: string;
    path: Uint8Array;
    offset: number;
    len: number;
    /** Where the run starts in its staging buffer: offset % ALIGN when gathered for a direct write. */
    lead: number;
    direct: boolean;
    /** The parts gathered in it (their indices in the task's batch), for their outcome. */
    slots: number[];
    failed: DecodeFailures;
  };

  /** Queues `plain` for the piece of file `path` at `offset` (part i of the task's batch); once flushed, a
   *  failure to write it lands in failed.parts. */
  add(path: Uint8Array, offset: number, plain: Buffer, failed: DecodeFailures, i: number): void {
    if (allZero(plain)) return; // a hole: the file was sized, nothing to write
    const key = Buffer.from(path.buffer, path.byteOffset, path.byteLength).toString('latin1');
    let run = this.run;
    const fits = run && run.key === key && run.offset + run.len === offset;
    if (!fits || run!.len + plain.length > STAGING_MAX) {
      this.flush();
      // a blob larger than STAGING_MAX (see below) is written through the cache, from a buffer of its own
      const d = this.direct && !directRefused && O_DIRECT !== undefined && plain.length <= STAGING_MAX;
      run = this.run = {
        key,
        path,
        offset,
        len: 0,
        lead: d ? offset % ALIGN : 0,
        direct: d,
        slots: [],
        failed,
      };
    }
    if (run!.direct) {
      alignedStaging ??= takeAligned(ALIGNED_STAGING);
      if (!alignedStaging) {
        run!.direct = false; // no aligned memory to be had: through the cache
        run!.lead = 0;
      }
    }
    if (run!.direct) plain.copy(alignedStaging!, run!.lead + run!.len);
    else {
      // allocated once at STAGING_MAX (see scratchOf); only an empty run can need more (a blob larger
      // than that, the block of a file of many TiB: a run of its own in a buffer of its own), so nothing
      // is copied
      stagingBuf = scratchOf(stagingBuf, run!.len + plain.length, STAGING_MAX);
      plain.copy(stagingBuf, run!.len);
    }
    run!.len += plain.length;
    run!.slots.push(i);
  }

  /** The file's descriptor in `fds` (opened with `flags`); a few dozen stay open per task. */
  private fdOf(fds: Map<string, number>, key: string, path: Uint8Array, flags: number): number {
    let fd = fds.get(key);
    if (fd === undefined) {
      // a task's blobs may belong to many files (a night's changed blocks of many block files): a few
      // dozen stay open, the one opened first is closed for the next
      if (fds.size >= MAX_OPEN_PARTS) {
        const [oldest, ofd] = fds.entries().next().value!;
        fds.delete(oldest);
        closeSync(ofd);
      }
      fd = openSync(Buffer.from(path), flags);
      fds.set(key, fd);
    }
    return fd;
  }

  /** Writes the gathered run, if any. */
  flush(): void {
    const run = this.run;
    this.run = undefined;
    if (!run) return;
    try {
      const fd = this.fdOf(this.fds, run.key, run.path, FS.O_WRONLY | FS.O_NOFOLLOW);
      const end = run.offset + run.len;
      const bodyStart = Math.ceil(run.offset / ALIGN) * ALIGN;
      const bodyEnd = Math.floor(end / ALIGN) * ALIGN;
      if (!run.direct) {
        writeAll(fd, stagingBuf!, 0, run.len, run.offset);
        return;
      }
      if (run.len < DIRECT_RUN_MIN || bodyEnd <= bodyStart || !this.writeDirect(run, bodyStart, bodyEnd))
        writeAll(fd, alignedStaging!, run.lead, run.len, run.offset);
      else {
        writeAll(fd, alignedStaging!, run.lead, bodyStart - run.offset, run.offset);
        writeAll(fd, alignedStaging!, run.lead + (bodyEnd - run.offset), end - bodyEnd, bodyEnd);
      }
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      for (const i of run.slots) (run.failed.parts ??= []).push([i, e.message, e.code]);
    }
  }

  /** Writes [bodyStart, bodyEnd) of the run past the cache; false (nothing written) where the filesystem
   *  or device refuses direct I/O (EINVAL), and never again in this thread. Other errors are thrown. */
  private writeDirect(run: NonNullable<PartWriter['run']>, bodyStart: number, bodyEnd: number): boolean {
    try {
      const fd = this.fdOf(this.directFds, run.key, run.path, FS.O_WRONLY | FS.O_NOFOLLOW | O_DIRECT!);
      writeAll(fd, alignedStaging!, run.lead + (bodyStart - run.offset), bodyEnd - bodyStart, bodyStart);
      this.directBytes += bodyEnd - bodyStart;
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
      directRefused = true;
      return false;
    }
  }

  /** Writes what is left and closes the files. */
  close(): void {
    try {
      this.flush();
    } finally {
      for (const fd of this.fds.values()) closeSync(fd);
      for (const fd of this.directFds.values()) closeSync(fd);
      this.fds.clear();
      this.directFds.clear();
      // a blob larger than STAGING_MAX (a huge file's block) grew the buffer past it: not kept for good
      if (stagingBuf && stagingBuf.length > STAGING_MAX) stagingBuf = undefined;
    }
  }
}

/** Writes buf[from, from + len) at `position`, however many calls it takes. */
function writeAll(fd: number, buf: Buffer, from: number, len: number, position: number): void {
  let done = 0;
  while (done < len) done += writeSync(fd, buf, from + done, len - done, position + done);
}

const STAGING_MAX = 8 * 1024 * 1024;
/** The aligned staging buffer: a run of STAGING_MAX bytes starting anywhere in a block (64 KiB pages). */
const ALIGNED_STAGING = STAGING_MAX + 64 * 1024;
/** Runs shorter than this go through the page cache whole: a direct write waits for the disk, which
 *  for a small file's piece costs more than the copy it saves. */
const DIRECT_RUN_MIN = 256 * 1024;
const MAX_OPEN_PARTS = 32;

/**
 * A decode task whose pack range the worker reads itself (DecodeTask.file): the main thread, busy
 * planning a restore (its walk of ~30,000 files took ~0.7 s), stood between each range's open, read and
 * close and the next, and its ranges took 50-120 ms to read while it walked (2-6 ms after). Reading here
 * asynchronously, one task reads while another decodes. Into a buffer of the thread's, used again.
 */
async function decodeFile(task: DecodeTask): Promise<{ result: DecodeResult; transfer: ArrayBuffer[] }> {
  const { path: file, offset, length, pack } = task.file!;
  let buf: Buffer | undefined; // read through the cache into this one
  let aligned: Buffer | undefined; // or past it into this one
  let data: Buffer;
  try {
    const read = task.file!.direct && !directReadRefused ? await readDirect(file, offset, length) : undefined;
    aligned = read?.buffer;
    if (read) data = read.data;
    else {
      buf = takeRangeBuffer(length);
      let done = 0;
      const fh = await fs.open(file, 'r');
      try {
        while (done < length) {
          const { bytesRead } = await fh.read(buf, done, length - done, offset + done);
          if (bytesRead === 0) break;
          done += bytesRead;
        }
      } finally {
        await fh.close();
      }
      data = buf.subarray(0, done);
    }
  } catch (err) {
    if (buf) keepRangeBuffer(buf);
    const message = `reading pack ${pack.slice(0, 12)}: ${(err as Error).message}`;
    const blobs = Array.from({ length: task.batch.count }, (_, i): [number, string] => [i, message]);
    return { result: { failed: { blobs } }, transfer: [] };
  }
  try {
    // a short pack fails the blobs past its end (decodeBatch)
    const decoded = decode(task, data);
    if (aligned) decoded.result.readDirect = length;
    return decoded;
  } finally {
    if (buf) keepRangeBuffer(buf);
    if (aligned) giveAligned(aligned, MAX_RANGE_BUFFERS);
  }
}

/**
 * Reads [offset, offset + length) of a pack past the page cache (O_DIRECT: the whole blocks around it,
 * into aligned memory), or undefined where the filesystem refuses (EINVAL: never tried again in this
 * thread) or no aligned memory can be had. A restore reads each pack range once: through the cache,
 * the kernel filled a fresh page-cache page for every 4 KiB and copied it out (perf, restore of the bench
 * dataset: ~0.25 CPU-s in the reading threads' pread, near a fifth of what those threads spent).
 */
async function readDirect(
  file: string,
  offset: number,
  length: number,
): Promise<{ data: Buffer; buffer: Buffer } | undefined> {
  const start = offset - (offset % ALIGN);
  const end = Math.ceil((offset + length) / ALIGN) * ALIGN;
  const buffer = takeAligned(Math.max(RANGE_ALIGNED, Math.ceil((end - start) / RANGE_UNIT) * RANGE_UNIT));
  if (!buffer) return undefined;
  let fh: FileHandle | undefined;
  try {
    fh = await fs.open(file, FS.O_RDONLY | O_DIRECT!);
    let done = 0;
    while (done < end - start) {
      const { bytesRead } = await fh.read(buffer, done, end - start - done, start + done);
      if (bytesRead === 0) break;
      done += bytesRead;
      if (done % ALIGN) break; // the end of the file
    }
    const lead = offset - start;
    return { data: buffer.subarray(lead, lead + Math.max(0, Math.min(length, done - lead))), buffer };
  } catch (err) {
    giveAligned(buffer, MAX_RANGE_BUFFERS);
    if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
    directReadRefused = true;
    return undefined;
  } finally {
    await fh?.close();
  }
}
let directReadRefused = O_DIRECT === undefined;
/** Aligned read buffers take a whole range of the restore's (up to 4 MiB, restore/index.ts coalesce, and
 *  the blocks around it), so that ranges of different lengths use the same ones again; a longer range
 *  (one blob larger than that) takes whole MiBs. */
const RANGE_UNIT = 1024 * 1024;
const RANGE_ALIGNED = 5 * RANGE_UNIT;

function keepRangeBuffer(buf: Buffer): void {
  // kept for the next range; of more than MAX_RANGE_BUFFERS the smallest is let go
  rangeBuffers.push(buf);
  rangeBuffers.sort((a, b) => b.length - a.length);
  if (rangeBuffers.length > MAX_RANGE_BUFFERS) discardBuffer(rangeBuffers.pop()!.buffer as ArrayBuffer);
}

/** Buffers decodeFile reads into, kept from task to task (a fresh one costs a page fault per page). Two:
 *  a worker has one or two decode tasks at a time (the restore runs four, restore/index.ts RESTORE_LOOPS). */
const rangeBuffers: Buffer[] = [];
const MAX_RANGE_BUFFERS = 2;
function takeRangeBuffer(size: number): Buffer {
  let i = -1;
  for (let k = 0; k < rangeBuffers.length; k++) if (rangeBuffers[k].length >= size) i = k; // the smallest fit
  if (i >= 0) return rangeBuffers.splice(i, 1)[0];
  return Buffer.allocUnsafeSlow(Math.ceil(size / (1024 * 1024)) * 1024 * 1024); // whole MiBs
}

function decode(task: DecodeTask, data = task.buffer!): { result: DecodeResult; transfer: ArrayBuffer[] } {
  const writer = new PartWriter(!!task.direct);
  const failed: DecodeFailures = {};
  try {
    decodeBatch(task, data, writer, failed);
  } finally {
    writer.close(); // the parts' outcomes are in `failed` once this returns
  }
  const result: DecodeResult = {
    failed: failed.blobs || failed.writes || failed.parts ? failed : undefined,
    direct: writer.directBytes || undefined,
  };
  if (!task.buffer) return { result, transfer: [] };
  // nothing refers to the task's buffer any more: back to the main thread
  const returned = task.buffer.buffer as ArrayBuffer;
  if (task.buffer.byteOffset === 0 && returned.byteLength >= 1024 * 1024) {
    result.returned = returned;
    return { result, transfer: [returned] };
  }
  return { result, transfer: [] };
}

/** Opens each blob of the task's batch (decrypt, decompress, check its ID) and writes the files made of it
 *  and the pieces it fills, reading the batch's arrays in place (./decodeBatch.ts); failures go in `failed`. */
function decodeBatch(task: DecodeTask, data: Uint8Array, writer: PartWriter, failed: DecodeFailures): void {
  const { count, blobs, ids, idsHex, writes, mtimes, parts, paths } = task.batch;
  const chown = !!task.chown;
  for (let i = 0; i < count; i++) {
    const b = i * BLOB_FIELDS;
    const offset = blobs[b];
    const length = blobs[b + 1];
    let plain: Buffer;
    try {
      if (offset + length > data.length) {
        (failed.blobs ??= []).push([i, 'the pack is shorter than its index says']);
        continue;
      }
      const id = Buffer.from(ids.buffer, ids.byteOffset + i * 32, 32);
      plain = openTransient(encKey, data.subarray(offset, offset + length), id);
      if (blobs[b + 3]) plain = decompressTransient(plain, blobs[b + 2]); // used before the next blob
      if (!idsHex.startsWith(blobIdHex(idKey, plain), i * 64)) {
        (failed.blobs ??= []).push([i, 'content does not match its ID']);
        continue;
      }
    } catch (err) {
      (failed.blobs ??= []).push([i, (err as Error).message]);
      continue;
    }
    for (let w = blobs[b + 4], end = w + blobs[b + 5]; w < end; w++) {
      const o = w * WRITE_FIELDS;
      try {
        const uid = writes[o + 3];
        writeWholeFile(
          paths.subarray(writes[o], writes[o] + writes[o + 1]),
          writes[o + 2],
          chown && uid >= 0 ? uid : undefined,
          writes[o + 4],
          mtimes[w],
          plain,
        );
      } catch (err) {
        const e = err as NodeJS.ErrnoException;
        (failed.writes ??= []).push([w, e.message, e.code]);
      }
    }
    for (let p = blobs[b + 6], end = p + blobs[b + 7]; p < end; p++) {
      const o = p * PART_FIELDS;
      writer.add(paths.subarray(parts[o], parts[o] + parts[o + 1]), parts[o + 2], plain, failed, p);
    }
  }
}

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
  const run = async (): Promise<{ result: unknown; transfer: ArrayBuffer[] }> => {
    if (task.op === 'backupFile') {
      const r = await backupFile(taskId, task);
      const transfer = r.blobs.map((b) => b.sealed.buffer as ArrayBuffer);
      if (r.blockIds) transfer.push(r.blockIds.buffer as ArrayBuffer); // its own ArrayBuffer (allocUnsafeSlow)
      return { result: r, transfer };
    }
    if (task.op === 'backupSmallFiles') {
      const r = await backupSmallFiles(taskId, task);
      return { result: r, transfer: r.sealed ? segmentBuffers(r.sealed) : [] };
    }
    if (task.op === 'listDir') return { result: await listFolder(task), transfer: [] };
    if (task.op === 'sealSegment') {
      const r = sealSegment(task.segment);
      // a block file's raw segment goes back to be filled again (see spareSegments)
      if (task.segment.oneFile) r.emptied = task.segment.data.buffer as ArrayBuffer;
      return { result: r, transfer: segmentBuffers(r) };
    }
    if (task.op === 'seal') {
      const r = sealChunks(task.chunks);
      return { result: r, transfer: segmentBuffers(r) };
    }
    return task.file ? decodeFile(task) : decode(task);
  };
  run().then(
    ({ result, transfer }) =>
      port.postMessage({ type: 'done', taskId, result, room: scratchRoom() } satisfies FromWorker, transfer),
    (err: NodeJS.ErrnoException) =>
      port.postMessage({
        type: 'error',
        taskId,
        error: { message: err.message, code: err.code, name: err.name },
      } satisfies FromWorker),
  );
});
