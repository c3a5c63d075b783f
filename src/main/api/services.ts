/**
 * The small interfaces the API implementation needs (docs/architecture.md §1 rule 3). They are wired in one place
 * (`wiring.ts`, used by the Electron entry and the headless server); tests pass in-memory fakes.
 */
import type {
  BackupOptions,
  BackupResult,
  CheckReport,
  RestoreOptions,
  RestoreResult,
  RetentionPolicy,
} from '../engine/operations.js';
import type { SnapshotEntry, Tree } from '../engine/repo/types.js';
import type { AlarmDismissal } from '../engine/repo/holds.js';
import type { Immutability, ImmutabilityOptions } from '../engine/repo/immutability.js';
import type { BackendOptions } from '../engine/backend/open.js';
import type { RestoreTestOptions, RestoreTestResult } from '../engine/restoretest/index.js';
import type { RepairOptions, RepairReport } from '../engine/repair/index.js';
import type { AppInfo } from '../../shared/api.js';
import type { RunSpeedTest, SpeedTestStore } from './speedtests.js';
import type {
  BrowseEntry,
  CleanUpSummary,
  FileVersion,
  Job,
  LiveRun,
  MaintenanceInfo,
  RestoreTestSummary,
  RunDetail,
  RunSummary,
  SearchHit,
  Settings,
} from '../../shared/api.js';

/** An open repository, as far as the API uses it. */
export interface RepoHandle {
  listSnapshots(): Promise<SnapshotEntry[]>;
  loadTree(id: string): Promise<Tree>;
  close(): Promise<void>;
  /** The repository's protection (S3 object lock, append-only), when it has any. */
  readonly immutability?: Immutability;
  /** Dismissals of mass-change alarms (repo/holds.ts); absent: none. */
  listDismissals?(): Promise<AlarmDismissal[]>;
  /** Dismisses the alarm of a suspect snapshot; absent: this engine cannot. */
  dismissAlarm?(snapshot: SnapshotEntry, opts: { note?: string }): Promise<AlarmDismissal>;
  /** Catches up with what others wrote since it was opened (their new blobs); absent: the API reopens it. */
  refresh?(): Promise<void>;
}

/**
 * The engine's operations the API calls. `options` are the backend options of the location (for S3:
 * the access key ID and, from the secret store, the secret key; see destination.ts).
 */
export interface Engine {
  /** True when a repository exists at this location. */
  exists(location: string, options?: BackendOptions): Promise<boolean>;
  /** Creates a repository; `protect` chooses S3 object lock or append-only (repo/immutability.ts). */
  init(
    location: string,
    password: string,
    options?: BackendOptions,
    protect?: ImmutabilityOptions,
  ): Promise<RepoHandle>;
  open(location: string, password: string, options?: BackendOptions): Promise<RepoHandle>;
  backup(repo: RepoHandle, opts: BackupOptions): Promise<BackupResult>;
  restore(repo: RepoHandle, opts: RestoreOptions): Promise<RestoreResult>;
  /** Applies a retention policy after a run; absent: retention is not applied by the API. */
  forget?(repo: RepoHandle, policy: RetentionPolicy): Promise<void>;
  changePassword?(
    location: string,
    oldPassword: string,
    newPassword: string,
    options?: BackendOptions,
  ): Promise<void>;
  /** Bytes the repository takes, when it can be measured cheaply. */
  repoBytes?(location: string): Promise<number | null>;
  /** Verifies a repository (structure, or every byte with readData). */
  check?(repo: RepoHandle, opts: { readData: boolean; signal?: AbortSignal }): Promise<CheckReport>;
  /** Who prunes the repository on schedule (null: nobody yet); absent: the engine cannot tell. */
  maintenance?(repo: RepoHandle): Promise<MaintenanceInfo | null>;
  /** Restores a sample of a snapshot into a temporary folder and compares it with its hashes. */
  restoreTest?(repo: RepoHandle, opts: RestoreTestOptions): Promise<RestoreTestResult>;
  /** Repairs a damaged repository (engine/repair). */
  repair?(repo: RepoHandle, opts: RepairOptions): Promise<RepairReport>;
  /** Lets an append-only repository's handle delete (its maintenance password); a no-op otherwise. */
  unlockMaintenance?(repo: RepoHandle, password: string): Promise<void>;
  /** Applies a job's retention policy now and removes the data no snapshot needs any more. */
  cleanUp?(
    repo: RepoHandle,
    opts: { retention: RetentionPolicy; job: string; signal?: AbortSignal },
  ): Promise<Omit<CleanUpSummary, 'cleanedAt'>>;
  /** True when backup() honours `pauseGate`. */
  readonly supportsPause: boolean;
}

type MaybePromise<T> = T | Promise<T>;

/** A job as the user configures it (what the wizard sends, minus the password). */
export type JobSpec = Omit<Job, 'id' | 'createdAt' | 'snapshotTag'>;

/**
 * Jobs and their secrets: the repository password and, for S3 destinations, the secret access key
 * (secrets never sit with the jobs themselves). `secretAccessKey` undefined on update: keep the stored one.
 */
export interface JobStore {
  listJobs(): MaybePromise<Job[]>;
  getJob(id: string): MaybePromise<Job | undefined>;
  createJob(spec: JobSpec, password: string, secretAccessKey?: string): MaybePromise<Job>;
  updateJob(id: string, spec: JobSpec, secretAccessKey?: string): MaybePromise<Job>;
  /** The stored S3 secret access key of the job's destination. */
  destinationSecret(id: string): MaybePromise<string | undefined>;
  deleteJob(id: string): MaybePromise<void>;
  jobPassword(id: string): MaybePromise<string | undefined>;
  setJobPassword(id: string, password: string): MaybePromise<void>;
}

export interface RunStore {
  listRuns(filter: { jobId?: string; limit?: number }): MaybePromise<RunSummary[]>;
  getRun(id: string): MaybePromise<RunDetail | undefined>;
}

/** Events a runner reports to the API (which forwards them to every transport). */
export type RunnerEmit = (
  event: 'run.progress' | 'run.finished' | 'jobs.changed' | 'restoreTest.finished',
  payload: unknown,
) => void;

/** Starts, watches, pauses and cancels runs, and schedules jobs. */
export interface Runner {
  start(job: Job, full: boolean): Promise<RunSummary>;
  liveRuns(): LiveRun[];
  pause(runId: string, paused: boolean): LiveRun;
  cancel(runId: string): void;
  isRunning(jobId: string): boolean;
  nextRunAt(job: Job): string | null;
  startScheduler(): void;
  close(): Promise<void>;
}

export interface SettingsStore {
  getSettings(): MaybePromise<Settings>;
  saveSettings(settings: Settings): MaybePromise<void>;
}

/** Optional fast file index (the catalog); without it the API walks snapshot trees. */
export interface FileIndex {
  /** null: the snapshot is not (yet) indexed. */
  browse(jobId: string, snapshotId: string, dirPath: string): MaybePromise<BrowseEntry[] | null>;
  search(jobId: string, query: string, limit: number): MaybePromise<SearchHit[] | null>;
  versions(jobId: string, path: string): MaybePromise<FileVersion[] | null>;
  /** Brings the index in line with the job's repository now (after a repair changed its snapshots). */
  resync?(jobId: string, repo: RepoHandle): Promise<void>;
}

/** Restore tests recorded where the scheduler records them (the catalog), and made through it. */
export interface RestoreTestService {
  /** A test of the job's newest snapshot now; announced with restoreTest.finished. */
  test(job: Job, opts: { allBlockFiles?: boolean }): Promise<RestoreTestSummary>;
  /** Newest first. */
  list(filter: { jobId?: string; limit?: number }): MaybePromise<RestoreTestSummary[]>;
}

/** Native affordances that exist only in Electron. */
export interface Desktop {
  pickFolder?(title?: string): Promise<string | null>;
  setStartAtLogin?(enabled: boolean): void;
}

export interface ApiServices {
  engine: Engine;
  jobs: JobStore;
  runs: RunStore;
  settings: SettingsStore;
  fileIndex?: FileIndex;
  /** Restore tests kept with the runs; absent: the API tests through `engine` and keeps them in memory. */
  restoreTests?: RestoreTestService;
  /** The runner; default: the API's own (RunManager over `engine`, with a simple timer scheduler). */
  runner?: (emit: RunnerEmit) => Runner;
  desktop?: Desktop;
  now?: () => number;
  info: {
    version: string;
    mode: 'electron' | 'browser';
    dataDir: string;
    defaultRepoDir: string;
    homeDir: string;
  };
  /** The change tracking in effect, when a tracker runs. */
  tracking?: () => NonNullable<AppInfo['tracking']>;
  /** Where finished speed tests are kept (default: in memory). */
  speedTests?: SpeedTestStore;
  /** The engine's speed test (default: engine/speedtest's runSpeedTest). */
  runSpeedTest?: RunSpeedTest;
}
