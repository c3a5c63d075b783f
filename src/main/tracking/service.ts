/**
 * The change tracker as a service inside a long-running process (the app, `tidemark scheduler`):
 * it tracks exactly the union of the jobs' sources, restarts when that set changes (a new generation,
 * so each job does one full scan), and plans every backup from its journal. `journalBackup` is the one
 * place a backup is tied to the journal: it picks the parent snapshot, asks the journal what changed
 * since that snapshot's cursor, runs the backup (journal-driven, or a full scan with the reason), and
 * commits the cursor captured at the start only after the backup succeeded.
 */
import os from 'node:os';
import path from 'node:path';
import { runTrackerDaemon } from './daemon.js';
import type { ChangeJournal } from './journal.js';
import type { TrackerBackendName } from './types.js';
import type { Repository } from '../engine/repo/repository.js';
import type { BackupOptions } from '../engine/operations.js';
import { backup, findParent, normalizeSources, type BackupRunResult } from '../engine/backup/index.js';
import { withSourceViews } from '../engine/backup/sourceView.js';
import { lookup } from '../engine/repo/browse.js';
import type { SnapshotEntry, TreeNode } from '../engine/repo/types.js';
import { BlockChangeSession, BlockTracker, computeChangedRanges, loadCbtNative } from './blocks/index.js';

/** Files at least this large get block-level tracking (smaller ones are cheap to read whole). */
export const BLOCK_TRACKED_MIN_SIZE = 64 * 1024 * 1024;

/** What a backup needs for level 1 (changed blocks of large files); absent: file-level tracking only. */
export interface BlockLevel {
  tracker: BlockTracker;
  dir: string;
}

/** The change tracking in effect (docs/architecture.md §3). */
export interface ChangeTrackingStatus {
  /** How many folders are tracked (the union of the jobs' sources). */
  folders: number;
  /** The change journal's backend (fanotify, inotify, usn), or null when backups scan everything. */
  journal: string | null;
  /** Whether the changed blocks of large files are tracked; if not, why. */
  blockLevel: boolean;
  blockReason?: string;
}

export interface TrackerServiceOptions {
  dataDir: string;
  log?: (line: string) => void;
  backends?: TrackerBackendName[];
  /** Name under which the block tracker is pinned in the kernel (keeps tracking while the app is
   *  closed); false: not pinned. Default 'tidemark'. */
  blockPin?: string | false;
}

export class TrackerService {
  private roots: string[] = [];
  private controller?: AbortController;
  private running?: Promise<unknown>;
  private current?: ChangeJournal;
  private ready?: Promise<void>;
  private blocks?: BlockTracker;
  private backend?: string;
  /** Why block-level tracking is off (unprivileged, no eBPF, unsupported filesystem), for the run log. */
  blockReason?: string;

  constructor(private readonly opts: TrackerServiceOptions) {}

  private serial: Promise<void> = Promise.resolve();

  /** Tracks exactly these folders (the union of all jobs' sources); no folders stops tracking.
   *  Calls are serialized, so a periodic re-check and a backup never start two trackers. */
  setRoots(roots: string[]): Promise<void> {
    const run = this.serial.then(() => this.applyRoots(roots));
    this.serial = run.catch(() => {});
    return run;
  }

  private async applyRoots(roots: string[]): Promise<void> {
    const next = [...new Set(roots.map((r) => path.resolve(r)))].sort();
    if (JSON.stringify(next) === JSON.stringify(this.roots) && (this.running || !next.length)) return;
    await this.stop();
    this.roots = next;
    if (!next.length) return;
    const controller = new AbortController();
    this.controller = controller;
    let markReady!: () => void;
    this.ready = new Promise((r) => (markReady = r));
    if (process.platform === 'linux' && process.env.TIDEMARK_NO_BLOCK_TRACKING !== '1') {
      const started = await BlockTracker.start(next, this.pinOption()).catch((err: Error) => ({
        ok: false as const,
        reason: err.message,
      }));
      if (started.ok) {
        this.blocks = started.tracker;
        this.blockReason = undefined;
      } else {
        this.blockReason = started.reason;
        this.opts.log?.(
          `block-level tracking off (${started.reason}); large files that change are read whole`,
        );
      }
    } else this.blockReason = 'block-level tracking exists only on Linux';
    this.running = runTrackerDaemon({
      dataDir: this.opts.dataDir,
      roots: next,
      signal: controller.signal,
      backends: this.opts.backends,
      log: this.opts.log,
      onReady: ({ journal, backend }) => {
        this.current = journal;
        this.backend = backend;
        markReady();
      },
    })
      .catch((err) => this.opts.log?.(`change tracker failed: ${(err as Error).message}`))
      .finally(() => markReady());
  }

  /** Pinned under `blockPin`, else $TIDEMARK_BLOCK_PIN (empty: not pinned, as in the test suite), else 'tidemark'. */
  private pinOption(): { pin?: string } {
    const pin =
      this.opts.blockPin === false
        ? ''
        : (this.opts.blockPin ?? process.env.TIDEMARK_BLOCK_PIN ?? 'tidemark');
    return pin ? { pin } : {};
  }

  /** The journal of the running tracker, once it runs. */
  async journal(): Promise<ChangeJournal | undefined> {
    await this.ready;
    return this.current;
  }

  /** What tracks changes now, for the app's Settings page. */
  status(): ChangeTrackingStatus {
    return {
      folders: this.roots.length,
      journal: this.backend && this.backend !== 'none' ? this.backend : null,
      blockLevel: !!this.blocks,
      ...(this.blocks ? {} : { blockReason: this.blockReason ?? 'no folders are tracked yet' }),
    };
  }

  /** Block-level tracking, when it runs. */
  blockLevel(): BlockLevel | undefined {
    return this.blocks ? { tracker: this.blocks, dir: path.join(this.opts.dataDir, 'blocks') } : undefined;
  }

  async stop(): Promise<void> {
    this.controller?.abort();
    await this.running;
    this.controller = undefined;
    this.running = undefined;
    this.current = undefined;
    this.ready = undefined;
    this.backend = undefined;
    // a pinned block tracker keeps recording in the kernel; only this process's handle goes
    this.blocks?.stop();
    this.blocks = undefined;
  }
}

/**
 * Runs a backup planned from the change journal (level 2 of docs/architecture.md §3), falling back to a full
 * scan with the reason. `consumer` names whose baseline the journal keeps (one per job).
 */
export async function journalBackup(
  journal: ChangeJournal | undefined,
  repo: Repository,
  opts: BackupOptions,
  consumer: string,
  run: (repo: Repository, opts: BackupOptions) => Promise<BackupRunResult> = backup,
  blocks?: BlockLevel,
): Promise<BackupRunResult> {
  if (!journal || opts.forceFull || opts.changeHint) {
    return run(repo, {
      ...opts,
      fullScanReason: opts.fullScanReason ?? (journal ? undefined : 'no change tracker is running'),
    });
  }
  const sources = normalizeSources(opts.paths);
  const parent = await findParent(repo, opts.host ?? os.hostname(), sources, opts.parent, opts.log);
  const plan = await journal.planBackup(parent?.journalCursor ?? null, sources);
  opts.log?.(
    plan.changeHint
      ? `change journal: ${plan.changeHint.dirtyDirs.size} changed folders`
      : `full scan: ${plan.fullScanReason}`,
  );
  // Level 1: the changed byte ranges of large files in the changed folders. The tracker syncs the
  // filesystems and swaps its bitmap while the large files of the parent are looked up, and maps their
  // extents while the backup opens the repository and loads the previous trees (the engine waits for
  // the ranges when it reaches a large file).
  let session: BlockChangeSession | undefined;
  let largeFiles: string[] = [];
  let sessionReady: Promise<unknown> | undefined;
  let began: Promise<BlockChangeSession> | undefined;
  if (blocks && plan.changeHint && parent) {
    const mapper = loadCbtNative();
    if (mapper.ok) {
      began = BlockChangeSession.begin(sources, {
        dir: blocks.dir,
        consumer,
        tracker: blocks.tracker,
        mapper: mapper.native,
        parentSnapshot: parent.id,
        log: opts.log,
      });
      began.catch(() => {}); // awaited below; a failure surfaces through the ranges
      const large = await largeFilesIn(repo, parent, [...plan.changeHint.dirtyDirs]);
      largeFiles = [...large.keys()];
      const ranges = (async () => {
        session = await began!;
        const r = await computeChangedRanges(largeFiles, session, {
          minSize: BLOCK_TRACKED_MIN_SIZE,
          onWholeFile: (f, why) => opts.log?.(`block tracking: ${f} is read whole (${why})`),
          // reads are widened to whole chunks (content-defined) or blocks (fixed-size, docs/architecture.md §3)
          spread: { window: (f) => large.get(f)?.blockSize ?? repo.config.chunker.avg, maxFraction: 0.5 },
        });
        return r.size ? r : undefined;
      })();
      sessionReady = ranges.catch(() => {}); // a failure is logged by the backup, which reads whole files
      plan.changeHint.changedRanges = ranges;
    }
  }
  // A filesystem snapshot is taken after the journal's cursor and the block tracker's bitmap swap: every
  // change after the snapshot is then in the next backup's journal and bitmap (a change between the two is
  // in both: read twice, never missed).
  let viewed = opts;
  if (opts.prepareSourceViews) {
    await (began ?? Promise.resolve()).catch(() => {});
    viewed = await withSourceViews(opts);
  }
  let result: BackupRunResult;
  try {
    result = await run(repo, {
      ...viewed,
      ...(parent ? { parent: parent.id } : {}),
      changeHint: plan.changeHint,
      fullScanReason: plan.fullScanReason,
      journalCursor: plan.cursor as Record<string, unknown> | undefined,
    });
  } finally {
    await sessionReady; // a backup that failed early leaves nothing of the tracker's running behind
  }
  if (session) {
    const skipped = new Set(result.skipped.map((s) => s.path));
    await session.commit(
      result.snapshotId,
      largeFiles.filter((f) => !skipped.has(f)),
    );
  }
  await journal.commit(plan.cursor as Record<string, unknown> | undefined, consumer);
  return result;
}

/** Large files of the parent snapshot inside the given folders (candidates for changed ranges), with
 *  their nodes in the parent. */
async function largeFilesIn(
  repo: Repository,
  parent: SnapshotEntry,
  dirs: string[],
): Promise<Map<string, TreeNode>> {
  const out = new Map<string, TreeNode>();
  for (const dir of dirs) {
    try {
      const { treeId } = await lookup(repo, parent, dir);
      if (!treeId) continue;
      for (const n of (await repo.loadTree(treeId)).nodes)
        if (n.type === 'file' && (n.size ?? 0) >= BLOCK_TRACKED_MIN_SIZE && n.rawName === undefined)
          out.set(path.join(dir, n.name), n);
    } catch {
      // a folder new since the parent: nothing to reuse there
    }
  }
  return out;
}
