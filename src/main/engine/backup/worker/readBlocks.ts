/**
 * A block file's blocks, all or the changed ones (worker side; the plan of runs and batches:
 * ./blockPlan.ts).
 */
import { sameMtime } from '../../scan/stat.js';
import { ALIGN } from '../../aligned.js';
import { tell, throttle } from '../../pool/thread.js';
import type { BackupFileResult, BackupFileTask } from '../../pool/wire.js';
import { readScattered, type Piece } from '../scatterRead.js';
import type { BlockSource } from '../sourceRead.js';
import { batchesOf, blocksToRead, extentOf, hashBlocks, piecesOf, stripedPieces } from './blockPlan.js';
import { SegmentQueue, storeSegmentsIfNew } from './segments.js';
import { ID_BYTES, statAfter } from './settings.js';

/**
 * Backs up a file cut into fixed-size blocks (large files that change in place: VM disks, databases).
 * Without `incremental` every block is read, in large sequential reads. With it, a previous block is
 * reused unread unless a changed range touches it or it is not a whole block in both versions (the
 * last block of a file that grew or shrank); the others are read exactly, several reads in flight, so
 * scattered page writes cost a few random reads instead of a pass over the whole file. Block cuts do
 * not depend on content, so the result equals reading the whole file.
 */
export async function backupFileBlocks(
  taskId: number,
  task: BackupFileTask,
  src: BlockSource,
): Promise<BackupFileResult> {
  const B = task.blockSize!;
  const size = task.size;
  const n = Math.ceil(size / B);
  const inc = task.incremental;
  const blocks = blocksToRead(n, B, size, inc); // undefined: all n (or this task's stripes of them)
  const PIECE = Math.max(B, Math.floor((2 * 1024 * 1024) / B) * B);
  // Direct reads of consecutive blocks go 1 MiB at a time, several in flight: without the kernel's
  // read-ahead, two 4 MiB reads at a time read a whole file more slowly, 1 MiB pieces about as fast as
  // through the page cache (`npm run bench:cbt`, the whole-file incremental).
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
  // The pieces are read in batches of up to 2 MiB and 256 pieces, each in one call that keeps up to 24
  // reads in flight (scattered blocks need a deep queue: random reads one at a time are slow), two
  // batches at once, so the next batch is being read while this thread hashes the one before. (4 MiB
  // batches held ~10 MiB more at a backup's peak and read no faster: `npm run bench:cbt`.)
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
