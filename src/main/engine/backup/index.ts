/**
 * Backup: scan → read → chunk → hash → dedup → compress → encrypt → pack → upload.
 * The main thread walks the sources (async fs, parallel lstat) and decides per file whether the
 * previous snapshot's chunk list can be reused; files that must be read go to the worker pool, with
 * a bounded number in flight (backpressure reaches the walk). Directory trees are saved bottom-up as
 * their children finish, so an unchanged directory keeps its tree ID. The snapshot is written last,
 * after every pack and index it depends on.
 * Guarantees: unreadable, vanished or special entries are skipped and listed, never fatal; a cancel
 * or crash leaves earlier snapshots intact. Not here: change tracking itself (tracking/), scheduling.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Repository } from '../repo/repository.js';
import { BlobType } from '../repo/blobIndex.js';
import type { DirSummary, ID, SkippedEntry, Snapshot, SnapshotEntry, TreeNode, Tree } from '../repo/types.js';

interface SavedDir {
  id: ID;
  summary: DirSummary;
}
import {
  newBackupProgress,
  type BackupOptions,
  type BackupProgress,
  type BackupResult,
  type ChangedRanges,
} from '../operations.js';
import { AbortedError, TidemarkError, UsageError, throwIfAborted } from '../errors.js';
import { type WorkerPool, acquirePool, releasePool, defaultWorkerCount } from '../workers/index.js';
import {
  segmentBuffers,
  sealedBlobOf,
  type BackupFileResult,
  type BackupFileTask,
  type ListDirResult,
  type QueryReply,
  type SealedBlobMsg,
  type SealedSegment,
  type SmallFileResult,
  type SmallFilesResult,
  type Task,
  type TaskEvent,
} from '../workers/protocol.js';
import { Excluder, HintPlan, entryStat, metadataNode, unchangedFile, type EntryStat } from '../scan/index.js';
import { blockIdsOf, contentCount, contentIds, hasContent, nameBytes } from '../repo/tree.js';
import { MassChangeWatch, describeVerdict, massChangeVerdict } from '../alarm/index.js';
import {
  blockPolicy,
  joinStripes,
  LIST_IN_PARTS_FROM,
  nextPatch,
  STRIPE_BYTES,
  stripeParts,
} from './blockFiles.js';
import { hiddenPatterns, sourceViewMap, withSourceViews } from './sourceView.js';

/** Counters of filesystem calls, for benchmarks of the scan. */
export interface ScanCounters {
  stat: number;
  readdir: number;
}

export interface BackupRunResult extends BackupResult {
  counters: ScanCounters;
}

const sep = Buffer.from(path.sep);
const join = (dir: Buffer, name: Buffer) =>
  dir.length === 1 && dir[0] === sep[0] ? Buffer.concat([dir, name]) : Buffer.concat([dir, sep, name]);
const show = (p: Buffer) => p.toString('utf8');

/** A block file's list from the worker's result. After an incremental the worker lists only the blocks
 *  it read; every other block is the previous snapshot's, so a copy of that list is patched in place. */
function blockList(r: BackupFileResult, prev: TreeNode | undefined, what: string): Buffer {
  const got = Buffer.from(r.blockIds!.buffer, r.blockIds!.byteOffset, r.blockIds!.byteLength);
  if (!r.readBlocks) return got;
  const ID = 32;
  const count = r.blockCount!;
  const prevIds = prev ? blockIdsOf(prev) : undefined;
  const out = Buffer.allocUnsafe(count * ID);
  const reused = Math.min(prevIds?.length ?? 0, out.length) / ID; // blocks taken from the previous list
  prevIds?.copy(out, 0, 0, reused * ID);
  let beyond = 0; // read blocks past the previous list: together they must cover the rest
  r.readBlocks.forEach((b, k) => {
    got.copy(out, b * ID, k * ID, (k + 1) * ID);
    if (b >= reused) beyond++;
  });
  if (got.length !== r.readBlocks.length * ID || beyond !== count - reused)
    throw new Error(`${what}: the block list does not cover the file (internal error)`);
  return out;
}

/** True when an entry's lstat matches the previous snapshot's node in everything a tree records. */
function sameMetadata(prev: TreeNode, st: EntryStat): boolean {
  return (
    prev.type === st.type &&
    prev.mode === st.mode &&
    prev.mtimeNs === st.mtimeNs &&
    prev.ctimeNs === st.ctimeNs &&
    prev.inode === st.ino &&
    prev.dev === st.dev &&
    prev.uid === st.uid &&
    prev.gid === st.gid &&
    (st.type !== 'file' || (prev.size === st.size && (prev.nlink ?? 1) === (st.nlink > 1 ? st.nlink : 1))) &&
    prev.rdev === (st.type === 'chardev' || st.type === 'blockdev' ? st.rdev : undefined) &&
    prev.atimeNs === undefined &&
    prev.user === undefined &&
    prev.group === undefined
  );
}

function sameSummary(a: DirSummary, b: DirSummary | undefined): boolean {
  return !!b && a.files === b.files && a.dirs === b.dirs && a.bytes === b.bytes;
}

/** Normalizes source paths: absolute, no duplicates, none inside another. */
export function normalizeSources(paths: string[]): string[] {
  if (!paths.length) throw new UsageError('nothing to back up: give at least one path');
  const abs = [...new Set(paths.map((p) => path.resolve(p)))].sort();
  return abs.filter(
    (p) => !abs.some((q) => q !== p && p.startsWith(q.endsWith(path.sep) ? q : q + path.sep)),
  );
}

function sameSources(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((p, i) => p === b[i]);
}

/** Finds the snapshot to compare with: the newest of this host with exactly these sources. */
export async function findParent(
  repo: Repository,
  host: string,
  paths: string[],
  explicit?: ID,
): Promise<SnapshotEntry | undefined> {
  if (explicit) return repo.loadSnapshot(explicit);
  const all = await repo.listSnapshots();
  const sorted = [...paths].sort();
  for (let i = all.length - 1; i >= 0; i--) {
    if (all[i].host === host && sameSources([...all[i].paths].sort(), sorted)) return all[i];
  }
  return undefined;
}

/** Bytes in flight with a ceiling: `wait` resolves once the total is back under it. */
class ByteBudget {
  private used = 0;
  private waiters: (() => void)[] = [];
  constructor(private readonly max: number) {}
  add(n: number): void {
    this.used += n;
  }
  release(n: number): void {
    this.used -= n;
    while (this.used < this.max && this.waiters.length) this.waiters.shift()!();
  }
  async wait(): Promise<void> {
    if (this.used < this.max) return;
    await new Promise<void>((r) => this.waiters.push(r));
  }
}

class Semaphore {
  private waiters: (() => void)[] = [];
  constructor(private free: number) {}
  async take(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return;
    }
    await new Promise<void>((r) => this.waiters.push(r));
  }
  give(): void {
    const w = this.waiters.shift();
    if (w) w();
    else this.free++;
  }
}

export async function backup(repo: Repository, options: BackupOptions): Promise<BackupRunResult> {
  const opts = await withSourceViews(options); // takes the filesystem snapshots, unless the caller did
  const started = Date.now();
  const signal = opts.signal;
  const sources = normalizeSources(opts.paths);
  const host = opts.host ?? os.hostname();
  const log = opts.log ?? (() => {});
  const excluder = new Excluder([...(opts.excludes ?? []), ...hiddenPatterns(opts.hiddenPaths)]);
  const view = sourceViewMap(opts.sourceViews); // recorded path → where it is read (a filesystem snapshot)
  const skipped: SkippedEntry[] = [];
  const counters: ScanCounters = { stat: 0, readdir: 0 };
  const progress: BackupProgress = newBackupProgress();
  const stats = { files: 0, dirs: 0, totalBytes: 0, filesUnchanged: 0 };
  const statsAtStart = { ...repo.stats };
  const emit = () => {
    progress.elapsedMs = Date.now() - started;
    progress.bytesNew = repo.stats.newBytes - statsAtStart.newBytes;
    progress.bytesStored = repo.stats.packedBytes - statsAtStart.packedBytes;
    opts.progress?.({ ...progress });
  };
  emit();
  // handled from the start: a promise of ranges that fails while the lock is taken is no unhandled rejection
  const rangesArriving: Promise<ChangedRanges | Error | undefined> = Promise.resolve(
    opts.changeHint?.changedRanges,
  ).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
  const lock = await repo.lock(false, 'backup', undefined, opts.lockWaitMs ?? 10 * 60_000);
  const ticker = setInterval(emit, 250);
  let pool: WorkerPool | undefined;
  let succeeded = false;
  try {
    // the worker threads start (~30–50 ms each, more on a busy PC) while the index and the previous
    // snapshot load: an incremental's first read waits for them
    const workers = opts.workers ?? defaultWorkerCount();
    const cfg = repo.config;
    pool = acquirePool(
      {
        encryptionKey: repo.key.encryption,
        idKey: repo.key.id,
        chunker: cfg.chunker,
        chunkerSeed: cfg.chunkerSeed,
        compressionLevel: opts.compressionLevel ?? cfg.compressionLevel,
        readLimit: opts.readLimitBytesPerSec
          ? Math.max(1, Math.floor(opts.readLimitBytesPerSec / workers))
          : 0,
        lowPriority: !!opts.lowPriority,
        distributeSeal: workers > 1,
      },
      workers,
    );
    // sealed segments' buffers go back to the workers once their blobs are written (Repository.returnBuffers)
    const workerPool = pool;
    repo.returnBuffers((ab) => workerPool.keepSpareSealed(ab));
    await repo.loadIndex(true); // pick up what other writers added
    const parent = opts.forceFull ? undefined : await findParent(repo, host, sources, opts.parent);
    const hint = opts.changeHint && parent && !opts.forceFull ? new HintPlan(opts.changeHint) : undefined;
    // the mass-change alarm learns what changed from the walk (engine/alarm; nothing to compare without a parent)
    const watch = parent
      ? new MassChangeWatch({
          index: { get: (id) => repo.index.get(id) },
          compressionLevel: opts.compressionLevel ?? cfg.compressionLevel,
          filesBefore: parent.stats.files,
          parentTime: parent.time,
          journalDirtyDirs: hint ? opts.changeHint!.dirtyDirs.size : undefined,
        })
      : undefined;
    // Block tracking's ranges may still be on their way (see ChangeHint.changedRanges): awaited when a
    // large file is read and before the snapshot is written. Without them a changed file is read whole.
    const rangesReady = rangesArriving.then((r) => {
      if (hint && r instanceof Error) log(`block tracking: ${r.message}; changed files are read whole`);
      return hint && !(r instanceof Error) ? r : undefined;
    });
    const scanMode: Snapshot['scanMode'] = hint
      ? { mode: 'journal' }
      : {
          mode: 'full-scan',
          reason: opts.forceFull
            ? 'full backup requested'
            : !parent
              ? 'no previous snapshot'
              : (opts.fullScanReason ?? 'no change journal'),
        };
    if (scanMode.reason && opts.changeHint === undefined && opts.fullScanReason)
      log(`full scan: ${opts.fullScanReason}`);
    progress.phase = 'scanning';

    const skip = (p: string, err: unknown, reason?: string) => {
      const e = err as NodeJS.ErrnoException | undefined;
      const entry: SkippedEntry = { path: p, reason: reason ?? e?.message ?? String(err), code: e?.code };
      skipped.push(entry);
      progress.errors++;
      log(`skipped ${p}: ${entry.reason}`);
    };

    const storeBlobs = async (blobs: SealedBlobMsg[], speculative: boolean) => {
      for (const b of blobs) {
        const id = Buffer.from(b.id);
        if (speculative && !repo.claimBlob(id.toString('hex'))) continue;
        await repo.addSealedBlob(
          BlobType.Data,
          id,
          Buffer.from(b.sealed.buffer, b.sealed.byteOffset, b.sealed.byteLength),
          b.rawLength,
          b.compressed,
        );
      }
    };

    // Small files (one chunk) are read in batches by one task each, large files one task each.
    // taskSlots bounds the tasks in flight (two per worker: one reading while the other waits on CPU;
    // a third per worker only held another 8 MiB read block each, ~30 MB more peak RSS at the same
    // speed in `npm run bench`); smallSlots bounds how many small files wait in batches.
    const taskSlots = new Semaphore(workers * 2);
    const smallSlots = new Semaphore(4096);
    const smallLimit = cfg.chunker.min;
    const onEvent = async (ev: TaskEvent) => {
      throwIfAborted(signal);
      if (ev.kind === 'read') {
        progress.bytesRead += ev.bytes;
        return null;
      }
      if (ev.kind === 'query')
        return {
          store: ev.ids.map((id) => repo.claimBlob(id)),
          handOver: pool!.withoutFiles > 0,
          spares: pool!.takeSpareSegments(ev.spares),
        } satisfies QueryReply;
      if (ev.kind === 'raw') {
        sealChunks(ev.chunks);
        await sealBudget.wait();
        return null;
      }
      if (ev.kind === 'segments') {
        for (const segment of ev.segments)
          dispatchSeal(
            { op: 'sealSegment', segment },
            segment.data.byteLength,
            segmentBuffers(segment),
            storeSegment,
          );
        await sealBudget.wait();
        return null;
      }
      for (const s of ev.segments) await storeSegment(s); // sealedSegments
      return null;
    };
    /** Stores the blobs of a sealed segment (views into its one buffer: nothing is copied), and keeps the
     *  raw segment's buffer for the next reading worker that asks (QueryReply.spares). */
    const storeSegment = async (s: SealedSegment) => {
      pool!.keepSpareSegment(s.emptied);
      repo.holdBuffer(s.data.buffer);
      try {
        await storeBlobs(
          Array.from(s.lengths, (_, k) => sealedBlobOf(s, k)),
          false,
        );
      } finally {
        repo.releaseBuffer(s.data.buffer);
      }
    };
    // New chunks of large files are compressed and sealed by whichever worker is free (one big file's
    // compression spreads over all cores); bytes waiting for that are bounded, which pauses readers.
    // 8 MiB (four 2 MiB groups) keeps two workers busy: 24 MiB was no faster in `npm run bench` and held
    // 70–100 MB more at the peak when the engine's threads ran unhindered (real-time priority).
    const sealBudget = new ByteBudget(8 * 1024 * 1024);
    const sealing = new Set<Promise<void>>();
    let sealError: unknown;
    /** Hands a seal task to the least busy worker and stores what it returns; its bytes count against
     *  the seal budget until then. */
    const dispatchSeal = <T>(
      task: Task,
      bytes: number,
      transfer: ArrayBuffer[],
      store: (sealed: T) => Promise<void>,
    ) => {
      sealBudget.add(bytes);
      const p: Promise<void> = pool!
        .run<T>(task, undefined, transfer)
        .then(store)
        .catch((err) => {
          sealError ??= err;
        })
        .finally(() => {
          sealBudget.release(bytes);
          sealing.delete(p);
        });
      sealing.add(p);
    };
    const sealChunks = (chunks: { id: Uint8Array; data: Uint8Array }[]) => {
      let group: typeof chunks = [];
      let bytes = 0;
      const dispatch = () => {
        const g = group;
        const n = bytes;
        group = [];
        bytes = 0;
        dispatchSeal<SealedSegment>(
          { op: 'seal', chunks: g },
          n,
          g.map((c) => c.data.buffer as ArrayBuffer),
          storeSegment,
        );
      };
      for (const c of chunks) {
        group.push(c);
        bytes += c.data.length;
        if (bytes >= 2 * 1024 * 1024) dispatch();
      }
      if (group.length) dispatch();
    };
    const sealsSettled = async () => {
      while (sealing.size) await Promise.all([...sealing]);
      if (sealError) throw sealError;
    };

    interface SmallItem {
      abs: Buffer;
      size: number;
      mtimeMs: number;
      resolve: (r: SmallFileResult) => void;
      reject: (e: unknown) => void;
    }
    let smallQueue: SmallItem[] = [];
    let smallBytes = 0;
    let flushScheduled = false;
    const flushSmall = () => {
      flushScheduled = false;
      const batch = smallQueue;
      smallQueue = [];
      smallBytes = 0;
      if (!batch.length) return;
      void (async () => {
        await taskSlots.take();
        await opts.pauseGate?.wait(); // paused: start nothing new
        try {
          progress.currentFile = show(batch[batch.length - 1].abs);
          const r = await pool!.run<SmallFilesResult>(
            {
              op: 'backupSmallFiles',
              files: batch.map((b) => ({ path: view.read(b.abs), size: b.size, mtimeMs: b.mtimeMs })),
            },
            onEvent,
          );
          const sealed = r.sealed;
          batch.forEach((b, i) => {
            const f = r.files[i];
            // the file's blobs, as views of the task's one sealed buffer, held until readFile stored them
            if (!f.error && f.blobRefs?.length && sealed) {
              f.blobs = f.blobRefs.map((k) => sealedBlobOf(sealed, k));
              repo.holdBuffer(sealed.data.buffer);
            }
            b.resolve(f);
          });
        } catch (err) {
          batch.forEach((b) => b.reject(err));
        } finally {
          taskSlots.give();
        }
      })();
    };
    const readSmall = (abs: Buffer, size: number, mtimeMs: number) =>
      new Promise<SmallFileResult>((resolve, reject) => {
        smallQueue.push({ abs, size, mtimeMs, resolve, reject });
        smallBytes += size;
        if (smallQueue.length >= 256 || smallBytes >= 4 * 1024 * 1024) flushSmall();
        else if (!flushScheduled) {
          flushScheduled = true;
          setImmediate(flushSmall);
        }
      });
    let changedRanges: ChangedRanges | undefined;
    const blockSizeOf = blockPolicy(opts.blockFiles);
    /** Level 1 (block tracking): the previous chunk list and the changed ranges, when they can be trusted. */
    const incrementalOf = (
      abs: Buffer,
      node: TreeNode,
      prev: TreeNode | undefined,
    ): BackupFileTask['incremental'] => {
      const ranges = changedRanges?.get(show(abs));
      if (
        !ranges ||
        !prev ||
        !hasContent(prev) ||
        prev.type !== 'file' ||
        prev.inode !== node.inode ||
        prev.dev !== node.dev ||
        prev.blockSize !== node.blockSize
      )
        return undefined;
      if (node.blockSize) {
        // Fixed-size blocks. The previous blocks are trusted to be stored, as for a file whose metadata did
        // not change: the parent is a snapshot, so prune keeps them, and it cannot run during a backup.
        // The worker is not sent the previous list: it leaves reused blocks empty and they are filled here.
        const B = node.blockSize;
        const prevCount = contentCount(prev);
        if (prevCount !== Math.ceil((prev.size ?? 0) / B)) return undefined;
        const blocks = new Set<number>();
        for (const r of ranges)
          for (let b = Math.floor(r.offset / B); b <= Math.floor((r.offset + r.length - 1) / B); b++) {
            blocks.add(b);
            if (blocks.size > prevCount / 2) {
              log(`${show(abs)}: changes touch more than half of its blocks; reading the whole file`);
              return undefined;
            }
          }
        return {
          prevIds: [],
          prevCount,
          prevSizes: [],
          prevSize: prev.size ?? 0,
          changed: ranges,
        };
      }
      const prevIds = contentIds(prev);
      const prevSizes: number[] = [];
      for (const id of prevIds) {
        const loc = repo.index.get(id);
        if (!loc) return undefined;
        prevSizes.push(loc.rawLength);
      }
      if (prevSizes.reduce((a, b) => a + b, 0) !== prev.size) return undefined;
      // When the changes touch most chunks, one sequential read of the whole file is faster.
      const sorted = [...ranges].sort((a, b) => a.offset - b.offset);
      let touched = 0;
      let r = 0;
      let off = 0;
      for (const len of prevSizes) {
        while (r < sorted.length && sorted[r].offset + sorted[r].length <= off) r++;
        if (r < sorted.length && sorted[r].offset < off + len) touched++;
        off += len;
      }
      if (touched > prevSizes.length / 2) {
        log(`${show(abs)}: changes touch ${touched} of ${prevSizes.length} chunks; reading the whole file`);
        return undefined;
      }
      return { prevIds, prevSizes, changed: ranges };
    };
    /**
     * A block file's list from the worker's result. A long one is stored in two parts (repo/tree.ts): when
     * the previous snapshot's list is in parts and the worker read only some blocks, the new patch comes from
     * the previous patch and the blocks read — the base is not even loaded (the walk loads previous trees
     * without joining their lists); otherwise the whole list is made (joining the previous one when needed)
     * and, if long, written as a new base.
     */
    const saveBlockList = async (
      node: TreeNode,
      r: BackupFileResult,
      prev: TreeNode | undefined,
      what: string,
    ) => {
      const from = opts.listInPartsFrom ?? LIST_IN_PARTS_FROM;
      const count = r.blockCount ?? r.blockIds!.length / 32;
      if (count >= from && prev?.blockBase !== undefined && prev.blockPatch && r.readBlocks) {
        const patch = nextPatch(prev.blockPatch, prev.blockCount ?? 0, r.readBlocks, r.blockIds!, count);
        if (patch) {
          node.blockBase = prev.blockBase;
          node.blockCount = count;
          node.blockPatch = patch;
          return;
        }
      }
      // the previous list, whole, is needed only to patch a copy of it (the worker read some blocks)
      if (r.readBlocks && prev?.blockBase !== undefined && !prev.blockIds) await repo.joinBlockList(prev);
      const ids = (node.blockIds = blockList(r, prev, what));
      if (count < from) return;
      node.blockBase = await repo.saveBlob(BlobType.Tree, ids);
      node.blockCount = count;
      node.blockPatch = Buffer.alloc(0);
    };
    const runFileTask = async (
      task: BackupFileTask & { path: Buffer },
      shown: Buffer,
    ): Promise<BackupFileResult> => {
      await taskSlots.take();
      await opts.pauseGate?.wait(); // paused: start nothing new
      try {
        throwIfAborted(signal);
        progress.currentFile = show(shown);
        return await pool!.run<BackupFileResult>(task, onEvent);
      } finally {
        taskSlots.give();
      }
    };
    const readLarge = async (
      abs: Buffer,
      size: number,
      mtimeMs: number,
      incremental?: BackupFileTask['incremental'],
      blockSize?: number,
    ): Promise<BackupFileResult> => {
      const task = { op: 'backupFile' as const, path: view.read(abs), size, mtimeMs, incremental, blockSize };
      const stripeBytes = opts.stripeBytes ?? STRIPE_BYTES;
      const parts = blockSize && !incremental ? stripeParts(size, workers, stripeBytes) : 1;
      if (parts < 2) return runFileTask(task, abs);
      // A whole block file is read by every worker at once, each taking every parts-th stripe. In one task
      // the reading thread was busy all along hashing blocks (BLAKE3 gets little of its SIMD from 4 KiB
      // inputs) and copying them: a whole read of an already stored 2 GiB file at 4 KiB blocks, cold,
      // took 2.08–2.13 s in one task and 1.44–1.51 s in two (bench:cbt's whole-file incremental: 2.5 s
      // → 1.64–1.68 s; at 8 KiB blocks it stays within the noise, 1.4–1.7 s).
      const stripe = Math.max(1, Math.floor(stripeBytes / blockSize!));
      const settled = await Promise.allSettled(
        Array.from({ length: parts }, (_, part) =>
          runFileTask({ ...task, stripes: { blocks: stripe, parts, part } }, abs),
        ),
      );
      for (const r of settled) if (r.status === 'rejected') throw r.reason;
      const results = settled.map((r) => (r as PromiseFulfilledResult<BackupFileResult>).value);
      const bytesRead = results.reduce((a, r) => a + r.bytesRead, 0);
      if (results.some((r) => r.short)) {
        // it shrank while it was read: once more in one task, which keeps what was there
        const again = await runFileTask(task, abs);
        return { ...again, bytesRead: bytesRead + again.bytesRead, changedWhileReading: true };
      }
      return {
        content: [],
        blockIds: joinStripes(
          results.map((r) => r.blockIds!),
          Math.ceil(size / blockSize!),
          stripe,
        ),
        bytesRead,
        size,
        changedWhileReading: results.some((r) => r.changedWhileReading),
        blobs: [],
      };
    };

    const readFile = async (
      abs: Buffer,
      node: TreeNode,
      mtimeMs: number,
      prev?: TreeNode,
    ): Promise<TreeNode | undefined> => {
      const small = (node.size ?? 0) < smallLimit;
      if (small) await smallSlots.take();
      try {
        throwIfAborted(signal);
        let r: BackupFileResult;
        if (small) {
          const res = await readSmall(abs, node.size ?? 0, mtimeMs);
          if (res.error) throw Object.assign(new Error(res.error.message), { code: res.error.code });
          r = res;
        } else {
          const blockSize = blockSizeOf?.(node.name, node.size ?? 0);
          if (blockSize) node.blockSize = blockSize;
          if (prev) changedRanges = await rangesReady;
          const inc = incrementalOf(abs, node, prev);
          r = await readLarge(abs, node.size ?? 0, mtimeMs, inc, blockSize);
          if (r.blockIds) await saveBlockList(node, r, inc ? prev : undefined, show(abs));
          if (inc)
            log(
              `${show(abs)}: block-level tracking: read ${r.bytesRead} of ${node.size ?? 0} bytes (${inc.changed.length} changed ranges)`,
            );
        }
        try {
          await storeBlobs(r.blobs, true);
        } finally {
          if (small && r.blobs.length) repo.releaseBuffer(r.blobs[0].sealed.buffer); // held by flushSmall
        }
        progress.filesRead++;
        if (r.changedWhileReading) {
          skip(
            show(abs),
            undefined,
            'changed while it was being read; the saved copy may mix old and new content',
          );
          node.size = r.size;
        }
        if (!node.blockIds && node.blockBase === undefined) node.content = r.content;
        watch?.read(show(abs), node, prev, view.read(abs) === abs ? undefined : show(view.read(abs)));
        return node;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') skip(show(abs), err, 'vanished before it could be read');
        else if (code === 'EACCES' || code === 'EPERM') skip(show(abs), err, 'permission denied');
        else if (code === 'ELOOP') skip(show(abs), err, 'was replaced by a symlink while being read');
        else if (err instanceof TidemarkError) throw err;
        else skip(show(abs), err);
        return undefined;
      } finally {
        if (small) smallSlots.give();
        progress.filesDone++;
        progress.bytesDone += node.size ?? 0;
      }
    };

    const lstat = async (p: Buffer): Promise<EntryStat> => {
      counters.stat++;
      return view.recorded(entryStat(await fs.lstat(view.read(p), { bigint: true })));
    };

    /** Builds the node of one entry; dirs recurse. Returns undefined when the entry is skipped. */
    const saveEntry = async (
      abs: Buffer,
      raw: Buffer,
      st: EntryStat,
      prev: TreeNode | undefined,
      mode: 'scan' | 'full',
    ): Promise<TreeNode | undefined> => {
      progress.filesScanned++;
      // An entry whose metadata equals the previous snapshot's is kept as the very same node object,
      // so a directory whose entries are all unchanged keeps its tree without re-encoding it.
      const same = !!prev && sameMetadata(prev, st);
      if (same && st.type === 'file' && !opts.forceFull && hasContent(prev!)) {
        stats.files++;
        stats.totalBytes += st.size;
        stats.filesUnchanged++;
        progress.filesDone++;
        progress.bytesScanned += st.size;
        progress.bytesDone += st.size;
        return prev;
      }
      const node = metadataNode(raw, st);
      switch (node.type) {
        case 'dir': {
          const saved = await saveDir(abs, prev?.type === 'dir' ? prev : undefined, mode);
          if (saved === undefined) return undefined;
          stats.dirs++;
          if (same && saved.id === prev!.subtree && sameSummary(saved.summary, prev!.summary)) return prev;
          node.subtree = saved.id;
          node.summary = saved.summary;
          return node;
        }
        case 'file': {
          progress.bytesScanned += node.size ?? 0;
          if (!opts.forceFull && unchangedFile(prev, node)) {
            node.content = prev!.content;
            node.blockIds = prev!.blockIds; // a block file's list goes with its block size
            node.blockSize = prev!.blockSize;
            node.blockBase = prev!.blockBase; // and with the parts it is stored in
            node.blockCount = prev!.blockCount;
            node.blockPatch = prev!.blockPatch;
            stats.files++;
            stats.totalBytes += node.size ?? 0;
            stats.filesUnchanged++;
            progress.filesDone++;
            progress.bytesDone += node.size ?? 0;
            return node;
          }
          const saved = await readFile(abs, node, st.mtimeMs, prev);
          if (saved) {
            stats.files++;
            stats.totalBytes += saved.size ?? 0;
          }
          return saved;
        }
        case 'symlink': {
          try {
            const target = (await fs.readlink(view.read(abs), { encoding: 'buffer' })) as Buffer;
            const text = target.toString('utf8');
            node.linkTarget = text;
            if (!Buffer.from(text, 'utf8').equals(target)) node.linkTargetRaw = target.toString('base64');
            if (same && prev!.linkTarget === node.linkTarget && prev!.linkTargetRaw === node.linkTargetRaw)
              return prev;
            return node;
          } catch (err) {
            skip(show(abs), err);
            return undefined;
          }
        }
        default:
          skip(
            show(abs),
            undefined,
            `${node.type === 'fifo' ? 'a named pipe (FIFO)' : node.type === 'socket' ? 'a socket' : 'a device file'} is not backed up`,
          );
          return undefined;
      }
    };

    const byName = (tree: Tree | undefined) => {
      const m = new Map<string, TreeNode>();
      for (const n of tree?.nodes ?? []) m.set(nameBytes(n).toString('latin1'), n);
      return m;
    };

    /** Saves a directory's tree; returns its ID, or undefined when it cannot be read at all. */
    const saveDir = async (
      abs: Buffer,
      prevNode: TreeNode | undefined,
      mode: 'scan' | 'full',
    ): Promise<SavedDir | undefined> => {
      if (signal?.aborted) throw new AbortedError();
      const prevTreeId = prevNode?.subtree;
      const absText = show(abs);
      const decision = mode === 'full' || !hint ? 'scan' : hint.decide(absText);
      const subMode: 'scan' | 'full' = mode === 'full' || decision === 'full' ? 'full' : 'scan';
      if ((decision === 'reuse' || decision === 'descend') && prevTreeId === undefined) {
        // the hint says "unchanged" but the previous snapshot has nothing to reuse: scan it
        return saveDirScan(abs, undefined, 'full');
      }
      if (decision === 'reuse' && prevNode?.summary) {
        countSummary(prevNode.summary);
        return { id: prevTreeId!, summary: prevNode.summary };
      }
      if (decision === 'reuse') return saveDirScan(abs, prevTreeId, 'full');
      if (decision === 'descend') {
        const prevTree = await repo.loadTree(prevTreeId!, { joinLists: false });
        const nodes: TreeNode[] = [];
        for (const n of prevTree.nodes) {
          const childAbs = join(abs, nameBytes(n));
          if (n.type === 'dir' && hint!.leadsToChange(show(childAbs))) {
            let st: EntryStat;
            try {
              st = await lstat(childAbs);
            } catch {
              // gone although the parent was not reported dirty: be safe and rescan the parent
              return saveDirScan(abs, prevTreeId, 'full');
            }
            const node = await saveEntry(childAbs, nameBytes(n), st, n, subMode);
            if (node) nodes.push(node);
          } else {
            nodes.push(n);
            countNode(n);
          }
        }
        return saveTree(nodes);
      }
      return saveDirScan(abs, prevTreeId, subMode);
    };

    // A reused subtree is counted from its summary, without loading its trees.
    const countSummary = (s: DirSummary) => {
      stats.files += s.files;
      stats.dirs += s.dirs;
      stats.totalBytes += s.bytes;
      stats.filesUnchanged += s.files;
      progress.filesScanned += s.files + s.dirs;
      progress.filesDone += s.files;
      progress.bytesScanned += s.bytes;
      progress.bytesDone += s.bytes;
    };
    const countNode = (n: TreeNode) => {
      if (n.type === 'file') countSummary({ files: 1, dirs: 0, bytes: n.size ?? 0 });
      else if (n.type === 'dir')
        countSummary({
          files: 0,
          dirs: 1,
          bytes: 0,
          ...(n.summary && { files: n.summary.files, dirs: n.summary.dirs + 1, bytes: n.summary.bytes }),
        });
      else progress.filesScanned++;
    };
    const summarize = (nodes: TreeNode[]): DirSummary => {
      const summary: DirSummary = { files: 0, dirs: 0, bytes: 0 };
      for (const n of nodes) {
        if (n.type === 'file') {
          summary.files++;
          summary.bytes += n.size ?? 0;
        } else if (n.type === 'dir') {
          summary.dirs += 1 + (n.summary?.dirs ?? 0);
          summary.files += n.summary?.files ?? 0;
          summary.bytes += n.summary?.bytes ?? 0;
        }
      }
      return summary;
    };
    const saveTree = async (nodes: TreeNode[]): Promise<SavedDir> => ({
      id: await repo.saveTree({ nodes }),
      summary: summarize(nodes),
    });

    /** One directory's entries and their lstat results (or errors; undefined when excluded). The
     *  listing and the lstat calls run in a worker with synchronous calls: far cheaper per entry than
     *  promise-based calls, and off the thread that serves the UI. */
    interface Listing {
      names: Buffer[];
      stats: (EntryStat | Error | undefined)[];
    }
    const listDir = async (abs: Buffer): Promise<Listing | Error> => {
      await opts.pauseGate?.wait();
      counters.readdir++;
      const r = await pool!.run<ListDirResult>({ op: 'listDir', path: view.read(abs) });
      if (r.error) return Object.assign(new Error(r.error.message), { code: r.error.code });
      counters.stat += r.names.length;
      const names = r.names.map((n) => Buffer.from(n.buffer, n.byteOffset, n.byteLength));
      const stats = r.stats.map((st, i) => {
        if (!excluder.empty && excluder.excludes(show(join(abs, names[i])), show(names[i]))) return undefined;
        return 'error' in st
          ? Object.assign(new Error(st.error.message), { code: st.error.code })
          : view.recorded(st);
      });
      return { names, stats };
    };
    // The walk is depth-first (bounded memory); listings of the next directories are fetched ahead so
    // the disk and the thread pool always have work.
    const prefetched = new Map<string, Promise<Listing | Error>>();
    const dirTokens = { free: 6 };
    const PREFETCH = 12;

    const saveDirScan = async (
      abs: Buffer,
      prevTreeId: ID | undefined,
      mode: 'scan' | 'full',
    ): Promise<SavedDir | undefined> => {
      const key = abs.toString('latin1');
      const pending = prefetched.get(key);
      prefetched.delete(key);
      const listing = await (pending ?? listDir(abs));
      if (listing instanceof Error) {
        skip(
          show(abs),
          listing,
          (listing as NodeJS.ErrnoException).code === 'EACCES'
            ? 'permission denied (folder not readable)'
            : undefined,
        );
        return undefined;
      }
      const { names, stats } = listing;
      const kept = stats.map((st) => st !== undefined);
      for (let i = 0; i < names.length && prefetched.size < PREFETCH; i++) {
        const st = stats[i];
        if (
          st &&
          !(st instanceof Error) &&
          st.type === 'dir' &&
          (mode === 'full' || !hint || hint.decide(show(join(abs, names[i]))) === 'scan')
        ) {
          const childAbs = join(abs, names[i]);
          const k = childAbs.toString('latin1');
          if (!prefetched.has(k)) {
            const p = listDir(childAbs);
            p.catch(() => {});
            prefetched.set(k, p);
          }
        }
      }
      // block lists in two parts stay unjoined: a night's patch needs only the previous patch
      const prevTree = prevTreeId ? await repo.loadTree(prevTreeId, { joinLists: false }) : undefined;
      const prevNodes = byName(prevTree);
      const pendingNodes: Promise<TreeNode | undefined>[] = [];
      let matched = 0; // previous entries still here (fewer: some were removed)
      for (let i = 0; i < names.length; i++) {
        throwIfAborted(signal);
        if (!kept[i]) continue;
        const childAbs = join(abs, names[i]);
        const st = stats[i]!;
        if (st instanceof Error) {
          const code = (st as NodeJS.ErrnoException).code;
          skip(show(childAbs), st, code === 'ENOENT' ? 'vanished during the scan' : undefined);
          continue;
        }
        const prev = prevNodes.get(names[i].toString('latin1'));
        if (prev) matched++;
        const p = saveEntry(childAbs, names[i], st, prev, mode);
        if (st.type === 'dir') {
          // A few folders are walked at once (so small files from several of them keep both workers
          // busy); beyond that the walk goes depth-first, which bounds memory. Tokens are only taken,
          // never waited for, so a parent never blocks its own children.
          if (dirTokens.free > 0) {
            dirTokens.free--;
            void p.finally(() => dirTokens.free++).catch(() => {});
          } else await p;
        }
        pendingNodes.push(p);
      }
      // the mass-change alarm pairs new files with removed ones (only folders that lost entries)
      if (watch && prevTree && matched < prevTree.nodes.length)
        watch.listed(show(abs), names.map(show), prevTree.nodes);
      const nodes = (await Promise.all(pendingNodes)).filter((n): n is TreeNode => !!n);
      if (
        prevTree &&
        nodes.length === prevTree.nodes.length &&
        nodes.every((n, i) => n === prevTree.nodes[i])
      )
        return { id: prevTreeId!, summary: summarize(nodes) }; // nothing changed here: same tree, not re-encoded
      return saveTree(nodes);
    };

    // Sources hang under a tree that mirrors their absolute paths (/home/ann/Documents → home/ann/Documents).
    const prevRoot = parent ? await repo.loadTree(parent.tree) : undefined;
    const saveVirtual = async (
      prefix: string,
      children: Map<string, unknown>,
      prevTree: Tree | undefined,
    ): Promise<SavedDir> => {
      const prevNodes = byName(prevTree);
      const nodes: TreeNode[] = [];
      for (const [name, sub] of [...children].sort((a, b) =>
        Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0])),
      )) {
        const abs = prefix === path.sep ? path.sep + name : prefix + path.sep + name;
        const absBuf = Buffer.from(abs);
        const prev = prevNodes.get(Buffer.from(name).toString('latin1'));
        let st: EntryStat;
        try {
          st = await lstat(absBuf);
        } catch (err) {
          skip(abs, err, (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : undefined);
          continue;
        }
        if (sub === null) {
          const node = await saveEntry(absBuf, Buffer.from(name), st, prev, 'scan');
          if (node) nodes.push(node);
        } else {
          const node = metadataNode(Buffer.from(name), st);
          if (node.type !== 'dir') {
            skip(abs, undefined, 'is not a folder');
            continue;
          }
          const prevSub =
            prev?.type === 'dir' && prev.subtree ? await repo.loadTree(prev.subtree) : undefined;
          const saved = await saveVirtual(abs, sub as Map<string, unknown>, prevSub);
          node.subtree = saved.id;
          node.summary = saved.summary;
          nodes.push(node);
        }
      }
      return saveTree(nodes);
    };
    const trie = new Map<string, unknown>();
    for (const s of sources) {
      const parts = s.split(path.sep).filter(Boolean);
      let m = trie;
      parts.forEach((part, i) => {
        if (i === parts.length - 1) m.set(part, null);
        else {
          if (!(m.get(part) instanceof Map)) m.set(part, new Map());
          m = m.get(part) as Map<string, unknown>;
        }
      });
    }
    progress.phase = 'backing-up';
    const rootTree = (await saveVirtual(path.sep, trie, prevRoot)).id;
    throwIfAborted(signal);
    await sealsSettled();
    if (hint && (await rangesReady)?.size) scanMode.mode = 'blocks';
    progress.scanComplete = true;
    progress.phase = 'finalizing';
    progress.currentFile = undefined;
    emit();
    const snapshot: Snapshot = {
      version: 1,
      time: new Date().toISOString(),
      host,
      username: safeUser(),
      paths: sources,
      tags: opts.tags ?? [],
      ...(opts.job ? { job: opts.job } : {}),
      tree: rootTree,
      ...(parent ? { parent: parent.id } : {}),
      ...(opts.excludes?.length ? { excludes: opts.excludes } : {}),
      stats: {
        files: stats.files,
        dirs: stats.dirs,
        totalBytes: stats.totalBytes,
        filesRead: progress.filesRead,
        bytesRead: progress.bytesRead,
        filesUnchanged: stats.filesUnchanged,
        newBlobs: repo.stats.newBlobs - statsAtStart.newBlobs,
        newBytes: repo.stats.newBytes - statsAtStart.newBytes,
        storedBytes: 0,
        durationMs: 0,
      },
      skipped,
      ...(opts.changeHint
        ? { journalCursor: opts.changeHint.cursor }
        : opts.journalCursor
          ? { journalCursor: opts.journalCursor }
          : {}),
      scanMode,
    };
    await repo.flush();
    if (watch) {
      snapshot.massChange = await massChangeVerdict(watch, parent!);
      log(describeVerdict(snapshot.massChange));
    }
    lock.assertHeld('the backup');
    snapshot.stats.storedBytes = repo.stats.storedBytes - statsAtStart.storedBytes;
    snapshot.stats.durationMs = Date.now() - started;
    const snapshotId = await repo.saveSnapshot(snapshot);
    progress.phase = 'done';
    emit();
    succeeded = true;
    return {
      snapshotId,
      snapshot: { ...snapshot, id: snapshotId },
      skipped,
      status: skipped.length ? 'completed-with-warnings' : 'completed',
      ...(snapshot.massChange ? { massChange: snapshot.massChange } : {}),
      counters,
    };
  } catch (err) {
    if (signal?.aborted || err instanceof AbortedError) {
      // Keep what was uploaded indexed, so the next run does not upload it again.
      await repo.flush().catch(() => {});
      throw new AbortedError('backup cancelled; earlier snapshots are untouched');
    }
    throw err;
  } finally {
    clearInterval(ticker);
    repo.returnBuffers(); // a failed run's held buffers are simply collected
    if (pool) await releasePool(pool, !succeeded);
    await lock.release().catch(() => {});
  }
}

function safeUser(): string | undefined {
  try {
    return os.userInfo().username;
  } catch {
    return undefined;
  }
}
