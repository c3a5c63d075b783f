/**
 * Listing a folder for the scan: its entries' names (raw bytes, sorted as Buffer.compare sorts) and each
 * one's lstat, as the worker threads send them to the main thread (FolderListing: the wire's FolderListing).
 *
 * The native addon (native/fsmeta listDir) reads the folder and stats its entries relative to it, on a
 * thread of libuv's pool, through an io_uring on Linux where the kernel allows one (one submission for a
 * folder's entries: inodes not in memory yet are read from the disk together). Node's lstatSync took one
 * entry at a time, each walking its whole path, blocking the worker's thread while a cold inode was read.
 * Without the addon (Windows, not built) or with TIDEMARK_NO_NATIVE_LIST=1, Node's fs does the same;
 * both give the same result (tests/engine/list-dir.test.ts).
 */
import fs from 'node:fs';
import { errnoError, loadNativeAddon, useRing } from '../native.js';
import type { NodeType } from '../repo/types.js';
import { entryStat, mtimeMsOf, type EntryStat } from './stat.js';

/** A folder's entries and their lstat results (plain values: they cross between threads as they are). */
export interface FolderListing {
  /** Set when the folder itself cannot be read. */
  error?: { message: string; code?: string };
  names: Uint8Array[];
  stats: (EntryStat | { error: { message: string; code?: string } })[];
}

interface FsList {
  listDir?(
    path: Buffer,
    ring: boolean,
  ): Promise<
    | { names: Buffer; ends: Uint32Array; stats: Float64Array; ring: boolean }
    | { errno: number; names?: undefined }
  >;
}

const addon =
  process.platform === 'win32' || process.env.TIDEMARK_NO_NATIVE_LIST === '1'
    ? undefined
    : loadNativeAddon<FsList>('fsmeta', 'tidemark_fsmeta');

/** Whether folders are listed by the native addon (else by Node's fs). */
export const nativeListDir = !!addon?.listDir;

const S_IFMT = 0o170000;
const TYPES = new Map<number, NodeType>([
  [0o100000, 'file'],
  [0o040000, 'dir'],
  [0o120000, 'symlink'],
  [0o010000, 'fifo'],
  [0o140000, 'socket'],
  [0o020000, 'chardev'],
]);
const nsOf = (sec: number, nsec: number) => BigInt(sec) * 1_000_000_000n + BigInt(nsec);
const K = 13; // numbers per entry (native/fsmeta ListDir)

/** Lists `dir` (see the module comment); `native` (default: when built) and `ring` choose the way. */
export async function listDir(
  dir: Buffer,
  opts: { native?: boolean; ring?: boolean } = {},
): Promise<FolderListing & { via: 'ring' | 'native' | 'fs' }> {
  if ((opts.native ?? true) && addon?.listDir && !dir.includes(0)) {
    const r = await addon.listDir(dir, opts.ring ?? useRing);
    if (r.names === undefined)
      return { error: errnoError(r.errno, 'scandir', dir), names: [], stats: [], via: 'native' };
    const sep = dir.length === 1 && dir[0] === 0x2f ? '' : '/';
    const names: Uint8Array[] = [];
    const stats: FolderListing['stats'] = [];
    let start = 0;
    for (let i = 0; i < r.ends.length; i++) {
      const name = r.names.subarray(start, r.ends[i]);
      start = r.ends[i];
      names.push(name);
      const f = r.stats.subarray(i * K, i * K + K);
      if (f[0] < 0) {
        stats.push({ error: errnoError(f[0], 'lstat', Buffer.concat([dir, Buffer.from(sep), name])) });
        continue;
      }
      const mtimeNs = nsOf(f[3], f[4]);
      const st: EntryStat = {
        type: TYPES.get(f[1] & S_IFMT) ?? 'blockdev',
        mode: f[1] & 0o7777,
        size: f[2],
        mtimeNs: mtimeNs.toString(),
        mtimeMs: mtimeMsOf(mtimeNs),
        ctimeNs: nsOf(f[5], f[6]).toString(),
        uid: f[7],
        gid: f[8],
        ino: f[9],
        dev: f[10],
        nlink: f[11],
        rdev: f[12],
      };
      stats.push(st);
    }
    return { names, stats, via: r.ring ? 'ring' : 'native' };
  }
  return { ...listDirFs(dir), via: 'fs' };
}

/** The same with Node's fs, synchronously. */
function listDirFs(dir: Buffer): FolderListing {
  let names: Buffer[];
  try {
    names = fs.readdirSync(dir, { encoding: 'buffer' }) as Buffer[];
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    return { error: { message: e.message, code: e.code }, names: [], stats: [] };
  }
  names.sort(Buffer.compare);
  const sep = dir.length === 1 && dir[0] === 0x2f ? Buffer.alloc(0) : Buffer.from('/');
  const stats: FolderListing['stats'] = names.map((n) => {
    try {
      return entryStat(fs.lstatSync(Buffer.concat([dir, sep, n]), { bigint: true }));
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      return { error: { message: e.message, code: e.code } };
    }
  });
  return { names: names.map((n) => new Uint8Array(n.buffer, n.byteOffset, n.byteLength)), stats };
}

/** A folder's names and their lstat, as a worker thread answers a listDir task (without how it was made). */
export async function listFolder(path: Uint8Array): Promise<FolderListing> {
  const { names, stats, error } = await listDir(Buffer.from(path));
  return error ? { error, names, stats } : { names, stats };
}
