/**
 * The blobs of a decode task (restore, check --read-data) in a few flat arrays instead of an object per
 * blob and per file. A range of a pack of small files holds ~3,000 blobs: cloned between threads as
 * objects (an object per blob, one per file to write, a view per path) it took 3-6 µs per blob on each
 * side, a tenth of what restoring such a file costs; typed arrays are moved, not cloned. The worker reads
 * the arrays in place (pipelineWorker's decodeBatch) and answers with the failures only.
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
