/**
 * A large file of which only some byte ranges changed (block-level tracking; worker side).
 */
import fs from 'node:fs/promises';
import { blobId } from '../../crypto/index.js';
import { sameMtime } from '../../scan/stat.js';
import { idKey, settings, tell, throttle } from '../../pool/thread.js';
import type { BackupFileResult, BackupFileTask } from '../../pool/wire.js';
import { cdc, READ_BLOCK, statAfter } from './settings.js';
import { storeIfNew } from './store.js';

/**
 * Backs up a large file of which only some byte ranges changed: previous chunks that touch no changed
 * range are reused unread; from the previous chunk boundary before a change the file is read and
 * re-chunked until a cut falls on a previous boundary again (FastCDC cuts depend only on the bytes
 * since the chunk start, so from there the old cuts repeat). The result equals chunking the whole file.
 */
export async function backupFileRanges(
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
    const step = 2 * settings.chunker.avg;
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
