/**
 * The catalog's records: repositories, jobs, runs and their samples. These are plain data (JSON-safe)
 * so the API layer can send them to the UI as they are.
 */
import type { MemoryMode, RetentionPolicy } from '../operations.js';
import type { RequestLogSummary } from '../backend/requestlog/index.js';
import type { SnapshotMode, SnapshotReport } from '../snapshot/types.js';

/** When a job runs. Times are "HH:MM" in `timeZone` (default: the machine's zone). */
export type Schedule =
  | { kind: 'manual' }
  | { kind: 'hourly'; minute?: number; timeZone?: string }
  | { kind: 'every-hours'; hours: number; minute?: number; timeZone?: string }
  | { kind: 'daily'; times: string[]; timeZone?: string }
  /** days: 0 = Sunday … 6 = Saturday */
  | { kind: 'weekly'; days: number[]; time: string; timeZone?: string }
  | { kind: 'cron'; expressions: string[]; timeZone?: string };

export interface JobOptions {
  /** Read back and check the new snapshot after each backup. */
  verifyAfterBackup?: boolean;
  /** Verify by reading all data, not only the structure (slower). */
  verifyReadData?: boolean;
  /** Make every backup a "full" one (re-read everything) when the last full one is older than this. */
  fullEveryDays?: number;
  /** Run a missed scheduled backup once after sleep or shutdown (default true). */
  catchUp?: boolean;
  workers?: number;
  /** The engine's memory mode for this job's backups, restores and restore tests (absent: normal). */
  memory?: MemoryMode;
  readLimitBytesPerSec?: number;
  lowPriority?: boolean;
  /** Cut VM disks, databases and mail stores into fixed-size blocks (BackupOptions.blockFiles); absent: on. */
  blockFiles?: boolean;
  /** Restore tests after backups (schedule/restoreTests.ts); absent: none. */
  restoreTest?: RestoreTestSettings;
  tags?: string[];
  host?: string;
  /** Read the sources from a filesystem snapshot: where possible (absent), always (fail without), never. */
  snapshot?: SnapshotMode;
  /** Run before the scan (a failure fails the run) and after the run (its result in the environment). */
  preCommand?: string;
  postCommand?: string;
  /** How long each may take (default DEFAULT_HOOK_TIMEOUT_SEC). */
  hookTimeoutSec?: number;
}

/** When and how much a job's restore tests restore. */
export interface RestoreTestSettings {
  /** Test after a backup when the last test is at least this many days old (0: after every backup). */
  everyDays: number;
  /** Files drawn at random each time. */
  files: number;
  /** Where the temporary folder goes (default: the system's temporary folder). */
  tempDir?: string;
}

export interface JobSpec {
  name: string;
  repositoryId: number;
  sources: string[];
  excludes: string[];
  schedule: Schedule;
  retention: RetentionPolicy;
  compressionLevel: number;
  options: JobOptions;
  enabled: boolean;
}

export interface Job extends JobSpec {
  id: number;
  /** Stable tag written into this job's snapshots (snapshot.job). */
  key: string;
  createdAt: number;
  updatedAt: number;
  /** Scheduler bookkeeping: fire times up to here have been handled (ms since epoch). */
  schedCheckedAt: number | null;
}

export interface RepositorySpec {
  name: string;
  /** Location string (a folder path, `local:/path`, `s3:…`). */
  location: string;
  /** Backend options as plain JSON. Never secrets: those go through a SecretStore. */
  options: Record<string, unknown>;
  /** Prune (reclaim space) at most this often, in days (default 7; 0 = after every run). */
  pruneEveryDays?: number;
}

export interface RepositoryRecord extends RepositorySpec {
  id: number;
  pruneEveryDays: number;
  lastPruneAt: number | null;
  lastSyncAt: number | null;
  createdAt: number;
}

export type RunStatus =
  'queued' | 'running' | 'completed' | 'completed-with-warnings' | 'failed' | 'cancelled' | 'missed';

export type RunTrigger = 'manual' | 'schedule' | 'catch-up';

export interface RunRecord {
  id: number;
  jobId: number | null;
  kind: 'backup' | 'full' | 'missed';
  trigger: RunTrigger;
  status: RunStatus;
  scheduledFor: number | null;
  startedAt: number | null;
  endedAt: number | null;
  snapshotId: string | null;
  counters: Record<string, unknown>;
  error: { name: string; code: string; message: string } | null;
  verify: Record<string, unknown> | null;
  retention: Record<string, unknown> | null;
  /** What the run asked of its repository (getRun only; lists leave it out to stay light). */
  requests?: RequestLogSummary | null;
  /** Which sources were read from a filesystem snapshot, and why not the others (getRun only). */
  snapshots?: SnapshotReport | null;
}

/** One restore test (catalog/restoreTests.ts). */
export interface RestoreTestRecord {
  id: number;
  jobId: number | null;
  /** The backup run it followed (null: made on demand). */
  runId: number | null;
  repositoryId: number;
  snapshotId: string;
  trigger: 'schedule' | 'manual';
  /** passed: every file matched; failed: something did not restore or match; error: no test was made. */
  status: 'passed' | 'failed' | 'error';
  startedAt: number;
  endedAt: number;
  files: number;
  bytes: number;
  blockFiles: number;
  allBlockFiles: boolean;
  failures: { path: string; message: string }[];
  skipped: { path: string; reason: string }[];
  error: { name: string; code: string; message: string } | null;
}

export interface RunProblem {
  severity: 'warning' | 'error';
  path?: string;
  message: string;
  code?: string;
}

export interface RunSample {
  /** ms since the run started */
  t: number;
  readBps: number;
  writtenBps: number;
  filesPerSec: number;
  /** Bytes processed ÷ bytes stored so far (what dedup and compression save; 1 = nothing); 0 while
   *  nothing has been stored yet (as in the shared API's RunSample). */
  dedupRatio: number;
}
