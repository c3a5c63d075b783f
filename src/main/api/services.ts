/**
 * The small interfaces the API implementation needs (DESIGN.md §1 rule 3). They are wired in one place
 * (`wiring.ts`, used by the Electron entry and the headless server); tests pass in-memory fakes.
 */
import type {
  BackupOptions,
  BackupResult,
  RestoreOptions,
  RestoreResult,
  RetentionPolicy,
} from '../engine/operations.js';
import type { SnapshotEntry, Tree } from '../engine/repo/types.js';
import type { Job, RunDetail, RunSummary, Settings } from '../../shared/api.js';

/** An open repository, as far as the API uses it. */
export interface RepoHandle {
  listSnapshots(): Promise<SnapshotEntry[]>;
  loadTree(id: string): Promise<Tree>;
  close(): Promise<void>;
}

/** Lets a running backup be paused: the engine awaits `wait()` between files. */
export interface PauseGate {
  readonly paused: boolean;
  wait(): Promise<void>;
}

/** The engine's operations the API calls. */
export interface Engine {
  /** True when a repository exists at this location. */
  exists(location: string): Promise<boolean>;
  init(location: string, password: string): Promise<RepoHandle>;
  open(location: string, password: string): Promise<RepoHandle>;
  backup(repo: RepoHandle, opts: BackupOptions & { pauseGate?: PauseGate }): Promise<BackupResult>;
  restore(repo: RepoHandle, opts: RestoreOptions): Promise<RestoreResult>;
  /** Applies a retention policy after a run; absent: retention is not applied by the API. */
  forget?(repo: RepoHandle, policy: RetentionPolicy): Promise<void>;
  changePassword?(location: string, oldPassword: string, newPassword: string): Promise<void>;
  /** Bytes the repository takes, when it can be measured cheaply. */
  repoBytes?(location: string): Promise<number | null>;
  /** True when backup() honours `pauseGate`. */
  readonly supportsPause: boolean;
}

type MaybePromise<T> = T | Promise<T>;

export interface JobStore {
  listJobs(): MaybePromise<Job[]>;
  getJob(id: string): MaybePromise<Job | undefined>;
  saveJob(job: Job): MaybePromise<void>;
  deleteJob(id: string): MaybePromise<void>;
}

export interface RunStore {
  /** Inserts or replaces a run (with its samples, warnings and log). */
  saveRun(run: RunDetail): MaybePromise<void>;
  listRuns(filter: { jobId?: string; limit?: number }): MaybePromise<RunSummary[]>;
  getRun(id: string): MaybePromise<RunDetail | undefined>;
}

/** Repository passwords: never stored with the jobs. */
export interface SecretStore {
  getSecret(key: string): MaybePromise<string | undefined>;
  setSecret(key: string, value: string): MaybePromise<void>;
  deleteSecret(key: string): MaybePromise<void>;
}

export interface SettingsStore {
  getSettings(): MaybePromise<Settings>;
  saveSettings(settings: Settings): MaybePromise<void>;
}

/** Optional fast file index (the catalog); without it the API walks snapshot trees. */
export interface FileIndex {
  browse?(
    jobId: string,
    snapshotId: string,
    dirPath: string,
  ): MaybePromise<import('../../shared/api.js').BrowseEntry[] | null>;
  search?(
    jobId: string,
    query: string,
    limit: number,
  ): MaybePromise<import('../../shared/api.js').SearchHit[] | null>;
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
  secrets: SecretStore;
  settings: SettingsStore;
  fileIndex?: FileIndex;
  desktop?: Desktop;
  now?: () => number;
  info: {
    version: string;
    mode: 'electron' | 'browser';
    dataDir: string;
    defaultRepoDir: string;
    homeDir: string;
  };
}
