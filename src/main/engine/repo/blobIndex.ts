/**
 * The in-memory blob index: blob ID → (pack, offset, length, raw length, type, compressed).
 * Stored in flat typed arrays with an open-addressing hash table instead of a Map of objects, so a
 * repository with millions of blobs costs ~60 bytes per blob rather than several hundred.
 */
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

/** An ID's hash: its first four bytes (IDs are keyed hashes already), from `id[at]`. */
const hashAt = (id: Uint8Array, at: number): number =>
  (id[at] | (id[at + 1] << 8) | (id[at + 2] << 16) | (id[at + 3] << 24)) >>> 0;

export class BlobIndex {
  private ids = new Uint8Array(32 * 1024);
  private packRef = new Uint32Array(1024);
  private offsets = new Uint32Array(1024);
  private lengths = new Uint32Array(1024);
  private rawLengths = new Uint32Array(1024);
  private flags = new Uint8Array(1024);
  private table = new Int32Array(2048).fill(EMPTY);
  private count = 0;
  private readonly packNames: string[] = [];
  private readonly packNumbers = new Map<string, number>();
  private readonly packEnds: number[] = []; // per pack: where its last indexed blob ends

  get size(): number {
    return this.count;
  }

  /** The slot of the ID at `id[at..at+32)`: its entry's, or the empty one where it would go. */
  private slotOf(id: Uint8Array, at = 0): number {
    const mask = this.table.length - 1;
    let slot = hashAt(id, at) & mask;
    for (;;) {
      const e = this.table[slot];
      if (e === EMPTY || this.equals(e, id, at)) return slot;
      slot = (slot + 1) & mask;
    }
  }

  private equals(entry: number, id: Uint8Array, at: number): boolean {
    const base = entry * 32;
    const ids = this.ids;
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
    const f = this.flags[e];
    return {
      pack: this.packNames[this.packRef[e]],
      offset: this.offsets[e],
      length: this.lengths[e],
      rawLength: this.rawLengths[e],
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
    if ((this.count + 1) * 2 > this.table.length) this.grow();
    const slot = this.slotOf(src, at);
    if (this.table[slot] !== EMPTY) return false;
    const e = this.count++;
    if (e >= this.flags.length) this.growEntries();
    const pack = this.packNumber(packName); // (a pack none of whose blobs is added stays unknown)
    const ids = this.ids;
    for (let i = 0; i < 32; i++) ids[e * 32 + i] = src[at + i];
    if (offset + length > this.packEnds[pack]) this.packEnds[pack] = offset + length;
    this.packRef[e] = pack;
    this.offsets[e] = offset;
    this.lengths[e] = length;
    this.rawLengths[e] = rawLength;
    this.flags[e] = flags;
    this.table[slot] = e;
    return true;
  }

  /** Makes room for `n` blobs in all (an index file's count, before its blobs are added one by one). */
  reserve(n: number): void {
    if (n > this.flags.length) this.growEntries(2 ** Math.ceil(Math.log2(n)));
    if (n * 2 > this.table.length) this.grow(2 ** Math.ceil(Math.log2(n * 2)));
  }

  private growEntries(n = this.flags.length * 2): void {
    const grow = <T extends Uint8Array | Uint32Array>(a: T, size: number): T => {
      const b = new (a.constructor as new (n: number) => T)(size);
      b.set(a);
      return b;
    };
    this.ids = grow(this.ids, n * 32);
    this.packRef = grow(this.packRef, n);
    this.offsets = grow(this.offsets, n);
    this.lengths = grow(this.lengths, n);
    this.rawLengths = grow(this.rawLengths, n);
    this.flags = grow(this.flags, n);
  }

  private grow(size = this.table.length * 2): void {
    this.table = new Int32Array(size).fill(EMPTY);
    // every entry is distinct: each goes in the first empty slot from its hash (no comparing)
    const table = this.table;
    const ids = this.ids;
    const mask = size - 1;
    for (let e = 0; e < this.count; e++) {
      let slot = hashAt(ids, e * 32) & mask;
      while (table[slot] !== EMPTY) slot = (slot + 1) & mask;
      table[slot] = e;
    }
  }

  /** Every (id, location), in insertion order. */
  *entries(): IterableIterator<[string, BlobLocation]> {
    for (let e = 0; e < this.count; e++) {
      yield [Buffer.from(this.ids.subarray(e * 32, e * 32 + 32)).toString('hex'), this.location(e)];
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
    for (let e = 0; e < this.count; e++) if ((this.flags[e] & 0x7f) === type) counts[this.packRef[e]]++;
    const out = new Map<string, number>();
    counts.forEach((n, p) => n && out.set(this.packNames[p], n));
    return out;
  }
}
