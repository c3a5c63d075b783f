/**
 * A decode task's blobs in flat arrays (pool/wire.ts, DecodeBatch): what the restore plans per blob — its place
 * in the range, its ID, the whole files made of it and the pieces of larger files it fills — survives
 * packing field by field, and the worker's failures, reported by index, come back to the right blob, file
 * and piece.
 */
import { describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import {
  BLOB_FIELDS,
  PART_FIELDS,
  WRITE_FIELDS,
  outcomesOf,
  packDecodeItems,
  type DecodeItem,
} from '../../src/main/engine/pool/wire.js';

const id = () => randomBytes(32).toString('hex');
const p = (s: string) => new Uint8Array(Buffer.from(s));

const items: DecodeItem[] = [
  {
    id: id(),
    offset: 0,
    length: 100,
    compressed: true,
    rawLength: 300,
    writes: [
      { path: p('/t/a'), mode: 0o100644, uid: 1000, gid: 100, mtimeNs: '1600000000123456789' },
      { path: p('/t/dup-of-a'), mode: 0o100600, mtimeNs: '-5' },
    ],
  },
  { id: id(), offset: 100, length: 50, compressed: false, rawLength: 34 },
  {
    id: id(),
    offset: 150,
    length: 4096,
    compressed: false,
    rawLength: 4064,
    writes: [{ path: p('/t/ü'), mode: 0o100755, uid: 0, gid: 0, mtimeNs: '0' }],
    parts: [
      { path: p('/t/big'), offset: 0 },
      { path: p('/t/big2'), offset: 2 ** 40 },
    ],
  },
  {
    id: id(),
    offset: 4246,
    length: 10,
    compressed: true,
    rawLength: 9,
    parts: [{ path: p('/t/big'), offset: 4064 }],
  },
];

const text = (b: Uint8Array, start: number, len: number) =>
  Buffer.from(b.subarray(start, start + len)).toString();

describe('decode batch', () => {
  it('packs every blob, file and piece field by field, in flat arrays moved with the task', () => {
    const { batch, transfer } = packDecodeItems(items);
    expect(batch.count).toBe(4);
    expect(transfer).toHaveLength(6);
    expect(transfer.every((t) => t instanceof ArrayBuffer)).toBe(true);
    items.forEach((it, i) => {
      expect(Buffer.from(batch.ids.subarray(i * 32, i * 32 + 32)).toString('hex')).toBe(it.id);
      expect(batch.idsHex.slice(i * 64, i * 64 + 64)).toBe(it.id);
      const b = [...batch.blobs.subarray(i * BLOB_FIELDS, (i + 1) * BLOB_FIELDS)];
      expect(b.slice(0, 4)).toEqual([it.offset, it.length, it.rawLength, it.compressed ? 1 : 0]);
      expect(b[5]).toBe(it.writes?.length ?? 0);
      expect(b[7]).toBe(it.parts?.length ?? 0);
      (it.writes ?? []).forEach((w, k) => {
        const n = b[4] + k;
        const o = n * WRITE_FIELDS;
        expect(text(batch.paths, batch.writes[o], batch.writes[o + 1])).toBe(Buffer.from(w.path).toString());
        expect([...batch.writes.subarray(o + 2, o + 5)]).toEqual([w.mode, w.uid ?? -1, w.gid ?? 0]);
        expect(batch.mtimes[n]).toBe(BigInt(w.mtimeNs));
      });
      (it.parts ?? []).forEach((part, k) => {
        const o = (b[6] + k) * PART_FIELDS;
        expect(text(batch.paths, batch.parts[o], batch.parts[o + 1])).toBe(Buffer.from(part.path).toString());
        expect(batch.parts[o + 2]).toBe(part.offset);
      });
    });
    // writes and parts are numbered through the items in order
    expect([...batch.blobs].filter((_, k) => k % BLOB_FIELDS === 4)).toEqual([0, 2, 2, 3]);
    expect([...batch.blobs].filter((_, k) => k % BLOB_FIELDS === 6)).toEqual([0, 0, 0, 2]);
  });

  it('gives every blob its outcome: written, damaged, or which of its files and pieces failed', () => {
    expect(outcomesOf(items, undefined).map((o) => o.ok)).toEqual([true, true, true, true]);
    const out = outcomesOf(items, {
      blobs: [[1, 'content does not match its ID']],
      // write 1: the first blob's second file; write 2: the third blob's only file
      writes: [
        [1, 'EACCES: permission denied', 'EACCES'],
        [2, 'ENOSPC: no space left on device', 'ENOSPC'],
      ],
      // part 1: the third blob's second piece; part 2: the fourth blob's only piece
      parts: [
        [1, 'EIO: i/o error', 'EIO'],
        [2, 'EFBIG: file too large', 'EFBIG'],
      ],
    });
    expect(out).toEqual([
      { ok: true, writes: [null, { message: 'EACCES: permission denied', code: 'EACCES' }] },
      { ok: false, message: 'content does not match its ID' },
      {
        ok: true,
        writes: [{ message: 'ENOSPC: no space left on device', code: 'ENOSPC' }],
        parts: [null, { message: 'EIO: i/o error', code: 'EIO' }],
      },
      { ok: true, parts: [{ message: 'EFBIG: file too large', code: 'EFBIG' }] },
    ]);
  });

  it('refuses a failure numbered beyond the task', () => {
    expect(() => outcomesOf(items, { writes: [[3, 'x', undefined]] })).toThrow(/writes 3/);
  });
});
