/**
 * Writing a restored file made of one blob (most files of a PC: 30,000 of the bench dataset's 30,035),
 * synchronously, on the worker thread that decoded the blob: create it with its permission bits (O_EXCL;
 * an existing file, from a race, is truncated and given its mode explicitly), write it (all zeros: only
 * sized, so it stays sparse), set its owner (as root) and, where the creation mode could not carry its
 * bits (umask, setuid/setgid/sticky), its mode, then its times (after the last write: closing does not
 * change them), and close it. Never follows a symlink at its path (O_NOFOLLOW).
 *
 * native/fsmeta's writeWhole does all of that in one call; Node's fs took six calls per file, most of their
 * cost in JavaScript: with the addon a restore of the bench dataset is about a tenth faster
 * (docs/performance.md). Without the addon (not built, Windows, TIDEMARK_NO_NATIVE_WRITES=1) Node's
 * fs does the same, and errors read the same either way (`EEXIST: file already exists, open '…'`).
 */
import {
  closeSync,
  constants as FS,
  fchmodSync,
  fchownSync,
  ftruncateSync,
  openSync,
  writeSync,
} from 'node:fs';
import { getSystemErrorMap } from 'node:util';
import { loadNativeAddon } from '../native.js';
import { setTimesFdSync } from './times.js';

interface WholeWriter {
  /** 0, or errno * 8 + the step that failed (see WRITE_STEPS). */
  writeWhole?(
    path: Uint8Array,
    data: Uint8Array,
    mode: number,
    chmod: boolean,
    uid: number,
    gid: number,
    mtimeNs: bigint,
  ): number;
}

const native =
  process.platform === 'win32' || process.env.TIDEMARK_NO_NATIVE_WRITES === '1'
    ? undefined
    : loadNativeAddon<WholeWriter>('fsmeta', 'tidemark_fsmeta')?.writeWhole;

/** Whether whole files are written by the native addon (else by Node's fs). */
export const nativeWholeWrites = !!native;

const WRITE_STEPS = ['', 'open', 'write', 'ftruncate', 'fchown', 'fchmod', 'futimens', 'close'];
let errorMap: Map<number, [string, string]> | undefined;

const UMASK = process.umask(); // reading it is allowed in a worker (setting it is not)
const ZEROS = Buffer.alloc(64 * 1024);

/** Whether every byte of `b` is zero (such a blob is a hole: sized or skipped, never written). */
export function allZero(b: Buffer): boolean {
  for (let o = 0; o < b.length; o += ZEROS.length) {
    const piece = b.subarray(o, o + ZEROS.length);
    if (!piece.equals(ZEROS.subarray(0, piece.length))) return false;
  }
  return true;
}

/** Writes the file at `path` whole with `plain` as its content (see above): permission bits `mode`, owner
 *  `uid`:`gid` where a uid is given, times `mtimeNs`. Throws an fs error. */
export function writeWholeFile(
  path: Uint8Array,
  mode: number,
  uid: number | undefined,
  gid: number,
  mtimeNs: bigint,
  plain: Buffer,
): void {
  mode &= 0o7777;
  // the creation mode carries the bits when the umask keeps them all and none is special
  const modeByCreation = mode === (mode & 0o777 & ~UMASK);
  if (native) {
    const r = native(path, plain, mode, !modeByCreation, uid ?? -1, gid, mtimeNs);
    if (r === 0) return;
    const errno = Math.floor(r / 8);
    const [code, text] = (errorMap ??= getSystemErrorMap()).get(-errno) ?? [`E${errno}`, 'unknown error'];
    const shown = Buffer.from(path.buffer, path.byteOffset, path.byteLength).toString();
    throw Object.assign(new Error(`${code}: ${text}, ${WRITE_STEPS[r % 8]} '${shown}'`), {
      code,
      errno: -errno,
      syscall: WRITE_STEPS[r % 8],
    });
  }
  const p = Buffer.from(path);
  const base = FS.O_WRONLY | FS.O_CREAT | FS.O_TRUNC | FS.O_NOFOLLOW;
  let fd: number;
  let modeSet = false;
  try {
    fd = openSync(p, base | FS.O_EXCL, mode & 0o777);
    modeSet = modeByCreation;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    fd = openSync(p, base, 0o600);
  }
  try {
    if (allZero(plain)) {
      if (plain.length) ftruncateSync(fd, plain.length);
    } else {
      let done = 0;
      while (done < plain.length) done += writeSync(fd, plain, done, plain.length - done, done);
    }
    if (uid !== undefined) fchownSync(fd, uid, gid);
    if (!modeSet) fchmodSync(fd, mode);
    setTimesFdSync(fd, String(mtimeNs));
  } finally {
    closeSync(fd);
  }
}
