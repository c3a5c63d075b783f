/**
 * Index files: which blobs each pack holds and where. Binary, then compressed and encrypted like every
 * small object. Many index files coexist (one or more per backup run, per writer); the in-memory
 * BlobIndex is their union. Prune writes a new full index before deleting the ones it replaces.
 *   'TMI1', u32 packCount, per pack: 32-byte pack id, u32 blobCount,
 *   per blob: u8 type|compressed<<7, 32-byte id, u32 offset, u32 length, u32 rawLength
 */
import type { BlobIndex, BlobLocation } from './blobIndex.js';
import { CorruptObjectError } from '../errors.js';

const MAGIC = Buffer.from('TMI1');
const ENTRY = 1 + 32 + 12;

export interface IndexPack {
  pack: string;
  blobs: { id: Buffer; loc: BlobLocation }[];
}

export function encodeIndex(packs: IndexPack[]): Buffer {
  let size = 8;
  for (const p of packs) size += 36 + p.blobs.length * ENTRY;
  const out = Buffer.allocUnsafe(size);
  MAGIC.copy(out, 0);
  out.writeUInt32LE(packs.length, 4);
  let o = 8;
  for (const p of packs) {
    out.write(p.pack, o, 'hex');
    out.writeUInt32LE(p.blobs.length, o + 32);
    o += 36;
    for (const { id, loc } of p.blobs) {
      out[o] = (loc.type & 0x7f) | (loc.compressed ? 0x80 : 0);
      id.copy(out, o + 1);
      out.writeUInt32LE(loc.offset, o + 33);
      out.writeUInt32LE(loc.length, o + 37);
      out.writeUInt32LE(loc.rawLength, o + 41);
      o += ENTRY;
    }
  }
  return out;
}

/** The number of blobs an index file's plaintext lists; throws when it is not a whole index file. */
export function indexEntryCount(buf: Buffer, what: string): number {
  if (buf.length < 8 || !buf.subarray(0, 4).equals(MAGIC))
    throw new CorruptObjectError(`${what} is not an index file`);
  const n = buf.readUInt32LE(4);
  let total = 0;
  let o = 8;
  for (let i = 0; i < n; i++) {
    if (o + 36 > buf.length) throw new CorruptObjectError(`${what} is truncated`);
    const count = buf.readUInt32LE(o + 32);
    o += 36 + count * ENTRY;
    if (o > buf.length) throw new CorruptObjectError(`${what} is truncated`);
    total += count;
  }
  return total;
}

/**
 * Calls `each` for every blob of an index file's plaintext (`id` is a view into it: copy what is kept).
 * The file is checked whole first, so a damaged one calls `each` for nothing.
 */
export function decodeIndex(
  buf: Buffer,
  what: string,
  each: (id: Buffer, loc: BlobLocation) => void,
): string[] {
  return forEachEntry(buf, what, (pack, o) => {
    const f = buf[o];
    each(buf.subarray(o + 1, o + 33), {
      pack,
      type: f & 0x7f,
      compressed: (f & 0x80) !== 0,
      offset: buf.readUInt32LE(o + 33),
      length: buf.readUInt32LE(o + 37),
      rawLength: buf.readUInt32LE(o + 41),
    });
  });
}

/** Adds every blob of an index file's plaintext to `index`, reading the entries in place (decodeIndex
 *  made a view and a location object per blob: ~40% of a restore's index load). Checked whole first. */
export function addIndexFile(buf: Buffer, what: string, index: BlobIndex): void {
  forEachEntry(buf, what, (pack, o) => {
    index.addAt(
      buf,
      o + 1,
      pack,
      buf[o],
      buf.readUInt32LE(o + 33),
      buf.readUInt32LE(o + 37),
      buf.readUInt32LE(o + 41),
    );
  });
}

/** Calls `each` with the pack and offset of every entry; returns the packs. */
function forEachEntry(buf: Buffer, what: string, each: (pack: string, at: number) => void): string[] {
  indexEntryCount(buf, what);
  const packs: string[] = [];
  const n = buf.readUInt32LE(4);
  let o = 8;
  for (let i = 0; i < n; i++) {
    const pack = buf.toString('hex', o, o + 32);
    packs.push(pack);
    const count = buf.readUInt32LE(o + 32);
    o += 36;
    for (let j = 0; j < count; j++, o += ENTRY) each(pack, o);
  }
  return packs;
}
