/**
 * Which files are cut into fixed-size blocks instead of content-defined chunks, and how big the blocks
 * are (DESIGN.md §3, level 1).
 *
 * Content-defined chunks (~1 MiB) suit files that are rewritten or shifted; but VM disks, databases and
 * mail stores change in place, a few pages here and there. There 1% of 4 KiB pages rewritten at random
 * touches ~94% of 1 MiB chunks (and ~4.9× the written bytes even with 8 KiB content-defined chunks,
 * whose cut points take a while to fall back into step), so block-level tracking could not save reading.
 * Fixed blocks aligned to the file's offsets match in-place writes exactly: a changed page costs one
 * block (`npm run bench:cbt`). The block size grows with the file so that no file has more than
 * MAX_BLOCKS blocks (index memory and tree size stay bounded: 256 Ki blocks ≈ 15 MiB of index).
 */
import { minimatch } from 'minimatch';

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
export const MIN_BLOCK_SIZE = 8 * 1024;
export const MAX_BLOCKS = 256 * 1024;

/** The block size for a file of `size` bytes: the smallest power of two ≥ 8 KiB that keeps it under
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
  // on its first match: the 24 defaults took ~8 ms of the event loop in every backup (`npm run bench:cbt`)
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
