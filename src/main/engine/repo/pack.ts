/**
 * Pack files: many encrypted blobs followed by an encrypted header listing them, then the header's
 * length (u32 LE). A pack is named by the BLAKE3 hash of its bytes and never changes.
 *   [blob 0][blob 1]…[sealed header][u32 header length]
 * header plaintext: u32 count, then per blob: u8 type|compressed<<7, 32-byte id, u32 stored length, u32 raw length.
 * Blobs are sealed with their ID as associated data. The index duplicates the header so a restore never
 * reads headers; `check` and index rebuilds read headers to recover what a pack holds.
 */
import type { Backend, ObjectWriter, WriterOptions } from '../backend/types.js';
import { Blake3Hasher, open, seal, DecryptError, type MasterKey } from '../crypto/index.js';
import { CorruptObjectError } from '../errors.js';
import { BlobType, type BlobLocation } from './blobIndex.js';
import { giveAligned, takeAligned } from '../aligned.js';

export const HEADER_ENTRY = 1 + 32 + 4 + 4;
export const DEFAULT_PACK_SIZE = 16 * 1024 * 1024;

export interface PackedBlob {
  id: Buffer;
  type: BlobType;
  compressed: boolean;
  /** stored (sealed) length */
  length: number;
  rawLength: number;
  offset: number;
}

export function encodeHeader(key: MasterKey, blobs: PackedBlob[]): Buffer {
  const plain = Buffer.allocUnsafe(4 + blobs.length * HEADER_ENTRY);
  plain.writeUInt32LE(blobs.length, 0);
  let p = 4;
  for (const b of blobs) {
    plain[p] = (b.type & 0x7f) | (b.compressed ? 0x80 : 0);
    b.id.copy(plain, p + 1);
    plain.writeUInt32LE(b.length, p + 33);
    plain.writeUInt32LE(b.rawLength, p + 37);
    p += HEADER_ENTRY;
  }
  const sealed = seal(key.encryption, plain);
  const len = Buffer.allocUnsafe(4);
  len.writeUInt32LE(sealed.length, 0);
  return Buffer.concat([sealed, len]);
}

/** Parses a pack's header from the whole pack (or its tail: pass the pack's total size). */
export function decodeHeader(key: MasterKey, tail: Buffer, packSize: number, what: string): PackedBlob[] {
  if (tail.length < 4) throw new CorruptObjectError(`${what}: too short to be a pack`);
  const hlen = tail.readUInt32LE(tail.length - 4);
  if (hlen + 4 > tail.length || hlen + 4 > packSize)
    throw new CorruptObjectError(`${what}: header length ${hlen} is impossible`);
  let plain: Buffer;
  try {
    plain = open(key.encryption, tail.subarray(tail.length - 4 - hlen, tail.length - 4));
  } catch (err) {
    if (err instanceof DecryptError) throw new CorruptObjectError(`${what}: the pack header is damaged`);
    throw err;
  }
  const n = plain.readUInt32LE(0);
  if (4 + n * HEADER_ENTRY !== plain.length)
    throw new CorruptObjectError(`${what}: the pack header is malformed`);
  const out: PackedBlob[] = [];
  let offset = 0;
  for (let i = 0, p = 4; i < n; i++, p += HEADER_ENTRY) {
    const f = plain[p];
    const length = plain.readUInt32LE(p + 33);
    out.push({
      id: Buffer.from(plain.subarray(p + 1, p + 33)),
      type: (f & 0x7f) as BlobType,
      compressed: (f & 0x80) !== 0,
      length,
      rawLength: plain.readUInt32LE(p + 37),
      offset,
    });
    offset += length;
  }
  if (offset + hlen + 4 !== packSize)
    throw new CorruptObjectError(`${what}: blob lengths do not add up to the pack size`);
  return out;
}

/** Seals a blob's (possibly compressed) plaintext for storage in a pack. */
export function sealBlob(key: MasterKey, id: Buffer, data: Uint8Array): Buffer {
  return seal(key.encryption, data, id);
}

export function openBlob(key: MasterKey, id: Buffer, sealed: Uint8Array): Buffer {
  return open(key.encryption, sealed, id);
}

export interface FinishedPack {
  id: string;
  size: number;
  blobs: PackedBlob[];
}

/**
 * Accumulates sealed blobs into one pack in memory and uploads it when full. The caller adds blobs
 * with `add`, asks `full` when to `finish`. Hashing is incremental, so finishing costs one header.
 *
 * With `gather`, blobs are copied into one aligned buffer for the pack (../aligned.ts, kept from pack to
 * pack), the header after them: the caller's buffers are free as soon as `add` returns, and the pack is
 * one aligned piece that a local repository writes past the page cache in one call (backend/local/direct.ts,
 * which would otherwise copy the pieces into a stage, so nothing is copied more). A backup's sealed
 * buffers otherwise stay on the main thread until their pack is written: tens of MB of them at a time,
 * whose comings and goings make V8 collect the main thread's heap every ~100 ms ("external memory
 * pressure": two to three times the mark-compacts, and their pauses, in a full backup). A blob
 * that does not fit in what is left of the buffer, and every one after it, is kept as a view (a part of
 * its own) as without `gather`.
 */
export class PackBuilder {
  private parts: Buffer[] = [];
  private blobs: PackedBlob[] = [];
  private hasher = new Blake3Hasher();
  size = 0;
  /** The pack's buffer (gather) and how much of it is used; copying stops at the first blob that does not fit. */
  private buf?: Buffer;
  private copying = false;

  constructor(
    private readonly key: MasterKey,
    public targetSize = DEFAULT_PACK_SIZE,
    /** Gather blobs in a buffer for packs of up to this target size (one size for all of them, however
     *  targetSize changes: buffers of one size are used again by every later pack). */
    private readonly gather?: number,
  ) {}

  get count(): number {
    return this.blobs.length;
  }

  get full(): boolean {
    return this.size >= this.targetSize;
  }

  /**
   * Blobs that follow each other in memory (the views of one sealed segment: a block file's 8 KiB blocks,
   * a batch of small files) are kept as one part and hashed in one call: hashing 8 KiB blobs one call
   * each cost about five times as much (and the gathered write has fewer pieces). A part is hashed
   * once the next blob does not continue it, the last one when the pack is finished.
   * Returns true when the blob starts a part of its own (the pack refers to its buffer from now on); a
   * blob copied into the pack's buffer returns false.
   */
  add(id: Buffer, type: BlobType, compressed: boolean, rawLength: number, sealed: Buffer): boolean {
    this.blobs.push({ id, type, compressed, length: sealed.length, rawLength, offset: this.size });
    if (this.gather && this.blobs.length === 1) {
      this.buf = takeAligned(packBufferBytes(Math.max(this.gather, this.targetSize)));
      this.copying = !!this.buf;
    }
    if (this.copying && this.size + sealed.length <= this.buf!.length) {
      sealed.copy(this.buf!, this.size);
      this.size += sealed.length;
      return false;
    }
    if (this.copying) {
      // the buffer is full: what was copied is the pack's first part, later blobs parts of their own
      this.copying = false;
      this.parts.push(this.buf!.subarray(0, this.size));
    }
    const last = this.parts.length - 1;
    const prev = this.parts[last];
    this.size += sealed.length;
    if (
      prev &&
      prev.buffer !== this.buf?.buffer &&
      prev.buffer === sealed.buffer &&
      prev.byteOffset + prev.length === sealed.byteOffset
    ) {
      this.parts[last] = Buffer.from(prev.buffer, prev.byteOffset, prev.length + sealed.length);
      return false;
    }
    if (prev) this.hasher.update(prev);
    this.parts.push(sealed);
    return true;
  }

  /** Returns the pack's bytes (as its parts, in order: the blobs, then the header), its size and blob
   *  list, and resets the builder. The parts are not concatenated (see savePack). With `gather`, call
   *  `release` once the parts are written (or given up): the pack's buffer is used again. */
  finish(): { id: string; parts: Buffer[]; size: number; blobs: PackedBlob[]; release: () => void } {
    const header = encodeHeader(this.key, this.blobs);
    const buf = this.buf;
    let parts: Buffer[];
    if (this.copying && this.size + header.length <= buf!.length) {
      header.copy(buf!, this.size);
      parts = [buf!.subarray(0, this.size + header.length)];
      this.hasher.update(parts[0]);
    } else {
      if (this.copying) this.parts.push(buf!.subarray(0, this.size));
      if (this.parts.length) this.hasher.update(this.parts[this.parts.length - 1]);
      this.hasher.update(header);
      parts = [...this.parts, header];
    }
    const id = this.hasher.digest('hex');
    const size = this.size + header.length;
    const blobs = this.blobs;
    this.parts = [];
    this.blobs = [];
    this.hasher = new Blake3Hasher();
    this.size = 0;
    this.buf = undefined;
    this.copying = false;
    let released = false;
    const release = () => {
      if (buf && !released) giveAligned(buf);
      released = true;
    };
    return { id, parts, size, blobs, release };
  }
}

/**
 * A data pack written as it fills (Backend.openWriter: a folder repository's), instead of gathered in
 * memory: each blob is copied into the writer's small stages as it is added (the caller's buffer is free
 * once `add` has settled), the stages are hashed as they go to the store (in ~1 MiB calls, as cheap as
 * hashing the gathered pack), and `finish` appends the header and names the pack by the hash. The bytes
 * are the same as PackBuilder's for the same blobs, and so is the name.
 */
export class PackStream {
  private blobs: PackedBlob[] = [];
  private hasher = new Blake3Hasher();
  private writer?: ObjectWriter;
  size = 0;

  constructor(
    private readonly key: MasterKey,
    private readonly open: (options: WriterOptions) => ObjectWriter,
    public targetSize = DEFAULT_PACK_SIZE,
  ) {}

  get count(): number {
    return this.blobs.length;
  }

  get full(): boolean {
    return this.size >= this.targetSize;
  }

  /** Appends a blob; a promise when it has to wait for a stage (the caller keeps `sealed` until then). */
  add(
    id: Buffer,
    type: BlobType,
    compressed: boolean,
    rawLength: number,
    sealed: Buffer,
  ): Promise<void> | undefined {
    if (!this.writer) {
      const hasher = this.hasher;
      this.writer = this.open({ observe: (bytes) => hasher.update(bytes) });
    }
    this.blobs.push({ id, type, compressed, length: sealed.length, rawLength, offset: this.size });
    this.size += sealed.length;
    return this.writer.write(sealed);
  }

  /**
   * Takes the pack (the builder starts the next one at once) and returns its completion: the header
   * written, everything flushed, and the pack renamed to its hash. On failure nothing is left under a
   * name (the writer removes its file) and the promise rejects with the store's error.
   */
  finish(): Promise<FinishedPack> {
    const writer = this.writer!;
    const hasher = this.hasher;
    const blobs = this.blobs;
    const size = this.size;
    this.writer = undefined;
    this.blobs = [];
    this.hasher = new Blake3Hasher();
    this.size = 0;
    const header = encodeHeader(this.key, blobs);
    return (async () => {
      try {
        await writer.write(header);
        await writer.flush();
        const id = hasher.digest('hex');
        await writer.commit(id);
        return { id, size: size + header.length, blobs };
      } catch (err) {
        await writer.abort();
        throw err;
      }
    })();
  }

  /** Gives up the pack being filled (a run that stops without flushing): its file is removed. */
  abort(): Promise<void> {
    const writer = this.writer;
    this.writer = undefined;
    this.blobs = [];
    this.hasher = new Blake3Hasher();
    this.size = 0;
    return writer?.abort() ?? Promise.resolve();
  }
}

/** A pack's buffer: its target size, one largest chunk (4 MiB) and its header, in whole 64 KiB (the
 *  unit of ../aligned.ts). A blob past it goes into the pack as a part of its own. */
const packBufferBytes = (target: number) => Math.ceil((target + 4.25 * 1024 * 1024) / 65536) * 65536;

/** Stores a pack given as parts: a gathered write where the backend offers one, else one buffer. */
export function savePack(backend: Backend, id: string, parts: readonly Uint8Array[]): Promise<void> {
  if (backend.saveParts) return backend.saveParts('data', id, parts);
  return backend.save('data', id, parts.length === 1 ? parts[0] : Buffer.concat(parts));
}

export function locationsOf(pack: string, blobs: PackedBlob[]): [Buffer, BlobLocation][] {
  return blobs.map((b) => [
    b.id,
    {
      pack,
      offset: b.offset,
      length: b.length,
      rawLength: b.rawLength,
      type: b.type,
      compressed: b.compressed,
    },
  ]);
}

export async function loadPackHeader(
  backend: Backend,
  key: MasterKey,
  pack: string,
): Promise<{ size: number; blobs: PackedBlob[] }> {
  const { size } = await backend.stat('data', pack);
  const tailLen = Math.min(size, 64 * 1024);
  let tail = await backend.load('data', pack, size - tailLen, tailLen);
  const hlen = tail.length >= 4 ? tail.readUInt32LE(tail.length - 4) : 0;
  if (hlen + 4 > tail.length && hlen + 4 <= size)
    tail = await backend.load('data', pack, size - hlen - 4, hlen + 4);
  return { size, blobs: decodeHeader(key, tail, size, `pack ${pack.slice(0, 12)}`) };
}
