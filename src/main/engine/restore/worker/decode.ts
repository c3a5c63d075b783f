/**
 * A decode task's blobs opened and written (worker side): each blob decrypted, decompressed and checked
 * against its ID, then the whole files made of it written (../wholeFile.ts) and the pieces it fills
 * handed to the PartWriter (./partWriter.ts). What failed goes back by index (pool/wire.ts outcomesOf).
 */
import { blobIdHex, openTransient } from '../../crypto/index.js';
import { decompressTransient } from '../../compress/index.js';
import { encKey, idKey } from '../../pool/thread.js';
import {
  BLOB_FIELDS,
  PART_FIELDS,
  WRITE_FIELDS,
  type DecodeFailures,
  type DecodeResult,
  type DecodeTask,
} from '../../pool/wire.js';
import { writeWholeFile } from '../wholeFile.js';
import { PartWriter } from './partWriter.js';

export function decode(
  task: DecodeTask,
  data = task.buffer!,
): { result: DecodeResult; transfer: ArrayBuffer[] } {
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
 *  and the pieces it fills, reading the batch's arrays in place (../../pool/wire.ts, DecodeBatch); failures go in `failed`. */
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
