/**
 * Runs backups for the API: one run per job at a time, one writer per repository (a queue), live
 * progress turned into a per-second throughput series (read/written MB/s, files/s, dedup ratio), pause
 * and cancel, and the finished run saved with its samples, warnings and log.
 */
import { newBackupProgress, type BackupProgress } from '../engine/operations.js';
import { PauseGate } from '../engine/pauseGate.js';
import type { Job, LiveRun, RunCounters, RunDetail, RunSample, RunSummary } from '../../shared/api.js';
import { excludePresetPatterns } from '../../shared/api.js';
import type {
  Engine,
  JobStore,
  RepoHandle,
  Runner,
  RunnerEmit,
  RunStore,
  SettingsStore,
} from './services.js';
import { toWire, ApiUsageError } from './errors.js';
import { destinationLocation, destinationTarget } from './destination.js';
import { describeDestination } from '../../shared/destination.js';
import { nextRunAt, SimpleScheduler } from './schedule.js';
import { BoundedSeries, mergeRunSamples, RUN_SAMPLES_MAX } from '../../shared/series.js';

export type Emit = RunnerEmit;

/** What the API's own runner needs: the engine and stores that can also save runs. */
export interface RunManagerDeps {
  engine: Engine;
  jobs: JobStore;
  runs: RunStore & { saveRun(run: RunDetail): void | Promise<void> };
  settings: SettingsStore;
  now?: () => number;
}

const SAMPLE_MS = 1000;
const MAX_LOG = 2000;

interface Live {
  run: RunDetail;
  /** The run's throughput chart, whole and bounded (`run.samples` is its points). */
  samples: BoundedSeries<RunSample>;
  progress: BackupProgress;
  abort: AbortController;
  gate: PauseGate;
  startedMs: number;
  last: { at: number; bytesRead: number; bytesStored: number; filesDone: number };
  timer?: ReturnType<typeof setInterval>;
  lastEmit: number;
  /** Duration and size of the previous run of the job (for the ETA). */
  previous?: { ms: number; bytes: number };
}

export const emptyCounters = (): RunCounters => countersOf(newBackupProgress());

function countersOf(p: BackupProgress): RunCounters {
  return {
    filesScanned: p.filesScanned,
    bytesScanned: p.bytesScanned,
    filesRead: p.filesRead,
    bytesRead: p.bytesRead,
    filesDone: p.filesDone,
    bytesDone: p.bytesDone,
    bytesNew: p.bytesNew,
    bytesStored: p.bytesStored,
    errors: p.errors,
  };
}

export function summaryOf(run: RunDetail): RunSummary {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars
  const { samples, warningList, log, ...summary } = run;
  return summary;
}

/** The API's own runner (used with the fake engine in tests, and before the catalog existed). */
export class RunManager implements Runner {
  private live = new Map<string, Live>();
  private repoTails = new Map<string, Promise<unknown>>();
  private now: () => number;
  private scheduler?: SimpleScheduler;

  constructor(
    private s: RunManagerDeps,
    private emit: Emit,
  ) {
    this.now = s.now ?? Date.now;
  }

  nextRunAt(job: Job): string | null {
    return nextRunAt(job.schedule, new Date(this.now()));
  }

  startScheduler(): void {
    this.scheduler = new SimpleScheduler(
      async () => this.s.jobs.listJobs(),
      async (job) => (this.isRunning(job.id) ? null : this.start(job, false)),
      this.now,
    );
    this.scheduler.start();
  }

  async close(): Promise<void> {
    this.scheduler?.stop();
    for (const l of this.live.values()) this.cancel(l.run.id);
  }

  isRunning(jobId: string): boolean {
    for (const l of this.live.values()) if (l.run.jobId === jobId) return true;
    return false;
  }

  liveRuns(): LiveRun[] {
    return [...this.live.values()].map((l) => this.view(l));
  }

  liveRun(id: string): LiveRun {
    const l = this.live.get(id);
    if (!l) throw new ApiUsageError('NOT_RUNNING', 'this run is not running any more');
    return this.view(l);
  }

  pause(id: string, paused: boolean): LiveRun {
    const l = this.live.get(id);
    if (!l) throw new ApiUsageError('NOT_RUNNING', 'this run is not running any more');
    if (!this.s.engine.supportsPause)
      throw new ApiUsageError('UNSUPPORTED', 'this engine cannot pause a backup');
    l.gate.set(paused);
    if (l.run.status === 'running' || l.run.status === 'paused') l.run.status = paused ? 'paused' : 'running';
    this.log(l, paused ? 'paused by the user' : 'resumed by the user');
    this.emitProgress(l, true);
    return this.view(l);
  }

  cancel(id: string): void {
    const l = this.live.get(id);
    if (!l) throw new ApiUsageError('NOT_RUNNING', 'this run is not running any more');
    this.log(l, 'cancelled by the user');
    l.abort.abort();
    l.gate.set(false);
  }

  /** Starts a backup of the job (queued behind other writers of its repository) and returns at once. */
  async start(job: Job, full: boolean): Promise<RunSummary> {
    if (this.isRunning(job.id))
      throw new ApiUsageError('ALREADY_RUNNING', `"${job.name}" is already running`);
    const password = await this.s.jobs.jobPassword(job.id);
    if (!password)
      throw new ApiUsageError('NO_PASSWORD', `no password is stored for "${job.name}"; edit the job`);
    const previousRuns = await this.s.runs.listRuns({ jobId: job.id, limit: 10 });
    const prev = previousRuns.find((r) => r.status === 'completed' || r.status === 'completed-with-warnings');
    const startedMs = this.now();
    const run: RunDetail = {
      id: `run-${startedMs.toString(36)}-${Math.random().toString(36).slice(2, 8)}`,
      jobId: job.id,
      jobName: job.name,
      kind: full ? 'full-backup' : 'backup',
      status: 'queued',
      startedAt: new Date(startedMs).toISOString(),
      counters: emptyCounters(),
      warnings: 0,
      samples: [],
      warningList: [],
      log: [],
    };
    const samples = new BoundedSeries<RunSample>(RUN_SAMPLES_MAX, mergeRunSamples);
    run.samples = samples.points;
    const l: Live = {
      run,
      samples,
      progress: newBackupProgress(),
      abort: new AbortController(),
      gate: new PauseGate(),
      startedMs,
      last: { at: startedMs, bytesRead: 0, bytesStored: 0, filesDone: 0 },
      lastEmit: 0,
      previous:
        prev && prev.endedAt
          ? { ms: Date.parse(prev.endedAt) - Date.parse(prev.startedAt), bytes: prev.counters.bytesScanned }
          : undefined,
    };
    this.live.set(run.id, l);
    await this.s.runs.saveRun(run);
    const location = destinationLocation(job.destination);
    const tail = this.repoTails.get(location) ?? Promise.resolve();
    const done = tail.then(() => this.execute(l, job, password, full));
    this.repoTails.set(
      location,
      done.catch(() => {}),
    );
    this.emitProgress(l, true);
    return summaryOf(run);
  }

  private async execute(l: Live, job: Job, password: string, full: boolean): Promise<void> {
    const { run } = l;
    let repo: RepoHandle | undefined;
    try {
      if (l.abort.signal.aborted) throw Object.assign(new Error('operation cancelled'), { code: 'ABORTED' });
      l.startedMs = this.now();
      l.last.at = l.startedMs;
      run.startedAt = new Date(l.startedMs).toISOString();
      run.status = 'running';
      this.log(
        l,
        `backup of ${job.sources.join(', ')} to ${describeDestination(job.destination)}${full ? ' (full: re-reading every file)' : ''}`,
      );
      l.timer = setInterval(() => this.sample(l), SAMPLE_MS);
      const target = destinationTarget(
        job.destination,
        job.destination.kind === 's3' ? await this.s.jobs.destinationSecret(job.id) : undefined,
      );
      repo = await this.s.engine.open(target.location, password, target.options);
      const settings = await this.s.settings.getSettings();
      const excludes = [
        ...job.excludes,
        ...job.excludePresets.flatMap((p) => excludePresetPatterns[p].patterns),
      ];
      const limit = job.options.readLimitMBps ?? settings.readLimitMBps;
      const result = await this.s.engine.backup(repo, {
        paths: job.sources,
        excludes,
        job: job.snapshotTag,
        tags: [`job:${job.name}`],
        forceFull: full,
        // low memory picks its own (fewer) workers unless the job names a number
        workers: job.options.workers ?? (job.options.memory === 'low' ? undefined : settings.workers),
        memory: job.options.memory,
        compressionLevel: job.options.compressionLevel ?? settings.compressionLevel,
        readLimitBytesPerSec: limit ? Math.round(limit * 1024 * 1024) : undefined,
        blockFiles: job.options.blockFiles === false ? false : {},
        signal: l.abort.signal,
        pauseGate: l.gate,
        progress: (p) => {
          l.progress = { ...p };
          run.counters = countersOf(p);
          this.emitProgress(l, false);
        },
        log: (line) => this.log(l, line),
      });
      run.snapshotId = result.snapshotId;
      run.warningList = result.skipped.map((s) => ({ path: s.path, reason: s.reason, code: s.code }));
      run.warnings = run.warningList.length;
      run.status = result.status;
      const st = result.snapshot.stats;
      run.counters = {
        ...run.counters,
        filesScanned: Math.max(run.counters.filesScanned, st.files),
        bytesScanned: Math.max(run.counters.bytesScanned, st.totalBytes),
        filesDone: Math.max(run.counters.filesDone, st.files),
        bytesDone: Math.max(run.counters.bytesDone, st.totalBytes),
        filesRead: Math.max(run.counters.filesRead, st.filesRead),
        bytesRead: Math.max(run.counters.bytesRead, st.bytesRead),
        bytesNew: Math.max(run.counters.bytesNew, st.newBytes),
        bytesStored: Math.max(run.counters.bytesStored, st.storedBytes),
      };
      l.progress = { ...l.progress, ...run.counters, phase: 'done', scanComplete: true };
      this.log(
        l,
        `snapshot ${result.snapshotId.slice(0, 10)} saved: ${st.files} files, ${st.newBytes} new bytes`,
      );
      if (this.s.engine.forget && hasRetention(job)) {
        try {
          await this.s.engine.forget(repo, job.retention);
          this.log(l, 'retention policy applied');
        } catch (err) {
          this.log(l, `retention failed: ${toWire(err).message}`);
        }
      }
    } catch (err) {
      const wire = toWire(err);
      run.status = wire.code === 'ABORTED' || l.abort.signal.aborted ? 'cancelled' : 'failed';
      if (run.status === 'failed') run.error = wire;
      this.log(l, `${run.status}: ${wire.message}`);
    } finally {
      if (l.timer) clearInterval(l.timer);
      this.sample(l, true);
      await repo?.close().catch(() => {});
      run.endedAt = new Date(this.now()).toISOString();
      this.live.delete(run.id);
      await Promise.resolve(this.s.runs.saveRun(run)).catch(() => {});
      this.emit('run.finished', summaryOf(run));
      this.emit('jobs.changed', { jobId: run.jobId });
    }
  }

  private log(l: Live, line: string): void {
    if (l.run.log.length >= MAX_LOG) return;
    l.run.log.push(`${new Date(this.now()).toISOString()} ${line}`);
  }

  private sample(l: Live, final = false): void {
    const at = this.now();
    const dt = (at - l.last.at) / 1000;
    if (dt <= 0 || (final && dt < 0.2 && l.run.samples.length > 0)) return;
    if (l.run.status === 'queued') return;
    const c = l.run.counters;
    const s: RunSample = {
      t: at - l.startedMs,
      readBps: Math.max(0, (c.bytesRead - l.last.bytesRead) / dt),
      writeBps: Math.max(0, (c.bytesStored - l.last.bytesStored) / dt),
      filesPerSec: Math.max(0, (c.filesDone - l.last.filesDone) / dt),
      dedupRatio: c.bytesStored > 0 ? c.bytesDone / c.bytesStored : 0,
    };
    l.samples.push(s);
    l.last = { at, bytesRead: c.bytesRead, bytesStored: c.bytesStored, filesDone: c.filesDone };
    if (!final) this.emitProgress(l, true);
  }

  private emitProgress(l: Live, force: boolean): void {
    const at = this.now();
    if (!force && at - l.lastEmit < 250) return;
    l.lastEmit = at;
    this.emit('run.progress', this.view(l));
  }

  private view(l: Live): LiveRun {
    const p = l.progress;
    const elapsedMs = l.run.status === 'queued' ? 0 : this.now() - l.startedMs;
    const total = p.scanComplete ? p.bytesScanned : Math.max(p.bytesScanned, l.previous?.bytes ?? 0);
    const fraction = total > 0 ? Math.min(1, p.bytesDone / total) : p.scanComplete ? 1 : null;
    let etaMs: number | null = null;
    if (fraction !== null && fraction > 0.02 && elapsedMs > 500)
      etaMs = (elapsedMs * (1 - fraction)) / fraction;
    else if (l.previous && l.previous.ms > 0) etaMs = Math.max(0, l.previous.ms - elapsedMs);
    return {
      run: summaryOf(l.run),
      phase: l.run.status === 'queued' ? 'queued' : p.phase,
      currentFile: p.currentFile,
      scanComplete: p.scanComplete,
      fraction,
      etaMs: etaMs === null ? null : Math.round(etaMs),
      elapsedMs,
      canPause: this.s.engine.supportsPause,
      samples: l.run.samples,
    };
  }
}

function hasRetention(job: Job): boolean {
  return Object.values(job.retention).some((v) => typeof v === 'number' && v > 0);
}
