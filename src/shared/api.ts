/**
 * The API contract between the UI and the engine (docs/architecture.md §1 rule 2): every call with its argument
 * and result types, every event, and the error shape. `src/main/api` implements it once; Electron IPC
 * (preload) and the browser-mode WebSocket transport are thin bindings of that implementation.
 *
 * Arguments are validated at the boundary with the zod schemas below (`argSchemas`), so a handler
 * never sees malformed input whichever transport it came through. Errors cross as `{name, code, message}`.
 *
 * This file is shared by main, preload and renderer: it imports nothing from Node or Electron.
 */
import { z } from 'zod';
import { API_EVENTS, API_METHODS } from './channels.js';
import { isLoopbackUrl } from './destination.js';

// ---------------------------------------------------------------------------------------------
// Errors

/** How an error crosses the boundary. `code` is stable (e.g. WRONG_PASSWORD, VALIDATION, NOT_FOUND). */
export interface WireError {
  name: string;
  code: string;
  message: string;
  /** For VALIDATION errors: the offending field paths and their messages. */
  issues?: { path: string; message: string }[];
}

/** An error received from the other side of the boundary, keeping its name and code. */
export class ApiError extends Error {
  readonly code: string;
  readonly issues?: { path: string; message: string }[];
  constructor(wire: WireError) {
    super(wire.message);
    this.name = wire.name;
    this.code = wire.code;
    this.issues = wire.issues;
  }
}

// ---------------------------------------------------------------------------------------------
// Schemas of the values the UI sends

export const excludePresetSchema = z.enum(['caches', 'temp', 'trash', 'node_modules', 'media']);
export type ExcludePreset = z.infer<typeof excludePresetSchema>;

const timeOfDay = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'use a time like 21:30');

export const scheduleSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('manual') }),
  z.object({ kind: z.literal('hourly'), minute: z.number().int().min(0).max(59) }),
  z.object({ kind: z.literal('every'), hours: z.number().int().min(1).max(168) }),
  z.object({ kind: z.literal('daily'), time: timeOfDay }),
  /** Custom cron expressions (made with the CLI); the wizard shows them but does not edit them. */
  z.object({ kind: z.literal('cron'), expressions: z.array(z.string().min(1)).min(1) }),
  z.object({
    kind: z.literal('weekly'),
    days: z.array(z.number().int().min(0).max(6)).min(1, 'pick at least one day'),
    time: timeOfDay,
  }),
]);
export type Schedule = z.infer<typeof scheduleSchema>;

const keep = z.number().int().min(0).max(10_000).optional();
export const retentionSchema = z.object({
  keepLast: keep,
  keepHourly: keep,
  keepDaily: keep,
  keepWeekly: keep,
  keepMonthly: keep,
  keepYearly: keep,
});
export type Retention = z.infer<typeof retentionSchema>;

export const localDestinationSchema = z.object({
  kind: z.literal('local'),
  path: z.string().trim().min(1, 'choose a destination folder'),
  /** Append-only repository: backups never delete or overwrite anything; pruning needs a separate
   *  maintenance password (chosen when the repository is created). */
  appendOnly: z.boolean().optional(),
});

/** S3 object lock of a repository's backup objects (chosen when the repository is created). */
export const objectLockSchema = z.enum(['governance', 'compliance']);

/**
 * An S3-compatible bucket. The secret access key is never part of a destination (nor of a job): it
 * travels beside it (`secretAccessKey` of jobs.create/jobs.update/destinations.test) and is kept in
 * the secret store, like the repository password.
 */
export const s3DestinationSchema = z
  .object({
    kind: z.literal('s3'),
    /** Scheme, host and port, e.g. https://s3.example.com or http://127.0.0.1:9000. */
    endpoint: z
      .string()
      .trim()
      .min(1, 'enter the address of the storage service')
      .refine((v) => /^https?:\/\/[^/\s]+\/?$/i.test(v), 'use an address like https://s3.example.com'),
    bucket: z
      .string()
      .trim()
      .regex(/^[a-z0-9][a-z0-9.\-_]{1,254}$/i, 'enter a bucket name (letters, digits, dots and dashes)'),
    /** Folder inside the bucket ('' for its root). */
    prefix: z
      .string()
      .trim()
      .default('')
      .refine((v) => !v.split('/').some((s) => s === '.' || s === '..'), 'a folder name cannot be . or ..'),
    region: z.string().trim().max(64).optional(),
    /** Path-style (https://host/bucket/key) rather than virtual-hosted (https://bucket.host/key). */
    pathStyle: z.boolean().default(true),
    accessKeyId: z.string().trim().min(1, 'enter the access key ID'),
    /** Allow plain http to a host that is not this computer (keys and data travel unprotected). */
    allowInsecureHttp: z.boolean().optional(),
    /** Lock every backup object against deletion for as long as the retention keeps it. */
    objectLock: objectLockSchema.optional(),
  })
  .refine((d) => !/^http:/i.test(d.endpoint) || d.allowInsecureHttp === true || isLoopbackUrl(d.endpoint), {
    path: ['endpoint'],
    message:
      'plain http sends keys and data unprotected: use https, or tick "allow insecure HTTP" for a trusted local network',
  });

export const destinationSchema = z.discriminatedUnion('kind', [localDestinationSchema, s3DestinationSchema]);
export type Destination = z.infer<typeof destinationSchema>;
export type S3Destination = z.infer<typeof s3DestinationSchema>;
/** The S3 secret key as the UI sends it beside a destination (blank on edit: keep the stored one). */
const secretAccessKey = z.string().max(1000).optional();

export const jobOptionsSchema = z.object({
  /** zstd level 0 (off) … 19. */
  compressionLevel: z.number().int().min(0).max(19).optional(),
  /** Read limit in MB/s; 0 or absent: unlimited. */
  readLimitMBps: z.number().min(0).max(100_000).optional(),
  workers: z.number().int().min(1).max(64).optional(),
  /** "Use less memory" (older PCs): backups and restores of the job run in the engine's low-memory mode
   *  (one worker, fewer buffers: slower); absent: normal. */
  memory: z.enum(['normal', 'low']).optional(),
  /** Read back and check the new snapshot after each backup. */
  verifyAfter: z.boolean().optional(),
  /** Back up VM disks, databases and mail stores (64 MiB+) in fixed-size blocks, so that incrementals
   *  read and store only the blocks that changed (absent: on). */
  blockFiles: z.boolean().optional(),
  /** Read the sources from a filesystem snapshot (btrfs, LVM, VSS, APFS): where possible (absent),
   *  always (the run fails without one), never. */
  snapshot: z.enum(['when-possible', 'always', 'never']).optional(),
  /** Shell commands run before the scan (a failure fails the run) and after the run (its result in
   *  TIDEMARK_RUN_STATUS); their output goes to the run log. */
  preCommand: z.string().trim().max(4000).optional(),
  postCommand: z.string().trim().max(4000).optional(),
  /** Seconds each command may take (default 600). */
  hookTimeoutSec: z.number().int().min(1).max(86_400).optional(),
  /** Restore tests after backups: a random sample of files restored into a temporary folder and
   *  compared with the stored hashes, every `everyDays` days (0: after every backup); absent: none. */
  restoreTest: z
    .object({
      everyDays: z.number().int().min(0, 'use 0 or more days').max(365),
      files: z.number().int().min(1, 'test at least one file').max(10_000),
    })
    .optional(),
});
export type JobOptions = z.infer<typeof jobOptionsSchema>;

const jobFields = {
  name: z.string().trim().min(1, 'give the job a name').max(100),
  sources: z.array(z.string().trim().min(1)).min(1, 'add at least one folder to back up'),
  excludes: z.array(z.string().trim().min(1)).default([]),
  excludePresets: z.array(excludePresetSchema).default([]),
  destination: destinationSchema,
  schedule: scheduleSchema,
  retention: retentionSchema.default({}),
  options: jobOptionsSchema.default({}),
};

export const jobInputSchema = z.object({
  ...jobFields,
  password: z.string().min(8, 'use a password of at least 8 characters'),
  /** The S3 secret access key, for an S3 destination (stored in the secret store, never in the job). */
  secretAccessKey,
  /** A new append-only repository's maintenance password (needed to prune; never stored). */
  maintenancePassword: z.string().min(8, 'use a maintenance password of at least 8 characters').optional(),
});
export type JobInput = z.input<typeof jobInputSchema>;

export const jobUpdateSchema = z.object(jobFields).partial();
export type JobUpdate = z.input<typeof jobUpdateSchema>;

export const overwritePolicySchema = z.enum(['skip', 'overwrite', 'keep-both']);
export type OverwritePolicy = z.infer<typeof overwritePolicySchema>;

export const settingsSchema = z.object({
  theme: z.enum(['system', 'light', 'dark']),
  notifications: z.boolean(),
  startAtLogin: z.boolean(),
  /** Defaults for new jobs and runs without their own values. */
  compressionLevel: z.number().int().min(0).max(19),
  readLimitMBps: z.number().min(0).max(100_000),
  workers: z.number().int().min(1).max(64),
});
export type Settings = z.infer<typeof settingsSchema>;

/** Speed-test patterns: the DiskSpd simulations and Tidemark's own on a folder; object patterns on S3. */
export const SPEED_TEST_DISK_PATTERNS = [
  'active-full',
  'synthetic-full',
  'reverse-incremental',
  'restore',
  'pack',
  'small-file-restore',
] as const;
export const SPEED_TEST_S3_PATTERNS = ['pack-put', 'pack-get', 'small-get'] as const;
export const speedTestPatternSchema = z.enum([...SPEED_TEST_DISK_PATTERNS, ...SPEED_TEST_S3_PATTERNS]);
export type SpeedTestPatternId = z.infer<typeof speedTestPatternSchema>;

export const speedTestSettingsSchema = z
  .object({
    patterns: z.array(speedTestPatternSchema).min(1, 'pick at least one pattern').optional(),
    /** Test file (folders): whole MiB, at least 16 (default 1024, like DiskSpd's -c1G). */
    fileSizeMiB: z.number().int().min(16, 'use a test file of at least 16 MiB').max(1_048_576).optional(),
    /** Block size of the DiskSpd patterns (presets 256 / 512 / 4096: WAN / LAN / local). */
    blockSizeKiB: z
      .number()
      .int()
      .min(4)
      .max(65536)
      .refine((v) => v % 4 === 0, 'use a multiple of 4 KiB')
      .optional(),
    /** Seconds per pattern. */
    durationSec: z.number().min(0.1).max(3600).optional(),
    threads: z.number().int().min(1).max(64).optional(),
    queueDepth: z.number().int().min(1).max(256).optional(),
    /** S3: requests in flight to measure at (default 1, 4, 8). */
    inFlight: z.array(z.number().int().min(1).max(64)).min(1).optional(),
  })
  .strict();
export type SpeedTestSettings = z.infer<typeof speedTestSettingsSchema>;

// ---------------------------------------------------------------------------------------------
// Values the engine sends

export type RunStatus =
  | 'queued'
  | 'running'
  | 'paused'
  | 'completed'
  | 'completed-with-warnings'
  | 'failed'
  | 'cancelled'
  | 'missed';

export type Health = 'ok' | 'warning' | 'error' | 'never-run';

export interface Job {
  id: string;
  name: string;
  sources: string[];
  excludes: string[];
  excludePresets: ExcludePreset[];
  destination: Destination;
  schedule: Schedule;
  retention: Retention;
  options: JobOptions;
  createdAt: string;
  /** The value this job writes into its snapshots' `job` field (which snapshots are the job's). */
  snapshotTag: string;
}

export interface RunCounters {
  filesScanned: number;
  bytesScanned: number;
  filesRead: number;
  bytesRead: number;
  filesDone: number;
  bytesDone: number;
  bytesNew: number;
  bytesStored: number;
  errors: number;
}

export interface RunSummary {
  id: string;
  jobId: string;
  jobName: string;
  kind: 'backup' | 'full-backup';
  status: RunStatus;
  startedAt: string;
  endedAt?: string;
  counters: RunCounters;
  snapshotId?: string;
  error?: WireError;
  warnings: number;
}

/** One point of the per-second throughput series of a run. */
export interface RunSample {
  /** Milliseconds since the run started. */
  t: number;
  readBps: number;
  writeBps: number;
  filesPerSec: number;
  /** Bytes processed ÷ bytes stored so far: what deduplication and compression save (1 = nothing);
   *  0 while nothing has been stored yet (not known). */
  dedupRatio: number;
}

export interface RunWarning {
  path: string;
  reason: string;
  code?: string;
}

/** One request a run made to its repository (save, load, list, …), as the run history keeps it. */
export interface RunRequestRecord {
  op: 'save' | 'load' | 'stat' | 'remove' | 'list' | 'exists' | 'init';
  type?: string;
  name?: string;
  /** Bytes sent (save) or received (load); objects seen (list). */
  bytes: number;
  /** Start (ms since the epoch) and duration (ms). */
  at: number;
  ms: number;
  ok: boolean;
  error?: WireError;
  /** A failed request that was attempted again afterwards. */
  retried?: boolean;
}

/** What a run asked of its repository: totals, the failed requests, the slowest, and the last ones. */
export interface RunRequests {
  requests: number;
  failed: number;
  retried: number;
  bytesUp: number;
  bytesDown: number;
  byOp: Record<RunRequestRecord['op'], number>;
  totalMs: number;
  slowest: RunRequestRecord[];
  failures: RunRequestRecord[];
  failuresDropped: number;
  recent: RunRequestRecord[];
}

/** How a run read one source (or a filesystem mounted inside one): from a snapshot, or live and why. */
export interface RunSourceRead {
  path: string;
  snapshot?: { kind: 'btrfs' | 'lvm-thin' | 'lvm' | 'vss' | 'apfs'; name: string; volume: string };
  reason?: string;
  nested?: boolean;
}

/** The filesystem snapshots of a run (History shows which sources came from one, and why not the rest). */
export interface RunSnapshots {
  mode: 'when-possible' | 'always' | 'never';
  sources: RunSourceRead[];
  /** Snapshots earlier runs left behind (a crash or kill) that this run removed. */
  leftoversRemoved?: string[];
}

export interface RunDetail extends RunSummary {
  samples: RunSample[];
  warningList: RunWarning[];
  log: string[];
  /** Repository requests of the run (runs recorded before this existed have none). */
  requests?: RunRequests;
  /** Which sources were read from a filesystem snapshot (runs without the snapshot step have none). */
  snapshots?: RunSnapshots;
}

export type Phase =
  | 'queued'
  | 'starting'
  | 'scanning'
  | 'backing-up'
  | 'finalizing'
  | 'retention'
  | 'indexing'
  | 'prune'
  | 'verify'
  | 'restore-test'
  | 'done';

/** A run in progress, as the Live run page and the tray show it. */
export interface LiveRun {
  run: RunSummary;
  phase: Phase;
  currentFile?: string;
  scanComplete: boolean;
  /** 0…1, or null while the total is unknown. */
  fraction: number | null;
  /** Estimated milliseconds left (from the previous run and the current rate), or null. */
  etaMs: number | null;
  elapsedMs: number;
  canPause: boolean;
  samples: RunSample[];
}

export interface JobSummary extends Job {
  lastRun?: RunSummary;
  /** ISO time of the next scheduled run, or null for manual jobs. */
  nextRunAt: string | null;
  missed: boolean;
  health: Health;
  snapshotCount: number;
  /** Bytes the repository takes on disk, when known. */
  repoBytes: number | null;
  running: boolean;
  /** The last repository check made in this session, if any. */
  lastCheck?: CheckSummary;
  /** The newest mass-change alarm of this job nobody dismissed (possible ransomware), if any. */
  alarm?: AlarmInfo;
  /** The job's newest restore test, if any. */
  lastRestoreTest?: RestoreTestSummary;
}

/**
 * A backup whose changes looked like mass encryption (ransomware): the snapshot is kept, and it and every
 * older snapshot of its computer are held from deletion until the user dismisses the alarm.
 */
export interface AlarmInfo {
  jobId: string;
  jobName: string;
  snapshotId: string;
  time: string;
  host: string;
  /** Files whose change looked like encryption, and how many raise the alarm. */
  suspicious: number;
  threshold: number;
  /** What changed, in sentences. */
  reasons: string[];
  /** Some of the files, with what happened to them. */
  examples: { path: string; what: string }[];
  /** Snapshots this alarm holds from deletion (itself and the older ones of its computer). */
  held: number;
  /** Set once the user dismissed it. */
  dismissed?: { at: string; host: string; note?: string };
}

/** A restore test: a sample of a snapshot restored into a temporary folder and compared with its hashes. */
export interface RestoreTestSummary {
  id: string;
  jobId: string;
  jobName: string;
  /** The backup run it followed; absent: made on demand. */
  runId?: string;
  snapshotId: string;
  trigger: 'schedule' | 'manual';
  /** passed: everything matched; failed: something did not restore correctly; error: no test was made. */
  status: 'passed' | 'failed' | 'error';
  startedAt: string;
  endedAt: string;
  files: number;
  bytes: number;
  blockFiles: number;
  /** Every block file of the snapshot was restored (the monthly test). */
  allBlockFiles: boolean;
  failures: { path: string; message: string }[];
  skipped: { path: string; reason: string }[];
  error?: WireError;
}

/** What "Clean up now" did: the job's retention applied, then the space no snapshot needs freed. */
export interface CleanUpSummary {
  cleanedAt: string;
  snapshotsKept: number;
  snapshotsRemoved: number;
  /** Kept by a mass-change alarm nobody dismissed, whatever the retention says. */
  snapshotsHeld: number;
  packsRemoved: number;
  packsRewritten: number;
  bytesFreed: number;
}

/** What a repair of a job's repository did (or, as a dry run, would do). */
export interface RepairSummary {
  repairedAt: string;
  dryRun: boolean;
  /** Nothing needed repairing. */
  clean: boolean;
  damagedPacks: number;
  missingPacks: number;
  damagedIndexFiles: number;
  /** Sound blobs copied out of damaged packs. */
  blobsSalvaged: number;
  /** Lost blobs read again from the files on this computer. */
  blobsFromSources: number;
  /** Blobs some snapshot needed that could not be saved. */
  blobsLost: number;
  snapshotsRebuilt: number;
  snapshotsRemoved: number;
  snapshotsRecovered: number;
  /** What could not be saved ("snapshot:/path"), capped; `lostCount` is exact. */
  lost: { where: string; kind: 'file' | 'folder' | 'snapshot'; reason: string }[];
  lostCount: number;
  /** The check made after the repair. */
  check?: CheckSummary;
}

/** A repair in progress. */
export interface RepairProgress {
  jobId: string;
  phase: 'packs' | 'snapshots' | 'sources' | 'rebuild' | 'writing' | 'cleanup' | 'check';
  done: number;
  total: number;
}

export interface SnapshotInfo {
  id: string;
  time: string;
  host: string;
  paths: string[];
  tags: string[];
  files: number;
  totalBytes: number;
  newBytes: number;
  /** This backup raised a mass-change alarm (its changes looked like encryption). */
  suspect?: boolean;
}

/** A computer that has written snapshots into a repository. */
export interface SnapshotHost {
  host: string;
  /** How many snapshots it has there (of any job). */
  snapshots: number;
  /** Time of its newest snapshot. */
  latest: string;
  /** The computer this app runs on. */
  thisComputer: boolean;
}

export type EntryType = 'file' | 'dir' | 'symlink' | 'other';

export interface BrowseEntry {
  name: string;
  /** Absolute path inside the snapshot (as backed up, '/'-separated). */
  path: string;
  type: EntryType;
  size: number;
  mtime: string;
}

export interface SearchHit {
  snapshotId: string;
  snapshotTime: string;
  path: string;
  type: EntryType;
  size: number;
  mtime: string;
}

export interface FileVersion {
  snapshotId: string;
  snapshotTime: string;
  size: number;
  mtime: string;
  /** True when the content differs from the next older version. */
  changed: boolean;
}

/** What a retention policy would do to a job's snapshots now (nothing is deleted by a preview). */
export interface RetentionPreview {
  keep: (SnapshotInfo & { reasons: string[] })[];
  remove: SnapshotInfo[];
}

/** The result of verifying a job's repository. */
/** Which host prunes a job's repository on schedule (a repository shared by several PCs). */
export interface MaintenanceInfo {
  owner: string;
  intervalMs: number;
  claimedAt: string;
  lastPruneAt: string | null;
  /** Another host takes over if the owner has not pruned by then. */
  takeoverAfter: string;
  /** The last change of owner that was not the first claim. */
  takeover?: { from: string; reason: string; at: string };
}

export interface CheckSummary {
  ok: boolean;
  checkedAt: string;
  readData: boolean;
  snapshots: number;
  packs: number;
  problems: { kind: string; object: string; message: string; affects: string[] }[];
  /** Packs left by interrupted runs (harmless; the next prune removes them). */
  unreferencedPacks: number;
}

/** One check of a destination test: passed, failed, a warning, or not tried (an earlier one failed). */
export interface DestinationCheck {
  /** reach, credentials, bucket, list, write, read, delete, clock, repository (S3);
   *  folder, writable, repository (local folder). */
  name: string;
  label: string;
  status: 'passed' | 'failed' | 'warning' | 'skipped';
  message: string;
  /** The engine's error code when it failed (e.g. S3_WRONG_KEYS, S3_ACCESS_DENIED). */
  code?: string;
}

/** What `destinations.test` found out by really talking to the destination. */
export interface DestinationTestResult {
  /** True when every required check passed (warnings allowed). */
  ok: boolean;
  /** Readable form of the destination (host/bucket/prefix, or the folder). */
  location: string;
  checks: DestinationCheck[];
  /** A Tidemark repository already exists there (its password will be asked); null: not known. */
  repositoryExists: boolean | null;
  /** The store's clock minus this computer's, in ms (S3 only, when known). */
  clockOffsetMs?: number;
  /** One sentence: all good, or the first thing that is wrong and what to do. */
  summary: string;
}

export interface SpeedTestLatency {
  /** Microseconds; null where no operation of that kind ran. */
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

/** What one pattern measured. */
export interface SpeedTestPatternResult {
  pattern: SpeedTestPatternId;
  label: string;
  blockSize: number;
  align: number;
  readPercent: number;
  random: boolean;
  threads: number;
  /** Operations (S3: requests) in flight per thread. */
  depth: number;
  elapsedMs: number;
  reads: number;
  writes: number;
  bytesRead: number;
  bytesWritten: number;
  mibps: number;
  readMibps: number;
  writeMibps: number;
  iops: number;
  latencyUs: SpeedTestLatency;
  readLatencyUs: SpeedTestLatency;
  writeLatencyUs: SpeedTestLatency;
  /** Folders: whether the caches were bypassed (O_DIRECT …), by which engine, and why not. */
  direct?: boolean;
  engine?: 'aio' | 'threads' | 'node' | 's3';
  note?: string;
}

export interface SpeedTestSample {
  /** ms since the test started */
  t: number;
  pattern: SpeedTestPatternId;
  mibps: number;
  iops: number;
}

/** A time at a measured rate, and where the rate comes from. */
export interface SpeedTestTime {
  ms: number;
  mibps: number;
  basis: SpeedTestPatternId;
  inFlight: number;
}

/** A finished backup run of the job and the rates it achieved. */
export interface SpeedTestRunRate {
  endedAt: string;
  durationMs: number;
  bytesRead: number;
  bytesStored: number;
  full: boolean;
  readMibps: number;
  storedMibps: number;
}

/** The verdict: this job's next full backup and a full restore at the measured rates, and its last runs. */
export interface SpeedTestEstimate {
  sourceBytes: number | null;
  /** False: the sources were too large to measure whole in time (sourceBytes is a lower bound). */
  sourceComplete: boolean;
  storedBytes: number | null;
  storedRatio: number | null;
  backup: SpeedTestTime | null;
  restore: SpeedTestTime | null;
  lastFull: SpeedTestRunRate | null;
  lastRun: SpeedTestRunRate | null;
}

/** A speed test as the catalog keeps it (history). */
export interface SpeedTestRecord {
  id: string;
  jobId?: string;
  /** The destination as people read it. */
  location: string;
  status: 'running' | 'completed' | 'failed' | 'cancelled';
  startedAt: string;
  endedAt?: string;
  settings: SpeedTestSettings & { patterns: SpeedTestPatternId[]; durationSec: number };
  results: SpeedTestPatternResult[];
  estimate?: SpeedTestEstimate;
  notes: string[];
  error?: WireError;
}

/** A speed test in progress (or just ended), with its live samples. */
export interface SpeedTestStatus extends SpeedTestRecord {
  phase: 'checking' | 'preparing' | 'testing' | 'cleaning' | 'done';
  pattern?: SpeedTestPatternId;
  /** S3: the in-flight count of the pattern running. */
  inFlight?: number;
  patternIndex: number;
  patternCount: number;
  /** 0…1 */
  fraction: number;
  samples: SpeedTestSample[];
}

export interface DirListing {
  path: string;
  parent: string | null;
  entries: { name: string; path: string }[];
  /** Shortcuts shown at the top of the browser (home, drives, mounts). */
  roots: { label: string; path: string }[];
}

export interface RestoreStatus {
  id: string;
  jobId: string;
  snapshotId: string;
  target: string;
  status: 'running' | 'completed' | 'completed-with-errors' | 'failed' | 'cancelled';
  filesTotal: number;
  bytesTotal: number;
  filesDone: number;
  bytesDone: number;
  skipped: number;
  /** The first errors (up to 1000: the app keeps no more); `errorCount` counts them all. */
  errors: { path: string; message: string }[];
  errorCount?: number;
  error?: WireError;
}

export interface AppInfo {
  version: string;
  mode: 'electron' | 'browser';
  platform: string;
  dataDir: string;
  defaultRepoDir: string;
  homeDir: string;
  /** True when a native folder picker exists (Electron); otherwise the UI uses fs.listDirs. */
  nativePicker: boolean;
  /** The change tracking in effect (absent where no tracker runs, e.g. with a test engine). */
  tracking?: {
    folders: number;
    /** fanotify / inotify / usn, or null: backups scan everything. */
    journal: string | null;
    blockLevel: boolean;
    blockReason?: string;
  };
}

// ---------------------------------------------------------------------------------------------
// Calls: one schema per call for its arguments; result types in ApiResults

const id = z.string().min(1).max(200);
/** An append-only repository's maintenance password, for a call that deletes (never stored). */
const maintenancePassword = z.string().min(1).max(1000).optional();
const none = z.object({}).strict();
/**
 * Whose snapshots a snapshots.* call works on: absent, the job's own; a host name, every snapshot that
 * computer wrote into the job's repository (whatever job wrote it).
 */
const snapshotHost = z.string().min(1).max(255).optional();

export const argSchemas = {
  'app.info': none,
  'settings.get': none,
  'settings.update': settingsSchema.partial().strict(),
  'fs.listDirs': z.object({ path: z.string().optional() }).strict(),
  'fs.pickFolder': z.object({ title: z.string().optional() }).strict(),
  'jobs.list': none,
  'jobs.get': z.object({ id }).strict(),
  'jobs.create': jobInputSchema,
  'jobs.update': z.object({ id, changes: jobUpdateSchema, secretAccessKey }).strict(),
  'jobs.remove': z.object({ id }).strict(),
  'jobs.runNow': z.object({ id, full: z.boolean().optional() }).strict(),
  'jobs.changePassword': z
    .object({
      id,
      oldPassword: z.string().min(1),
      newPassword: z.string().min(8, 'use at least 8 characters'),
    })
    .strict(),
  'jobs.previewRetention': z.object({ id, retention: retentionSchema }).strict(),
  'jobs.check': z.object({ id, readData: z.boolean().optional() }).strict(),
  'jobs.maintenance': z.object({ id }).strict(),
  /** A restore test of the job's newest snapshot now (`allBlockFiles`: every block file too). */
  'jobs.testRestore': z.object({ id, allBlockFiles: z.boolean().optional() }).strict(),
  /** Repairs the job's repository (waits for nothing: fails while a backup holds it). */
  'jobs.repair': z.object({ id, dryRun: z.boolean().optional(), maintenancePassword }).strict(),
  /** Applies the job's retention now and frees the space no snapshot needs (an append-only repository:
   *  with its maintenance password). */
  'jobs.cleanUp': z.object({ id, maintenancePassword }).strict(),
  'restoreTests.list': z
    .object({ jobId: id.optional(), limit: z.number().int().min(1).max(1000).optional() })
    .strict(),
  /** Tries a destination before it is saved. On the edit page, a blank secret with `jobId` uses the stored one. */
  'destinations.test': z
    .object({ destination: destinationSchema, secretAccessKey, jobId: id.optional() })
    .strict(),
  'runs.list': z
    .object({ jobId: id.optional(), limit: z.number().int().min(1).max(1000).optional() })
    .strict(),
  'runs.get': z.object({ id }).strict(),
  'runs.live': none,
  'runs.pause': z.object({ id }).strict(),
  'runs.resume': z.object({ id }).strict(),
  'runs.cancel': z.object({ id }).strict(),
  /** The computers that have snapshots in the job's repository (a repository shared by several PCs). */
  'snapshots.hosts': z.object({ jobId: id }).strict(),
  'snapshots.list': z.object({ jobId: id, host: snapshotHost }).strict(),
  'snapshots.browse': z.object({ jobId: id, snapshotId: id, path: z.string(), host: snapshotHost }).strict(),
  'snapshots.search': z
    .object({
      jobId: id,
      query: z.string().min(1).max(200),
      limit: z.number().int().min(1).max(5000).optional(),
      host: snapshotHost,
    })
    .strict(),
  'snapshots.versions': z.object({ jobId: id, path: z.string().min(1), host: snapshotHost }).strict(),
  'restore.start': z
    .object({
      jobId: id,
      snapshotId: id,
      paths: z.array(z.string().min(1)).min(1, 'select something to restore'),
      target: z.discriminatedUnion('kind', [
        z.object({ kind: z.literal('original') }),
        z.object({
          kind: z.literal('folder'),
          path: z.string().trim().min(1, 'choose a folder to restore into'),
        }),
      ]),
      overwrite: overwritePolicySchema,
    })
    .strict(),
  'restore.get': z.object({ id }).strict(),
  'restore.cancel': z.object({ id }).strict(),
  /** Mass-change alarms of one job or of all jobs (by default only those nobody dismissed). */
  'alarms.list': z.object({ jobId: id.optional(), includeDismissed: z.boolean().optional() }).strict(),
  /** The user says the changes were theirs: retention applies to the held snapshots again. */
  'alarms.dismiss': z.object({ jobId: id, snapshotId: id, note: z.string().max(500).optional() }).strict(),
  /** Starts a speed test of a destination (before it is saved, or a job's: `jobId` gives the estimate its
   *  sources and last runs, and lends a blank secret the stored one). `sources`: a new job's folders. */
  'speedtests.start': z
    .object({
      destination: destinationSchema,
      secretAccessKey,
      jobId: id.optional(),
      sources: z.array(z.string().trim().min(1)).max(1000).optional(),
      settings: speedTestSettingsSchema.default({}),
    })
    .strict(),
  'speedtests.get': z.object({ id }).strict(),
  'speedtests.cancel': z.object({ id }).strict(),
  /** Past speed tests of a destination (or of a job's destination), newest first. */
  'speedtests.history': z
    .object({
      destination: destinationSchema.optional(),
      jobId: id.optional(),
      limit: z.number().int().min(1).max(500).optional(),
    })
    .strict(),
} as const;

export type ApiMethod = keyof typeof argSchemas;
export const apiMethods: readonly ApiMethod[] = API_METHODS;
// compile-time check: the name list in channels.ts is exactly the contract's calls
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const _methodsMatch: Same<(typeof API_METHODS)[number], ApiMethod> = true;
void _methodsMatch;

export type ApiArgs = { [M in ApiMethod]: z.input<(typeof argSchemas)[M]> };
/** Arguments after validation (defaults applied). */
export type ApiParsedArgs = { [M in ApiMethod]: z.output<(typeof argSchemas)[M]> };

export interface ApiResults {
  'app.info': AppInfo;
  'settings.get': Settings;
  'settings.update': Settings;
  'fs.listDirs': DirListing;
  'fs.pickFolder': string | null;
  'jobs.list': JobSummary[];
  'jobs.get': JobSummary;
  'jobs.create': JobSummary;
  'jobs.update': JobSummary;
  'jobs.remove': { removed: true };
  'jobs.runNow': RunSummary;
  'jobs.changePassword': { changed: true };
  'jobs.previewRetention': RetentionPreview;
  'jobs.check': CheckSummary;
  'jobs.maintenance': MaintenanceInfo | null;
  'jobs.testRestore': RestoreTestSummary;
  'jobs.repair': RepairSummary;
  'jobs.cleanUp': CleanUpSummary;
  'restoreTests.list': RestoreTestSummary[];
  'destinations.test': DestinationTestResult;
  'runs.list': RunSummary[];
  'runs.get': RunDetail;
  'runs.live': LiveRun[];
  'runs.pause': LiveRun;
  'runs.resume': LiveRun;
  'runs.cancel': { cancelled: true };
  'snapshots.hosts': SnapshotHost[];
  'snapshots.list': SnapshotInfo[];
  'snapshots.browse': BrowseEntry[];
  'snapshots.search': SearchHit[];
  'snapshots.versions': FileVersion[];
  'restore.start': RestoreStatus;
  'restore.get': RestoreStatus;
  'restore.cancel': { cancelled: true };
  'alarms.list': AlarmInfo[];
  'alarms.dismiss': AlarmInfo;
  'speedtests.start': SpeedTestStatus;
  'speedtests.get': SpeedTestStatus;
  'speedtests.cancel': { cancelled: true };
  'speedtests.history': SpeedTestRecord[];
}

// ---------------------------------------------------------------------------------------------
// Events (engine → UI)

export interface ApiEvents {
  /** A run started, moved, or changed status; at least once a second while running. */
  'run.progress': LiveRun;
  /** A run ended (any final status, including 'missed'). */
  'run.finished': RunSummary;
  'jobs.changed': { jobId: string | null };
  'restore.progress': RestoreStatus;
  'settings.changed': Settings;
  /** A backup's changes looked like mass encryption (possible ransomware). */
  'alarm.raised': AlarmInfo;
  /** A restore test ended (after a backup or on demand), whatever its verdict. */
  'restoreTest.finished': RestoreTestSummary;
  'repair.progress': RepairProgress;
  /** A speed test moved (at most a few times a second) or ended. */
  'speedtest.progress': SpeedTestStatus;
}
export type ApiEvent = keyof ApiEvents;
export const apiEvents: readonly ApiEvent[] = API_EVENTS;
const _eventsMatch: Same<(typeof API_EVENTS)[number], ApiEvent> = true;
void _eventsMatch;

/** What a transport needs from the implementation, and what the renderer's client offers. */
export interface ApiClient {
  call<M extends ApiMethod>(method: M, args: ApiArgs[M]): Promise<ApiResults[M]>;
  on<E extends ApiEvent>(event: E, listener: (payload: ApiEvents[E]) => void): () => void;
}

/** The shape `window.tidemark` has in Electron (exposed by the preload script). */
export interface PreloadBridge {
  call(
    method: string,
    args: unknown,
  ): Promise<{ ok: true; result: unknown } | { ok: false; error: WireError }>;
  on(event: string, listener: (payload: unknown) => void): () => void;
  readonly platform: string;
}

// ---------------------------------------------------------------------------------------------
// The wire protocol of the browser-mode WebSocket transport

export type WsClientMessage = { id: number; method: string; args: unknown };
export type WsServerMessage =
  | { id: number; ok: true; result: unknown }
  | { id: number; ok: false; error: WireError }
  | { event: string; payload: unknown };

/** Exclusion patterns of the presets (minimatch globs, matched against paths). */
export const excludePresetPatterns: Record<ExcludePreset, { label: string; patterns: string[] }> = {
  caches: {
    label: 'Caches',
    patterns: ['**/.cache', '**/Cache', '**/Caches', '**/*.cache', '**/__pycache__'],
  },
  temp: {
    label: 'Temporary files',
    patterns: ['**/*.tmp', '**/*.temp', '**/~$*', '**/*.swp', '**/.~lock.*'],
  },
  trash: {
    label: 'Trash',
    patterns: ['**/.Trash', '**/.Trash-*', '**/$RECYCLE.BIN', '**/.local/share/Trash'],
  },
  node_modules: {
    label: 'Build folders (node_modules, target)',
    patterns: ['**/node_modules', '**/target/debug'],
  },
  media: { label: 'Large media (*.iso, *.vmdk)', patterns: ['**/*.iso', '**/*.vmdk', '**/*.vdi'] },
};
