/**
 * A batch of small files (worker side).
 */
import { blobId } from '../../crypto/index.js';
import { sameMtime } from '../../scan/stat.js';
import { idKey, settings, tell, throttle } from '../../pool/thread.js';
import { giveScratch, takeScratch } from '../../pool/scratch.js';
import type {
  ChunkSegment,
  SealedSegment,
  SmallFileResult,
  SmallFilesResult,
  SmallFilesTask,
} from '../../pool/wire.js';
import { readFiles } from '../scatterRead.js';
import { sealSegment } from './seal.js';
import { cdc } from './settings.js';

/** Small files: read in one call per batch, several in flight (backup/scatterRead.ts, readFiles), then
 *  hashed and sealed together straight from the buffer they were read into; another task of this worker
 *  computes while a batch is being read. */
export async function backupSmallFiles(taskId: number, task: SmallFilesTask): Promise<SmallFilesResult> {
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
      n === 0 ? [] : n > settings.chunker.min ? cdc.chunkAll(buffer.subarray(r.start, r.start + n)) : [n];
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
