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

export interface TrackerServiceOptions {
  dataDir: string;
  log?: (line: string) => void;
  backends?: TrackerBackendName[];
}

export class TrackerService {
  private roots: string[] = [];
  private controller?: AbortController;
  private running?: Promise<unknown>;
  private current?: ChangeJournal;
  private ready?: Promise<void>;

  constructor(private readonly opts: TrackerServiceOptions) {}

  /** Tracks exactly these folders (the union of all jobs' sources); no folders stops tracking. */
  async setRoots(roots: string[]): Promise<void> {
    const next = [...new Set(roots.map((r) => path.resolve(r)))].sort();
    if (JSON.stringify(next) === JSON.stringify(this.roots) && (this.running || !next.length)) return;
    await this.stop();
    this.roots = next;
    if (!next.length) return;
    const controller = new AbortController();
    this.controller = controller;
    let markReady!: () => void;
    this.ready = new Promise((r) => (markReady = r));
    this.running = runTrackerDaemon({
      dataDir: this.opts.dataDir,
      roots: next,
      signal: controller.signal,
      backends: this.opts.backends,
      log: this.opts.log,
      onReady: ({ journal }) => {
        this.current = journal;
        markReady();
      },
    })
      .catch((err) => this.opts.log?.(`change tracker failed: ${(err as Error).message}`))
      .finally(() => markReady());
  }

  /** The journal of the running tracker, once it runs. */
  async journal(): Promise<ChangeJournal | undefined> {
    await this.ready;
    return this.current;
  }

  async stop(): Promise<void> {
    this.controller?.abort();
    await this.running;
    this.controller = undefined;
    this.running = undefined;
    this.current = undefined;
    this.ready = undefined;
  }
}

/**
 * Runs a backup planned from the change journal (level 2 of DESIGN.md §3), falling back to a full
 * scan with the reason. `consumer` names whose baseline the journal keeps (one per job).
 */
export async function journalBackup(
  journal: ChangeJournal | undefined,
  repo: Repository,
  opts: BackupOptions,
  consumer: string,
  run: (repo: Repository, opts: BackupOptions) => Promise<BackupRunResult> = backup,
): Promise<BackupRunResult> {
  if (!journal || opts.forceFull || opts.changeHint) {
    return run(repo, {
      ...opts,
      fullScanReason: opts.fullScanReason ?? (journal ? undefined : 'no change tracker is running'),
    });
  }
  const sources = normalizeSources(opts.paths);
  await repo.loadIndex(true);
  const parent = await findParent(repo, opts.host ?? os.hostname(), sources, opts.parent);
  const plan = await journal.planBackup(parent?.journalCursor ?? null, sources);
  opts.log?.(
    plan.changeHint
      ? `change journal: ${plan.changeHint.dirtyDirs.size} changed folders`
      : `full scan: ${plan.fullScanReason}`,
  );
  const result = await run(repo, {
    ...opts,
    ...(parent ? { parent: parent.id } : {}),
    changeHint: plan.changeHint,
    fullScanReason: plan.fullScanReason,
    journalCursor: plan.cursor as Record<string, unknown> | undefined,
  });
  await journal.commit(plan.cursor as Record<string, unknown> | undefined, consumer);
  return result;
}
