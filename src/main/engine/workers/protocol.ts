/** Messages between the engine (main thread) and its CPU workers. */
import type { FolderListing } from '../scan/listDir.js';
import type { DecodeBatch, DecodeFailures } from './decodeBatch.js';

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
   *  (./decodeBatch.ts). */
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
   *  for; added by the pool: WorkerPool.keepSpareSealed). */
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
   *  block count; every other block is the previous version's (a 2 GiB file had 256 Ki blocks of 8 KiB
   *  then: the whole list each way cost ~20 ms on every incremental of it). */
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
  /** Blobs that did not open or match their ID, writes and parts that failed (decodeBatch.outcomesOf
   *  reads them blob by blob). Plaintexts never come back: the worker writes them. */
  failed?: DecodeFailures;
}

export type ToWorker =
  /** spares: emptied buffers of sealed segments, moved back for the worker to seal into again
   *  (WorkerPool.keepSpareSealed). */
  | { type: 'task'; taskId: number; task: Task; spares?: ArrayBuffer[] }
  | { type: 'reply'; taskId: number; seq: number; value: unknown }
  /** The pool's settings, first, to a thread started before its pool (prestartWorkers). */
  | { type: 'init'; init: WorkerInit };

/** Bytes of emptied sealed-segment buffers a worker keeps at most (its `room` is what it lacks of that). */
export const WORKER_SCRATCH_BYTES = 16 * 1024 * 1024; // see MAX_SPARE_SEALED_BYTES in ./index.ts

/** `room`: bytes of sealed-segment buffers the worker would keep now (WORKER_SCRATCH_BYTES less what it
 *  has); the pool moves it no more than that (WorkerPool.takeSpareSealedFor). */
export type FromWorker =
  | { type: 'event'; taskId: number; seq: number; event: TaskEvent; room?: number }
  | { type: 'done'; taskId: number; result: unknown; room?: number }
  | { type: 'error'; taskId: number; error: { message: string; code?: string; name?: string } };
