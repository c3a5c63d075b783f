// The in-memory blob index: lookups by hex or bytes, first location kept, counts per pack.
import { describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import { BlobIndex, BlobType } from './blobIndex.js';

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
});
