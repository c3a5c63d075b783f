/**
 * What the scan needs of an lstat result, in plain values, and the modification-time rules shared with
 * the workers that read files (kept apart from ./index.ts, whose exclusion patterns load minimatch: a
 * worker thread loads only this, ~15 ms less of its start-up).
 */
import type { BigIntStats } from 'node:fs';
import type { NodeType, TreeNode } from '../repo/types.js';

export function nodeTypeOf(st: BigIntStats): NodeType {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isFIFO()) return 'fifo';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice()) return 'chardev';
  return 'blockdev';
}

/** Name fields for raw name bytes: `name` is always text; `rawName` keeps bytes that are not valid UTF-8. */
export function nameFields(raw: Buffer): Pick<TreeNode, 'name' | 'rawName'> {
  const name = raw.toString('utf8');
  return Buffer.from(name, 'utf8').equals(raw) ? { name } : { name, rawName: raw.toString('base64') };
}

/** What the scan needs of an lstat result, in plain values (cheap to pass between threads). */
export interface EntryStat {
  type: NodeType;
  mode: number;
  size: number;
  mtimeNs: string;
  mtimeMs: number;
  ctimeNs: string;
  uid: number;
  gid: number;
  ino: number;
  dev: number;
  nlink: number;
  rdev: number;
}

/**
 * A modification time in milliseconds, to the microsecond (truncated): how the scan records it and how a
 * file is checked after reading, so the two compare exactly. (fs.Stats' mtimeMs keeps the nanoseconds
 * and rounds differently: ~0.1% of times set to the nanosecond differed from the scan's by over a
 * microsecond, and their files were reported as changed while being read.)
 */
export function mtimeMsOf(mtimeNs: bigint): number {
  return Number(mtimeNs / 1000n) / 1000;
}

/** Whether a file's modification time after reading is the one the scan saw (both from mtimeMsOf). */
export function sameMtime(a: number, b: number): boolean {
  return Math.abs(a - b) < 0.0005;
}

export function entryStat(st: BigIntStats): EntryStat {
  return {
    type: nodeTypeOf(st),
    mode: Number(st.mode & 0o7777n),
    size: Number(st.size),
    mtimeNs: st.mtimeNs.toString(),
    mtimeMs: mtimeMsOf(st.mtimeNs),
    ctimeNs: st.ctimeNs.toString(),
    uid: Number(st.uid),
    gid: Number(st.gid),
    ino: Number(st.ino),
    dev: Number(st.dev),
    nlink: Number(st.nlink),
    rdev: Number(st.rdev),
  };
}
