/**
 * Test helpers: file trees declared as data, temp folders, a CLI runner, and byte-exact comparison
 * of trees including metadata.
 */
import fs from 'node:fs/promises';
import fss from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll } from 'vitest';

export type Entry =
  | string // file content
  | Buffer
  | { file: string | Buffer; mode?: number; mtime?: Date; uid?: number; gid?: number }
  | { symlink: string }
  | { dir: TreeSpec; mode?: number }
  | { hardlinkTo: string };

export interface TreeSpec {
  [name: string]: Entry;
}

const madeDirs: string[] = [];
// Removed after the test file that made them (a run of the suite used to leave gigabytes behind). Outside
// a test file (a global setup, a script) there is no suite to hook: those folders stay.
try {
  afterAll(() => {
    for (const d of madeDirs.splice(0))
      try {
        fss.rmSync(d, { recursive: true, force: true });
      } catch {
        // still in use (a mount point): left for the system's temp cleaning
      }
  });
} catch {
  // not collecting a test file
}

/** A new folder in the temp folder, removed after the test file. */
export async function tempDir(prefix = 'tm-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix));
  madeDirs.push(dir);
  return dir;
}

export async function writeTree(root: string, spec: TreeSpec): Promise<void> {
  await fs.mkdir(root, { recursive: true });
  const later: (() => Promise<void>)[] = [];
  for (const [name, e] of Object.entries(spec)) {
    const p = path.join(root, name);
    if (typeof e === 'string' || Buffer.isBuffer(e)) await fs.writeFile(p, e);
    else if ('file' in e) {
      await fs.writeFile(p, e.file);
      if (e.mode !== undefined) await fs.chmod(p, e.mode);
      if (e.uid !== undefined) await fs.chown(p, e.uid, e.gid ?? e.uid);
      if (e.mtime) await fs.utimes(p, e.mtime, e.mtime);
    } else if ('symlink' in e) await fs.symlink(e.symlink, p);
    else if ('dir' in e) {
      await writeTree(p, e.dir);
      if (e.mode !== undefined) later.push(() => fs.chmod(p, e.mode!));
    } else if ('hardlinkTo' in e) later.push(() => fs.link(path.join(root, e.hardlinkTo), p));
  }
  for (const f of later) await f();
}

export function randomBytes(n: number, seed = 1): Buffer {
  // deterministic, incompressible
  const out = Buffer.alloc(n);
  let counter = 0;
  for (let off = 0; off < n; off += 32) {
    crypto.createHash('sha256').update(`${seed}:${counter++}`).digest().copy(out, off);
  }
  return out;
}

/** A seeded xorshift generator: rand(n) is an integer in [0, n). */
export function seededRandom(seed: number): (n: number) => number {
  let x = seed;
  return (n: number) => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) % n;
  };
}

/** An in-place change to an open file of `size` bytes; returns the byte ranges it changed. */
export type RangeEdit = (
  fh: import('node:fs/promises').FileHandle,
  size: number,
  rand: (n: number) => number,
) => Promise<{ offset: number; length: number }[]>;

export interface EntryInfo {
  type: string;
  mode: number;
  size?: number;
  mtimeMs?: number;
  uid: number;
  gid: number;
  sha?: string;
  link?: string;
  ino?: number;
}

/** A comparable description of a tree (relative raw paths → metadata + content hash). */
export async function describeTree(
  root: string,
  opts: { mtime?: boolean; dirMtime?: boolean } = {},
): Promise<Map<string, EntryInfo>> {
  const out = new Map<string, EntryInfo>();
  const inodeNames = new Map<number, string>();
  const walk = async (dir: Buffer, rel: string) => {
    const names = (await fs.readdir(dir, { encoding: 'buffer' })) as Buffer[];
    for (const n of names.sort(Buffer.compare)) {
      const p = Buffer.concat([dir, Buffer.from('/'), n]);
      const r = rel ? rel + '/' + n.toString('latin1') : n.toString('latin1');
      const st = await fs.lstat(p, { bigint: true });
      const info: EntryInfo = {
        type: st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'symlink' : st.isFile() ? 'file' : 'other',
        mode: Number(st.mode & 0o7777n),
        uid: Number(st.uid),
        gid: Number(st.gid),
      };
      if ((opts.mtime ?? true) && (info.type !== 'dir' || opts.dirMtime))
        info.mtimeMs = Number(st.mtimeNs / 1000n); // µs (ns compared separately)
      if (info.type === 'file') {
        info.size = Number(st.size);
        info.sha = crypto
          .createHash('sha256')
          .update(await fs.readFile(p))
          .digest('hex');
        if (st.nlink > 1n) {
          const first = inodeNames.get(Number(st.ino));
          if (first) info.link = 'hardlink:' + first;
          else inodeNames.set(Number(st.ino), r);
        }
      }
      if (info.type === 'symlink')
        info.link = ((await fs.readlink(p, { encoding: 'buffer' })) as Buffer).toString('latin1');
      out.set(r, info);
      if (info.type === 'dir') await walk(p, r);
    }
  };
  await walk(Buffer.from(root), '');
  return out;
}

export function expectSameTrees(a: Map<string, EntryInfo>, b: Map<string, EntryInfo>): void {
  const ka = [...a.keys()].sort();
  const kb = [...b.keys()].sort();
  if (JSON.stringify(ka) !== JSON.stringify(kb))
    throw new Error(
      `different entries:\n only in first: ${ka.filter((k) => !b.has(k)).join(', ')}\n only in second: ${kb.filter((k) => !a.has(k)).join(', ')}`,
    );
  for (const k of ka) {
    const x = JSON.stringify(a.get(k));
    const y = JSON.stringify(b.get(k));
    if (x !== y) throw new Error(`entry ${k} differs:\n ${x}\n ${y}`);
  }
}

const ROOT = path.resolve(import.meta.dirname, '../..');
export const CLI = path.join(ROOT, 'bin/tidemark.mjs');

export interface CliResult {
  /** The exit code; -1 when the process was killed by a signal (`signal`). */
  code: number;
  signal?: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  json?: any;
}

export function cliEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    TIDEMARK_PASSWORD: 'correct horse',
    TIDEMARK_TEST_KDF_N: '1024',
    // prune keeps unindexed packs for a grace period (a running backup's); tests of leftovers want them gone
    TIDEMARK_PRUNE_GRACE_MS: '0',
    TIDEMARK_HOME: path.join(os.tmpdir(), 'tm-home-tests'),
    ...extra,
  };
}

export function startCli(
  args: string[],
  env: NodeJS.ProcessEnv = cliEnv(),
  opts: { uid?: number; gid?: number } = {},
): ChildProcess {
  return spawn(process.execPath, [CLI, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'], ...opts });
}

export function runCli(
  args: string[],
  env: NodeJS.ProcessEnv = cliEnv(),
  opts: { uid?: number; gid?: number } = {},
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = startCli(args, env, opts);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d) => (stdout += d));
    child.stderr!.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      let json: any;
      if (args.includes('--json')) {
        try {
          json = JSON.parse(stdout);
        } catch {}
      }
      resolve({ code: code ?? -1, signal, stdout, stderr, json });
    });
  });
}

export async function listRepoFiles(repo: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else out.push(path.relative(repo, p) + ':' + (await fs.stat(p)).size);
    }
  };
  await walk(repo);
  return out.sort();
}

export async function dirSize(dir: string): Promise<number> {
  let total = 0;
  const walk = async (d: string) => {
    for (const e of await fs.readdir(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else total += (await fs.stat(p)).size;
    }
  };
  await walk(dir);
  return total;
}

export const isRoot = process.getuid?.() === 0;
export const exists = (p: string) => fss.existsSync(p);

/**
 * Waits until `cond` holds, polling. For waiting on what another process or thread does: no test
 * may assume how far work gets in a fixed time (CI machines are slow and loaded). `what` names the
 * condition in the error thrown when it does not hold within `ms` (a hang made readable).
 */
export async function until(
  cond: () => boolean | Promise<boolean>,
  what: string | (() => string),
  ms = 90_000, // below the suite's test timeout, so the error says what did not happen
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${ms} ms waiting for ${typeof what === 'string' ? what : what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
