import { describe, expect, it } from 'vitest';
import { discardBuffer, giveBuffer, isPoolBuffer, takeBuffer } from './bufferPool.js';
import { decodeBuffer } from './pool/wire.js';

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

  it('frees a buffer nobody holds at once, not at the next collection, and those it has no room for', async () => {
    const rss = () => process.memoryUsage().rss;
    const bufs = Array.from({ length: 8 }, () => {
      const ab = new ArrayBuffer(16 * MiB);
      new Uint8Array(ab).fill(1); // resident
      return ab;
    });
    const before = rss();
    for (const ab of bufs) discardBuffer(ab);
    expect(bufs.every((ab) => ab.byteLength === 0)).toBe(true); // detached: its memory is gone with the message
    // 128 MiB freed within moments (the message is dropped on the next turn), with no collection
    for (let i = 0; i < 100 && before - rss() <= 64 * MiB; i++) await new Promise((r) => setTimeout(r, 20));
    expect(before - rss()).toBeGreaterThan(64 * MiB);
    // past what the pool keeps, a buffer given back is freed the same way
    const kept = Array.from({ length: 6 }, () => takeBuffer(4 * MiB).buffer as ArrayBuffer);
    for (const ab of kept) giveBuffer(ab);
    expect(kept.filter((ab) => ab.byteLength === 0).length).toBeGreaterThan(0);
    discardBuffer(new ArrayBuffer(0)); // nothing to free: no error
  });
});
