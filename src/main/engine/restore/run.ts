/**
 * One restore's shared state, explicit: its options and target, the progress it reports (at most every
 * 250 ms and at each phase), the errors it collects, its totals, and what it keeps to the end (folders
 * and links, for their metadata). Every stage of the restore (./index.ts) gets this one object.
 */
import path from 'node:path';
import type { RestoreError, RestoreOptions, RestoreProgress } from '../operations.js';
import type { PlannedDir, PlannedFile, PlannedHardlink, PlannedLink } from './plan.js';

export const SEP = Buffer.from(path.sep);

export class RestoreRun {
  readonly started = Date.now();
  readonly signal?: AbortSignal;
  readonly policy: NonNullable<RestoreOptions['overwrite']>;
  /** The target folder, as raw bytes and as latin1 text (the way paths are kept here). */
  readonly target: Buffer;
  readonly targetPath: string;
  /** The snapshot folder restored as the target (relativeTo), '/' for all of it. */
  readonly strip: string;
  readonly isRoot = process.getuid?.() === 0;
  readonly errors: RestoreError[] = [];
  readonly progress: RestoreProgress = {
    phase: 'planning',
    filesTotal: 0,
    bytesTotal: 0,
    filesDone: 0,
    bytesDone: 0,
    errors: 0,
    elapsedMs: 0,
  };
  /** Every folder, for its metadata at the end. */
  readonly dirs: PlannedDir[] = [];
  /** Links are made at the end. */
  readonly symlinks: PlannedLink[] = [];
  readonly hardlinks: PlannedHardlink[] = [];
  /** Files the overwrite policy left as they were. */
  skippedCount = 0;
  /** Exact totals as walked (the progress shows folders' summaries ahead of the walk). */
  walkedFiles = 0;
  walkedBytes = 0;
  /** Files decided to be written, and those of them that failed. */
  readonly chosen = { files: 0, bytes: 0 };
  readonly failedTotals = { files: 0, bytes: 0 };

  constructor(readonly opts: RestoreOptions) {
    this.signal = opts.signal;
    this.policy = opts.overwrite ?? 'overwrite';
    this.target = Buffer.from(path.resolve(opts.target));
    this.targetPath = this.target.toString('latin1');
    this.strip = opts.relativeTo ? path.posix.resolve('/', opts.relativeTo) : '/';
  }

  /** Sends the progress (a copy) to the caller's sink. */
  readonly emit = (): void => {
    this.progress.elapsedMs = Date.now() - this.started;
    this.progress.errors = this.errors.length;
    this.opts.progress?.({ ...this.progress });
  };

  /** A planned file's path in the snapshot (what errors and the progress show): its target path is the
   *  target folder and then its names from the snapshot, below `strip`. */
  displayOf(f: PlannedFile): string {
    const { strip } = this;
    const rest = f.abs.subarray(this.target.length + SEP.length).toString();
    return (strip === '/' ? '' : strip) + '/' + (path.sep === '/' ? rest : rest.split(path.sep).join('/'));
  }

  /** A file that cannot be restored (its first reason is kept and reported by name). */
  fail(f: PlannedFile, message: string, code = 'CORRUPT_OBJECT'): void {
    if (f.failed) return;
    f.failed = message;
    if (f.chosen) {
      this.failedTotals.files++;
      this.failedTotals.bytes += f.size;
    }
    const shown = this.displayOf(f);
    this.errors.push({ path: shown, code, message: `cannot restore ${shown}: ${message}` });
  }
}
