/**
 * Compressing and sealing chunks (worker side): one chunk into a buffer of its own (a small file's blob,
 * sent with its result), or many into one buffer as a sealed segment (one allocation and one move between
 * threads, not one per chunk), each compressed straight into its place there and sealed in place. Sealed
 * buffers come from ./../../pool/scratch.ts and go back to it.
 */
import { NONCE_BYTES, OVERHEAD, seal, sealInto } from '../../crypto/index.js';
import {
  CompressionProbe,
  maybeCompressTransient,
  compressBound,
  compressInto,
} from '../../compress/index.js';
import { encKey, settings } from '../../pool/thread.js';
import { takeScratch } from '../../pool/scratch.js';
import type { ChunkSegment, SealedBlobMsg, SealedSegment } from '../../pool/wire.js';

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
 *  Each chunk is compressed straight into the sealed buffer, where its ciphertext will go, and sealed
 *  there in place (AES-GCM encrypts in place; the nonce goes in front after): no staging buffer per
 *  thread (it was the size of a whole batch's compressed bound, ~4 MiB resident in each worker). The
 *  buffer is sized for the chunks compressed at their worst; its pages past what is written are never
 *  touched, so a fresh one costs no more resident memory than one of just the size it needs. */
function sealEach(n: number, plainOf: (i: number) => Buffer, ids: Buffer, oneFile: boolean): SealedSegment {
  const level = settings.compressionLevel;
  let cap = 0;
  for (let i = 0; i < n; i++) {
    const len = plainOf(i).length;
    cap += (level > 0 ? Math.max(len, compressBound(len)) : len) + OVERHEAD;
  }
  const out = takeScratch(cap);
  const rawLengths = new Uint32Array(n);
  const compressed = new Uint8Array(n);
  const offsets = new Uint32Array(n);
  const lengths = new Uint32Array(n);
  const probe = oneFile ? new CompressionProbe() : undefined;
  let pos = 0;
  for (let i = 0; i < n; i++) {
    const plain = plainOf(i);
    rawLengths[i] = plain.length;
    const at = pos + NONCE_BYTES; // where the ciphertext goes
    let packed = 0;
    if (level > 0 && (!probe || probe.shouldTry())) {
      packed = compressInto(plain, level, out.subarray(at, at + compressBound(plain.length)));
      probe?.record(packed > 0);
    }
    compressed[i] = packed > 0 ? 1 : 0;
    const data = packed ? out.subarray(at, at + packed) : plain;
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
