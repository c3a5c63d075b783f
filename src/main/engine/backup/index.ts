/**
 * Backup: scan → read → chunk → hash → dedup → compress → encrypt → pack → upload.
 * The main thread walks the sources (./walk.ts: listings fetched ahead by workers, ./listing.ts) and
 * decides per entry whether the previous snapshot's node can be reused; files that must be read go to the
 * file saver (./fileSaver.ts: small files in batches, ./smallFiles.ts; large ones a task each, block files
 * in stripes, with block tracking's changed ranges, ./incremental.ts and ./blockLists.ts), with a bounded
 * number in flight (backpressure reaches the walk). The workers (./worker: reading, chunking, hashing,
 * sealing) send chunks back; the sealer (./sealer.ts) answers their dedup queries and puts sealed blobs
 * into the repository's packs. Folder trees are saved bottom-up as their children finish
 * (./treeSaver.ts), so an unchanged folder keeps its tree ID; the sources hang under a tree mirroring
 * their paths (./sources.ts), read where the source views say (a filesystem snapshot, ./sourceView.ts).
 * The snapshot is written last, after every pack and index it depends on. One run's shared state is
 * explicit in ./run.ts.
 * Guarantees: unreadable, vanished or special entries are skipped and listed, never fatal; a cancel
 * or crash leaves earlier snapshots intact. Not here: change tracking itself (tracking/), scheduling.
 */
import os from 'node:os';
import type { Repository } from '../repo/repository.js';
import type { Snapshot } from '../repo/types.js';
import type { BackupOptions, BackupResult, ChangedRanges } from '../operations.js';
import { AbortedError, throwIfAborted } from '../errors.js';
import {
  type WorkerPool,
  acquirePool,
  releasePool,
  memoryProfile,
  enterMemoryMode,
  BufferLedger,
} from '../pool/index.js';
import { Excluder, HintPlan } from '../scan/index.js';
import { FileSaver } from './fileSaver.js';
import { Incrementals } from './incremental.js';
import { Semaphore } from './limits.js';
import { Lister } from './listing.js';
import { BackupRun, type ScanCounters } from './run.js';
import { Sealer } from './sealer.js';
import { SmallFileBatches } from './smallFiles.js';
import { findParent, normalizeSources, saveSources } from './sources.js';
import { TreeSaver } from './treeSaver.js';
import { Walker } from './walk.js';
import { hiddenPatterns, withSourceViews } from './sourceView.js';
import { MassChangeWatch, describeVerdict, massChangeVerdict } from '../alarm/index.js';

export { findParent, normalizeSources } from './sources.js';
export type { ScanCounters } from './run.js';

export interface BackupRunResult extends BackupResult {
  counters: ScanCounters;
}

export async function backup(repo: Repository, options: BackupOptions): Promise<BackupRunResult> {
  const opts = await withSourceViews(options); // takes the filesystem snapshots, unless the caller did
  const run = new BackupRun(repo, opts);
  const { signal, log, progress, stats, skipped, counters, emit } = run;
  const sources = normalizeSources(opts.paths);
  const host = opts.host ?? os.hostname();
  const excluder = new Excluder([...(opts.excludes ?? []), ...hiddenPatterns(opts.hiddenPaths)]);
  emit();
  // handled from the start: a promise of ranges that fails while the lock is taken is no unhandled rejection
  const rangesArriving: Promise<ChangedRanges | Error | undefined> = Promise.resolve(
    opts.changeHint?.changedRanges,
  ).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
  const lock = await repo.lock(false, 'backup', undefined, opts.lockWaitMs ?? 10 * 60_000);
  const ticker = setInterval(emit, 250);
  let pool: WorkerPool | undefined;
  let ledger: BufferLedger | undefined;
  let succeeded = false;
  try {
    // the worker threads start (~30–50 ms each, more on a busy PC) while the index and the previous
    // snapshot load: an incremental's first read waits for them
    // the worker count and the buffers in flight, by BackupOptions.memory (pool/memory.ts)
    const mem = memoryProfile(opts.memory, opts.workers);
    enterMemoryMode(opts.memory);
    const workers = mem.workers;
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
        scratchBytes: mem.scratchBytes,
      },
      workers,
      { sealedBytes: mem.scratchBytes },
    );
    // sealed segments' buffers go back to the workers once their blobs are written (pool/ledger.ts)
    const workerPool = pool;
    ledger = new BufferLedger((ab) => workerPool.spares.keepSealed(ab));
    await repo.loadIndex(true); // pick up what other writers added
    const parent = opts.forceFull ? undefined : await findParent(repo, host, sources, opts.parent, log);
    const hint = opts.changeHint && parent && !opts.forceFull ? new HintPlan(opts.changeHint) : undefined;
    // the mass-change alarm learns what changed from the walk (engine/alarm; nothing to compare without a parent)
    const watch = (run.watch = parent
      ? new MassChangeWatch({
          index: { get: (id) => repo.index.get(id) },
          compressionLevel: opts.compressionLevel ?? cfg.compressionLevel,
          filesBefore: parent.stats.files,
          parentTime: parent.time,
          journalDirtyDirs: hint ? opts.changeHint!.dirtyDirs.size : undefined,
        })
      : undefined);
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

    // the stages (each holds its own state; ./run.ts is what they share)
    // tasks in flight per worker: normally one reading while the other waits on CPU (a third per worker
    // only held another 8 MiB read block each: more peak RSS at the same speed in `npm run bench`)
    const taskSlots = new Semaphore(workers * mem.tasksPerWorker);
    const sealer = new Sealer(run, repo, pool, ledger, mem.sealBudget);
    repo.packBuffers = mem.packBuffers;
    repo.packWriteBytes = mem.packWriteBytes;
    const small = new SmallFileBatches(run, pool, ledger, taskSlots, sealer.onEvent);
    const incrementals = new Incrementals(run, repo, rangesReady);
    const files = new FileSaver(
      run,
      repo,
      pool,
      ledger,
      sealer,
      small,
      incrementals,
      taskSlots,
      workers,
      mem.smallFilesWaiting,
    );
    const trees = new TreeSaver(repo);
    const walker = new Walker(run, repo, hint, new Lister(run, pool, excluder, hint), trees, files);

    const prevRoot = parent ? await repo.loadTree(parent.tree) : undefined;
    progress.phase = 'backing-up';
    const rootTree = await saveSources(run, repo, walker, trees, sources, prevRoot);
    throwIfAborted(signal);
    await sealer.settled();
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
        newBlobs: repo.stats.newBlobs - run.statsAtStart.newBlobs,
        newBytes: repo.stats.newBytes - run.statsAtStart.newBytes,
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
    snapshot.stats.storedBytes = repo.stats.storedBytes - run.statsAtStart.storedBytes;
    snapshot.stats.durationMs = Date.now() - run.started;
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
    ledger?.close(); // a failed run's held buffers are simply collected
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
