import { describe, expect, it } from 'vitest';
import { giveBuffer, isPoolBuffer, takeBuffer } from './bufferPool.js';
import { decodeBuffer } from './workers/index.js';

const MiB = 1024 * 1024;

describe('buffer pool', () => {
  it('reuses a buffer given back for the next range of about its size, and only large ones', () => {
    const a = takeBuffer(3 * MiB + 5);
    expect(a.length).toBe(3 * MiB + 5);
    expect(a.buffer.byteLength).toBe(4 * MiB); // whole MiBs
    expect(isPoolBuffer(a.buffer)).toBe(true);
    const ab = a.buffer as ArrayBuffer;
    giveBuffer(ab);
    const b = takeBuffer(3 * MiB);
    expect(b.buffer).toBe(ab); // the same memory again
    expect(b.length).toBe(3 * MiB);
    // not kept twice, not handed out twice
    giveBuffer(ab);
    giveBuffer(ab);
    expect(takeBuffer(3 * MiB).buffer).toBe(ab);
    expect(takeBuffer(3 * MiB).buffer).not.toBe(ab);
    // a far larger kept buffer is not spent on a small range; small ranges are plain buffers
    giveBuffer(takeBuffer(16 * MiB).buffer as ArrayBuffer);
    expect(takeBuffer(2 * MiB).buffer.byteLength).toBe(2 * MiB);
    expect(isPoolBuffer(takeBuffer(1000).buffer)).toBe(false);
  });

  it('moves a pool buffer to a worker whole, and copies a view into anyone else’s buffer', () => {
    const mine = takeBuffer(2 * MiB - 10);
    const d1 = decodeBuffer(mine);
    expect(d1.transfer).toEqual([mine.buffer]);
    expect(d1.buffer.byteLength).toBe(2 * MiB - 10);
    // a view with room to spare into a buffer the pool did not make (a network library's, say)
    const theirs = Buffer.from(new ArrayBuffer(4 * MiB), 0, MiB);
    const d2 = decodeBuffer(theirs);
    expect(d2.transfer[0]).not.toBe(theirs.buffer);
    expect(d2.buffer.byteLength).toBe(MiB);
  });
});
