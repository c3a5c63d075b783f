/**
 * The API's restore tests and repair (src/shared/api.ts: jobs.testRestore, jobs.repair,
 * restoreTests.list; events restoreTest.finished and repair.progress), kept apart from api.ts:
 * - restore tests go through the app's RestoreTestService when it has one (the catalog: recorded there,
 *   scheduled ones too) and otherwise through the engine directly, kept in memory for the session;
 * - repair opens the job's repository on its own handle (never one a browse is using), reports its
 *   progress, brings the catalog's snapshot cache in line, and checks the repository afterwards;
 * - "clean up now" (jobs.cleanUp) applies the job's retention and prunes, on a handle of its own too.
 * Both delete from the repository: an append-only one needs its maintenance password for them.
 */
import type {
  CheckSummary,
  CleanUpSummary,
  Job,
  RepairProgress,
  RepairSummary,
  RestoreTestSummary,
} from '../../shared/api.js';
import type { CheckReport } from '../engine/operations.js';
import type { RepairReport } from '../engine/repair/index.js';
import type { RestoreTestRecord } from '../engine/catalog/types.js';
import type { ApiServices, RepoHandle } from './services.js';
import { ApiUsageError, toWire } from './errors.js';

/** What these handlers need from the API object (api.ts passes itself). */
export interface ProtectionContext {
  services: ApiServices;
  job(id: string): Promise<Job>;
  /** The job's shared (cached) repository handle. */
  repoFor(job: Job): Promise<RepoHandle>;
  /** Opens a handle of the job's repository that nobody else uses. */
  openOwn(job: Job): Promise<RepoHandle>;
  dropRepo(jobId: string): void;
  isRunning(jobId: string): boolean;
  setCheck(jobId: string, summary: CheckSummary): void;
  emit(event: 'restoreTest.finished', payload: RestoreTestSummary): void;
  emit(event: 'repair.progress', payload: RepairProgress): void;
  emit(event: 'jobs.changed', payload: { jobId: string | null }): void;
}

const iso = (ms: number) => new Date(ms).toISOString();

/** A catalog record as the API shows it. */
export function restoreTestSummary(t: RestoreTestRecord, jobName: string): RestoreTestSummary {
  return {
    id: String(t.id),
    jobId: String(t.jobId ?? ''),
    jobName,
    ...(t.runId !== null ? { runId: String(t.runId) } : {}),
    snapshotId: t.snapshotId,
    trigger: t.trigger,
    status: t.status,
    startedAt: iso(t.startedAt),
    endedAt: iso(t.endedAt),
    files: t.files,
    bytes: t.bytes,
    blockFiles: t.blockFiles,
    allBlockFiles: t.allBlockFiles,
    failures: t.failures,
    skipped: t.skipped,
    ...(t.error ? { error: t.error } : {}),
  };
}

export function checkSummary(report: CheckReport, readData: boolean, at: number): CheckSummary {
  return {
    ok: report.ok,
    checkedAt: iso(at),
    readData,
    snapshots: report.snapshots,
    packs: report.packs,
    problems: report.problems.map((p) => ({
      kind: p.kind,
      object: p.object,
      message: p.message,
      affects: p.affects,
    })),
    unreferencedPacks: report.unreferencedPacks.length,
  };
}

function repairSummary(r: RepairReport, at: number): RepairSummary {
  return {
    repairedAt: iso(at),
    dryRun: r.dryRun,
    clean: r.clean,
    damagedPacks: r.packs.damaged.length,
    missingPacks: r.packs.missing.length,
    damagedIndexFiles: r.index.damaged.length,
    blobsSalvaged: r.blobs.salvaged,
    blobsFromSources: r.blobs.fromSources,
    blobsLost: r.blobs.lost,
    snapshotsRebuilt: r.snapshots.rebuilt.length,
    snapshotsRemoved: r.snapshots.removed.length,
    snapshotsRecovered: r.snapshots.recovered.length,
    lost: r.lost.slice(0, 200),
    lostCount: r.lostCount,
  };
}

export class Protection {
  /** Restore tests made this session without a RestoreTestService, newest first. */
  private readonly tests: RestoreTestSummary[] = [];
  /** Jobs whose repository a repair or a clean-up is changing (one at a time; restore tests wait). */
  private readonly busy = new Set<string>();
  private nextId = 1;

  constructor(private readonly ctx: ProtectionContext) {}

  private get s(): ApiServices {
    return this.ctx.services;
  }

  async list(filter: { jobId?: string; limit?: number }): Promise<RestoreTestSummary[]> {
    if (this.s.restoreTests) return this.s.restoreTests.list(filter);
    return this.tests
      .filter((t) => filter.jobId === undefined || t.jobId === filter.jobId)
      .slice(0, filter.limit ?? 100);
  }

  async last(jobId: string): Promise<RestoreTestSummary | undefined> {
    return (await this.list({ jobId, limit: 1 }))[0];
  }

  async testRestore(jobId: string, allBlockFiles?: boolean): Promise<RestoreTestSummary> {
    const job = await this.ctx.job(jobId);
    // (a repair or clean-up removes packs as it goes: a test meanwhile would fail for nothing)
    if (this.busy.has(job.id))
      throw new ApiUsageError(
        'ALREADY_RUNNING',
        `"${job.name}" is being repaired or cleaned up: test it when that is done`,
      );
    // the app's service records the test and announces it (restoreTest.finished) itself
    if (this.s.restoreTests) return this.s.restoreTests.test(job, { allBlockFiles });
    const engine = this.s.engine;
    if (!engine.restoreTest) throw new ApiUsageError('UNSUPPORTED', 'this engine cannot test restores');
    const repo = await this.ctx.repoFor(job);
    const snaps = (await repo.listSnapshots()).filter((x) => x.job === job.snapshotTag);
    const latest = snaps.sort((a, b) => a.time.localeCompare(b.time)).at(-1);
    if (!latest) throw new ApiUsageError('NOT_FOUND', `"${job.name}" has no snapshot to test yet`);
    const now = this.s.now ?? Date.now;
    const startedAt = now();
    const base = {
      id: `test-${this.nextId++}`,
      jobId: job.id,
      jobName: job.name,
      snapshotId: latest.id,
      trigger: 'manual' as const,
      startedAt: iso(startedAt),
      allBlockFiles: !!allBlockFiles,
    };
    let t: RestoreTestSummary;
    try {
      const r = await engine.restoreTest(repo, {
        snapshot: latest.id,
        files: job.options.restoreTest?.files ?? 20,
        allBlockFiles,
      });
      t = {
        ...base,
        status: r.ok ? 'passed' : 'failed',
        endedAt: iso(now()),
        files: r.filesChecked,
        bytes: r.bytesChecked,
        blockFiles: r.blockFilesChecked,
        failures: r.failures,
        skipped: r.skipped,
      };
    } catch (err) {
      t = {
        ...base,
        status: 'error',
        endedAt: iso(now()),
        files: 0,
        bytes: 0,
        blockFiles: 0,
        failures: [],
        skipped: [],
        error: toWire(err),
      };
    }
    this.tests.unshift(t);
    this.ctx.emit('restoreTest.finished', t);
    this.ctx.emit('jobs.changed', { jobId: job.id });
    return t;
  }

  async repair(jobId: string, dryRun = false, maintenancePassword?: string): Promise<RepairSummary> {
    const job = await this.ctx.job(jobId);
    const engine = this.s.engine;
    if (!engine.repair) throw new ApiUsageError('UNSUPPORTED', 'this engine cannot repair repositories');
    if (this.ctx.isRunning(job.id))
      throw new ApiUsageError(
        'ALREADY_RUNNING',
        `"${job.name}" is backing up: repair it when the backup is done`,
      );
    if (this.busy.has(job.id))
      throw new ApiUsageError('ALREADY_RUNNING', `"${job.name}" is being repaired or cleaned up already`);
    this.busy.add(job.id);
    const now = this.s.now ?? Date.now;
    let last = 0;
    const progress = (p: Omit<RepairProgress, 'jobId'>, force = false) => {
      const t = Date.now();
      if (!force && t - last < 250) return;
      last = t;
      this.ctx.emit('repair.progress', { jobId: job.id, ...p });
    };
    const repo = await this.ctx.openOwn(job).catch((err: unknown) => {
      this.busy.delete(job.id);
      throw err;
    });
    try {
      if (maintenancePassword && !dryRun) await engine.unlockMaintenance?.(repo, maintenancePassword);
      const report = await engine.repair(repo, { dryRun, progress: (p) => progress(p) });
      const summary = repairSummary(report, now());
      if (!dryRun && !report.clean) {
        this.ctx.dropRepo(job.id); // the cached handle's index is the old one
        await this.s.fileIndex?.resync?.(job.id, repo);
      }
      if (engine.check) {
        progress({ phase: 'check', done: 0, total: 1 }, true);
        summary.check = checkSummary(await engine.check(repo, { readData: false }), false, now());
        this.ctx.setCheck(job.id, summary.check);
      }
      this.ctx.emit('jobs.changed', { jobId: job.id });
      return summary;
    } finally {
      this.busy.delete(job.id);
      await repo.close().catch(() => {});
    }
  }

  /**
   * "Clean up now": the job's retention applied and the space no snapshot needs freed, on a handle of
   * its own (an append-only repository's unlock never outlives the call). Not while the job backs up.
   */
  async cleanUp(jobId: string, maintenancePassword?: string): Promise<CleanUpSummary> {
    const job = await this.ctx.job(jobId);
    const engine = this.s.engine;
    if (!engine.cleanUp) throw new ApiUsageError('UNSUPPORTED', 'this engine cannot clean up repositories');
    if (this.ctx.isRunning(job.id) || this.busy.has(job.id))
      throw new ApiUsageError('ALREADY_RUNNING', `"${job.name}" is busy: clean it up when it is done`);
    this.busy.add(job.id);
    try {
      const repo = await this.ctx.openOwn(job);
      try {
        if (maintenancePassword) await engine.unlockMaintenance?.(repo, maintenancePassword);
        const r = await engine.cleanUp(repo, { retention: job.retention, job: job.snapshotTag });
        this.ctx.dropRepo(job.id); // the cached handle's index still names the removed packs
        await this.s.fileIndex?.resync?.(job.id, repo);
        this.ctx.emit('jobs.changed', { jobId: job.id });
        return { cleanedAt: new Date((this.s.now ?? Date.now)()).toISOString(), ...r };
      } finally {
        await repo.close().catch(() => {});
      }
    } finally {
      this.busy.delete(job.id);
    }
  }
}
