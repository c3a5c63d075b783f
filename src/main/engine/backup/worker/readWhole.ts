/**
 * A file read whole, start to end, cut into content-defined chunks as it is read (worker side): large
 * files past the page cache (../sourceRead.ts), a small file (one chunk) sealed here and sent with the
 * result, a large one's new chunks stored a batch at a time (./store.ts).
 */
import { blobId } from '../../crypto/index.js';
import { sameMtime } from '../../scan/stat.js';
import { ALIGN, releaseAligned, takeAligned } from '../../aligned.js';
import { idKey, settings, tell, throttle } from '../../pool/thread.js';
import type { BackupFileResult, BackupFileTask, SealedBlobMsg } from '../../pool/wire.js';
import { SourceReader } from '../sourceRead.js';
import { memtraceGauge } from '../../pool/memtrace.js';
import { sealChunk } from './seal.js';
import { storeIfNew } from './store.js';
import { cdc, READ_BLOCK, statAfter } from './settings.js';

/*
 * Read blocks (READ_BLOCK: the unfinished chunk and 2 MiB more) are aligned memory, for direct and
 * buffered reads alike, reused from file to file: a fresh multi-MiB buffer per file costs its page faults
 * again and is freed only when this thread's garbage collector gets round to it (its JS heap is tiny, so
 * rarely). Up to two are kept idle (a worker reads two files at a time at most); once no file has taken
 * one for IDLE_RELEASE_MS their pages are given back, so they do not sit resident through a backup's
 * small files (taken again, in huge pages, they cost a few faults). Direct reads fill a block whole; larger
 * blocks only raised a full backup's peak RSS, at the same speed (8 MiB blocks, four kept, did).
 */
const idleBlocks: { buf: Buffer; resident: boolean }[] = [];
const IDLE_RELEASE_MS = 200;
let blocksOut = 0;
let releaseTimer: NodeJS.Timeout | undefined;
memtraceGauge('read blocks in use', () => blocksOut);
memtraceGauge('read blocks idle', () => idleBlocks.filter((b) => b.resident).length * (READ_BLOCK ?? 0));
function takeBlock(): { buf: Buffer; aligned: boolean } {
  blocksOut += READ_BLOCK;
  const idle = idleBlocks.pop();
  if (idle && idle.buf.length === READ_BLOCK) return { buf: idle.buf, aligned: true };
  const aligned = takeAligned(READ_BLOCK);
  return { buf: aligned ?? Buffer.allocUnsafeSlow(READ_BLOCK), aligned: !!aligned };
}
function giveBlock(buf: Buffer, aligned: boolean): void {
  blocksOut -= READ_BLOCK;
  if (!aligned || idleBlocks.length >= 2) return; // left to the collector
  idleBlocks.push({ buf, resident: true });
  clearTimeout(releaseTimer);
  releaseTimer = setTimeout(() => {
    for (const b of idleBlocks) if (b.resident) releaseAligned(b.buf);
    for (const b of idleBlocks) b.resident = false;
  }, IDLE_RELEASE_MS);
  releaseTimer.unref();
}

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
    // One read block (see takeBlock) for a large file; direct reads go straight into it at aligned offsets
    // (SourceReader.readAligned). A small file gets a buffer of its size (and one byte more, which shows
    // that it grew).
    const taken = small ? undefined : takeBlock();
    const buf = (block = taken?.buf ?? Buffer.allocUnsafe(Math.max(1, task.size + 1)));
    blockAligned = !!taken?.aligned;
    const aligned = fh.direct && blockAligned;
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
    if (block && block.length === READ_BLOCK) giveBlock(block, blockAligned);
    await fh.close();
  }
}
