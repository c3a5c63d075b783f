/**
 * Compressing and sealing chunks (worker side): one chunk into a buffer of its own (a small file's blob,
 * sent with its result), or many into one buffer as a sealed segment (one allocation and one move between
 * threads, not one per chunk), compressed first into the thread's staging buffer so that the sealed buffer
 * has just the size it needs. Sealed buffers come from ./../../pool/scratch.ts and go back to it.
 */
import { seal, sealInto, OVERHEAD } from '../../crypto/index.js';
import {
  CompressionProbe,
  maybeCompressTransient,
  scratchOf,
  compressBound,
  compressInto,
} from '../../compress/index.js';
import { encKey, settings } from '../../pool/thread.js';
import { takeScratch } from '../../pool/scratch.js';
import type { ChunkSegment, SealedBlobMsg, SealedSegment } from '../../pool/wire.js';
import { MiB } from './settings.js';

export function sealChunk(id: Buffer, data: Uint8Array): SealedBlobMsg {
  const c = maybeCompressTransient(data, settings.compressionLevel); // sealed (copied) right away
  const sealed = seal(encKey, c.data, id);
  // an ArrayBuffer of its own, so it can be transferred (copied when it is a slice of a shared pool)
  let own: Uint8Array = sealed;
  if (sealed.byteOffset !== 0 || sealed.byteLength !== sealed.buffer.byteLength) {
    own = new Uint8Array(sealed.length);
    own.set(sealed);
  }
  return { id: new Uint8Array(id), sealed: own, rawLength: data.length, compressed: c.compressed };
}

/** Compresses and seals a segment of chunks into one buffer. */
export function sealSegment(seg: ChunkSegment): SealedSegment {
  const data = Buffer.from(seg.data.buffer, seg.data.byteOffset, seg.data.byteLength);
  const ids = Buffer.from(seg.ids.buffer, seg.ids.byteOffset, seg.ids.byteLength);
  return sealEach(
    seg.lengths.length,
    (i) => data.subarray(seg.offsets[i], seg.offsets[i] + seg.lengths[i]),
    ids,
    !!seg.oneFile,
  );
}

/** Compresses and seals chunks (views, wherever they are) into one buffer, as a sealed segment: one
 *  allocation and one move between threads, not one per chunk. */
export function sealChunks(chunks: { id: Uint8Array; data: Uint8Array }[]): SealedSegment {
  const ids = Buffer.allocUnsafe(32 * chunks.length);
  chunks.forEach((c, k) => ids.set(c.id, 32 * k));
  const views = chunks.map((c) => Buffer.from(c.data.buffer, c.data.byteOffset, c.data.byteLength));
  return sealEach(chunks.length, (i) => views[i], ids, false);
}

/** Seals n chunks (`plainOf(i)`, ID ids[32i, 32i + 32)) into one buffer; see CompressionProbe for oneFile.
 *  The chunks are compressed first, into the thread's staging buffer, so that the sealed buffer has just
 *  the size it needs (no copy to shrink it, no room pinned until its pack is written). */
function sealEach(n: number, plainOf: (i: number) => Buffer, ids: Buffer, oneFile: boolean): SealedSegment {
  let bound = 0;
  for (let i = 0; i < n; i++) bound += compressBound(plainOf(i).length);
  const stage = stageOf(bound);
  const packed = new Uint32Array(n); // compressed length in the stage, 0: stored raw
  const rawLengths = new Uint32Array(n);
  const compressed = new Uint8Array(n);
  const probe = oneFile ? new CompressionProbe() : undefined;
  let at = 0;
  let cap = 0;
  for (let i = 0; i < n; i++) {
    const plain = plainOf(i);
    rawLengths[i] = plain.length;
    if (!probe || probe.shouldTry()) {
      packed[i] = compressInto(plain, settings.compressionLevel, stage.subarray(at));
      probe?.record(packed[i] > 0);
    }
    compressed[i] = packed[i] > 0 ? 1 : 0;
    cap += (packed[i] || plain.length) + OVERHEAD;
    at += packed[i];
  }
  const out = takeScratch(cap);
  const offsets = new Uint32Array(n);
  const lengths = new Uint32Array(n);
  let pos = 0;
  at = 0;
  for (let i = 0; i < n; i++) {
    const data = packed[i] ? stage.subarray(at, at + packed[i]) : plainOf(i);
    at += packed[i];
    const len = sealInto(encKey, data, ids.subarray(32 * i, 32 * i + 32), out, pos);
    offsets[i] = pos;
    lengths[i] = len;
    pos += len;
  }
  return {
    data: new Uint8Array(out.buffer, out.byteOffset, pos),
    ids: new Uint8Array(ids),
    offsets,
    lengths,
    rawLengths,
    compressed,
  };
}

/** The thread's staging buffer for compressed chunks, at least `size` bytes (kept up to 16 MiB). */
let staging: Buffer | undefined;
function stageOf(size: number): Buffer {
  const b = scratchOf(staging, size, STAGE_MAX); // allocated once at its largest (see scratchOf)
  if (b.length <= STAGE_MAX) staging = b;
  return b;
}
const STAGE_MAX = 16 * MiB;
