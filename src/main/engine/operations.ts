/**
 * Options, progress and results of the engine's long operations (backup, restore, check, forget,
 * prune). These are the types the CLI, the catalog/scheduler and the API layer build on; the
 * implementations live in backup/, restore/, check/ and repo/.
 *
 * Every long operation takes an AbortSignal and an injected progress sink (docs/architecture.md §1 rule 5).
 */
import type { ID, MassChangeVerdict, SnapshotEntry, SkippedEntry } from './repo/types.js';

/** A progress sink: called with a fresh counters object whenever something moved (throttle in the consumer). */
export type ProgressSink<P> = (progress: P) => void;

export type BackupPhase = 'starting' | 'scanning' | 'backing-up' | 'finalizing' | 'done';

export interface BackupProgress {
  phase: BackupPhase;
  /** Entries found by the scan so far (files, dirs, others) and the size of the files among them. */
  filesScanned: number;
  bytesScanned: number;
  /** Files whose content was read (changed/new) and the bytes read from the source. */
  filesRead: number;
  bytesRead: number;
  /** Files finished (read or reused). */
  filesDone: number;
  /** Bytes of those files (read or reused): the progress bar's numerator against bytesScanned. */
  bytesDone: number;
  /** Plaintext bytes of new (not deduplicated) chunks, and bytes written to the repository. */
  bytesNew: number;
  bytesStored: number;
  errors: number;
  currentFile?: string;
  /** True once the scan has finished, so bytesScanned is the total. */
  scanComplete: boolean;
  elapsedMs: number;
}

/** Changed byte ranges of large files: absolute path → ranges (ChangeHint.changedRanges). */
export type ChangedRanges = ReadonlyMap<string, { offset: number; length: number }[]>;

/**
 * What a change journal (src/main/tracking) proved changed since the parent snapshot. Without it the
 * backup does a full scan (level 3 of docs/architecture.md §3). With it, the scanner visits only dirty directories
 * (and their ancestors), stats only entries inside them, and reuses every other subtree ID unchanged.
 */
export interface ChangeHint {
  /** Absolute paths of directories in which an entry was created, deleted, renamed, or had its content
   *  or metadata changed since the parent snapshot's cursor. */
  dirtyDirs: ReadonlySet<string>;
  /** Absolute paths of directories whose whole subtree must be rescanned (e.g. moved in from elsewhere). */
  dirtyTrees?: ReadonlySet<string>;
  /** The journal cursor this backup is consistent with; recorded in the snapshot. */
  cursor: Record<string, unknown>;
  /** Changed byte ranges of large files (level 1, block tracking): absolute path → ranges. A file not in
   *  the map is read whole when it changed. May be a promise: the backup opens the repository and loads
   *  the previous snapshot's trees while the tracker syncs the filesystem and maps extents, and waits
   *  for the ranges only when a large file is about to be read. If it rejects, changed files are read
   *  whole (the error is logged). */
  changedRanges?: ChangedRanges | Promise<ChangedRanges | undefined>;
}

/** Progress counters at the start of a backup (the engine, the API's fake engine and tests share it). */
export function newBackupProgress(phase: BackupPhase = 'starting'): BackupProgress {
  return {
    phase,
    filesScanned: 0,
    bytesScanned: 0,
    filesRead: 0,
    bytesRead: 0,
    filesDone: 0,
    bytesDone: 0,
    bytesNew: 0,
    bytesStored: 0,
    errors: 0,
    scanComplete: false,
    elapsedMs: 0,
  };
}

/**
 * Where a backup reads a part of its sources from (a point-in-time filesystem snapshot, engine/snapshot/):
 * entries at or below `path` are read at the same place below `readFrom` and recorded under `path`, so a
 * snapshot's tree names the original paths. The deepest matching view wins (a filesystem mounted inside
 * a source has its own).
 */
export interface SourceView {
  /** The recorded (original) absolute path: a source, or a folder inside one. */
  path: string;
  /** The same folder inside the snapshot (equal to `path`: read live). */
  readFrom: string;
  /** Entries read there carry the snapshot's device number; they are recorded with the original's, so an
   *  unchanged file compares equal with the previous snapshot's (and block tracking's checks hold). */
  dev?: { snapshot: number; original: number };
}

/** How much memory a backup or restore may use: 'normal' (default) or 'low' (old PCs: slower). */
export type MemoryMode = 'normal' | 'low';

export interface BackupOptions {
  /** Change-journal hint (level 2); absent: full scan. Ignored with forceFull or when there is no parent. */
  changeHint?: ChangeHint;
  /** Why there is no changeHint (recorded in the snapshot's scanMode and the run log). */
  fullScanReason?: string;
  /** The journal cursor to record when the backup runs as a full scan while a tracker runs, so the next
   *  backup can be journal-driven from here. (With a changeHint, its cursor is recorded.) */
  journalCursor?: Record<string, unknown>;
  paths: string[];
  excludes?: string[];
  /** Read the sources from these views (see SourceView); absent: everything is read live. */
  sourceViews?: SourceView[];
  /** Absolute paths the backup leaves out without recording them as exclusions (the folder a filesystem
   *  snapshot is kept in, when it lies inside a source). */
  hiddenPaths?: string[];
  /** Makes the source views (takes the filesystem snapshots). Whoever runs the backup calls it once the
   *  change journal's cursor and the block tracker's bitmap for this backup are taken (tracking/service.ts),
   *  so every change after the snapshot is in the next backup's journal; `backup` itself only reads
   *  `sourceViews`. */
  prepareSourceViews?: () => Promise<{ views: SourceView[]; hidden: string[] } | undefined>;
  tags?: string[];
  job?: string;
  host?: string;
  /** Parent snapshot to compare with; default: the latest snapshot of the same host and paths. */
  parent?: ID;
  /** Re-read every file, ignoring the parent's metadata and any change tracking. */
  forceFull?: boolean;
  /** Number of CPU workers (default: number of cores). */
  workers?: number;
  /** How much memory the engine may use: 'normal' (default) or 'low' for machines short of memory (one
   *  worker, fewer buffers in flight, smaller caches: slower). Workers and budgets per mode: engine/pool/memory.ts. */
  memory?: MemoryMode;
  /** zstd level; 0 disables compression. */
  compressionLevel?: number;
  /** Read bandwidth limit in bytes per second (0/undefined: unlimited). */
  readLimitBytesPerSec?: number;
  /** Run at low CPU and I/O priority. */
  lowPriority?: boolean;
  /** Large files that change in place (VM disks, databases, mail stores) to cut into fixed-size blocks
   *  instead of content-defined chunks, so block-level tracking re-reads only the blocks that changed:
   *  file-name patterns (default DEFAULT_BLOCK_FILE_PATTERNS) and a minimum size (default 64 MiB).
   *  Absent or false: every file is cut into content-defined chunks. The app's jobs turn it on (a job
   *  option, on unless unticked), the CLI with --block-files. */
  blockFiles?: { patterns?: string[]; minSize?: number } | false;
  /** Block lists of at least this many blocks are stored in two parts (repo/tree.ts; default
   *  LIST_IN_PARTS_FROM, 32 Ki blocks). For tests. */
  listInPartsFrom?: number;
  /** A whole read of a block file is shared by the workers in stripes of this many bytes (default
   *  STRIPE_BYTES, 16 MiB; a file of fewer than two stripes per worker is read by one). For tests. */
  stripeBytes?: number;
  /** How long to wait for a prune's lock to go away before failing (default 10 minutes). */
  lockWaitMs?: number;
  /** Pause: the backup awaits `wait()` before each file and folder it starts (work in flight finishes). */
  pauseGate?: { wait(): Promise<void> };
  signal?: AbortSignal;
  progress?: ProgressSink<BackupProgress>;
  /** Receives one line per notable event (fallbacks, skipped files) for the run log. */
  log?: (line: string) => void;
}

export interface BackupResult {
  snapshotId: ID;
  snapshot: SnapshotEntry;
  skipped: SkippedEntry[];
  /** 'completed' or 'completed-with-warnings' (some entries were skipped). */
  status: 'completed' | 'completed-with-warnings';
  /** The mass-change alarm's verdict (also in snapshot.massChange): present when there was a parent
   *  snapshot to compare with; `suspect` when the changes look like mass encryption (engine/alarm). */
  massChange?: MassChangeVerdict;
}

export type OverwritePolicy = 'skip' | 'overwrite' | 'keep-both' | 'if-newer';

export interface RestoreProgress {
  phase: 'planning' | 'restoring' | 'metadata' | 'done';
  filesTotal: number;
  bytesTotal: number;
  filesDone: number;
  bytesDone: number;
  errors: number;
  currentFile?: string;
  elapsedMs: number;
}

export interface RestoreOptions {
  snapshot: ID;
  target: string;
  /** Paths inside the snapshot to restore (each with everything under it); default: everything. */
  include?: string[];
  overwrite?: OverwritePolicy;
  /** A folder inside the snapshot to strip from restored paths (restore its contents directly into target).
   *  Default: the snapshot's absolute paths are recreated under target (target "/" restores in place). */
  relativeTo?: string;
  workers?: number;
  /** How much memory the restore may use: 'normal' (default) or 'low' (one worker, fewer packs in flight,
   *  smaller buffers: slower). Workers and budgets per mode: engine/pool/memory.ts. */
  memory?: MemoryMode;
  /** The most file pieces (one per blob a file needs) a restore holds planned and not yet written
   *  (default: the memory mode's, engine/pool/memory.ts): at that bound it reads every pack planned so far
   *  before it plans more. */
  planLimit?: number;
  signal?: AbortSignal;
  progress?: ProgressSink<RestoreProgress>;
}

export interface RestoreError {
  path: string;
  message: string;
  code: string;
}

export interface RestoreResult {
  filesRestored: number;
  bytesRestored: number;
  skipped: number;
  errors: RestoreError[];
  /** Of bytesRestored, those written past the page cache (direct I/O: long runs of large files' pieces,
   *  where the target is on a local disk). */
  bytesWrittenDirect?: number;
  /** Bytes of pack ranges read past the page cache (direct I/O: a folder repository on a local disk). */
  bytesReadDirect?: number;
}

export interface CheckProblem {
  kind:
    | 'missing-pack'
    | 'corrupt-pack'
    | 'corrupt-blob'
    | 'missing-blob'
    | 'corrupt-index'
    | 'corrupt-snapshot'
    | 'corrupt-tree';
  object: string;
  message: string;
  /** Snapshot paths affected, as "snapshotId:/path". */
  affects: string[];
}

export interface CheckReport {
  ok: boolean;
  problems: CheckProblem[];
  /** Packs no index or snapshot references (left by an interrupted backup/prune; prune removes them). */
  unreferencedPacks: string[];
  unusedBlobs: number;
  snapshots: number;
  packs: number;
  blobs: number;
}

export interface RetentionPolicy {
  keepLast?: number;
  keepHourly?: number;
  keepDaily?: number;
  keepWeekly?: number;
  keepMonthly?: number;
  keepYearly?: number;
  /** Always keep snapshots carrying one of these tags. */
  keepTags?: string[];
}

export interface ForgetDecision {
  keep: { snapshot: SnapshotEntry; reasons: string[] }[];
  remove: SnapshotEntry[];
}

export interface PruneResult {
  packsRemoved: number;
  packsRewritten: number;
  bytesFreed: number;
  blobsRemoved: number;
  /** S3 object lock (repo/immutability.ts): current objects whose lock was extended; old versions
   *  deleted now that their lock ran out, and those still locked (kept until `lockedUntil`). The bytes
   *  of removed packs are only really freed when their old versions are purged. */
  objectLock?: {
    extended: number;
    purged: number;
    bytesPurged: number;
    locked: number;
    bytesLocked: number;
    lockedUntil: string | null;
  };
}
