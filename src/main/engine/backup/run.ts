/**
 * One backup's shared state, explicit: its options, the progress it reports (sent at most every 250 ms
 * and at each phase), the totals its snapshot records, the entries it skipped, the filesystem calls it
 * made, and where it reads its sources (the source views: every stage that touches the filesystem reads
 * `view.read(path)` and records what it finds under the original path). Every stage of the backup (./index.ts) gets this one object; nothing else is shared between them.
 */
import path from 'node:path';
import type { Repository } from '../repo/repository.js';
import type { DirSummary, SkippedEntry, TreeNode } from '../repo/types.js';
import { newBackupProgress, type BackupOptions, type BackupProgress } from '../operations.js';
import type { MassChangeWatch } from '../alarm/index.js';
import { sourceViewMap, type SourceViewMap } from './sourceView.js';

/** Counters of filesystem calls, for benchmarks of the scan. */
export interface ScanCounters {
  stat: number;
  readdir: number;
}

const sep = Buffer.from(path.sep);
/** A child's path: raw bytes, as the scan sees them. */
export const join = (dir: Buffer, name: Buffer) =>
  dir.length === 1 && dir[0] === sep[0] ? Buffer.concat([dir, name]) : Buffer.concat([dir, sep, name]);
/** A raw path as text (for logs, progress and the snapshot's skipped list). */
export const show = (p: Buffer) => p.toString('utf8');

export class BackupRun {
  readonly started = Date.now();
  readonly signal?: AbortSignal;
  readonly log: (line: string) => void;
  readonly skipped: SkippedEntry[] = [];
  readonly counters: ScanCounters = { stat: 0, readdir: 0 };
  readonly progress: BackupProgress = newBackupProgress();
  /** What the snapshot records of the whole tree (reused subtrees counted from their summaries). */
  readonly stats = { files: 0, dirs: 0, totalBytes: 0, filesUnchanged: 0 };
  /** The repository's counters when the run began: the run's own are the difference. */
  readonly statsAtStart: Repository['stats'];
  /** Recorded path → where it is read (a filesystem snapshot; ./sourceView.ts). */
  readonly view: SourceViewMap;
  /** The mass-change alarm, learning what changed from the walk (engine/alarm): set once the parent
   *  snapshot is known (none without one: nothing to compare with). */
  watch: MassChangeWatch | undefined;

  constructor(
    readonly repo: Repository,
    readonly opts: BackupOptions,
  ) {
    this.signal = opts.signal;
    this.log = opts.log ?? (() => {});
    this.statsAtStart = { ...repo.stats };
    this.view = sourceViewMap(opts.sourceViews);
  }

  /** Sends the progress (a copy) to the caller's sink. */
  readonly emit = (): void => {
    const progress = this.progress;
    progress.elapsedMs = Date.now() - this.started;
    progress.bytesNew = this.repo.stats.newBytes - this.statsAtStart.newBytes;
    progress.bytesStored = this.repo.stats.packedBytes - this.statsAtStart.packedBytes;
    this.opts.progress?.({ ...progress });
  };

  /** An entry left out of the snapshot, with why: listed in it, counted as an error, logged. */
  skip(p: string, err: unknown, reason?: string): void {
    const e = err as NodeJS.ErrnoException | undefined;
    const entry: SkippedEntry = { path: p, reason: reason ?? e?.message ?? String(err), code: e?.code };
    this.skipped.push(entry);
    this.progress.errors++;
    this.log(`skipped ${p}: ${entry.reason}`);
  }

  /** A reused subtree, counted from its summary without loading its trees. */
  countSummary(s: DirSummary): void {
    const { stats, progress } = this;
    stats.files += s.files;
    stats.dirs += s.dirs;
    stats.totalBytes += s.bytes;
    stats.filesUnchanged += s.files;
    progress.filesScanned += s.files + s.dirs;
    progress.filesDone += s.files;
    progress.bytesScanned += s.bytes;
    progress.bytesDone += s.bytes;
  }

  /** A previous snapshot's entry kept as it is. */
  countNode(n: TreeNode): void {
    if (n.type === 'file') this.countSummary({ files: 1, dirs: 0, bytes: n.size ?? 0 });
    else if (n.type === 'dir')
      this.countSummary({
        files: 0,
        dirs: 1,
        bytes: 0,
        ...(n.summary && { files: n.summary.files, dirs: n.summary.dirs + 1, bytes: n.summary.bytes }),
      });
    else this.progress.filesScanned++;
  }

  /** A file whose content is the previous snapshot's (same metadata). */
  countUnchangedFile(size: number): void {
    const { stats, progress } = this;
    stats.files++;
    stats.totalBytes += size;
    stats.filesUnchanged++;
    progress.filesDone++;
    progress.bytesDone += size;
  }
}
