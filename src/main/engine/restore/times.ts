/**
 * Setting file times with nanosecond precision. Node's fs.utimes takes seconds as a double, which
 * cannot hold today's times to the nanosecond, so the small native addon native/fsmeta (utimensat)
 * is used when it was built; otherwise fs.utimes/lutimes (precise to about a microsecond).
 */
import fs from 'node:fs/promises';
import { futimesSync } from 'node:fs';
import { loadNativeAddon } from '../native.js';

interface FsMeta {
  setTimes(path: Buffer, atimeNs: bigint, mtimeNs: bigint, noFollow: boolean): void;
  setTimesFd?(fd: number, atimeNs: bigint, mtimeNs: bigint): void;
}

const addon =
  process.platform === 'win32' || process.env.TIDEMARK_NO_NATIVE_TIMES === '1'
    ? undefined
    : loadNativeAddon<FsMeta>('fsmeta', 'tidemark_fsmeta');

export const nanosecondTimes = !!addon;

/** Synchronous, on an open file (worker threads, before closing a file they wrote): sets mtime and atime. */
export function setTimesFdSync(fd: number, mtimeNs: string): void {
  if (addon?.setTimesFd) {
    addon.setTimesFd(fd, BigInt(mtimeNs), BigInt(mtimeNs));
    return;
  }
  const sec = Number(BigInt(mtimeNs) / 1000n) / 1e6;
  futimesSync(fd, sec, sec);
}

/** Sets atime and mtime (nanoseconds since the epoch, as decimal strings); never follows a final symlink when noFollow. */
export async function setTimes(
  p: Buffer,
  mtimeNs: string,
  atimeNs: string = mtimeNs,
  noFollow = false,
): Promise<void> {
  if (addon) {
    addon.setTimes(p, BigInt(atimeNs), BigInt(mtimeNs), noFollow);
    return;
  }
  const sec = (ns: string) => Number(BigInt(ns) / 1000n) / 1e6;
  if (noFollow) await fs.lutimes(p, sec(atimeNs), sec(mtimeNs));
  else await fs.utimes(p, sec(atimeNs), sec(mtimeNs));
}
