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

  it('gathers blobs in one buffer: the callers’ buffers are free at once, the pack is one piece', () => {
    const key = newMasterKey();
    const MiB = 1024 * 1024;
    const b = new PackBuilder(key, 4 * MiB, 16 * MiB);
    const blobs = [crypto.randomBytes(3000), crypto.randomBytes(2 * MiB), crypto.randomBytes(70_000)];
    const copies = blobs.map((x) => Buffer.from(x));
    // copied, not referred to: add says the pack does not hold the caller's buffer
    for (const x of blobs)
      expect(b.add(crypto.randomBytes(32), BlobType.Data, false, x.length, x)).toBe(false);
    for (const x of blobs) x.fill(0); // the callers reuse their buffers
    const first = b.finish();
    expect(first.parts).toHaveLength(1); // blobs and header in the pack's buffer
    const bytes = Buffer.from(first.parts[0]);
    expect(first.id).toBe(storageId(bytes));
    expect(bytes.subarray(0, 3000 + 2 * MiB + 70_000).equals(Buffer.concat(copies))).toBe(true);
    expect(decodeHeader(key, bytes, bytes.length, 'pack').map((h) => h.length)).toEqual([
      3000,
      2 * MiB,
      70_000,
    ]);
    first.release();
    // a blob past the buffer's room, and every one after it, are parts of their own (views, held)
    const big = crypto.randomBytes(21 * MiB);
    const after = crypto.randomBytes(500);
    expect(b.add(crypto.randomBytes(32), BlobType.Data, false, 10, Buffer.from('gathered'))).toBe(false);
    expect(b.add(crypto.randomBytes(32), BlobType.Data, false, big.length, big)).toBe(true);
    expect(b.add(crypto.randomBytes(32), BlobType.Data, false, after.length, after)).toBe(true);
    const second = b.finish();
    expect(second.parts).toHaveLength(4); // the gathered start, the two views, the header
    const whole = Buffer.concat(second.parts);
    expect(second.id).toBe(storageId(whole));
    expect(whole.subarray(0, 8).toString()).toBe('gathered');
    expect(whole.subarray(8, 8 + big.length).equals(big)).toBe(true);
    expect(decodeHeader(key, whole, whole.length, 'pack').map((h) => h.offset)).toEqual([
      0,
      8,
      8 + big.length,
    ]);
    second.release();
  });
});
