/**
 * The wire format: every message between the engine's main thread and its worker threads, in one place.
 * A task goes out (ToWorker), a worker may ask questions during it (TaskEvent, answered by the task's
 * event handler: a dedup query, chunks to seal, sealed blobs to store) and answers once (FromWorker).
 * Large data moves as ArrayBuffers transferred, not copied: segments of chunks (ChunkSegment) and the
 * blobs of a decode task packed into a few flat arrays (DecodeBatch). Buffers that come back for reuse
 * ride along (ToWorker.spares, QueryReply.spares and scratch, FromWorker.room).
 */
import { isPoolBuffer } from '../bufferPool.js';
import type { FolderListing } from '../scan/listDir.js';

export interface WorkerInit {
  encryptionKey: Uint8Array;
  idKey: Uint8Array;
  chunker: { min: number; avg: number; max: number };
  chunkerSeed: string;
  compressionLevel: number;
  /** Per-worker read limit in bytes/s (0: none). */
  readLimit: number;
  lowPriority: boolean;
  /** Hand new chunks to the main thread to compress and seal on whichever worker is free, instead of
   *  sealing them here (balances one large file's compression over all workers). */
  distributeSeal?: boolean;
}

export interface BackupFileTask {
  op: 'backupFile';
  /** Absolute path (raw bytes as latin1-free Buffer copy). */
  path: Uint8Array;
  /** Size and mtime seen by the scan, to detect a file that changes while it is read. */
  size: number;
  mtimeMs: number;
  /** Block-level tracking (docs/architecture.md §3 level 1): the previous snapshot's chunk list of this file and
   *  the byte ranges that may have changed since. Only chunks touching a changed range are re-read. */
  incremental?: {
    prevIds: string[];
    /** Content-defined chunks: the previous chunk sizes (empty for fixed-size blocks). */
    prevSizes: number[];
    /** Fixed-size blocks: the previous file size. */
    prevSize?: number;
    /** Fixed-size blocks: how many blocks the previous version had. prevIds is left empty and the result
     *  lists only the blocks read (readBlocks); the caller keeps the previous IDs for the rest. */
    prevCount?: number;
    changed: { offset: number; length: number }[];
  };
  /** Cut into fixed-size blocks of this many bytes instead of content-defined chunks. */
  blockSize?: number;
  /** A whole read of a block file shared by several workers (no `incremental`): the file is taken in
   *  stripes of `blocks` blocks, and this task reads stripes part, part + parts, part + 2·parts, … The
   *  result lists those stripes' block IDs in that order. */
  stripes?: { blocks: number; parts: number; part: number };
}

/** Many small files (each below the minimum chunk size) in one task: read with synchronous I/O,
 *  each one chunk, sealed speculatively — one message each way instead of several per file. */
export interface SmallFilesTask {
  op: 'backupSmallFiles';
  files: { path: Uint8Array; size: number; mtimeMs: number }[];
}

export type SmallFileResult =
  (BackupFileResult & { error?: undefined }) | { error: { message: string; code?: string } };

export interface SmallFilesResult {
  files: SmallFileResult[];
  /** The files' chunks, sealed in one buffer; each file names its blobs in blobRefs. */
  sealed?: SealedSegment;
}

/** Blobs to open, all within one buffer read from a pack (sent once, transferred when possible). */
export interface DecodeTask {
  op: 'decode';
  /** The pack range the blobs lie in (their offsets are into it): given, or `file` for the worker to
   *  read itself (a folder repository's pack, Backend.localFile). */
  buffer?: Uint8Array;
  /** direct: read it past the page cache (the repository's folder is on a local disk's filesystem). */
  file?: { path: string; offset: number; length: number; pack: string; direct?: boolean };
  /** The blobs, the whole files made of one of them and the pieces of larger files they fill
   *  (DecodeBatch, below). */
  batch: DecodeBatch;
  /** Set owner and group on written files (running as root). */
  chown?: boolean;
  /** Write the whole blocks of long runs of parts past the page cache (O_DIRECT): the target folder
   *  is on a local disk's filesystem (aligned.ts, directIoFilesystem). */
  direct?: boolean;
}

/** A directory listing with every entry's lstat, done in a worker with synchronous calls. */
export interface ListDirTask {
  op: 'listDir';
  path: Uint8Array;
}

export type ListDirResult = FolderListing;

/** Compress and seal chunks (any worker; see WorkerInit.distributeSeal). Result: a SealedSegment. */
export interface SealTask {
  op: 'seal';
  chunks: { id: Uint8Array; data: Uint8Array }[];
}

/**
 * Many small chunks in one buffer (a block file's fixed-size blocks): chunk i is
 * data[offsets[i] .. offsets[i] + lengths[i]), its ID ids[32i .. 32i + 32). One ArrayBuffer moves between
 * threads instead of one per block (a 1 GiB block file has 128 Ki blocks of 8 KiB: allocating, moving
 * and collecting a buffer or three per block cost more CPU than compressing and sealing them).
 */
export interface ChunkSegment {
  data: Uint8Array;
  ids: Uint8Array;
  offsets: Uint32Array;
  lengths: Uint32Array;
  /** Consecutive blocks of one file (a block file's): compression is probed (CompressionProbe) rather
   *  than tried on each block. */
  oneFile?: boolean;
}

/** The same chunks sealed, in one buffer: blob i is data[offsets[i] .. offsets[i] + lengths[i]). */
export interface SealedSegment extends ChunkSegment {
  rawLengths: Uint32Array;
  /** 1 where the blob is compressed. */
  compressed: Uint8Array;
  /** The raw segment's buffer once sealed (a block file's segment), moved back so that a reading worker
   *  can fill it again (QueryReply.spares): a fresh 2 MiB buffer costs 512 page faults as it is filled. */
  emptied?: ArrayBuffer;
}

/** Blob `k` of a sealed segment, as views of its buffers (nothing is copied). */
export function sealedBlobOf(s: SealedSegment, k: number): SealedBlobMsg {
  return {
    id: s.ids.subarray(32 * k, 32 * k + 32),
    sealed: s.data.subarray(s.offsets[k], s.offsets[k] + s.lengths[k]),
    rawLength: s.rawLengths[k],
    compressed: s.compressed[k] === 1,
  };
}

/** The buffers of a segment, to be moved (not copied) to another thread. */
export function segmentBuffers(s: ChunkSegment | SealedSegment): ArrayBuffer[] {
  const views: ArrayBufferView[] = [s.data, s.ids, s.offsets, s.lengths];
  if ('rawLengths' in s) views.push(s.rawLengths, s.compressed);
  const buffers = views.map((v) => v.buffer as ArrayBuffer);
  if ('emptied' in s && s.emptied) buffers.push(s.emptied);
  return [...new Set(buffers)];
}

/** Compress and seal a segment of chunks (any worker). */
export interface SealSegmentTask {
  op: 'sealSegment';
  segment: ChunkSegment;
}

export type Task = BackupFileTask | SmallFilesTask | DecodeTask | ListDirTask | SealTask | SealSegmentTask;

export interface SealedBlobMsg {
  id: Uint8Array;
  sealed: Uint8Array;
  rawLength: number;
  compressed: boolean;
}

/** The main thread's answer to a dedup query. */
export interface QueryReply {
  /** Per ID: true = the repository lacks it, store it. */
  store: boolean[];
  /** Hand the new chunks over raw for any worker to seal (another worker reads no file), rather than
   *  sealing them on the asking thread: spreading one big file's compression over the cores pays, but while
   *  every worker has files of its own, moving raw chunks only costs copies (~5% of a full backup). */
  handOver: boolean;
  /** Empty segment buffers for the asking worker to fill (moved; see SealedSegment.emptied). */
  spares?: ArrayBuffer[];
  /** Emptied sealed-segment buffers for the asking worker to seal into (moved, as many as it has room
   *  for; added by the pool: SpareBuffers.keepSealed). */
  scratch?: ArrayBuffer[];
}

/** Worker → main during a task. */
export type TaskEvent =
  | { kind: 'query'; ids: string[]; spares?: number } // reply: QueryReply (with up to `spares` buffers)
  | { kind: 'raw'; chunks: { id: Uint8Array; data: Uint8Array }[] } // reply: null once accepted for sealing
  | { kind: 'segments'; segments: ChunkSegment[] } // reply: null once accepted for sealing
  | { kind: 'sealedSegments'; segments: SealedSegment[] } // reply: null once stored
  | { kind: 'read'; bytes: number }; // progress, no reply

export interface BackupFileResult {
  /** The file's chunk IDs in order (empty for fixed-size blocks: see blockIds). */
  content: string[];
  /** Fixed-size blocks: their IDs, 32 bytes each, in order; with readBlocks, only those of the blocks
   *  read, in that order (TreeNode.blockIds). */
  blockIds?: Uint8Array;
  /** Fixed-size blocks given incremental: the indexes of the blocks read (ascending) and the file's
   *  block count; every other block is the previous version's (moving a 2 GiB file's whole list each
   *  way cost ~20 ms on every incremental of it). */
  readBlocks?: Uint32Array;
  blockCount?: number;
  bytesRead: number;
  size: number;
  /** Set when size or mtime differed after reading: the file changed while it was read. */
  changedWhileReading: boolean;
  /** Blobs sent speculatively with the result (small single-chunk files); main stores them if new. */
  blobs: SealedBlobMsg[];
  /** Small files: the indexes of this file's blobs in SmallFilesResult.sealed (main turns them into
   *  `blobs`). */
  blobRefs?: number[];
  /** A striped block read (BackupFileTask.stripes) came back short: the file shrank while it was read, and
   *  the caller reads it again in one task (which keeps what was there). */
  short?: boolean;
}

export interface DecodeResult {
  /** The task's buffer, moved back when the worker is done with it (for bufferPool.giveBuffer). */
  returned?: ArrayBuffer;
  /** Bytes of parts written past the page cache (DecodeTask.direct). */
  direct?: number;
  /** Bytes of the range read past the page cache (DecodeTask.file.direct). */
  readDirect?: number;
  /** Blobs that did not open or match their ID, writes and parts that failed (outcomesOf
   *  reads them blob by blob). Plaintexts never come back: the worker writes them. */
  failed?: DecodeFailures;
}

export type ToWorker =
  /** spares: emptied buffers of sealed segments, moved back for the worker to seal into again
   *  (SpareBuffers.keepSealed). */
  | { type: 'task'; taskId: number; task: Task; spares?: ArrayBuffer[] }
  | { type: 'reply'; taskId: number; seq: number; value: unknown }
  /** The pool's settings, first, to a thread started before its pool (prestartWorkers). */
  | { type: 'init'; init: WorkerInit };

/** Bytes of emptied sealed-segment buffers a worker keeps at most (its `room` is what it lacks of that). */
export const WORKER_SCRATCH_BYTES = 16 * 1024 * 1024; // see MAX_SPARE_SEALED_BYTES in ./spares.ts

/** `room`: bytes of sealed-segment buffers the worker would keep now (WORKER_SCRATCH_BYTES less what it
 *  has); the pool moves it no more than that (WorkerPool.takeSpareSealedFor). */
export type FromWorker =
  | { type: 'event'; taskId: number; seq: number; event: TaskEvent; room?: number }
  | { type: 'done'; taskId: number; result: unknown; room?: number }
  | { type: 'error'; taskId: number; error: { message: string; code?: string; name?: string } };

/*
 * ---- decode tasks: their blobs in flat arrays ----------------------------------------------------
 * The blobs of a decode task (restore, check --read-data) in a few flat arrays instead of an object per
 * blob and per file. A range of a pack of small files holds ~3,000 blobs: cloned between threads as
 * objects (an object per blob, one per file to write, a view per path) it took a few µs per blob on each
 * side, a tenth of what restoring such a file costs; typed arrays are moved, not cloned. The worker reads
 * the arrays in place (the restore's worker side) and answers with the failures only.
 */

/** A whole file a decode task writes (restore). */
export interface FileWrite {
  path: Uint8Array;
  mode: number;
  uid?: number;
  gid?: number;
  mtimeNs: string;
}

/** A blob to open, as the caller plans it (the restore, check): packed by packDecodeItems. */
export interface DecodeItem {
  id: string;
  offset: number;
  length: number;
  compressed: boolean;
  rawLength: number;
  /** Restore: whole files made of just this blob, written by the worker (synchronous I/O). */
  writes?: FileWrite[];
  /** Restore: pieces of larger files, written by the worker at their offsets into files the main thread
   *  already created and sized (all-zero blobs are not written, so holes stay sparse). */
  parts?: { path: Uint8Array; offset: number }[];
}

/** Numbers per blob in DecodeBatch.blobs: offset, length, raw length, compressed (1/0), first write,
 *  writes, first part, parts. */
export const BLOB_FIELDS = 8;
/** Numbers per write in DecodeBatch.writes: path start, path length, mode, uid (-1: none), gid. */
export const WRITE_FIELDS = 5;
/** Numbers per part in DecodeBatch.parts: path start, path length, offset in its file. */
export const PART_FIELDS = 3;

export interface DecodeBatch {
  count: number;
  blobs: Float64Array;
  /** Blob i's ID: bytes [32i, 32i + 32) (the cipher's associated data) and hex digits [64i, 64i + 64)
   *  (compared with its content's hash). */
  ids: Uint8Array;
  idsHex: string;
  writes: Float64Array;
  /** Per write: its file's mtime in nanoseconds. */
  mtimes: BigInt64Array;
  parts: Float64Array;
  /** Every path, one after the other (writes and parts name theirs by start and length). */
  paths: Uint8Array;
}

/** What went wrong, by index: blobs that did not open or match their ID, writes and parts that failed. */
export interface DecodeFailures {
  blobs?: [number, string][];
  writes?: [number, string, string | undefined][];
  parts?: [number, string, string | undefined][];
}

type WriteOutcome = { message: string; code?: string } | null;

/** A blob's outcome, as the caller reads it: `writes` and `parts` (null for written) when one failed. */
export type DecodeOutcome =
  { ok: true; writes?: WriteOutcome[]; parts?: WriteOutcome[] } | { ok: false; message: string };

/** Packs the items; `transfer` lists the arrays' buffers, to be moved with the task. */
export function packDecodeItems(items: DecodeItem[]): { batch: DecodeBatch; transfer: ArrayBuffer[] } {
  let nWrites = 0;
  let nParts = 0;
  let pathBytes = 0;
  for (const it of items) {
    for (const w of it.writes ?? []) pathBytes += w.path.byteLength;
    for (const p of it.parts ?? []) pathBytes += p.path.byteLength;
    nWrites += it.writes?.length ?? 0;
    nParts += it.parts?.length ?? 0;
  }
  const blobs = new Float64Array(items.length * BLOB_FIELDS);
  const ids = new Uint8Array(items.length * 32);
  const writes = new Float64Array(nWrites * WRITE_FIELDS);
  const mtimes = new BigInt64Array(nWrites);
  const parts = new Float64Array(nParts * PART_FIELDS);
  const paths = new Uint8Array(pathBytes);
  const hex: string[] = [];
  let w = 0;
  let p = 0;
  let at = 0;
  const addPath = (path: Uint8Array): number => {
    paths.set(path, at);
    at += path.byteLength;
    return at - path.byteLength;
  };
  items.forEach((it, i) => {
    hex.push(it.id);
    Buffer.from(ids.buffer, i * 32, 32).write(it.id, 'hex');
    const b = i * BLOB_FIELDS;
    blobs[b] = it.offset;
    blobs[b + 1] = it.length;
    blobs[b + 2] = it.rawLength;
    blobs[b + 3] = it.compressed ? 1 : 0;
    blobs[b + 4] = w;
    blobs[b + 5] = it.writes?.length ?? 0;
    blobs[b + 6] = p;
    blobs[b + 7] = it.parts?.length ?? 0;
    for (const f of it.writes ?? []) {
      const o = w * WRITE_FIELDS;
      writes[o] = addPath(f.path);
      writes[o + 1] = f.path.byteLength;
      writes[o + 2] = f.mode;
      writes[o + 3] = f.uid ?? -1;
      writes[o + 4] = f.gid ?? 0;
      mtimes[w++] = BigInt(f.mtimeNs);
    }
    for (const part of it.parts ?? []) {
      const o = p++ * PART_FIELDS;
      parts[o] = addPath(part.path);
      parts[o + 1] = part.path.byteLength;
      parts[o + 2] = part.offset;
    }
  });
  const batch = { count: items.length, blobs, ids, idsHex: hex.join(''), writes, mtimes, parts, paths };
  const transfer = [blobs, ids, writes, mtimes, parts, paths].map((a) => a.buffer as ArrayBuffer);
  return { batch, transfer };
}

const OK: DecodeOutcome = Object.freeze({ ok: true as const });

/** The failures a worker reported, blob by blob, in the items' order (writes and parts in theirs). */
export function outcomesOf(items: DecodeItem[], failed: DecodeFailures | undefined): DecodeOutcome[] {
  const out: DecodeOutcome[] = items.map(() => OK);
  if (!failed) return out;
  for (const [i, message] of failed.blobs ?? []) out[i] = { ok: false, message };
  // write and part indices run through the items in order: each one's item, worked out once per kind (a
  // full disk fails every file of a range: a search per failure would be quadratic)
  for (const kind of ['writes', 'parts'] as const) {
    const list = failed[kind];
    if (!list?.length) continue;
    const itemOf: number[] = [];
    const firstOf: number[] = [];
    items.forEach((it, i) => {
      firstOf.push(itemOf.length);
      for (let k = 0; k < (it[kind]?.length ?? 0); k++) itemOf.push(i);
    });
    for (const [index, message, code] of list) {
      const i = itemOf[index];
      if (i === undefined) throw new Error(`decode result names ${kind} ${index}, beyond the task's`);
      const o = out[i];
      if (!o.ok) continue; // the blob failed: none of its files was written
      const outcome = o === OK ? (out[i] = { ok: true }) : o;
      const slots = (outcome[kind] ??= items[i][kind]!.map(() => null));
      slots[index - firstOf[i]] = { message, code };
    }
  }
  return out;
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
