/**
 * Writing pack files past the page cache (O_DIRECT, Linux).
 *
 * A backup writes hundreds of megabytes of packs that nothing will read soon. Written through the page
 * cache they push the user's own files out of memory (the PC feels slow after a backup: written
 * directly, none of them stay in the cache), and each page costs the kernel a copy plus, on a VM whose
 * freed memory goes back to the host, a fault on the host the first time it is touched: written directly
 * they cost a small fraction of that system time, and a whole backup is a few percent faster
 * (docs/performance.md).
 *
 * O_DIRECT wants the memory, file offset and length aligned to the device's logical block. Packs are
 * gathered from many blob buffers, so they are copied into a staging buffer from a WebAssembly memory
 * (page-aligned by construction: JavaScript cannot ask for aligned memory otherwise) and written 1 MiB
 * at a time (4 MiB stages held more memory at the backup's peak for no measurable speed), or, when the
 * pack was gathered in such memory already (repo/pack.ts, PackBuilder), written from it at once; the last
 * piece is padded to the block and the file cut back to its size. Only on a local disk's filesystem
 * (../../aligned.ts, directIoFilesystem); where the platform has no O_DIRECT (Windows, macOS), the
 * filesystem refuses it (EINVAL) or the memory cannot be had, the caller writes through the page cache.
 */
import type fs from 'node:fs/promises';
import { ALIGN, alignedAt, giveAligned, takeAligned } from '../../aligned.js';

/** Objects smaller than this are written through the page cache (index files, locks, snapshots). */
export const DIRECT_MIN_BYTES = 1024 * 1024;
const STAGE = 1024 * 1024;

/** Thrown when direct I/O turns out not to work here; the caller starts again buffered. */
export class DirectUnsupported extends Error {}

/** Writes `length` bytes of `buf` at `position`, all of them. On a handle opened with O_DIRECT
 *  (`direct`, the default) a refusal (EINVAL) or a short unaligned write throws DirectUnsupported. */
export async function writeAt(
  fh: fs.FileHandle,
  buf: Buffer,
  length: number,
  position: number,
  direct = true,
): Promise<void> {
  let done = 0;
  while (done < length) {
    let n: number;
    try {
      ({ bytesWritten: n } = await fh.write(buf, done, length - done, position + done));
    } catch (err) {
      if (direct && (err as NodeJS.ErrnoException).code === 'EINVAL') throw new DirectUnsupported('EINVAL');
      throw err;
    }
    if (n === 0) throw Object.assign(new Error('no space left on device'), { code: 'ENOSPC' });
    if (direct && n % ALIGN !== 0) throw new DirectUnsupported(`short unaligned write (${n} bytes)`);
    done += n;
  }
}

/**
 * Writes `parts` in order into `fh` (opened with O_DIRECT, empty) and cuts the file to their total size.
 * Throws DirectUnsupported when direct I/O does not work here (nothing usable was written).
 */
export async function writePartsDirect(fh: fs.FileHandle, parts: readonly Uint8Array[]): Promise<void> {
  // a pack gathered in aligned memory (repo/pack.ts, PackBuilder) with room to pad its end: one write
  const one = parts.length === 1 ? parts[0] : undefined;
  const padded = one ? Math.ceil(one.length / ALIGN) * ALIGN : 0;
  if (one && alignedAt(one) && one.byteOffset + padded <= one.buffer.byteLength) {
    const whole = Buffer.from(one.buffer, one.byteOffset, padded);
    whole.fill(0, one.length);
    await writeAt(fh, whole, padded, 0);
    if (padded !== one.length) await fh.truncate(one.length);
    return;
  }
  const stage = takeAligned(STAGE);
  if (!stage) throw new DirectUnsupported('no aligned memory');
  try {
    let pos = 0;
    let fill = 0;
    for (const p of parts) {
      for (let off = 0; off < p.length;) {
        const n = Math.min(STAGE - fill, p.length - off);
        stage.set(p.subarray(off, off + n), fill);
        fill += n;
        off += n;
        if (fill === STAGE) {
          await writeAt(fh, stage, STAGE, pos);
          pos += STAGE;
          fill = 0;
        }
      }
    }
    if (fill) {
      const padded = Math.ceil(fill / ALIGN) * ALIGN;
      stage.fill(0, fill, padded);
      await writeAt(fh, stage, padded, pos);
      pos += fill;
      await fh.truncate(pos);
    }
  } finally {
    giveAligned(stage);
  }
}
