// The in-memory blob index: lookups by hex or bytes, first location kept, counts per pack.
import { describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import { BlobIndex, BlobType } from './blobIndex.js';
import { addIndexFile, decodeIndex, encodeIndex, indexEntryCount } from './indexFile.js';
import { CorruptObjectError } from '../errors.js';

const id = (n: number) => crypto.createHash('sha256').update(String(n)).digest('hex');
const at = (pack: string, type: BlobType, offset: number) => ({
  pack,
  offset,
  length: 100,
  rawLength: 200,
  type,
  compressed: true,
});

describe('BlobIndex', () => {
  it('finds blobs by hex or bytes, keeps the first location, and counts each type per pack', () => {
    const index = new BlobIndex();
    for (let i = 0; i < 3000; i++)
      index.add(id(i), at(`p${i % 3}`, i % 10 === 0 ? BlobType.Tree : BlobType.Data, i));
    expect(index.add(id(7), at('elsewhere', BlobType.Data, 0))).toBe(false); // a second copy
    expect(index.size).toBe(3000);
    expect(index.get(id(7))).toEqual(at('p1', BlobType.Data, 7));
    expect(index.get(Buffer.from(id(8), 'hex'))).toEqual(at('p2', BlobType.Data, 8));
    expect(index.get(id(3000))).toBeUndefined();
    // 3000 blobs over 3 packs, every 10th a tree: 300 trees, 100 in each pack
    expect(index.countsByPack(BlobType.Data)).toEqual(
      new Map([
        ['p0', 900],
        ['p1', 900],
        ['p2', 900],
      ]),
    );
    expect(index.countsByPack(BlobType.Tree)).toEqual(
      new Map([
        ['p0', 100],
        ['p1', 100],
        ['p2', 100],
      ]),
    );
  });

  it('finds every blob across its segments (2^14 entries each) as it grows, by adding or by reserving', () => {
    // 40,000 blobs: the first segment grown from 1,024 to 16,384 entries, then two more segments, and the
    // hash table rebuilt six times; a second index reserves room part way (between the segments' bounds)
    const n = 40_000;
    const ids = Array.from({ length: n }, (_, i) => crypto.createHash('sha256').update(`s${i}`).digest());
    const loc = (i: number) => ({
      pack: `pack${i >> 12}`,
      offset: i * 7,
      length: (i % 5000) + 1,
      rawLength: i + 3,
      type: i % 3 === 0 ? BlobType.Tree : BlobType.Data,
      compressed: i % 2 === 0,
    });
    const grown = new BlobIndex();
    const reserved = new BlobIndex();
    for (let i = 0; i < n; i++) {
      if (i === 10_000) reserved.reserve(33_000); // past the first segment, not a whole number of them
      expect(grown.add(ids[i], loc(i))).toBe(true);
      expect(reserved.add(ids[i].toString('hex'), loc(i))).toBe(true);
      // the entry just added at a boundary, and the first ones, stay found as it grows
      if (i === 16_383 || i === 16_384 || i === 32_767 || i === 32_768) {
        expect(grown.get(ids[i])).toEqual(loc(i));
        expect(grown.get(ids[0])).toEqual(loc(0));
      }
    }
    for (const index of [grown, reserved]) {
      expect(index.size).toBe(n);
      for (let i = 0; i < n; i++) expect(index.get(ids[i])).toEqual(loc(i));
      expect(index.add(ids[16_384], loc(0))).toBe(false); // a second copy: the first location stays
      expect(index.get(ids[16_384])).toEqual(loc(16_384));
      expect(index.has(crypto.createHash('sha256').update('absent').digest())).toBe(false);
      // in insertion order, across the segments
      let k = 0;
      for (const [hex, l] of index.entries()) {
        expect(hex).toBe(ids[k].toString('hex'));
        expect(l).toEqual(loc(k));
        k++;
      }
      expect(k).toBe(n);
      const trees = index.countsByPack(BlobType.Tree);
      expect([...trees.values()].reduce((a, b) => a + b, 0)).toBe(Math.ceil(n / 3));
      expect(index.packExtent('pack9')).toBe(
        Math.max(
          ...Array.from({ length: 4096 }, (_, j) => {
            const i = 9 * 4096 + j;
            return i < n ? loc(i).offset + loc(i).length : 0;
          }),
        ),
      );
    }
  });

  it('keeps every blob when room is made first, beside blobs already there', () => {
    const index = new BlobIndex();
    for (let i = 0; i < 100; i++) index.add(id(i), at('a', BlobType.Data, i));
    index.reserve(100 + 5000); // an index file of 5,000 blobs: the table and arrays sized once
    for (let i = 100; i < 5100; i++) index.add(Buffer.from(id(i), 'hex'), at('b', BlobType.Data, i));
    expect(index.size).toBe(5100);
    for (let i = 0; i < 5100; i++) expect(index.get(id(i))?.offset).toBe(i);
    index.reserve(10); // never shrinks
    expect(index.get(id(5099))).toEqual(at('b', BlobType.Data, 5099));
  });

  it('finds blobs whose probes run past the last slot of the table (IDs hashing to its end and its start)', () => {
    // the hash is an ID's first four bytes: ff ff ff ff… all start at the last slot and wrap round to
    // the first, where 00 00 00 00… start too; through a rebuild of the table and after it
    const edge = (n: number, top: boolean) => {
      const b = Buffer.from(id(n), 'hex');
      b.fill(top ? 0xff : 0, 0, 4);
      return b;
    };
    const index = new BlobIndex();
    const ids: Buffer[] = [];
    for (let i = 0; i < 3000; i++) {
      ids.push(edge(i, i % 2 === 0));
      expect(index.add(ids[i], at('p', BlobType.Data, i))).toBe(true);
      if (i % 500 === 0) for (let k = 0; k <= i; k++) expect(index.get(ids[k])?.offset).toBe(k);
    }
    for (let i = 0; i < 3000; i++) expect(index.has(ids[i])).toBe(true);
    expect(index.has(edge(3001, true))).toBe(false);
    expect(index.has(edge(3002, false))).toBe(false);
    expect(index.size).toBe(3000);
  });
});

describe('index files', () => {
  const file = encodeIndex([
    {
      pack: id(-1),
      blobs: [0, 1, 2].map((i) => ({ id: Buffer.from(id(i), 'hex'), loc: at(id(-1), BlobType.Data, i) })),
    },
    {
      pack: id(-2),
      blobs: [3, 4].map((i) => ({ id: Buffer.from(id(i), 'hex'), loc: at(id(-2), BlobType.Tree, i) })),
    },
  ]);

  it('lists every blob with its pack', () => {
    expect(indexEntryCount(file, 'f')).toBe(5);
    const seen: [string, number, string][] = [];
    decodeIndex(file, 'f', (b, loc) => seen.push([b.toString('hex'), loc.offset, loc.pack]));
    expect(seen).toEqual([0, 1, 2, 3, 4].map((i) => [id(i), i, id(i < 3 ? -1 : -2)]));
  });

  it('adds an index file to an index in place: every blob, its location and pack, the first copy kept', () => {
    // 3 packs of 2,000 blobs, the last blob of each pack a copy of the first of the next (kept where first
    // seen); added to an index holding blobs already, its table growing (not reserved) as they come
    const packs = [0, 1, 2].map((k) => ({
      pack: id(-10 - k),
      blobs: Array.from({ length: 2000 }, (_, j) => {
        const n = j === 1999 && k < 2 ? (k + 1) * 2000 : k * 2000 + j;
        const type = n % 7 === 0 ? BlobType.Tree : BlobType.Data;
        return {
          id: Buffer.from(id(n), 'hex'),
          loc: { ...at(id(-10 - k), type, j * 100), compressed: n % 2 === 0 },
        };
      }),
    }));
    const index = new BlobIndex();
    for (let i = 0; i < 50; i++) index.add(id(100_000 + i), at('earlier', BlobType.Data, i));
    addIndexFile(encodeIndex(packs), 'f', index);
    const expected = new BlobIndex();
    for (let i = 0; i < 50; i++) expected.add(id(100_000 + i), at('earlier', BlobType.Data, i));
    decodeIndex(encodeIndex(packs), 'f', (b, loc) => expected.add(b, loc));
    expect(index.size).toBe(50 + 3 * 2000 - 2);
    expect([...index.entries()]).toEqual([...expected.entries()]);
    expect(index.get(id(2000))).toMatchObject({ pack: id(-10), offset: 1999 * 100 }); // the first copy
    expect(index.get(id(4001))).toMatchObject({ pack: id(-12), offset: 100, compressed: false });
    expect(index.get(id(7))).toMatchObject({ type: BlobType.Tree, compressed: false });
    expect(index.packExtent(id(-11))).toBe(1999 * 100 + 100);
    expect(index.packs()).toEqual(['earlier', id(-10), id(-11), id(-12)]);
    // a pack whose every blob is a copy stays unknown (as when added blob by blob)
    addIndexFile(encodeIndex([{ pack: id(-20), blobs: packs[0].blobs.slice(0, 3) }]), 'g', index);
    expect(index.packs()).toEqual(['earlier', id(-10), id(-11), id(-12)]);
    expect(index.packExtent(id(-20))).toBeUndefined();
    for (let n = 0; n < 6000; n++) expect(index.has(id(n))).toBe(n !== 1999 && n !== 3999);
    // a damaged file adds nothing
    const damaged = encodeIndex(packs).subarray(0, 8 + 36 + 45 * 10);
    expect(() => addIndexFile(damaged, 'f', index)).toThrow(CorruptObjectError);
    expect(index.size).toBe(50 + 3 * 2000 - 2);
  });

  it('a damaged file lists nothing, not the blobs before the damage', () => {
    for (const cut of [file.length - 1, file.length - 45, 8 + 36 + 10, 20]) {
      let called = 0;
      expect(() => decodeIndex(file.subarray(0, cut), 'f', () => called++)).toThrow(CorruptObjectError);
      expect(called).toBe(0);
    }
    expect(() => indexEntryCount(Buffer.from('nope, not an index'), 'f')).toThrow(/not an index file/);
  });
});
