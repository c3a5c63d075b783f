import { describe, it, expect } from 'vitest';
import crypto from 'node:crypto';
import { PackBuilder, decodeHeader } from './pack.js';
import { BlobType } from './blobIndex.js';
import { newMasterKey, storageId } from '../crypto/index.js';

describe('PackBuilder', () => {
  it('names a pack by the hash of its bytes when blobs are views that follow each other in memory', () => {
    const key = newMasterKey();
    const segment = crypto.randomBytes(10_000); // one sealed segment: its blobs are consecutive views
    const other = crypto.randomBytes(3_000);
    const blobs = [
      segment.subarray(0, 4000),
      segment.subarray(4000, 6000),
      other.subarray(0, 1000), // breaks the run
      other.subarray(2000, 3000), // same buffer, not consecutive: a part of its own
      segment.subarray(6000, 10_000),
    ];
    const b = new PackBuilder(key);
    blobs.forEach((s, i) => b.add(crypto.randomBytes(32), BlobType.Data, false, s.length + i, s));
    const { id, parts, size, blobs: listed } = b.finish();
    const bytes = Buffer.concat(parts);
    expect(parts.length).toBe(5); // 2 blobs joined + 3 parts + the header
    expect(size).toBe(bytes.length);
    expect(id).toBe(storageId(bytes));
    expect(bytes.subarray(0, 12_000).equals(Buffer.concat(blobs))).toBe(true);
    const header = decodeHeader(key, bytes, bytes.length, 'pack');
    expect(header.map((h) => [h.offset, h.length, h.rawLength])).toEqual(
      listed.map((h, i) => [h.offset, blobs[i].length, blobs[i].length + i]),
    );
    // the builder starts over: a second pack is hashed on its own
    b.add(crypto.randomBytes(32), BlobType.Data, false, 10, segment.subarray(0, 10));
    const second = b.finish();
    expect(second.id).toBe(storageId(Buffer.concat(second.parts)));
  });
});
