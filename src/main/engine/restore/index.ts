/**
 * Restore: materialise files from a snapshot.
 * The plan (walk the trees, select what `include` asks for, decide per existing file with the
 * overwrite policy; ./planner.ts, ./selection.ts, ./prepare.ts) is made in batches of files; a pack is
 * read as soon as the walk has asked for every blob in it, while the walk goes on, and the plan held stays
 * bounded however large the snapshot (./packQueue.ts). Each pack is read once (but for blobs asked for
 * again after it was read), in coalesced ranges (./packReader.ts); workers decrypt, decompress and verify
 * blobs and write them with synchronous calls (./worker): whole single-blob files, and the pieces of
 * larger files at their offsets into files the main thread created and sized first (./files.ts; all-zero
 * chunks are not written, so sparse files stay sparse; plaintext never comes back to the main thread).
 * Files in folders this run created are not looked up first (./folders.ts). Metadata comes last
 * (./metadata.ts): files, then hardlinks and symlinks, then directories deepest first (so their mtimes
 * stick). One run's shared state is explicit in ./run.ts.
 * Guarantees: never writes outside the target folder — names are validated, parents are verified to
 * be real directories, files are opened with O_NOFOLLOW, symlinks are created only at the end.
 * A damaged blob fails only the files that use it; they are removed and reported by name.
 */
import type { Repository } from '../repo/repository.js';
import type { RestoreOptions, RestoreResult } from '../operations.js';
import {
  type WorkerPool,
  acquireDecodePool,
  releasePool,
  memoryProfile,
  enterMemoryMode,
} from '../pool/index.js';
import { TargetFiles } from './files.js';
import { TargetFolders } from './folders.js';
import { finishLinksAndFolders } from './metadata.js';
import { PackQueue } from './packQueue.js';
import { PackReader } from './packReader.js';
import { RestorePlanner } from './planner.js';
import { BatchPreparer } from './prepare.js';
import { RestoreRun } from './run.js';
import { Selection } from './selection.js';
import { TreeAhead } from './treeAhead.js';

export async function restore(repo: Repository, opts: RestoreOptions): Promise<RestoreResult> {
  const run = new RestoreRun(opts);
  const { signal, progress, errors, emit } = run;
  const ticker = setInterval(emit, 250);
  let pool: WorkerPool | undefined;
  try {
    // the index (to pick up what other writers added) and the snapshot are read at the same time
    const indexLoaded = repo.loadIndex(true);
    indexLoaded.catch(() => {}); // awaited below (after a failure to find the snapshot: not at all)
    const snap = await repo.loadSnapshot(opts.snapshot);
    await indexLoaded;
    emit();
    // the workers start while the plan is made
    // the worker count and the loops reading packs, by RestoreOptions.memory (pool/memory.ts)
    const mem = memoryProfile(opts.memory, opts.workers);
    enterMemoryMode(opts.memory);
    pool = acquireDecodePool(repo.key, repo.config, mem.workers);

    // The pipeline: the planner walks the trees and plans batches of files, adding what each file needs
    // to the plan of each pack and queueing the packs (the queue); restoreLoops loops of the pack reader
    // take the queued packs and hand their ranges to the decode workers.
    const packs = new PackQueue(run, repo, Math.max(1, opts.planLimit ?? mem.planLimit));
    const files = new TargetFiles(run);
    const preparer = new BatchPreparer(run, repo, new TargetFolders(run.target), files, packs);
    const planner = new RestorePlanner(run, new Selection(run), new TreeAhead(repo), preparer, packs);
    const reader = new PackReader(run, repo, pool, packs, files);
    /** Runs a stage; its failure stops the others (each looks at `packs.failure`). */
    const stage = (fn: () => Promise<void>, last?: () => void) =>
      fn()
        .catch((err) => {
          packs.failure ??= err;
        })
        .finally(() => {
          last?.();
          packs.changed.notify();
        });
    const loops = Array.from({ length: mem.restoreLoops }, () => stage(() => reader.loop()));
    await Promise.all([
      stage(
        () => planner.plan(snap),
        () => (packs.walkDone = true),
      ),
      ...loops,
    ]);
    if (packs.failure !== undefined) throw packs.failure;

    progress.phase = 'metadata';
    await finishLinksAndFolders(run);
    progress.phase = 'done';
    emit();
    return {
      filesRestored: run.chosen.files - run.failedTotals.files,
      bytesRestored: run.chosen.bytes - run.failedTotals.bytes,
      skipped: run.skippedCount,
      errors,
      bytesWrittenDirect: reader.directBytes,
      bytesReadDirect: reader.readDirectBytes,
    };
  } finally {
    clearInterval(ticker);
    if (pool) await releasePool(pool, !!signal?.aborted);
  }
}
