/**
 * The catalog (engine/catalog) and scheduler (engine/schedule) behind the API's small interfaces, so
 * the app, the CLI and `tidemark scheduler` share one set of jobs, runs, samples and file index:
 * - CatalogJobs: JobStore + RunStore + FileIndex over the SQLite catalog and the secret store;
 * - CatalogRunner: Runner over the Scheduler/JobRunner, turning their run events into LiveRun updates.
 * Mapping notes: the API's string IDs are the catalog's numeric IDs as text; a job's destination is
 * its repository's location; exclusion presets are stored expanded into the job's patterns and
 * recognised again when read back.
 */
import path from 'node:path';
import type { Catalog, SnapshotRow } from '../engine/catalog/catalog.js';
import type {
  Job as CJob,
  RunRecord,
  RunSample as CSample,
  Schedule as CSchedule,
} from '../engine/catalog/types.js';
import { secretKeys, type SecretStore } from '../engine/catalog/secrets.js';
import { storeRepositorySecrets } from '../engine/schedule/engine.js';
import type { Scheduler } from '../engine/schedule/scheduler.js';
import type { BackupProgress } from '../engine/operations.js';
import {
  excludePresetPatterns,
  type BrowseEntry,
  type EntryType,
  type ExcludePreset,
  type FileVersion,
  type Job,
  type LiveRun,
  type Phase,
  type RunCounters,
  type RunDetail,
  type RunSample,
  type RunSummary,
  type Schedule,
  type SearchHit,
} from '../../shared/api.js';
import type { FileIndex, JobSpec, JobStore, Runner, RunnerEmit, RunStore } from './services.js';
import { ApiUsageError } from './errors.js';
import { restoreTestSummary } from './protection.js';
import { syncRepository } from '../engine/catalog/sync.js';
import type { RepoHandle } from './services.js';
import { emptyCounters } from './runner.js';
import {
  destinationLocation,
  destinationOf,
  destinationOptions,
  placeKey,
  placeKeyOf,
} from './destination.js';
import { describeDestination } from '../../shared/destination.js';
import { DEFAULT_COMPRESSION_LEVEL } from '../../shared/compression.js';
import { BoundedSeries, boundSeries, mergeRunSamples, RUN_SAMPLES_MAX } from '../../shared/series.js';
import { boundLog, MAX_RUN_WARNINGS } from './bounded.js';
import type { Destination } from '../../shared/api.js';

const iso = (ms: number | null | undefined) => new Date(ms ?? 0).toISOString();
const entryType = (t: string): EntryType => (t === 'file' || t === 'dir' || t === 'symlink' ? t : 'other');

export function toCatalogSchedule(s: Schedule): CSchedule {
  switch (s.kind) {
    case 'manual':
      return { kind: 'manual' };
    case 'hourly':
      return { kind: 'hourly', minute: s.minute };
    case 'every':
      return { kind: 'every-hours', hours: s.hours };
    case 'daily':
      return { kind: 'daily', times: [s.time] };
    case 'weekly':
      return { kind: 'weekly', days: s.days, time: s.time };
    case 'cron':
      return { kind: 'cron', expressions: s.expressions };
  }
}

export function fromCatalogSchedule(s: CSchedule): Schedule {
  switch (s.kind) {
    case 'manual':
      return { kind: 'manual' };
    case 'hourly':
      return { kind: 'hourly', minute: s.minute ?? 0 };
    case 'every-hours':
      return { kind: 'every', hours: s.hours };
    case 'daily':
      return s.times.length === 1
        ? { kind: 'daily', time: s.times[0] }
        : {
            kind: 'cron',
            expressions: s.times.map((t) => `${Number(t.split(':')[1])} ${Number(t.split(':')[0])} * * *`),
          };
    case 'weekly':
      return { kind: 'weekly', days: s.days, time: s.time };
    case 'cron':
      return { kind: 'cron', expressions: s.expressions };
  }
}

/** Splits stored patterns back into the presets they contain and the user's own patterns. */
export function splitExcludes(excludes: string[]): { presets: ExcludePreset[]; own: string[] } {
  const set = new Set(excludes);
  const presets = (Object.keys(excludePresetPatterns) as ExcludePreset[]).filter((p) =>
    excludePresetPatterns[p].patterns.every((x) => set.has(x)),
  );
  const taken = new Set(presets.flatMap((p) => excludePresetPatterns[p].patterns));
  return { presets, own: excludes.filter((x) => !taken.has(x)) };
}

function counters(c: Record<string, unknown> | null | undefined): RunCounters {
  const out = emptyCounters();
  for (const k of Object.keys(out) as (keyof RunCounters)[]) {
    const v = c?.[k];
    if (typeof v === 'number') out[k] = v;
  }
  return out;
}

const sample = (s: CSample): RunSample => ({
  t: s.t,
  readBps: s.readBps,
  writeBps: s.writtenBps,
  filesPerSec: s.filesPerSec,
  dedupRatio: s.dedupRatio,
});

export class CatalogJobs implements JobStore, RunStore, FileIndex {
  constructor(
    private catalog: Catalog,
    private secrets: SecretStore,
  ) {}

  private cjob(id: string): CJob | undefined {
    const n = Number(id);
    if (!Number.isInteger(n)) return undefined;
    try {
      return this.catalog.getJob(n);
    } catch {
      return undefined;
    }
  }

  toJob(j: CJob): Job {
    const repo = this.catalog.getRepository(j.repositoryId);
    const { presets, own } = splitExcludes(j.excludes);
    return {
      id: String(j.id),
      name: j.name,
      sources: j.sources,
      excludes: own,
      excludePresets: presets,
      destination: destinationOf(repo.location, repo.options ?? {}),
      schedule: fromCatalogSchedule(j.schedule),
      retention: j.retention,
      options: {
        compressionLevel: j.compressionLevel,
        readLimitMBps: j.options.readLimitBytesPerSec
          ? j.options.readLimitBytesPerSec / (1024 * 1024)
          : undefined,
        workers: j.options.workers,
        ...(j.options.memory === 'low' ? { memory: 'low' as const } : {}),
        verifyAfter: j.options.verifyAfterBackup,
        blockFiles: j.options.blockFiles,
        snapshot: j.options.snapshot,
        preCommand: j.options.preCommand,
        postCommand: j.options.postCommand,
        hookTimeoutSec: j.options.hookTimeoutSec,
        ...(j.options.restoreTest
          ? {
              restoreTest: { everyDays: j.options.restoreTest.everyDays, files: j.options.restoreTest.files },
            }
          : {}),
      },
      createdAt: iso(j.createdAt),
      snapshotTag: j.key,
    };
  }

  private spec(spec: JobSpec, repositoryId: number, current?: CJob) {
    const excludes = [
      ...spec.excludes,
      ...spec.excludePresets.flatMap((p) => excludePresetPatterns[p].patterns),
    ];
    return {
      name: spec.name,
      repositoryId,
      sources: spec.sources,
      excludes: [...new Set(excludes)],
      schedule: toCatalogSchedule(spec.schedule),
      retention: spec.retention,
      compressionLevel:
        spec.options.compressionLevel ?? current?.compressionLevel ?? DEFAULT_COMPRESSION_LEVEL,
      options: {
        ...(current?.options ?? {}),
        readLimitBytesPerSec: spec.options.readLimitMBps
          ? Math.round(spec.options.readLimitMBps * 1024 * 1024)
          : undefined,
        workers: spec.options.workers,
        memory: spec.options.memory === 'low' ? ('low' as const) : undefined,
        verifyAfterBackup: spec.options.verifyAfter,
        blockFiles: spec.options.blockFiles,
        snapshot: spec.options.snapshot,
        preCommand: spec.options.preCommand || undefined,
        postCommand: spec.options.postCommand || undefined,
        hookTimeoutSec: spec.options.hookTimeoutSec,
        // (a temporary folder chosen with the CLI is kept)
        restoreTest: spec.options.restoreTest
          ? { ...current?.options.restoreTest, ...spec.options.restoreTest }
          : undefined,
      },
      enabled: current?.enabled ?? true,
    };
  }

  /**
   * The repository record for a destination (a folder, or a bucket and prefix), created when new.
   * An S3 repository row keeps the location and the access key ID; its secret key goes to the
   * secret store (storeS3Secret), like the password.
   */
  private repositoryFor(destination: Destination, jobName: string): number {
    const key = placeKey(destination);
    const location = destinationLocation(destination);
    const options = destinationOptions(destination);
    const found = this.catalog
      .listRepositories()
      .find((r) => placeKeyOf(r.location, r.options ?? {}) === key);
    if (found) {
      if (
        destination.kind === 's3' &&
        (found.location !== location || JSON.stringify(found.options) !== JSON.stringify(options))
      )
        this.catalog.updateRepository(found.id, { location, options });
      return found.id;
    }
    const name =
      destination.kind === 'local'
        ? path.basename(destination.path) || jobName
        : describeDestination(destination);
    const taken = new Set(this.catalog.listRepositories().map((r) => r.name));
    let repoName = name;
    for (let i = 2; taken.has(repoName); i++) repoName = `${name} ${i}`;
    return this.catalog.addRepository({ name: repoName, location, options }).id;
  }

  private async storeS3Secret(repositoryId: number, secretAccessKey: string | undefined): Promise<void> {
    if (secretAccessKey)
      await storeRepositorySecrets(this.secrets, repositoryId, { options: { secretAccessKey } });
  }

  listJobs(): Job[] {
    return this.catalog.listJobs().map((j) => this.toJob(j));
  }
  getJob(id: string): Job | undefined {
    const j = this.cjob(id);
    return j && this.toJob(j);
  }
  async createJob(spec: JobSpec, password: string, secretAccessKey?: string): Promise<Job> {
    const repositoryId = this.repositoryFor(spec.destination, spec.name);
    await this.secrets.set(secretKeys.repositoryPassword(repositoryId), password);
    await this.storeS3Secret(repositoryId, secretAccessKey);
    return this.toJob(this.catalog.addJob(this.spec(spec, repositoryId)));
  }
  async updateJob(id: string, spec: JobSpec, secretAccessKey?: string): Promise<Job> {
    const cur = this.cjob(id);
    if (!cur) throw new ApiUsageError('NOT_FOUND', `no job with id ${id}`);
    const curRepo = this.catalog.getRepository(cur.repositoryId);
    const sameRepo = placeKeyOf(curRepo.location, curRepo.options ?? {}) === placeKey(spec.destination);
    // repositoryFor also refreshes the stored address details and key ID of the same bucket/prefix
    const repositoryId = this.repositoryFor(spec.destination, spec.name);
    if (!sameRepo) {
      const password = await this.secrets.get(secretKeys.repositoryPassword(cur.repositoryId));
      if (password !== undefined && !(await this.secrets.get(secretKeys.repositoryPassword(repositoryId))))
        await this.secrets.set(secretKeys.repositoryPassword(repositoryId), password);
      const oldSecret = await this.secrets.get(
        secretKeys.repositoryOption(cur.repositoryId, 'secretAccessKey'),
      );
      if (!secretAccessKey && oldSecret && spec.destination.kind === 's3')
        await this.storeS3Secret(repositoryId, oldSecret);
    }
    await this.storeS3Secret(repositoryId, secretAccessKey);
    return this.toJob(this.catalog.updateJob(cur.id, this.spec(spec, repositoryId, cur)));
  }
  deleteJob(id: string): void {
    const j = this.cjob(id);
    if (j) this.catalog.removeJob(j.id);
  }
  async jobPassword(id: string): Promise<string | undefined> {
    const j = this.cjob(id);
    return j ? this.secrets.get(secretKeys.repositoryPassword(j.repositoryId)) : undefined;
  }
  async destinationSecret(id: string): Promise<string | undefined> {
    const j = this.cjob(id);
    return j ? this.secrets.get(secretKeys.repositoryOption(j.repositoryId, 'secretAccessKey')) : undefined;
  }
  async setJobPassword(id: string, password: string): Promise<void> {
    const j = this.cjob(id);
    if (j) await this.secrets.set(secretKeys.repositoryPassword(j.repositoryId), password);
  }

  // ---- runs --------------------------------------------------------------------------------

  summary(r: RunRecord, problems?: number): RunSummary {
    const job = r.jobId !== null ? this.cjob(String(r.jobId)) : undefined;
    return {
      id: String(r.id),
      jobId: String(r.jobId ?? ''),
      jobName: job?.name ?? '(removed job)',
      kind: r.kind === 'full' ? 'full-backup' : 'backup',
      status: r.status,
      startedAt: iso(r.startedAt ?? r.scheduledFor),
      endedAt: r.endedAt !== null ? iso(r.endedAt) : undefined,
      counters: counters(r.counters),
      snapshotId: r.snapshotId ?? undefined,
      error: r.error ?? undefined,
      warnings: problems ?? this.catalog.runProblems(r.id).filter((p) => p.severity === 'warning').length,
    };
  }

  listRuns(filter: { jobId?: string; limit?: number }): RunSummary[] {
    const jobId = filter.jobId !== undefined ? Number(filter.jobId) : undefined;
    return this.catalog.listRuns({ jobId, limit: filter.limit }).map((r) => this.summary(r));
  }

  getRun(id: string): RunDetail | undefined {
    const n = Number(id);
    if (!Number.isInteger(n)) return undefined;
    let r: RunRecord;
    try {
      r = this.catalog.getRun(n);
    } catch {
      return undefined;
    }
    const problems = this.catalog.runProblems(n);
    return {
      ...this.summary(r, problems.filter((p) => p.severity === 'warning').length),
      samples: boundSeries(this.catalog.runSamples(n).map(sample), RUN_SAMPLES_MAX, mergeRunSamples),
      warningList: problems
        .slice(0, MAX_RUN_WARNINGS)
        .map((p) => ({ path: p.path ?? '', reason: p.message, code: p.code })),
      log: boundLog(this.catalog.runLog(n).map((l) => `${iso(l.t)} ${l.line}`)),
      ...(r.requests ? { requests: r.requests } : {}),
      ...(r.snapshots ? { snapshots: r.snapshots } : {}),
    };
  }

  // ---- file index --------------------------------------------------------------------------

  async resync(jobId: string, repo: RepoHandle): Promise<void> {
    const j = this.cjob(jobId);
    if (j) await syncRepository(this.catalog, j.repositoryId, repo);
  }

  private indexedSnapshot(jobId: string, snapshotId: string): SnapshotRow | undefined {
    const j = this.cjob(jobId);
    if (!j) return undefined;
    const row = this.catalog.getSnapshot(j.repositoryId, snapshotId);
    return row?.indexed ? row : undefined;
  }

  browse(jobId: string, snapshotId: string, dirPath: string): BrowseEntry[] | null {
    const row = this.indexedSnapshot(jobId, snapshotId);
    if (!row) return null;
    const list = this.catalog.files.list(row.id, dirPath.replace(/\\/g, '/') || '/');
    if (!list) return null;
    return list
      .map((e) => ({
        name: e.name,
        path: e.path,
        type: entryType(e.type),
        size: e.size ?? 0,
        mtime: iso(e.mtime),
      }))
      .sort((a, b) =>
        (a.type === 'dir') !== (b.type === 'dir')
          ? a.type === 'dir'
            ? -1
            : 1
          : a.name.localeCompare(b.name),
      );
  }

  /** The job's own snapshots in the catalog, or null while any of them is not indexed yet. */
  private jobSnapshots(jobId: string): SnapshotRow[] | null {
    const j = this.cjob(jobId);
    if (!j) return null;
    const rows = this.catalog.listSnapshots(j.repositoryId, { job: j.key });
    if (rows.length === 0 || rows.some((r) => !r.indexed)) return null; // the tree walker sees them all
    return rows;
  }

  search(jobId: string, query: string, limit: number): SearchHit[] | null {
    const rows = this.jobSnapshots(jobId);
    if (!rows) return null;
    const hits = this.catalog.files.search(query, { snapshots: rows.map((r) => r.id), limit });
    const byRow = new Map(rows.map((r) => [r.id, r]));
    return hits.flatMap((h) => {
      const snap = byRow.get(h.snapshots[0]);
      if (!snap) return [];
      return [
        {
          snapshotId: snap.snapId,
          snapshotTime: iso(snap.time),
          path: h.path,
          type: entryType(h.type),
          size: h.size ?? 0,
          mtime: iso(h.mtime),
        },
      ];
    });
  }

  versions(jobId: string, p: string): FileVersion[] | null {
    const rows = this.jobSnapshots(jobId);
    if (!rows) return null;
    const mine = new Set(rows.map((r) => r.id));
    let prev: string | null = null;
    const out: FileVersion[] = [];
    for (const v of this.catalog.files.history(p, { repositoryId: rows[0].repositoryId })) {
      if (!mine.has(v.snapshot)) continue;
      const key = `${v.type}:${v.size}:${v.mtime}:${v.fingerprint}`;
      out.push({
        snapshotId: v.snapId,
        snapshotTime: iso(v.time),
        size: v.size ?? 0,
        mtime: iso(v.mtime),
        changed: key !== prev,
      });
      prev = key;
    }
    return out.reverse();
  }
}

interface LiveState {
  runId: number;
  jobId: number;
  status: 'queued' | 'running';
  startedAt: number;
  phase: Phase;
  progress?: BackupProgress;
  samples: BoundedSeries<RunSample>;
  previous?: { ms: number; bytes: number };
  full: boolean;
}

/** Runs through the catalog's Scheduler, reporting LiveRun updates at least once a second. */
export class CatalogRunner implements Runner {
  private live = new Map<number, LiveState>();
  private ticker?: ReturnType<typeof setInterval>;
  private lastEmit = new Map<number, number>();

  constructor(
    private catalog: Catalog,
    private jobs: CatalogJobs,
    private scheduler: Scheduler,
    private emit: RunnerEmit,
    private now: () => number = Date.now,
  ) {
    const ev = scheduler.events;
    ev.on('run-queued', (e) => {
      this.live.set(e.runId, {
        runId: e.runId,
        jobId: e.jobId,
        status: 'queued',
        startedAt: this.now(),
        phase: 'queued',
        samples: new BoundedSeries<RunSample>(RUN_SAMPLES_MAX, mergeRunSamples),
        full: e.full,
        previous: this.previous(e.jobId),
      });
      this.push(e.runId, true);
    });
    ev.on('run-started', (e) => {
      const l: LiveState = this.live.get(e.runId) ?? {
        runId: e.runId,
        jobId: e.jobId,
        status: 'running',
        startedAt: e.at,
        phase: 'starting',
        samples: new BoundedSeries<RunSample>(RUN_SAMPLES_MAX, mergeRunSamples),
        full: e.full,
        previous: this.previous(e.jobId),
      };
      Object.assign(l, { status: 'running', startedAt: e.at, phase: 'starting' });
      this.live.set(e.runId, l);
      this.push(e.runId, true);
      this.tick();
    });
    ev.on('run-progress', (e) => {
      const l = this.live.get(e.runId);
      if (!l) return;
      l.progress = e.progress;
      l.phase = e.progress.phase;
      // the chart's whole run in a bounded series (the catalog keeps every sample)
      if (e.sample) l.samples.push(sample(e.sample));
      this.push(e.runId, !!e.sample);
    });
    ev.on('run-phase', (e) => {
      const l = this.live.get(e.runId);
      if (!l) return;
      l.phase = e.phase;
      this.push(e.runId, true);
    });
    const finished = (runId: number) => {
      this.live.delete(runId);
      this.lastEmit.delete(runId);
      try {
        this.emit('run.finished', this.jobs.summary(this.catalog.getRun(runId)));
      } catch {}
      this.emit('jobs.changed', { jobId: null });
      if (this.live.size === 0 && this.ticker) {
        clearInterval(this.ticker);
        this.ticker = undefined;
      }
    };
    ev.on('restore-test', (e) => {
      let name = '(removed job)';
      try {
        name = this.catalog.getJob(e.jobId).name;
      } catch {}
      this.emit('restoreTest.finished', restoreTestSummary(e.test, name));
      this.emit('jobs.changed', { jobId: String(e.jobId) });
    });
    ev.on('run-finished', (e) => finished(e.runId));
    ev.on('run-failed', (e) => finished(e.runId));
    ev.on('run-missed', (e) => finished(e.runId));
  }

  private previous(jobId: number): { ms: number; bytes: number } | undefined {
    const prev = this.catalog
      .listRuns({ jobId, limit: 10 })
      .find(
        (r) =>
          (r.status === 'completed' || r.status === 'completed-with-warnings') && r.startedAt && r.endedAt,
      );
    return prev
      ? { ms: prev.endedAt! - prev.startedAt!, bytes: counters(prev.counters).bytesScanned }
      : undefined;
  }

  private tick(): void {
    if (this.ticker) return;
    this.ticker = setInterval(() => {
      for (const id of this.live.keys()) this.push(id, true);
    }, 1000);
    this.ticker.unref?.();
  }

  private push(runId: number, force: boolean): void {
    const at = this.now();
    if (!force && at - (this.lastEmit.get(runId) ?? 0) < 250) return;
    this.lastEmit.set(runId, at);
    const v = this.view(runId);
    if (v) this.emit('run.progress', v);
  }

  private view(runId: number): LiveRun | undefined {
    const l = this.live.get(runId);
    if (!l) return undefined;
    let rec: RunRecord;
    try {
      rec = this.catalog.getRun(runId);
    } catch {
      return undefined;
    }
    const p = l.progress;
    const run = this.jobs.summary(
      {
        ...rec,
        status: l.status,
        kind: l.full ? 'full' : 'backup',
        startedAt: l.status === 'queued' ? rec.startedAt : l.startedAt,
      },
      0,
    );
    if (l.status === 'running' && this.scheduler.isPaused(l.jobId)) run.status = 'paused';
    if (p) run.counters = counters(p as unknown as Record<string, unknown>);
    const elapsedMs = l.status === 'queued' ? 0 : Math.max(0, this.now() - l.startedAt);
    const scanComplete = p?.scanComplete ?? false;
    const total = p ? (scanComplete ? p.bytesScanned : Math.max(p.bytesScanned, l.previous?.bytes ?? 0)) : 0;
    const fraction = p && total > 0 ? Math.min(1, p.bytesDone / total) : p && scanComplete ? 1 : null;
    let etaMs: number | null = null;
    if (fraction !== null && fraction > 0.02 && elapsedMs > 500)
      etaMs = (elapsedMs * (1 - fraction)) / fraction;
    else if (l.previous && l.previous.ms > 0) etaMs = Math.max(0, l.previous.ms - elapsedMs);
    return {
      run,
      phase: l.phase,
      currentFile: p?.currentFile,
      scanComplete,
      fraction,
      etaMs: etaMs === null ? null : Math.round(etaMs),
      elapsedMs,
      canPause: true,
      samples: l.samples.points,
    };
  }

  async start(job: Job, full: boolean): Promise<RunSummary> {
    const { runId, promise } = this.scheduler.runNow(Number(job.id), { full });
    promise.catch(() => {});
    return this.jobs.summary(this.catalog.getRun(runId), 0);
  }

  liveRuns(): LiveRun[] {
    return [...this.live.keys()].map((id) => this.view(id)).filter((v): v is LiveRun => !!v);
  }

  pause(runId: string, paused: boolean): LiveRun {
    const l = this.live.get(Number(runId));
    if (!l || !this.scheduler.pause(l.jobId, paused))
      throw new ApiUsageError('NOT_RUNNING', 'this run is not running any more');
    this.push(Number(runId), true);
    return this.view(Number(runId))!;
  }

  cancel(runId: string): void {
    const l = this.live.get(Number(runId));
    if (!l || !this.scheduler.cancel(l.jobId))
      throw new ApiUsageError('NOT_RUNNING', 'this run is not running any more');
  }

  isRunning(jobId: string): boolean {
    const st = this.scheduler.status();
    const n = Number(jobId);
    return st.running.includes(n) || st.queued.includes(n);
  }

  nextRunAt(job: Job): string | null {
    try {
      const next = this.scheduler.nextRun(this.catalog.getJob(Number(job.id)));
      return next === null ? null : iso(next);
    } catch {
      return null;
    }
  }

  startScheduler(): void {
    this.scheduler.start();
  }

  async close(): Promise<void> {
    if (this.ticker) clearInterval(this.ticker);
    await this.scheduler.stop({ cancelRuns: true });
  }
}
