/**
 * JobRunner: what one run of a job does, start to finish, and what it leaves in the catalog.
 *
 *   open the repository → backup (incremental, or "full" on demand / when the last full one is older
 *   than the job's fullEveryDays) with per-second throughput samples → record the result and the
 *   skipped entries → apply the job's retention (forget) → sync the catalog (index the new snapshot,
 *   drop forgotten ones) → prune when the repository's prune interval has passed → optional
 *   verify-after-backup (check).
 *
 * Around the backup: the job's pre-command (before the scan; a failure fails the run), a filesystem
 * snapshot of the sources (engine/snapshot: taken when the engine is about to read, released right after
 * the backup, what was read from where kept with the run) and the post-command (after everything, with the
 * run's result in its environment; schedule/hooks.ts).
 *
 * The engine's functions are injected (JobEngine) so the runner is tested with fakes and wired to the
 * real engine in one place. A failure after the snapshot was saved (indexing, retention, prune) is a
 * warning, never a lost backup; a failed verification fails the run so the user is told.
 */
import { heldCount } from '../repo/holds.js';
import type {
  BackupOptions,
  BackupProgress,
  BackupResult,
  CheckReport,
  ForgetDecision,
  PruneResult,
  RetentionPolicy,
} from '../operations.js';
import type { Catalog } from '../catalog/catalog.js';
import type { Job, RepositoryRecord, RunProblem, RunRecord, RunSample } from '../catalog/types.js';
import { syncRepository, type SnapshotSource } from '../catalog/sync.js';
import { AbortedError, NotFoundError, errorToWire, throwIfAborted } from '../errors.js';
import { createRunEvents, type RunEventEmitter } from './events.js';
import { policyIsEmpty } from '../repo/retentionPolicy.js';
import type { RunRequest, Clock } from './scheduler.js';
import { systemClock } from './scheduler.js';
import os from 'node:os';
import { describeRequests, type RequestLogSummary } from '../backend/requestlog/index.js';
import { clockSkewWarning } from '../repo/lock.js';
import type { MaintenanceDecision } from '../repo/maintenance.js';
import { SourceSnapshots, type SnapshotProvider } from '../snapshot/index.js';
import { HookFailedError, runHook, DEFAULT_HOOK_TIMEOUT_SEC } from './hooks.js';
import type { RestoreTestOptions, RestoreTestResult } from '../restoretest/index.js';
import { allBlockFilesDue, restoreTestPlan, runRestoreTest } from './restoreTests.js';
import type { RestoreTestRecord } from '../catalog/types.js';
import type { MassChangeVerdict } from '../repo/types.js';

/** An append-only repository refused to delete (without its maintenance password, which is never stored). */
const appendOnly = (err: unknown) => (err as { code?: string })?.code === 'APPEND_ONLY';

/** The run problem a suspect backup adds (the run ends with warnings; the app shows the alarm). */
function alarmProblem(v: MassChangeVerdict): string {
  return `mass-change alarm: ${v.reasons.join('; ')}. The snapshot is kept, and older ones are held until the alarm is dismissed`;
}

/** An open repository as the runner needs it. */
export interface EngineRepo extends SnapshotSource {
  close(): Promise<void>;
}

/** The engine operations a run uses. */
export interface JobEngine<R extends EngineRepo = EngineRepo> {
  /** Opens the job's repository (the caller looks up the password in its SecretStore). */
  openRepo(job: Job, repository: RepositoryRecord): Promise<R>;
  backup(repo: R, opts: BackupOptions): Promise<BackupResult>;
  /** Applies `policy` to the snapshots of one job (snapshot.job === opts.job) and removes the others. */
  forget?(
    repo: R,
    policy: RetentionPolicy,
    opts: { dryRun: boolean; job: string; signal?: AbortSignal },
  ): Promise<ForgetDecision>;
  prune?(repo: R, opts: { signal?: AbortSignal }): Promise<PruneResult>;
  check?(
    repo: R,
    opts: { readData: boolean; signal?: AbortSignal; snapshots?: string[] },
  ): Promise<CheckReport>;
  /** The requests the run made to the repository so far (kept in the run's history). */
  requestLog?(repo: R): RequestLogSummary | undefined;
  /** The store's clock minus ours (ms), for a warning when they disagree by minutes. */
  storeClockOffsetMs?(repo: R): Promise<number>;
  /** Whether this host prunes now: the repository's maintenance owner decides (repo/maintenance.ts).
   *  Without it, the catalog's lastPruneAt decides (every host prunes on its own interval). */
  maintenance?(repo: R, opts: { host: string; intervalMs: number }): Promise<MaintenanceDecision>;
  /** Records a finished prune in the maintenance record; false when another host took over. */
  recordPrune?(repo: R, opts: { host: string; intervalMs: number }): Promise<boolean>;
  /** Gives back what the backup kept for the next one (its idle worker threads and their buffers), so
   *  the run's later steps (indexing, retention, prune) do not hold both at once. */
  releaseMemory?(): Promise<void>;
  /** Restores a sample of a snapshot into a temporary folder and compares it (restoretest/). */
  restoreTest?(repo: R, opts: RestoreTestOptions): Promise<RestoreTestResult>;
}

export interface JobRunnerOptions<R extends EngineRepo> {
  catalog: Catalog;
  engine: JobEngine<R>;
  events?: RunEventEmitter;
  clock?: Clock;
  /** Host name recorded in snapshots (default: the engine's default). */
  host?: string;
  /** Progress events to the UI at most this often (default 250 ms); samples are taken every 1000 ms. */
  progressIntervalMs?: number;
  /** Where records of filesystem snapshots are kept (`<data folder>/snapshots`); absent: no snapshots. */
  snapshotDir?: string;
  /** The snapshot provider (default: the platform's; null: none, every source read live). For tests. */
  snapshotProvider?: SnapshotProvider | null;
}

const DAY = 86_400_000;

/** Per-second throughput samples from cumulative progress counters. */
export class Sampler {
  private last?: { t: number; read: number; stored: number; files: number };
  readonly pending: RunSample[] = [];

  constructor(private readonly intervalMs = 1000) {}

  /** Returns a sample when at least intervalMs passed since the previous one (or `force`). */
  offer(p: BackupProgress, force = false): RunSample | undefined {
    const t = p.elapsedMs;
    if (!this.last) {
      this.last = { t: 0, read: 0, stored: 0, files: 0 };
    }
    const dt = t - this.last.t;
    if (dt <= 0 || (!force && dt < this.intervalMs)) return undefined;
    const s: RunSample = {
      t,
      readBps: ((p.bytesRead - this.last.read) * 1000) / dt,
      writtenBps: ((p.bytesStored - this.last.stored) * 1000) / dt,
      filesPerSec: ((p.filesDone - this.last.files) * 1000) / dt,
      dedupRatio: p.bytesStored > 0 ? p.bytesDone / p.bytesStored : 0,
    };
    this.last = { t, read: p.bytesRead, stored: p.bytesStored, files: p.filesDone };
    this.pending.push(s);
    return s;
  }

  take(): RunSample[] {
    return this.pending.splice(0, this.pending.length);
  }
}

export class JobRunner<R extends EngineRepo = EngineRepo> {
  readonly events: RunEventEmitter;
  private readonly catalog: Catalog;
  private readonly engine: JobEngine<R>;
  private readonly clock: Clock;
  private readonly progressIntervalMs: number;

  constructor(private readonly opts: JobRunnerOptions<R>) {
    this.catalog = opts.catalog;
    this.engine = opts.engine;
    this.events = opts.events ?? createRunEvents();
    this.clock = opts.clock ?? systemClock;
    this.progressIntervalMs = opts.progressIntervalMs ?? 250;
  }

  /** True when this run should re-read everything (on demand, or the last full one is too old). */
  fullDue(job: Job, now = this.clock.now()): boolean {
    const every = job.options.fullEveryDays;
    if (!every || every <= 0) return false;
    const last = this.catalog.lastFullRun(job.id);
    return !last || (last.startedAt ?? 0) <= now - every * DAY;
  }

  /** What retention would remove now (dry run), without changing anything. */
  async previewRetention(job: Job): Promise<ForgetDecision> {
    if (!this.engine.forget) throw new Error('this engine cannot apply retention');
    const repo = await this.engine.openRepo(job, this.catalog.getRepository(job.repositoryId));
    try {
      return await this.engine.forget(repo, job.retention, { dryRun: true, job: job.key });
    } finally {
      await repo.close();
    }
  }

  /**
   * A restore test of the job's newest snapshot now, recorded in the catalog (trigger 'manual'). Every
   * block file is restored too with `allBlockFiles`, or when the monthly test of them is due.
   */
  async testRestore(
    job: Job,
    opts: { allBlockFiles?: boolean; signal?: AbortSignal } = {},
  ): Promise<RestoreTestRecord> {
    if (!this.engine.restoreTest) throw new Error('this engine cannot test restores');
    const repo = await this.engine.openRepo(job, this.catalog.getRepository(job.repositoryId));
    try {
      const snaps = (await repo.listSnapshots()).filter((s) => s.job === job.key);
      const latest = snaps.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0)).at(-1);
      if (!latest) throw new NotFoundError(`a snapshot of "${job.name}" (run a backup first)`);
      const test = await runRestoreTest({
        catalog: this.catalog,
        job,
        repo,
        test: (r, o) => this.engine.restoreTest!(r, o),
        snapshotId: latest.id,
        runId: null,
        trigger: 'manual',
        allBlockFiles: opts.allBlockFiles ?? allBlockFilesDue(this.catalog, job, this.clock.now()),
        now: () => this.clock.now(),
        signal: opts.signal,
      });
      this.events.emit('restore-test', { jobId: job.id, runId: null, test });
      return test;
    } finally {
      await repo.close().catch(() => {});
    }
  }

  /** The run's request summary (logged in one line), or undefined when the engine keeps none. */
  private requests(repo: R | undefined, log: (line: string) => void): RequestLogSummary | undefined {
    if (!repo || !this.engine.requestLog) return undefined;
    try {
      const s = this.engine.requestLog(repo);
      if (s) log(`repository: ${describeRequests(s)}`);
      return s;
    } catch {
      return undefined; // the log must never fail a run
    }
  }

  /** Runs a job now. Never throws for a failed run: the returned record says what happened. */
  async run(job: Job, req: Partial<RunRequest> = {}): Promise<RunRecord> {
    const catalog = this.catalog;
    const signal = req.signal ?? new AbortController().signal;
    const trigger = req.trigger ?? 'manual';
    const full = !!req.full || this.fullDue(job);
    const runId =
      req.runId ??
      catalog.createRun({ jobId: job.id, trigger, status: 'queued', scheduledFor: req.scheduledFor ?? null })
        .id;
    const startedAt = this.clock.now();
    catalog.updateRun(runId, { status: 'running', startedAt, kind: full ? 'full' : 'backup' });
    this.events.emit('run-started', { jobId: job.id, runId, trigger, full, at: startedAt });

    const logLines: { t: number; line: string }[] = [];
    const log = (line: string) => logLines.push({ t: this.clock.now(), line });
    const problems: RunProblem[] = [];
    const sampler = new Sampler();
    let lastProgress: BackupProgress | undefined;
    let lastEmit = -Infinity;
    const flush = () => {
      catalog.addRunSamples(runId, sampler.take());
      catalog.addRunLog(runId, logLines.splice(0, logLines.length));
    };

    let repo: R | undefined;
    let result: BackupResult | undefined;
    let retentionSummary: Record<string, unknown> | null = null;
    let verify: Record<string, unknown> | null = null;
    let verifyFailed = false;
    const hookEnv = {
      TIDEMARK_JOB: job.name,
      TIDEMARK_JOB_ID: String(job.id),
      TIDEMARK_RUN_ID: String(runId),
      TIDEMARK_SOURCES: job.sources.join('\n'),
    };
    const hookTimeout = job.options.hookTimeoutSec ?? DEFAULT_HOOK_TIMEOUT_SEC;
    /** The post-command, once, after the run (not cancelled with it: it may have to undo the pre-command). */
    const post = async (status: string, snapshotId?: string, error?: string) => {
      const cmd = job.options.postCommand?.trim();
      if (!cmd) return;
      log(`post-command: ${cmd}`);
      try {
        const r = await runHook('post', cmd, {
          env: {
            ...hookEnv,
            TIDEMARK_RUN_STATUS: status,
            ...(snapshotId ? { TIDEMARK_SNAPSHOT_ID: snapshotId } : {}),
            ...(error ? { TIDEMARK_ERROR: error } : {}),
          },
          timeoutSec: hookTimeout,
          log,
        });
        if (r.exitCode === 0) log(`post-command finished (${r.durationMs} ms)`);
        else {
          const e = new HookFailedError('post', r, hookTimeout);
          log(e.message);
          problems.push({ severity: 'warning', message: e.message, code: e.code });
        }
      } catch (err) {
        const message = `the job's post-command could not be started: ${(err as Error).message}`;
        log(message);
        problems.push({ severity: 'warning', message, code: 'POST_COMMAND_FAILED' });
      }
    };
    const snapshots = this.opts.snapshotDir
      ? new SourceSnapshots({
          stateDir: this.opts.snapshotDir,
          mode: job.options.snapshot ?? 'when-possible',
          log,
          ...(this.opts.snapshotProvider !== undefined
            ? { provider: this.opts.snapshotProvider ?? undefined }
            : {}),
        })
      : undefined;
    let restoreTestFailed: RestoreTestRecord | undefined;
    try {
      const repository = catalog.getRepository(job.repositoryId);
      log(`${full ? 'full' : 'incremental'} backup of ${job.sources.join(', ')} to ${repository.location}`);
      const pre = job.options.preCommand?.trim();
      if (pre) {
        log(`pre-command: ${pre}`);
        const r = await runHook('pre', pre, { env: hookEnv, timeoutSec: hookTimeout, signal, log }).catch(
          (err: Error) => {
            throw new HookFailedError(
              'pre',
              { exitCode: null, signal: null, timedOut: false, durationMs: 0, tail: [err.message] },
              hookTimeout,
            );
          },
        );
        throwIfAborted(signal);
        if (r.exitCode !== 0) throw new HookFailedError('pre', r, hookTimeout);
        log(`pre-command finished (${r.durationMs} ms)`);
      }
      repo = await this.engine.openRepo(job, repository);
      if (this.engine.storeClockOffsetMs) {
        const offset = await this.engine.storeClockOffsetMs(repo).catch(() => 0);
        const warning = clockSkewWarning(offset, repository.location);
        if (warning) {
          log(`warning: ${warning}`);
          problems.push({ severity: 'warning', message: warning, code: 'CLOCK_SKEW' });
        }
      }
      if (job.options.memory === 'low')
        log('using less memory (the job\'s "Use less memory" option): slower');
      try {
        result = await this.engine.backup(repo, {
          // the engine calls this once the change journal's cursor is taken, right before it reads
          prepareSourceViews: snapshots ? () => snapshots.take(job.sources, signal) : undefined,
          paths: job.sources,
          excludes: job.excludes,
          job: job.key,
          tags: job.options.tags,
          host: job.options.host ?? this.opts.host,
          forceFull: full,
          fullScanReason: full ? 'full backup' : undefined,
          compressionLevel: job.compressionLevel,
          workers: job.options.workers,
          memory: job.options.memory,
          readLimitBytesPerSec: job.options.readLimitBytesPerSec,
          lowPriority: job.options.lowPriority,
          blockFiles: job.options.blockFiles === false ? false : {},
          pauseGate: req.pauseGate,
          signal,
          log,
          progress: (p) => {
            lastProgress = p;
            const sample = sampler.offer(p);
            if (sample || p.elapsedMs - lastEmit >= this.progressIntervalMs) {
              lastEmit = p.elapsedMs;
              this.events.emit('run-progress', { jobId: job.id, runId, progress: p, sample });
            }
            if (sampler.pending.length >= 10) flush();
          },
        });
      } finally {
        if (snapshots) {
          for (const message of await snapshots.problems())
            problems.push({ severity: 'warning', message, code: 'SNAPSHOT_OVERFLOW' }); // the run completes with warnings
          await snapshots
            .release()
            .catch((err: Error) =>
              problems.push({ severity: 'warning', message: err.message, code: 'SNAPSHOT_RELEASE' }),
            );
          if (snapshots.report.sources.length || snapshots.report.leftoversRemoved)
            catalog.updateRun(runId, { snapshots: snapshots.report });
        }
      }
      if (lastProgress) sampler.offer(lastProgress, true);
      await this.engine.releaseMemory?.().catch(() => {});
      for (const s of result.skipped) {
        problems.push({ severity: 'warning', path: s.path, message: s.reason, code: s.code });
      }
      if (result.massChange?.suspect)
        problems.push({ severity: 'warning', message: alarmProblem(result.massChange), code: 'MASS_CHANGE' });
      catalog.updateRun(runId, { snapshotId: result.snapshotId });
      log(`snapshot ${result.snapshotId.slice(0, 12)} saved (${result.skipped.length} entries skipped)`);

      // Retention, then the catalog (which indexes the new snapshot and drops forgotten ones).
      if (!policyIsEmpty(job.retention) && this.engine.forget) {
        this.events.emit('run-phase', { jobId: job.id, runId, phase: 'retention' });
        try {
          const d = await this.engine.forget(repo, job.retention, { dryRun: false, job: job.key, signal });
          retentionSummary = { kept: d.keep.length, removed: d.remove.map((s) => s.id) };
          const held = heldCount(d.keep);
          log(
            `retention: kept ${d.keep.length}, removed ${d.remove.length} snapshot(s)${held ? ` (${held} held by a mass-change alarm)` : ''}`,
          );
        } catch (err) {
          if (signal.aborted) throw err;
          if (appendOnly(err))
            log(
              'retention: not applied: the repository is append-only (prune it with its maintenance password)',
            );
          else problems.push({ severity: 'warning', message: `retention failed: ${(err as Error).message}` });
        }
      }
      this.events.emit('run-phase', { jobId: job.id, runId, phase: 'indexing' });
      try {
        const sync = await syncRepository(catalog, job.repositoryId, repo, { signal });
        log(
          `catalog: ${sync.added} snapshot(s) added, ${sync.removed} removed, ${sync.index.newEntries} entries indexed`,
        );
        for (const id of sync.damaged)
          problems.push({
            severity: 'warning',
            message: `snapshot ${id.slice(0, 12)} is damaged (its file in the repository cannot be read): check and repair the repository`,
          });
      } catch (err) {
        if (signal.aborted) throw err;
        problems.push({
          severity: 'warning',
          message: `indexing the snapshot failed: ${(err as Error).message}`,
        });
      }
      // Prune on the repository's own interval (it also clears leftovers of interrupted backups): in a
      // repository shared by several PCs only its maintenance owner does, judged in the store's time.
      const intervalMs = Math.max(0, repository.pruneEveryDays) * DAY;
      const host = this.opts.host ?? os.hostname();
      let due =
        repository.pruneEveryDays <= 0 ||
        repository.lastPruneAt === null ||
        repository.lastPruneAt <= this.clock.now() - intervalMs;
      if (this.engine.prune && this.engine.maintenance) {
        try {
          const decision = await this.engine.maintenance(repo, { host, intervalMs });
          due = decision.prune;
          log(decision.reason);
        } catch (err) {
          if (signal.aborted) throw err;
          due = false;
          problems.push({
            severity: 'warning',
            message: `the repository's maintenance record could not be read or written, so no prune this time: ${(err as Error).message}`,
          });
        }
      }
      if (this.engine.prune && due) {
        this.events.emit('run-phase', { jobId: job.id, runId, phase: 'prune' });
        try {
          const pr = await this.engine.prune(repo, { signal });
          catalog.markPruned(job.repositoryId, this.clock.now());
          if (this.engine.recordPrune) {
            const recorded = await this.engine.recordPrune(repo, { host, intervalMs }).catch((err: Error) => {
              log(`maintenance: the prune could not be recorded: ${err.message}`);
              return true;
            });
            if (!recorded) log('maintenance: another host took over maintenance during this prune');
          }
          retentionSummary = { ...(retentionSummary ?? {}), prune: pr };
          log(
            `prune: ${pr.packsRemoved} pack(s) removed, ${pr.packsRewritten} rewritten, ${pr.bytesFreed} bytes freed`,
          );
        } catch (err) {
          if (signal.aborted) throw err;
          if (appendOnly(err))
            log('prune: not run: the repository is append-only (prune it with its maintenance password)');
          else problems.push({ severity: 'warning', message: `prune failed: ${(err as Error).message}` });
        }
      }
      if (job.options.verifyAfterBackup && this.engine.check) {
        this.events.emit('run-phase', { jobId: job.id, runId, phase: 'verify' });
        const report = await this.engine.check(repo, {
          readData: !!job.options.verifyReadData,
          signal,
          snapshots: [result.snapshotId],
        });
        verify = { ok: report.ok, problems: report.problems.length, readData: !!job.options.verifyReadData };
        for (const p of report.problems) {
          problems.push({ severity: 'error', path: p.affects[0], message: p.message, code: p.kind });
        }
        verifyFailed = !report.ok;
        log(report.ok ? 'verify: ok' : `verify: ${report.problems.length} problem(s)`);
      }
      const plan = this.engine.restoreTest ? restoreTestPlan(catalog, job, this.clock.now()) : undefined;
      if (plan?.due && !verifyFailed) {
        this.events.emit('run-phase', { jobId: job.id, runId, phase: 'restore-test' });
        const test = await runRestoreTest({
          catalog,
          job,
          repo,
          test: (r, o) => this.engine.restoreTest!(r, o),
          snapshotId: result.snapshotId,
          runId,
          trigger: 'schedule',
          allBlockFiles: plan.allBlockFiles,
          now: () => this.clock.now(),
          signal,
          log,
        });
        this.events.emit('restore-test', { jobId: job.id, runId, test });
        for (const f of test.failures)
          problems.push({ severity: 'error', path: f.path, message: f.message, code: 'RESTORE_TEST' });
        if (test.status === 'error')
          problems.push({
            severity: 'warning',
            message: `the restore test could not be made: ${test.error?.message}`,
            code: 'RESTORE_TEST',
          });
        if (test.status === 'failed') restoreTestFailed = test;
      }

      await post(
        verifyFailed || restoreTestFailed
          ? 'failed'
          : result.status === 'completed' && !problems.length
            ? 'completed'
            : 'completed-with-warnings',
        result.snapshotId,
      );
      const end = this.clock.now();
      const requests = this.requests(repo, log);
      const warnings = problems.filter((p) => p.severity === 'warning').length;
      catalog.addRunProblems(runId, problems);
      flush();
      if (verifyFailed || restoreTestFailed) {
        const error = verifyFailed
          ? {
              name: 'VerifyError',
              code: 'VERIFY_FAILED',
              message: `the new backup did not verify (${verify?.problems} problem(s)): run "tidemark check" and see the run's errors`,
            }
          : {
              name: 'RestoreTestError',
              code: 'RESTORE_TEST_FAILED',
              message: `the restore test failed: ${restoreTestFailed!.failures.length} problem(s) in ${restoreTestFailed!.files} file(s) tested (${restoreTestFailed!.failures[0]?.path}): run "tidemark check --read-data", then "tidemark repair"`,
            };
        catalog.updateRun(runId, {
          status: 'failed',
          endedAt: end,
          error,
          verify,
          retention: retentionSummary,
          counters: { ...(lastProgress ?? {}) },
          requests,
        });
        this.events.emit('run-failed', { jobId: job.id, runId, error, at: end });
      } else {
        const status =
          result.status === 'completed' && warnings === 0 ? 'completed' : 'completed-with-warnings';
        catalog.updateRun(runId, {
          status,
          endedAt: end,
          verify: verify ?? undefined,
          retention: retentionSummary ?? undefined,
          counters: { ...(lastProgress ?? {}), stats: result.snapshot.stats },
          requests,
        });
        this.events.emit('run-finished', {
          jobId: job.id,
          runId,
          status,
          snapshotId: result.snapshotId,
          warnings,
          at: end,
        });
      }
    } catch (err) {
      const cancelled = signal.aborted || err instanceof AbortedError;
      log(cancelled ? 'cancelled' : `failed: ${(err as Error)?.message ?? String(err)}`);
      await post(
        cancelled ? 'cancelled' : 'failed',
        result?.snapshotId,
        cancelled ? undefined : (err as Error)?.message,
      );
      const end = this.clock.now();
      const requests = this.requests(repo, log);
      if (lastProgress) sampler.offer(lastProgress, true);
      catalog.addRunProblems(runId, problems);
      flush();
      const error = errorToWire(err);
      catalog.updateRun(runId, {
        status: cancelled ? 'cancelled' : 'failed',
        endedAt: end,
        error: cancelled ? undefined : error,
        counters: { ...(lastProgress ?? {}) },
        requests,
        ...(result ? { snapshotId: result.snapshotId } : {}),
      });
      if (cancelled) {
        this.events.emit('run-finished', {
          jobId: job.id,
          runId,
          status: 'cancelled',
          snapshotId: result?.snapshotId ?? null,
          warnings: 0,
          at: end,
        });
      } else {
        this.events.emit('run-failed', { jobId: job.id, runId, error, at: end });
      }
    } finally {
      if (repo) await repo.close().catch(() => {});
    }
    try {
      return catalog.getRun(runId);
    } catch {
      // The job (and with it its runs) was removed while it ran.
      return {
        id: runId,
        jobId: job.id,
        kind: full ? 'full' : 'backup',
        trigger,
        status: signal.aborted ? 'cancelled' : result ? 'completed' : 'failed',
        scheduledFor: req.scheduledFor ?? null,
        startedAt,
        endedAt: this.clock.now(),
        snapshotId: result?.snapshotId ?? null,
        counters: {},
        error: null,
        verify: null,
        retention: null,
      };
    }
  }
}
