/**
 * Which files are cut into fixed-size blocks instead of content-defined chunks, and how big the blocks
 * are (docs/architecture.md §3, level 1).
 *
 * Content-defined chunks (~1 MiB) suit files that are rewritten or shifted; but VM disks, databases and
 * mail stores change in place, a few pages here and there. There 1% of 4 KiB pages rewritten at random
 * touches ~94% of 1 MiB chunks (and ~4.9× the written bytes even with 8 KiB content-defined chunks,
 * whose cut points take a while to fall back into step), so block-level tracking could not save reading.
 * Fixed blocks aligned to the file's offsets match in-place writes exactly: a changed page costs one
 * block (`npm run bench:cbt`). Blocks are 4 KiB where they can be, the page of most writers in place (SQLite's
 * default page, NTFS and ext4 clusters, what a guest OS writes to its disk): with 8 KiB blocks a night of 1%
 * of a 2 GiB file's pages rewritten read and stored twice the bytes written, and took longer than at
 * 4 KiB (bench:cbt). The block size grows with the file so that no file has
 * more than MAX_BLOCKS blocks (index memory and tree size stay bounded: 512 Ki blocks ≈ 30 MiB of index and a
 * 16 MiB block list; a 2 GiB file has 4 KiB blocks, a 40 GiB disk 128 KiB ones).
 */
import { minimatch } from 'minimatch';
import { PATCH_ENTRY } from '../repo/tree.js';

/** VM disks, databases and mail stores: large files written in place. */
export const DEFAULT_BLOCK_FILE_PATTERNS: readonly string[] = [
  // virtual machine disks
  '*.vmdk',
  '*.vdi',
  '*.vhd',
  '*.vhdx',
  '*.qcow2',
  '*.qcow',
  '*.img',
  '*.raw',
  '*.hdd',
  // databases
  '*.db',
  '*.sqlite',
  '*.sqlite3',
  '*.mdf',
  '*.ndf',
  '*.ldf',
  '*.ibd',
  '*.mdb',
  '*.accdb',
  '*.fdb',
  // mail stores
  '*.pst',
  '*.ost',
  '*.nsf',
  '*.edb',
];
export const DEFAULT_BLOCK_FILE_MIN_SIZE = 64 * 1024 * 1024;
export const MIN_BLOCK_SIZE = 4 * 1024;
export const MAX_BLOCKS = 512 * 1024;

/** The block size for a file of `size` bytes: the smallest power of two ≥ 4 KiB that keeps it under
 *  MAX_BLOCKS blocks. */
export function fixedBlockSize(size: number): number {
  let b = MIN_BLOCK_SIZE;
  while (Math.ceil(size / b) > MAX_BLOCKS) b *= 2;
  return b;
}

/** Returns a function giving the block size for a file (by name and size), or undefined for chunking. */
export function blockPolicy(
  opts: { patterns?: string[]; minSize?: number } | false | undefined,
): ((name: string, size: number) => number | undefined) | undefined {
  if (!opts) return undefined;
  const patterns = opts.patterns ?? DEFAULT_BLOCK_FILE_PATTERNS;
  if (!patterns.length) return undefined;
  const minSize = opts.minSize ?? DEFAULT_BLOCK_FILE_MIN_SIZE;
  // "*.ext" (every default pattern) is a suffix test; minimatch, for any other glob, compiles each pattern
  // on its first match: the 24 defaults held the event loop several ms in every backup
  const suffixes: string[] = [];
  const matchers: InstanceType<typeof minimatch.Minimatch>[] = [];
  for (const p of patterns) {
    const simple = /^\*(\.[^*?[\]{}()!+@\\/]+)$/.exec(p);
    if (simple) suffixes.push(simple[1].toLowerCase());
    else matchers.push(new minimatch.Minimatch(p, { nocase: true, dot: true, matchBase: true }));
  }
  const matches = (name: string) => {
    const lower = name.toLowerCase();
    return suffixes.some((s) => lower.endsWith(s)) || matchers.some((m) => m.match(name));
  };
  return (name, size) => (size >= minSize && matches(name) ? fixedBlockSize(size) : undefined);
}

/**
 * Block lists of at least LIST_IN_PARTS_FROM blocks (a 128 MiB file at 4 KiB blocks) are stored in two
 * parts (repo/tree.ts): a base list written once, and per snapshot the blocks that differ from it. The
 * patch of a new snapshot is its previous patch with the blocks read this time; when it would pass an
 * eighth of the list a new base is written (every ~12 nights at 1% of the blocks a night, its 16 MiB for a
 * 2 GiB file): a night writes at most an eighth of a whole list, or now and then a new base, and reading a
 * snapshot's list takes at most 1⅛ of one (base and patch).
 */
export const LIST_IN_PARTS_FROM = 32 * 1024;

/**
 * The patch of a file's new list against the previous snapshot's base, without the base: every entry of
 * the previous patch still inside the file (`count` blocks), overridden and joined by the blocks read this
 * time (`readBlocks`, ascending, their IDs in `readIds`, 32 bytes each). The blocks past the previous list
 * (`prevCount` on) must all have been read. Returns undefined when a new base should be written instead
 * (the patch would pass an eighth of the list).
 */
export function nextPatch(
  prevPatch: Buffer,
  prevCount: number,
  readBlocks: Uint32Array,
  readIds: Uint8Array,
  count: number,
): Buffer | undefined {
  const ID = PATCH_ENTRY - 4;
  let past = 0;
  for (const b of readBlocks) if (b >= prevCount && b < count) past++;
  if (past !== Math.max(0, count - prevCount) || readIds.length !== readBlocks.length * ID)
    throw new Error('the blocks read do not cover the end of the file (internal error)');
  const limit = Math.floor((count * ID) / 8 / PATCH_ENTRY); // entries
  const out = Buffer.allocUnsafe(
    Math.min(limit, prevPatch.length / PATCH_ENTRY + readBlocks.length) * PATCH_ENTRY,
  );
  let entries = 0;
  /** Appends an entry; false once the patch would pass the limit. */
  const entry = (i: number, from: Uint8Array, at: number) => {
    if (entries >= limit) return false;
    out.writeUInt32LE(i, entries * PATCH_ENTRY);
    out.set(from.subarray(at, at + ID), entries * PATCH_ENTRY + 4);
    entries++;
    return true;
  };
  let r = 0;
  for (let at = 0; at < prevPatch.length; at += PATCH_ENTRY) {
    const i = prevPatch.readUInt32LE(at);
    if (i >= count) break;
    for (; r < readBlocks.length && readBlocks[r] < i; r++)
      if (!entry(readBlocks[r], readIds, r * ID)) return;
    const again = r < readBlocks.length && readBlocks[r] === i; // read again today: today's ID
    if (!(again ? entry(i, readIds, r++ * ID) : entry(i, prevPatch, at + 4))) return undefined;
  }
  for (; r < readBlocks.length && readBlocks[r] < count; r++)
    if (!entry(readBlocks[r], readIds, r * ID)) return;
  return out.subarray(0, entries * PATCH_ENTRY);
}

/**
 * A whole read of a block file is shared by the workers: the file is taken in stripes of STRIPE_BYTES,
 * worker k reading stripes k, k + parts, … Stripes, not halves, keep the readers within a few stripes of
 * each other, meant for spinning disks, where two far-apart streams would seek (not measured: this
 * machine has none).
 */
export const STRIPE_BYTES = 16 * 1024 * 1024;

/** How many workers share a whole read of a block file of `size` bytes: all of them (at least two
 *  stripes each), else one. */
export function stripeParts(size: number, workers: number, stripeBytes = STRIPE_BYTES): number {
  return Math.max(1, Math.min(workers, Math.floor(size / (2 * stripeBytes))));
}

/** The block list of a file of `n` blocks from the IDs each striped part read (32 bytes a block, its
 *  stripes of `stripe` blocks in order: part k has stripes k, k + parts, …). */
export function joinStripes(parts: Uint8Array[], n: number, stripe: number): Buffer {
  const ID = PATCH_ENTRY - 4;
  const out = Buffer.allocUnsafe(n * ID);
  const at = parts.map(() => 0);
  for (let s = 0, first = 0; first < n; s++, first += stripe) {
    const k = s % parts.length;
    const len = Math.min(stripe, n - first) * ID;
    if (at[k] + len > parts[k].length)
      throw new Error('a striped read returned too few blocks (internal error)');
    out.set(parts[k].subarray(at[k], at[k] + len), first * ID);
    at[k] += len;
  }
  if (parts.some((p, k) => at[k] !== p.length))
    throw new Error('a striped read returned too many blocks (internal error)');
  return out;
}
