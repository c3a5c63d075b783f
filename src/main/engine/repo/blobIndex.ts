/**
 * The in-memory blob index: blob ID → (pack, offset, length, raw length, type, compressed).
 * Stored in flat typed arrays with an open-addressing hash table instead of a Map of objects, so a
 * repository with millions of blobs costs ~56–58 bytes per blob rather than several hundred.
 */
import { discardBuffer } from '../bufferPool.js';

export enum BlobType {
  Data = 0,
  Tree = 1,
}

export interface BlobLocation {
  pack: string;
  offset: number;
  length: number;
  rawLength: number;
  type: BlobType;
  compressed: boolean;
}

const EMPTY = -1;

/** The hash table is rebuilt when more than MAX_LOAD of its slots are taken, to GROW_LOAD; reserve()
 *  sizes it to RESERVE_LOAD. Any size, not only powers of two (a slot is found by scaling the hash), so
 *  it costs ~6.5 bytes an entry, not 8 to 16 as a power-of-two table at most half full did. */
const MAX_LOAD = 0.7;
const GROW_LOAD = 0.45;
const RESERVE_LOAD = 0.6;

/** Entries per segment (see BlobIndex): 2^14, ~800 KB of columns. */
const SEG_BITS = 14;
const SEG = 1 << SEG_BITS;
const SEG_MASK = SEG - 1;
/** The first segment's first size; it doubles up to SEG (a small repository's index stays small). */
const FIRST = 1024;

/** One segment's columns: up to SEG entries, entry e at e & SEG_MASK of segment e >>> SEG_BITS. */
interface Segment {
  ids: Uint8Array;
  packRef: Uint32Array;
  offsets: Uint32Array;
  lengths: Uint32Array;
  rawLengths: Uint32Array;
  flags: Uint8Array;
}

const segment = (n: number): Segment => ({
  ids: new Uint8Array(32 * n),
  packRef: new Uint32Array(n),
  offsets: new Uint32Array(n),
  lengths: new Uint32Array(n),
  rawLengths: new Uint32Array(n),
  flags: new Uint8Array(n),
});

/** Where a hash's probe starts in a table of `size` slots: the hash scaled to [0, size) (exact enough in
 *  a double: below size, and the same for the same hash). */
const firstSlot = (hash: number, size: number): number => Math.floor((hash / 4294967296) * size);

/** An ID's hash: its first four bytes (IDs are keyed hashes already), from `id[at]`. */
const hashAt = (id: Uint8Array, at: number): number =>
  (id[at] | (id[at + 1] << 8) | (id[at + 2] << 16) | (id[at + 3] << 24)) >>> 0;

/**
 * The entries live in segments of SEG entries, appended as the index grows: growing never copies them
 * nor holds an old and a new copy at once (doubling whole arrays did, and their capacity ran up to twice
 * the entries: a backup's peak grew ~50 MiB per million blobs more than the ~49 bytes each entry needs).
 * Only the hash table (4 bytes a slot, at most MAX_LOAD full) is rebuilt when it grows, and the old one
 * is freed at once.
 */
export class BlobIndex {
  private segs: Segment[] = [segment(FIRST)];
  private table = new Int32Array(2048).fill(EMPTY);
  private count = 0;
  private readonly packNames: string[] = [];
  private readonly packNumbers = new Map<string, number>();
  private readonly packEnds: number[] = []; // per pack: where its last indexed blob ends

  get size(): number {
    return this.count;
  }

  /** The bytes its segments and hash table take (for figures: bench/blob-index.ts). */
  heldBytes(): number {
    let n = this.table.byteLength;
    for (const s of this.segs) for (const a of Object.values(s) as Uint8Array[]) n += a.byteLength;
    return n;
  }

  /** The slot of the ID at `id[at..at+32)`: its entry's, or the empty one where it would go. */
  private slotOf(id: Uint8Array, at = 0): number {
    const table = this.table;
    const size = table.length;
    let slot = firstSlot(hashAt(id, at), size);
    for (;;) {
      const e = table[slot];
      if (e === EMPTY || this.equals(e, id, at)) return slot;
      if (++slot === size) slot = 0;
    }
  }

  private equals(entry: number, id: Uint8Array, at: number): boolean {
    const ids = this.segs[entry >>> SEG_BITS].ids;
    const base = (entry & SEG_MASK) * 32;
    for (let i = 0; i < 32; i++) if (ids[base + i] !== id[at + i]) return false;
    return true;
  }

  /** Where hex IDs are decoded for a lookup (used synchronously, never kept: add() copies). */
  private static readonly scratch = Buffer.alloc(32);

  private static toBytes(id: Uint8Array | string): Uint8Array {
    if (typeof id !== 'string') return id;
    if (id.length === 64 && BlobIndex.scratch.write(id, 'hex') === 32) return BlobIndex.scratch;
    return Buffer.from(id, 'hex');
  }

  has(id: Uint8Array | string): boolean {
    return this.table[this.slotOf(BlobIndex.toBytes(id))] !== EMPTY;
  }

  get(id: Uint8Array | string): BlobLocation | undefined {
    const e = this.table[this.slotOf(BlobIndex.toBytes(id))];
    if (e === EMPTY) return undefined;
    return this.location(e);
  }

  private location(e: number): BlobLocation {
    const s = this.segs[e >>> SEG_BITS];
    const i = e & SEG_MASK;
    const f = s.flags[i];
    return {
      pack: this.packNames[s.packRef[i]],
      offset: s.offsets[i],
      length: s.lengths[i],
      rawLength: s.rawLengths[i],
      type: (f & 0x7f) as BlobType,
      compressed: (f & 0x80) !== 0,
    };
  }

  /** Adds a blob; a blob already present keeps its first location (duplicates across packs are harmless). */
  add(id: Uint8Array | string, loc: BlobLocation): boolean {
    const flags = (loc.type & 0x7f) | (loc.compressed ? 0x80 : 0);
    return this.addAt(BlobIndex.toBytes(id), 0, loc.pack, flags, loc.offset, loc.length, loc.rawLength);
  }

  /** The pack addAt was last given, and its number (an index file lists its blobs pack by pack). */
  private lastPack: string | undefined;
  private lastPackNumber = 0;

  /** A pack's number in this index (given one at its first blob). */
  private packNumber(pack: string): number {
    if (pack === this.lastPack) return this.lastPackNumber;
    let p = this.packNumbers.get(pack);
    if (p === undefined) {
      p = this.packNames.length;
      this.packNames.push(pack);
      this.packNumbers.set(pack, p);
      this.packEnds.push(0);
    }
    this.lastPack = pack;
    this.lastPackNumber = p;
    return p;
  }

  /** add(), for a blob whose ID is `src[at..at+32)` (an index file's entry, read in place: loading an
   *  index made a view and a location object per blob), `flags` its type | compressed << 7. */
  addAt(
    src: Uint8Array,
    at: number,
    packName: string,
    flags: number,
    offset: number,
    length: number,
    rawLength: number,
  ): boolean {
    if (this.count + 1 > this.table.length * MAX_LOAD) this.grow(Math.ceil((this.count + 1) / GROW_LOAD));
    const slot = this.slotOf(src, at);
    if (this.table[slot] !== EMPTY) return false;
    const e = this.count++;
    this.room(e + 1);
    const pack = this.packNumber(packName); // (a pack none of whose blobs is added stays unknown)
    const s = this.segs[e >>> SEG_BITS];
    const i = e & SEG_MASK;
    const ids = s.ids;
    for (let k = 0; k < 32; k++) ids[i * 32 + k] = src[at + k];
    if (offset + length > this.packEnds[pack]) this.packEnds[pack] = offset + length;
    s.packRef[i] = pack;
    s.offsets[i] = offset;
    s.lengths[i] = length;
    s.rawLengths[i] = rawLength;
    s.flags[i] = flags;
    this.table[slot] = e;
    return true;
  }

  /** Makes room for `n` blobs in all (an index file's count, before its blobs are added one by one). */
  reserve(n: number): void {
    this.room(n);
    if (n > this.table.length * MAX_LOAD) this.grow(Math.ceil(n / RESERVE_LOAD));
  }

  /** Segments for n entries: the first one grown (doubling, up to SEG), then whole segments appended. */
  private room(n: number): void {
    const first = this.segs[0];
    if (this.segs.length === 1 && first.flags.length < SEG && n > first.flags.length) {
      const size = Math.min(SEG, 2 ** Math.ceil(Math.log2(n)));
      const grown = segment(size);
      grown.ids.set(first.ids);
      grown.packRef.set(first.packRef);
      grown.offsets.set(first.offsets);
      grown.lengths.set(first.lengths);
      grown.rawLengths.set(first.rawLengths);
      grown.flags.set(first.flags);
      this.segs[0] = grown;
    }
    while (this.segs.length * SEG < n) this.segs.push(segment(SEG));
  }

  private grow(size: number): void {
    const old = this.table;
    this.table = new Int32Array(size).fill(EMPTY);
    discardBuffer(old.buffer as ArrayBuffer); // freed now, not at the next full collection
    // every entry is distinct: each goes in the first empty slot from its hash (no comparing)
    const table = this.table;
    for (let e = 0; e < this.count; e++) {
      let slot = firstSlot(hashAt(this.segs[e >>> SEG_BITS].ids, (e & SEG_MASK) * 32), size);
      while (table[slot] !== EMPTY) if (++slot === size) slot = 0;
      table[slot] = e;
    }
  }

  /** Every (id, location), in insertion order. */
  *entries(): IterableIterator<[string, BlobLocation]> {
    for (let e = 0; e < this.count; e++) {
      const ids = this.segs[e >>> SEG_BITS].ids;
      const at = (e & SEG_MASK) * 32;
      yield [Buffer.from(ids.subarray(at, at + 32)).toString('hex'), this.location(e)];
    }
  }

  /** The bytes of a pack its indexed blobs span (from its start), or undefined for an unknown pack. */
  packExtent(pack: string): number | undefined {
    const p = this.packNumbers.get(pack);
    return p === undefined ? undefined : this.packEnds[p];
  }

  packs(): string[] {
    return [...this.packNames];
  }

  /** How many blobs of `type` each pack holds (by the location `get` gives). */
  countsByPack(type: BlobType): Map<string, number> {
    const counts = new Uint32Array(this.packNames.length);
    for (let e = 0; e < this.count; e++) {
      const s = this.segs[e >>> SEG_BITS];
      const i = e & SEG_MASK;
      if ((s.flags[i] & 0x7f) === type) counts[s.packRef[i]]++;
    }
    const out = new Map<string, number>();
    counts.forEach((n, p) => n && out.set(this.packNames[p], n));
    return out;
  }
}
