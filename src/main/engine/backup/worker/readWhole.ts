/**
 * A file read whole, start to end, cut into content-defined chunks as it is read (worker side): large
 * files past the page cache (../sourceRead.ts), a small file (one chunk) sealed here and sent with the
 * result, a large one's new chunks stored a batch at a time (./store.ts).
 */
import { blobId } from '../../crypto/index.js';
import { sameMtime } from '../../scan/stat.js';
import { ALIGN, giveAligned, takeAligned } from '../../aligned.js';
import { idKey, settings, tell, throttle } from '../../pool/thread.js';
import type { BackupFileResult, BackupFileTask, SealedBlobMsg } from '../../pool/wire.js';
import { SourceReader } from '../sourceRead.js';
import { sealChunk } from './seal.js';
import { storeIfNew } from './store.js';
import { cdc, MiB, READ_BLOCK, statAfter } from './settings.js';

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
/** A read block for direct reads (../../aligned.ts: whole 64 KiB pages): the unfinished chunk (under
 *  chunker.max) and at least 2 MiB more. Direct reads fill a block whole, where buffered ones stopped once
 *  chunker.max bytes were in it: larger blocks only raised a full backup's peak RSS, at the same speed. */
const alignedBlockBytes = () => Math.ceil((settings.chunker.max + 2 * MiB) / 65536) * 65536;

export async function backupWholeFile(taskId: number, task: BackupFileTask): Promise<BackupFileResult> {
  // the whole file, start to end: large files past the page cache (backup/sourceRead.ts)
  const fh = await SourceReader.open(Buffer.from(task.path), task.size);
  let block: Buffer | undefined;
  let blockAligned = false;
  try {
    const content: string[] = [];
    let bytesRead = 0;
    const speculative: SealedBlobMsg[] = [];
    // Small files: one read, one chunk, no round trip — the blob travels with the result.
    const small = task.size < settings.chunker.min;
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
        if (cutBytes + len > settings.chunker.max) await settle();
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
      // 4 MiB read (a noticeable share of a full backup's CPU in memmove).
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
    // two aligned blocks kept (a worker reads two files at a time at most): more sit idle through a full
    // backup's small files, in its peak RSS
    if (block && blockAligned) giveAligned(block, 2);
    else if (block) giveBlock(block);
    await fh.close();
  }
}
