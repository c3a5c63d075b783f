/**
 * Restore tests: proof that a snapshot really restores. A random sample of its files (and, when asked,
 * every block file: VM disks, databases) is restored by the restore engine itself — the same function
 * a user's restore calls — into a new temporary folder, then read back from the disk and compared with
 * the hashes the snapshot stores: each piece of each file, at the offset where the pieces before it
 * end (their lengths are in the index), must hash to the blob ID the snapshot lists, and the file must
 * have the recorded size. The folder is removed afterwards, whatever happened.
 *
 * What it proves: the trees, index and packs of those files can be read, decrypted and decompressed,
 * and the restore writes them correctly to a real filesystem. What it does not: the files it did not
 * draw (`check --read-data` reads everything, without writing it).
 * Block files that do not fit in the temporary folder's free space are left out and named, not failed.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import type { Repository } from '../repo/repository.js';
import type { ID, TreeNode } from '../repo/types.js';
import type { MemoryMode, ProgressSink } from '../operations.js';
import { restore } from '../restore/index.js';
import { contentIds } from '../repo/tree.js';
import { blobIdHex } from '../crypto/index.js';
import { AbortedError, CorruptObjectError, TidemarkError, UsageError } from '../errors.js';

export interface RestoreTestOptions {
  /** The snapshot's full ID. */
  snapshot: ID;
  /** Files drawn at random from the snapshot (default 20). */
  files?: number;
  /** Also restore every block file of the snapshot (the job's monthly full test). */
  allBlockFiles?: boolean;
  /** The random sample's files together stay below this many bytes (default 1 GiB). */
  maxSampleBytes?: number;
  /** Where the temporary folder is made (default: the system's temporary folder). */
  tempDir?: string;
  /** The random source: an integer in [0, n) (default: crypto.randomInt). */
  random?: (n: number) => number;
  workers?: number;
  /** The restore's memory mode (RestoreOptions.memory). */
  memory?: MemoryMode;
  signal?: AbortSignal;
  progress?: ProgressSink<RestoreTestProgress>;
}

export interface RestoreTestProgress {
  phase: 'sampling' | 'restoring' | 'comparing';
  filesDone: number;
  filesTotal: number;
  bytesDone: number;
  bytesTotal: number;
}

export interface RestoreTestFailure {
  /** The file's path in the snapshot. */
  path: string;
  message: string;
}

export interface RestoreTestResult {
  snapshot: ID;
  /** True when every file restored and matched its stored hashes. */
  ok: boolean;
  filesChecked: number;
  bytesChecked: number;
  /** Of filesChecked, the block files. */
  blockFilesChecked: number;
  allBlockFiles: boolean;
  /** Files in the snapshot the sample was drawn from (regular files with content, not block files). */
  candidates: number;
  failures: RestoreTestFailure[];
  /** Files left out, and why (block files that do not fit in the temporary folder). */
  skipped: { path: string; reason: string }[];
  durationMs: number;
}

/** A restore test could not be made at all (no room, no such snapshot, a repository that cannot be read). */
export class RestoreTestError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('RESTORE_TEST_ERROR', message, options);
  }
}

interface Picked {
  path: string;
  node: TreeNode;
}

const DEFAULT_FILES = 20;
const DEFAULT_MAX_SAMPLE_BYTES = 1024 ** 3;
/** Free space the test leaves in the temporary folder's filesystem. */
const SPARE_BYTES = 256 * 1024 * 1024;
const READ_WINDOW = 8 * 1024 * 1024;

const join = (dir: string, name: string) => (dir === '/' ? `/${name}` : `${dir}/${name}`);

/** Draws the sample: up to `count` files (reservoir sampling, one pass over the snapshot's trees). */
async function sample(
  repo: Repository,
  tree: ID,
  count: number,
  maxBytes: number,
  random: (n: number) => number,
  signal?: AbortSignal,
): Promise<{ picked: Picked[]; blockFiles: Picked[]; candidates: number; unreadable: RestoreTestFailure[] }> {
  const picked: Picked[] = [];
  const blockFiles: Picked[] = [];
  const unreadable: RestoreTestFailure[] = [];
  let candidates = 0;
  const walk = async (id: ID, dir: string): Promise<void> => {
    if (signal?.aborted) throw new AbortedError();
    let t;
    try {
      // block lists in two parts are joined file by file when compared
      t = await repo.loadTree(id, { cache: false, joinLists: false });
    } catch (err) {
      if (!(err instanceof CorruptObjectError)) throw err;
      unreadable.push({ path: dir, message: `the folder cannot be read: ${err.message}` });
      return;
    }
    for (const n of t.nodes) {
      const p = join(dir, n.name);
      if (n.type === 'dir' && n.subtree) await walk(n.subtree, p);
      // a name that is not UTF-8 cannot be named to the restore's include list: left out
      if (n.type !== 'file' || n.rawName !== undefined || !n.size) continue;
      if (n.blockSize) {
        blockFiles.push({ path: p, node: n });
        continue;
      }
      if (n.size > maxBytes) continue;
      candidates++;
      if (picked.length < count) picked.push({ path: p, node: n });
      else {
        const j = random(candidates);
        if (j < count) picked[j] = { path: p, node: n };
      }
    }
  };
  await walk(tree, '/');
  // within the byte budget: drop drawn files at random until the rest fits
  let total = picked.reduce((a, f) => a + (f.node.size ?? 0), 0);
  while (total > maxBytes && picked.length) {
    const [f] = picked.splice(random(picked.length), 1);
    total -= f.node.size ?? 0;
  }
  return { picked, blockFiles, candidates, unreadable };
}

async function freeBytes(dir: string): Promise<number> {
  try {
    const s = await fs.statfs(dir);
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return Infinity; // not known here: the restore itself reports a full disk
  }
}

/**
 * Compares a restored file with the snapshot's record of it (a node with its block list joined): its
 * size, and each piece's hash at its offset. Returns what is wrong, or undefined.
 */
export async function compareRestored(
  repo: Repository,
  file: string,
  node: TreeNode,
  signal?: AbortSignal,
): Promise<string | undefined> {
  let fh: fs.FileHandle;
  try {
    fh = await fs.open(file, 'r');
  } catch (err) {
    return `it was not restored (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`;
  }
  try {
    const st = await fh.stat();
    if (st.size !== (node.size ?? 0)) return `restored with ${st.size} bytes instead of ${node.size}`;
    const ids = contentIds(node);
    let window = Buffer.alloc(0);
    let windowAt = 0; // file offset of window[0]
    let offset = 0;
    for (let i = 0; i < ids.length; i++) {
      if (signal?.aborted) throw new AbortedError();
      const len = repo.index.get(ids[i])?.rawLength;
      if (len === undefined) return `piece ${i + 1} of ${ids.length} is not in the repository's index`;
      if (offset + len > windowAt + window.length) {
        // read the next window (at least this piece) in one call
        const want = Math.max(len, Math.min(READ_WINDOW, st.size - offset));
        window = Buffer.allocUnsafe(want);
        const { bytesRead } = await fh.read(window, 0, want, offset);
        window = window.subarray(0, bytesRead);
        windowAt = offset;
        await new Promise<void>((r) => setImmediate(r)); // hashing a window at a time keeps the loop free
      }
      const piece = window.subarray(offset - windowAt, offset - windowAt + len);
      if (piece.length !== len) return `the restored file ends inside piece ${i + 1} of ${ids.length}`;
      if (blobIdHex(repo.key.id, piece) !== ids[i])
        return `bytes ${offset}–${offset + len} (piece ${i + 1} of ${ids.length}) differ from the stored hash`;
      offset += len;
    }
    if (offset !== st.size) return `its pieces add up to ${offset} bytes, not ${st.size}`;
    return undefined;
  } finally {
    await fh.close();
  }
}

export async function restoreTest(repo: Repository, opts: RestoreTestOptions): Promise<RestoreTestResult> {
  const started = Date.now();
  const signal = opts.signal;
  const count = opts.files ?? DEFAULT_FILES;
  if (!Number.isInteger(count) || count < 0)
    throw new UsageError('the number of files to test must be 0 or more');
  const random = opts.random ?? ((n: number) => crypto.randomInt(n));
  const progress: RestoreTestProgress = {
    phase: 'sampling',
    filesDone: 0,
    filesTotal: 0,
    bytesDone: 0,
    bytesTotal: 0,
  };
  const emit = () => opts.progress?.({ ...progress });
  emit();
  await repo.loadIndex(true);
  const snap = await repo.loadSnapshot(opts.snapshot).catch((err: unknown) => {
    if (err instanceof CorruptObjectError) return err;
    throw err;
  });
  const failed = (failures: RestoreTestFailure[]): RestoreTestResult => ({
    snapshot: opts.snapshot,
    ok: false,
    filesChecked: 0,
    bytesChecked: 0,
    blockFilesChecked: 0,
    allBlockFiles: !!opts.allBlockFiles,
    candidates: 0,
    failures,
    skipped: [],
    durationMs: Date.now() - started,
  });
  if (snap instanceof CorruptObjectError)
    return failed([{ path: '/', message: `the snapshot cannot be read: ${snap.message}` }]);
  const drawn = await sample(
    repo,
    snap.tree,
    count,
    opts.maxSampleBytes ?? DEFAULT_MAX_SAMPLE_BYTES,
    random,
    signal,
  );
  const skipped: RestoreTestResult['skipped'] = [];

  const base = opts.tempDir ?? os.tmpdir();
  let tmp: string;
  try {
    tmp = await fs.mkdtemp(path.join(base, 'tidemark-restore-test-'));
  } catch (err) {
    throw new RestoreTestError(`cannot make a temporary folder in ${base}: ${(err as Error).message}`, {
      cause: err,
    });
  }
  try {
    // what fits: the sample first, then block files smallest first
    let room = (await freeBytes(tmp)) - SPARE_BYTES;
    const files: (Picked & { block: boolean })[] = [];
    for (const f of drawn.picked) {
      room -= f.node.size ?? 0;
      files.push({ ...f, block: false });
    }
    if (room < 0)
      throw new RestoreTestError(
        `not enough free space in ${base} for the restore test's ${files.length} file(s); choose another temporary folder`,
      );
    if (opts.allBlockFiles)
      for (const f of [...drawn.blockFiles].sort((a, b) => (a.node.size ?? 0) - (b.node.size ?? 0))) {
        if ((f.node.size ?? 0) > room) {
          skipped.push({ path: f.path, reason: `not enough free space in ${base} (${f.node.size} bytes)` });
          continue;
        }
        room -= f.node.size ?? 0;
        files.push({ ...f, block: true });
      }
    const result: RestoreTestResult = {
      snapshot: snap.id,
      ok: true,
      filesChecked: 0,
      bytesChecked: 0,
      blockFilesChecked: 0,
      allBlockFiles: !!opts.allBlockFiles,
      candidates: drawn.candidates,
      failures: [...drawn.unreadable],
      skipped,
      durationMs: 0,
    };
    if (files.length === 0) {
      result.ok = result.failures.length === 0;
      result.durationMs = Date.now() - started;
      return result;
    }
    progress.phase = 'restoring';
    progress.filesTotal = files.length;
    progress.bytesTotal = files.reduce((a, f) => a + (f.node.size ?? 0), 0);
    emit();
    const restored = await restore(repo, {
      snapshot: snap.id,
      target: tmp,
      include: files.map((f) => f.path),
      overwrite: 'overwrite',
      workers: opts.workers,
      memory: opts.memory,
      signal,
      progress: (p) => {
        progress.filesDone = p.filesDone;
        progress.bytesDone = p.bytesDone;
        emit();
      },
    }).catch((err: unknown) => {
      // a folder on the way that cannot be read fails the test; anything else (a full disk) is no verdict
      if (err instanceof CorruptObjectError) return err;
      if (err instanceof AbortedError || err instanceof TidemarkError) throw err;
      throw new RestoreTestError(`the test restore failed: ${(err as Error).message}`, { cause: err });
    });
    if (restored instanceof CorruptObjectError) {
      result.failures.push({ path: '/', message: `the snapshot could not be restored: ${restored.message}` });
      result.ok = false;
      result.durationMs = Date.now() - started;
      return result;
    }
    // (the restore names the file in its message: the failure names it already)
    const restoreErrors = new Map(
      restored.errors.map((e) => [e.path, e.message.replace(`cannot restore ${e.path}: `, '')]),
    );
    progress.phase = 'comparing';
    progress.filesDone = 0;
    progress.bytesDone = 0;
    emit();
    for (const f of files) {
      if (signal?.aborted) throw new AbortedError();
      const node = { ...f.node };
      const joinFailure = await repo.joinBlockList(node, f.path).then(
        () => undefined,
        (err: Error) => err.message,
      );
      const wrong =
        restoreErrors.get(f.path) ??
        joinFailure ??
        (await compareRestored(repo, path.join(tmp, ...f.path.split('/')), node, signal));
      if (wrong) result.failures.push({ path: f.path, message: wrong });
      result.filesChecked++;
      result.bytesChecked += f.node.size ?? 0;
      if (f.block) result.blockFilesChecked++;
      progress.filesDone++;
      progress.bytesDone += f.node.size ?? 0;
      emit();
    }
    result.ok = result.failures.length === 0;
    result.durationMs = Date.now() - started;
    return result;
  } finally {
    await fs.rm(tmp, { recursive: true, force: true }).catch(() => {});
  }
}
