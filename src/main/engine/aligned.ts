/**
 * Memory aligned for direct I/O (O_DIRECT), which wants the buffer's address, the file offset and the
 * length aligned to the device's logical block. JavaScript cannot ask for aligned memory, but a
 * WebAssembly memory is page-aligned by construction; buffers are kept and reused per size (a few per
 * size), since the backup threads need them again and again.
 */
import { constants as fsConstants, promises as fsp } from 'node:fs';
import { loadNativeAddon } from './native.js';

/** The open(2) flag, where the platform has it (Linux); undefined elsewhere (Windows, macOS). */
export const O_DIRECT: number | undefined =
  process.env.TIDEMARK_NO_DIRECT_IO === '1' ? undefined : (fsConstants as { O_DIRECT?: number }).O_DIRECT;
/** Covers every logical block size in use (512 and 4096 bytes). */
export const ALIGN = 4096;

/**
 * Filesystems on a local disk where direct I/O is what it says (statfs f_type): ext2/3/4, XFS, Btrfs,
 * F2FS. Not network filesystems — a NAS mounted over NFS or SMB turns every direct write into a
 * synchronous round trip, and SMB refuses it unless mounted cache=none — nor tmpfs or FUSE, where there
 * is no disk to go to directly.
 */
const DIRECT_IO_FILESYSTEMS = new Set([0xef53, 0x58465342, 0x9123683e, 0xf2f52010]);

/** Whether direct I/O should be used for files on the filesystem holding `path`. */
export async function directIoFilesystem(path: string | Buffer): Promise<boolean> {
  if (O_DIRECT === undefined) return false;
  try {
    return DIRECT_IO_FILESYSTEMS.has((await fsp.statfs(path)).type);
  } catch {
    return false;
  }
}

/** WebAssembly is a global of every JavaScript engine we run on; Node's type library does not name it. */
const wasm = (
  globalThis as unknown as {
    WebAssembly: { Memory: new (d: { initial: number; maximum: number }) => { buffer: ArrayBuffer } };
  }
).WebAssembly;

/**
 * V8 maps a WebAssembly memory itself, so glibc's huge-page tunable (bin/malloc-env.mjs) does not reach
 * it: every fresh 4 KiB page of a pack's 21 MiB buffer or a 6 MiB read block cost a page fault (~20 µs
 * each in a VM; in huge pages, one per 2 MiB, filling a fresh memory is dozens of times faster).
 * Memories of 2 MiB and more are marked for transparent huge pages (madvise MADV_HUGEPAGE, native/fsmeta)
 * where the addon is built; without it, or where the kernel has no THP, they stay in small pages.
 */
const HUGE_FROM = 2 * 1024 * 1024;
let advise: ((ab: ArrayBuffer) => number) | null | undefined;
function adviseHugePages(memory: ArrayBuffer): void {
  if (advise === undefined)
    advise =
      process.platform === 'linux' && process.env.TIDEMARK_NO_HUGE_ALIGNED !== '1'
        ? (loadNativeAddon<{ adviseHugePages?: (ab: ArrayBuffer) => number }>('fsmeta', 'tidemark_fsmeta')
            ?.adviseHugePages ?? null)
        : null;
  advise?.(memory); // advice only: whatever it returns, the memory is the same
}

/**
 * A memory is freed only when a collection finds it dead (rarely, in a worker), and one kept for reuse
 * stays resident while idle: a backup's large-file read blocks sat through its small files. The pages of
 * every kept memory but the first of its size are given back (madvise MADV_DONTNEED, native/fsmeta; the
 * memory stays mapped, and reads as zeros until written again: in huge pages, a few faults).
 */
let release: ((ab: ArrayBuffer) => number) | null | undefined;
function releasePages(memory: ArrayBufferLike): void {
  if (release === undefined)
    release =
      process.platform === 'linux'
        ? (loadNativeAddon<{ releasePages?: (ab: ArrayBuffer) => number }>('fsmeta', 'tidemark_fsmeta')
            ?.releasePages ?? null)
        : null;
  release?.(memory as ArrayBuffer); // whatever it returns, the memory is usable as before
}

const kept = new Map<number, Buffer[]>();
/** This thread's aligned memories: bytes ever made (they are never returned, but kept or collected) and
 *  kept for reuse now (for TIDEMARK_MEMTRACE, engine/pool/memtrace.ts). */
export const alignedBytes = { made: 0, kept: 0 };
let noMemory = false;
/** The memories takeAligned handed out (see alignedAt). */
const ours = new WeakSet<ArrayBufferLike>();

/** Whether `b` starts at an aligned address: a view, at a multiple of ALIGN, of memory from takeAligned. */
export function alignedAt(b: Uint8Array): boolean {
  return ours.has(b.buffer) && b.byteOffset % ALIGN === 0;
}

/** An aligned buffer of `size` bytes (a multiple of 64 KiB), or undefined when none can be had (address
 *  space limited, e.g. ulimit -v). */
export function takeAligned(size: number): Buffer | undefined {
  const b = kept.get(size)?.pop();
  if (b) {
    alignedBytes.kept -= size;
    return b;
  }
  if (noMemory) return undefined;
  try {
    const pages = size / 65536; // WebAssembly pages are 64 KiB
    const memory = new wasm.Memory({ initial: pages, maximum: pages }).buffer;
    ours.add(memory);
    alignedBytes.made += size;
    if (size >= HUGE_FROM) adviseHugePages(memory);
    return Buffer.from(memory);
  } catch {
    noMemory = true;
    return undefined;
  }
}

/** Gives back the pages of a memory from takeAligned that is kept idle by its user (it stays usable:
 *  it reads as zeros until written again). */
export function releaseAligned(b: Buffer): void {
  if (ours.has(b.buffer)) releasePages(b.buffer);
}

export function giveAligned(b: Buffer, keep = 4): void {
  const list = kept.get(b.length) ?? [];
  if (list.length < keep) {
    if (list.length) releasePages(b.buffer);
    list.push(b);
    alignedBytes.kept += b.length;
  }
  kept.set(b.length, list);
}

/**
 * Lets go of every memory kept for reuse, its pages given back now (the mapping goes when a collection
 * finds it dead). For a process that stays up after an operation (the app): a backup's pack buffers were
 * otherwise kept, one of them resident, until its next backup.
 */
export function dropKeptAligned(): void {
  for (const list of kept.values()) for (const b of list) releasePages(b.buffer);
  kept.clear();
  alignedBytes.kept = 0;
}
