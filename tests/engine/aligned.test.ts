/**
 * Aligned memory (src/main/engine/aligned.ts): WebAssembly memories, page-aligned, kept per size. From
 * 2 MiB on they are marked for transparent huge pages (native/fsmeta's adviseHugePages), which V8's own
 * mapping of them never asks for: a fresh 21 MiB pack buffer otherwise costs ~5,000 page faults.
 */
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import {
  alignedAt,
  alignedBytes,
  dropKeptAligned,
  giveAligned,
  takeAligned,
} from '../../src/main/engine/aligned.js';
import { loadNativeAddon } from '../../src/main/engine/native.js';

const MiB = 1024 * 1024;
const hugeKiB = () =>
  Number(/AnonHugePages:\s+(\d+)/.exec(fs.readFileSync('/proc/self/smaps_rollup', 'utf8'))?.[1] ?? 0);
const thpMode = () => {
  try {
    return /\[(\w+)\]/.exec(fs.readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8'))?.[1];
  } catch {
    return undefined;
  }
};
const addon = loadNativeAddon<{ adviseHugePages?: (ab: ArrayBuffer) => number }>('fsmeta', 'tidemark_fsmeta');

describe('aligned memory', () => {
  it('is aligned, reused per size, and usable whole', () => {
    const a = takeAligned(2 * MiB)!;
    expect(a.length).toBe(2 * MiB);
    expect(alignedAt(a)).toBe(true);
    expect(alignedAt(a.subarray(4096))).toBe(true);
    expect(alignedAt(a.subarray(512))).toBe(false);
    expect(alignedAt(Buffer.alloc(4096))).toBe(false);
    a.fill(7);
    giveAligned(a);
    expect(takeAligned(2 * MiB)).toBe(a);
  });

  it('dropKeptAligned lets go of what is kept: the next take makes a new memory', () => {
    const a = takeAligned(4 * MiB)!;
    const b = takeAligned(4 * MiB)!;
    giveAligned(a);
    giveAligned(b);
    expect(alignedBytes.kept).toBeGreaterThanOrEqual(8 * MiB);
    dropKeptAligned();
    expect(alignedBytes.kept).toBe(0);
    const c = takeAligned(4 * MiB)!;
    // (identity compared as booleans: expect's not.toBe on two 4 MiB buffers compares their bytes to explain itself)
    expect(c === a || c === b).toBe(false);
    expect(alignedAt(c)).toBe(true);
    giveAligned(c);
  });

  it.skipIf(
    process.platform !== 'linux' || !addon?.adviseHugePages || !/madvise|always/.test(thpMode() ?? ''),
  )('comes in transparent huge pages from 2 MiB on (Linux, THP on request, fsmeta built)', () => {
    // a memory of 16 MiB written whole: at least 6 of its 2 MiB-aligned stretches lie wholly inside it
    const before = hugeKiB();
    const b = takeAligned(16 * MiB)!;
    b.fill(1);
    expect(hugeKiB() - before).toBeGreaterThanOrEqual(12 * 1024);
    // the advice changes nothing of the memory itself
    expect(b.every((x) => x === 1)).toBe(true);
    giveAligned(b);
  });

  it.skipIf(process.platform !== 'linux' || !addon?.adviseHugePages)(
    'adviseHugePages refuses what is not an ArrayBuffer',
    () => {
      expect(() => (addon!.adviseHugePages as (x: unknown) => number)(Buffer.alloc(8))).toThrow(
        /adviseHugePages/,
      );
      expect(addon!.adviseHugePages!(new ArrayBuffer(0))).not.toBe(0);
    },
  );
});
