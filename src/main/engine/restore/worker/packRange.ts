/**
 * A pack range the decode worker reads itself (worker side).
 */
import fs, { type FileHandle } from 'node:fs/promises';
import { constants as FS } from 'node:fs';
import { discardBuffer } from '../../bufferPool.js';
import { ALIGN, O_DIRECT, giveAligned, takeAligned } from '../../aligned.js';
import type { DecodeResult, DecodeTask } from '../../pool/wire.js';
import { decode } from './decode.js';

/**
 * A decode task whose pack range the worker reads itself (DecodeTask.file): the main thread, busy
 * planning a restore (its walk takes most of a second for the bench's ~30,000 files), stood between each
 * range's open, read and close and the next, and a range took twenty times as long to read while it
 * walked as after. Reading here
 * asynchronously, one task reads while another decodes. Into a buffer of the thread's, used again.
 */
export async function decodeFile(
  task: DecodeTask,
): Promise<{ result: DecodeResult; transfer: ArrayBuffer[] }> {
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
 * the kernel filled a fresh page-cache page for every 4 KiB and copied it out (perf: near a fifth of
 * what the reading threads spent, in pread).
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
/** Aligned read buffers take a whole range of the restore's (up to 2 MiB, restore/packQueue.ts coalesce, and
 *  the blocks around it), so that ranges of different lengths use the same ones again; a longer range
 *  (one blob larger than that) takes whole MiBs. */
const RANGE_UNIT = 1024 * 1024;
const RANGE_ALIGNED = 3 * RANGE_UNIT;

function keepRangeBuffer(buf: Buffer): void {
  // kept for the next range; of more than MAX_RANGE_BUFFERS the smallest is let go
  rangeBuffers.push(buf);
  rangeBuffers.sort((a, b) => b.length - a.length);
  if (rangeBuffers.length > MAX_RANGE_BUFFERS) discardBuffer(rangeBuffers.pop()!.buffer as ArrayBuffer);
}

/** Buffers decodeFile reads into, kept from task to task (a fresh one costs a page fault per page). Two:
 *  a worker has one or two decode tasks at a time (the restore runs four, restore/packQueue.ts RESTORE_LOOPS). */
const rangeBuffers: Buffer[] = [];
const MAX_RANGE_BUFFERS = 2;
function takeRangeBuffer(size: number): Buffer {
  let i = -1;
  for (let k = 0; k < rangeBuffers.length; k++) if (rangeBuffers[k].length >= size) i = k; // the smallest fit
  if (i >= 0) return rangeBuffers.splice(i, 1)[0];
  return Buffer.allocUnsafeSlow(Math.ceil(size / (1024 * 1024)) * 1024 * 1024); // whole MiBs
}
