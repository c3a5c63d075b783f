/**
 * The target's folders (main thread): made below the target, refusing to go through anything but real
 * folders (a file or symlink in the way is replaced, never followed), and remembered: verified ones are
 * not looked at again, and nothing in a folder this run made is looked up before it is written.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { TidemarkError, UnsafePathError } from '../errors.js';

export class TargetFolders {
  /** Folders verified to be real folders. */
  private readonly known = new Set<string>();
  /** Folders this run created: nothing in them is in the way. */
  private readonly made = new Set<string>();

  constructor(private readonly root: Buffer) {}

  /** Makes a folder (latin1 path) and its parents below the target. */
  ensure(abs: string): Promise<void> {
    return ensureDir(abs, this.root, this.known, this.made);
  }

  /** Whether this run made the folder (latin1 path). */
  madeHere(dir: string): boolean {
    return this.made.has(dir);
  }
}

/**
 * Creates a directory (and parents) below root, refusing to go through anything but real directories:
 * a file or symlink in the way is replaced, never followed. `known` remembers verified folders.
 */
async function ensureDir(abs: string, root: Buffer, known: Set<string>, made: Set<string>): Promise<void> {
  const rootStr = root.toString('latin1');
  const rel = path.relative(rootStr, abs);
  const parts = rel ? rel.split(path.sep) : [];
  const check = async (p: string) => {
    if (known.has(p)) return;
    const pb = Buffer.from(p, 'latin1');
    if (made.has(path.dirname(p))) {
      // in a folder this run made (mode 0700 until the end): nothing can be in the way, nobody else can
      // put anything there, so one mkdir does (an EEXIST — the same folder named twice — goes the long way)
      const createdNow = await fs.mkdir(pb, { mode: 0o700 }).then(
        () => true,
        (err) => {
          if (err.code !== 'EEXIST') throw err;
          return false;
        },
      );
      if (createdNow) {
        made.add(p);
        known.add(p);
        return;
      }
    }
    const st = await fs.lstat(pb).catch((err) => {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    });
    if (st && !st.isDirectory()) {
      if (p === rootStr) throw new TidemarkError('TARGET_NOT_DIR', `the restore target ${p} is not a folder`);
      await fs.rm(pb, { force: true });
    }
    if (!st || !st.isDirectory()) {
      const createdNow = await fs.mkdir(pb, { recursive: p === rootStr, mode: 0o700 }).then(
        () => true,
        (err) => {
          if (err.code !== 'EEXIST') throw err;
          return false;
        },
      );
      if (createdNow) made.add(p);
      if (!(await fs.lstat(pb)).isDirectory()) throw new UnsafePathError(`${p} is not a folder`);
    }
    known.add(p);
  };
  await check(rootStr);
  let cur = rootStr;
  for (const part of parts) {
    if (part === '..' || part === '')
      throw new UnsafePathError(`refusing path ${Buffer.from(abs, 'latin1').toString()}`);
    cur = cur + path.sep + part;
    await check(cur);
  }
}

/** A free name beside a file in the way (the keep-both policy): "name (restored).ext", "(restored 2)", … */
export async function freeName(abs: Buffer): Promise<Buffer> {
  const s = abs.toString('latin1');
  const ext = path.extname(s);
  const base = s.slice(0, s.length - ext.length);
  for (let i = 1; ; i++) {
    const candidate = Buffer.from(`${base} (restored${i > 1 ? ' ' + i : ''})${ext}`, 'latin1');
    try {
      await fs.lstat(candidate);
    } catch {
      return candidate;
    }
  }
}
