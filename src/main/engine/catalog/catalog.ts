/**
 * The Catalog: one SQLite database in the app's data folder holding repositories, jobs, runs (with
 * problems, log lines and per-second samples), the snapshot cache and the file index.
 */
import crypto from 'node:crypto';
import os from 'node:os';
import { openCatalogDb, databaseSize, type DB, type OpenOptions } from './db.js';
import { FileIndex } from './fileIndex.js';
import { RestoreTestLog } from './restoreTests.js';
import type {
  Job,
  JobSpec,
  RepositoryRecord,
  RepositorySpec,
  RunProblem,
  RunRecord,
  RunSample,
  RunStatus,
  RunTrigger,
} from './types.js';
import type { SnapshotEntry } from '../repo/types.js';
import { NotFoundError, UsageError } from '../errors.js';
import { DEFAULT_COMPRESSION_LEVEL } from '../../../shared/compression.js';

/** This process, as recorded in the runs it owns. */
const OWNER = `${os.hostname()}:${process.pid}`;

/** Whether the process that owns a run still lives (runs of other machines count as alive). */
function ownerAlive(owner: string): boolean {
  const i = owner.lastIndexOf(':');
  const host = owner.slice(0, i);
  const pid = Number(owner.slice(i + 1));
  if (host !== os.hostname()) return true;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const SECRET_KEYS = /pass(word)?|secret|token|credential|private/i;

/** Throws when backend options look like they carry a secret (those belong in a SecretStore). */
export function assertNoSecrets(options: Record<string, unknown>): void {
  for (const k of Object.keys(options)) {
    if (SECRET_KEYS.test(k) && options[k] !== undefined && options[k] !== null && options[k] !== '') {
      throw new UsageError(
        `repository option "${k}" looks like a secret: store it with the SecretStore instead`,
      );
    }
  }
}

function json<T>(s: string | null): T {
  return (s === null ? null : JSON.parse(s)) as T;
}

export interface SnapshotRow {
  id: number;
  repositoryId: number;
  snapId: string;
  time: number;
  host: string;
  job: string | null;
  tree: string;
  indexed: boolean;
  snapshot: SnapshotEntry;
}

export class Catalog {
  readonly db: DB;
  readonly files: FileIndex;
  readonly restoreTests: RestoreTestLog;

  constructor(dataDir: string, opts: OpenOptions = {}) {
    this.db = openCatalogDb(dataDir, opts);
    this.files = new FileIndex(this.db);
    this.restoreTests = new RestoreTestLog(this.db);
  }

  close(): void {
    this.db.close();
  }

  /**
   * Gives back what indexing kept (the file index's name and folder caches, SQLite's page cache of this
   * connection). A long-lived process (the app) calls it after each sync: the caches speed up one
   * indexing run, and kept between runs they only grew with the names seen (up to millions).
   */
  releaseMemory(): void {
    this.files.releaseMemory();
    this.db.pragma('shrink_memory');
  }

  sizeBytes(): number {
    return databaseSize(this.db);
  }

  // ---- repositories ----------------------------------------------------------------------------

  addRepository(spec: RepositorySpec, now = Date.now()): RepositoryRecord {
    assertNoSecrets(spec.options ?? {});
    const r = this.db
      .prepare(
        'INSERT INTO repositories(name, location, options, prune_every_days, created_at) VALUES (?, ?, ?, ?, ?)',
      )
      .run(spec.name, spec.location, JSON.stringify(spec.options ?? {}), spec.pruneEveryDays ?? 7, now);
    return this.getRepository(Number(r.lastInsertRowid));
  }

  updateRepository(id: number, patch: Partial<RepositorySpec>): RepositoryRecord {
    const cur = this.getRepository(id);
    const next = { ...cur, ...patch };
    assertNoSecrets(next.options ?? {});
    this.db
      .prepare(
        'UPDATE repositories SET name = ?, location = ?, options = ?, prune_every_days = ? WHERE id = ?',
      )
      .run(next.name, next.location, JSON.stringify(next.options ?? {}), next.pruneEveryDays, id);
    return this.getRepository(id);
  }

  private repoFromRow(r: any): RepositoryRecord {
    return {
      id: r.id,
      name: r.name,
      location: r.location,
      options: json(r.options),
      pruneEveryDays: r.prune_every_days,
      lastPruneAt: r.last_prune_at,
      lastSyncAt: r.last_sync_at,
      createdAt: r.created_at,
    };
  }

  getRepository(id: number): RepositoryRecord {
    const r = this.db.prepare('SELECT * FROM repositories WHERE id = ?').get(id);
    if (!r) throw new NotFoundError(`repository ${id}`);
    return this.repoFromRow(r);
  }

  findRepository(nameOrId: string | number): RepositoryRecord | undefined {
    const r =
      typeof nameOrId === 'number' || /^\d+$/.test(nameOrId)
        ? this.db.prepare('SELECT * FROM repositories WHERE id = ?').get(Number(nameOrId))
        : this.db
            .prepare('SELECT * FROM repositories WHERE name = ? OR location = ?')
            .get(nameOrId, nameOrId);
    return r ? this.repoFromRow(r) : undefined;
  }

  listRepositories(): RepositoryRecord[] {
    return this.db
      .prepare('SELECT * FROM repositories ORDER BY id')
      .all()
      .map((r) => this.repoFromRow(r));
  }

  removeRepository(id: number): void {
    const jobs = this.db
      .prepare('SELECT count(*) FROM jobs WHERE repository_id = ?')
      .pluck()
      .get(id) as number;
    if (jobs > 0) throw new UsageError(`repository ${id} is used by ${jobs} job(s): remove them first`);
    for (const s of this.listSnapshots(id)) this.files.removeSnapshot(s.id);
    this.db.prepare('DELETE FROM repositories WHERE id = ?').run(id);
    this.files.gc();
  }

  markPruned(id: number, at = Date.now()): void {
    this.db.prepare('UPDATE repositories SET last_prune_at = ? WHERE id = ?').run(at, id);
  }

  // ---- jobs ------------------------------------------------------------------------------------

  private jobFromRow(r: any): Job {
    return {
      id: r.id,
      key: r.key,
      name: r.name,
      repositoryId: r.repository_id,
      sources: json(r.sources),
      excludes: json(r.excludes),
      schedule: json(r.schedule),
      retention: json(r.retention),
      compressionLevel: r.compression_level,
      options: json(r.options),
      enabled: r.enabled === 1,
      createdAt: r.created_at,
      updatedAt: r.updated_at,
      schedCheckedAt: r.sched_checked_at,
    };
  }

  addJob(spec: JobSpec, now = Date.now()): Job {
    this.getRepository(spec.repositoryId);
    if (!spec.sources.length) throw new UsageError('a job needs at least one source folder');
    const key = `job-${crypto.randomBytes(6).toString('hex')}`;
    const r = this.db
      .prepare(
        `INSERT INTO jobs(key, name, repository_id, sources, excludes, schedule, retention, compression_level,
           options, enabled, sched_checked_at, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        key,
        spec.name,
        spec.repositoryId,
        JSON.stringify(spec.sources),
        JSON.stringify(spec.excludes ?? []),
        JSON.stringify(spec.schedule),
        JSON.stringify(spec.retention ?? {}),
        spec.compressionLevel ?? DEFAULT_COMPRESSION_LEVEL,
        JSON.stringify(spec.options ?? {}),
        spec.enabled === false ? 0 : 1,
        now,
        now,
        now,
      );
    return this.getJob(Number(r.lastInsertRowid));
  }

  updateJob(id: number, patch: Partial<JobSpec>, now = Date.now()): Job {
    const cur = this.getJob(id);
    const n = { ...cur, ...patch };
    if (patch.repositoryId !== undefined) this.getRepository(patch.repositoryId);
    // A new schedule starts counting from now: earlier fire times of the new schedule were never due.
    const schedChanged = patch.schedule && JSON.stringify(patch.schedule) !== JSON.stringify(cur.schedule);
    this.db
      .prepare(
        `UPDATE jobs SET name = ?, repository_id = ?, sources = ?, excludes = ?, schedule = ?, retention = ?,
           compression_level = ?, options = ?, enabled = ?, updated_at = ?,
           sched_checked_at = CASE WHEN ? THEN ? ELSE sched_checked_at END
         WHERE id = ?`,
      )
      .run(
        n.name,
        n.repositoryId,
        JSON.stringify(n.sources),
        JSON.stringify(n.excludes),
        JSON.stringify(n.schedule),
        JSON.stringify(n.retention),
        n.compressionLevel,
        JSON.stringify(n.options),
        n.enabled ? 1 : 0,
        now,
        schedChanged || (patch.enabled === true && !cur.enabled) ? 1 : 0,
        now,
        id,
      );
    return this.getJob(id);
  }

  setJobCheckedAt(id: number, at: number): void {
    this.db.prepare('UPDATE jobs SET sched_checked_at = ? WHERE id = ?').run(at, id);
  }

  /**
   * Moves a job's schedule bookmark from `expected` to `at` only if nobody else moved it meanwhile:
   * when two schedulers share a catalog (the app and `tidemark scheduler`), one of them fires.
   */
  claimJobCheck(id: number, expected: number | null, at: number): boolean {
    return (
      this.db
        .prepare('UPDATE jobs SET sched_checked_at = ? WHERE id = ? AND sched_checked_at IS ?')
        .run(at, id, expected).changes === 1
    );
  }

  getJob(id: number): Job {
    const r = this.db.prepare('SELECT * FROM jobs WHERE id = ?').get(id);
    if (!r) throw new NotFoundError(`job ${id}`);
    return this.jobFromRow(r);
  }

  findJob(nameOrId: string | number): Job | undefined {
    const r =
      typeof nameOrId === 'number' || /^\d+$/.test(nameOrId)
        ? this.db.prepare('SELECT * FROM jobs WHERE id = ?').get(Number(nameOrId))
        : this.db.prepare('SELECT * FROM jobs WHERE name = ? OR key = ?').get(nameOrId, nameOrId);
    return r ? this.jobFromRow(r) : undefined;
  }

  listJobs(): Job[] {
    return this.db
      .prepare('SELECT * FROM jobs ORDER BY id')
      .all()
      .map((r) => this.jobFromRow(r));
  }

  removeJob(id: number): void {
    this.db.prepare('DELETE FROM jobs WHERE id = ?').run(id);
  }

  // ---- runs ------------------------------------------------------------------------------------

  private runFromRow(r: any): RunRecord {
    return {
      id: r.id,
      jobId: r.job_id,
      kind: r.kind,
      trigger: r.trigger,
      status: r.status,
      scheduledFor: r.scheduled_for,
      startedAt: r.started_at,
      endedAt: r.ended_at,
      snapshotId: r.snapshot_id,
      counters: json(r.counters),
      error: json(r.error),
      verify: json(r.verify),
      retention: json(r.retention),
    };
  }

  createRun(r: {
    jobId: number | null;
    kind?: RunRecord['kind'];
    trigger: RunTrigger;
    status: RunStatus;
    scheduledFor?: number | null;
    startedAt?: number | null;
    endedAt?: number | null;
  }): RunRecord {
    const res = this.db
      .prepare(
        `INSERT INTO runs(job_id, kind, trigger, status, scheduled_for, started_at, ended_at, owner)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        r.jobId,
        r.kind ?? 'backup',
        r.trigger,
        r.status,
        r.scheduledFor ?? null,
        r.startedAt ?? null,
        r.endedAt ?? null,
        OWNER,
      );
    return this.getRun(Number(res.lastInsertRowid));
  }

  updateRun(
    id: number,
    patch: Partial<
      Pick<RunRecord, 'status' | 'kind' | 'startedAt' | 'endedAt' | 'snapshotId' | 'counters'>
    > & {
      error?: RunRecord['error'];
      verify?: RunRecord['verify'];
      retention?: RunRecord['retention'];
      requests?: RunRecord['requests'];
      snapshots?: RunRecord['snapshots'];
    },
  ): void {
    const cols: string[] = [];
    const vals: unknown[] = [];
    const map: Record<string, string> = {
      status: 'status',
      kind: 'kind',
      startedAt: 'started_at',
      endedAt: 'ended_at',
      snapshotId: 'snapshot_id',
    };
    for (const [k, col] of Object.entries(map)) {
      if ((patch as any)[k] !== undefined) {
        cols.push(`${col} = ?`);
        vals.push((patch as any)[k]);
      }
    }
    for (const k of ['counters', 'error', 'verify', 'retention', 'requests', 'snapshots'] as const) {
      if (patch[k] !== undefined) {
        cols.push(`${k} = ?`);
        vals.push(JSON.stringify(patch[k]));
      }
    }
    if (!cols.length) return;
    this.db.prepare(`UPDATE runs SET ${cols.join(', ')} WHERE id = ?`).run(...vals, id);
  }

  getRun(id: number): RunRecord {
    const r = this.db.prepare('SELECT * FROM runs WHERE id = ?').get(id);
    if (!r) throw new NotFoundError(`run ${id}`);
    const row = r as { requests?: string | null; snapshots?: string | null };
    return {
      ...this.runFromRow(r),
      requests: json(row.requests ?? null),
      snapshots: json(row.snapshots ?? null),
    };
  }

  listRuns(opts: { jobId?: number; limit?: number; status?: RunStatus } = {}): RunRecord[] {
    const where: string[] = [];
    const params: unknown[] = [];
    if (opts.jobId !== undefined) {
      where.push('job_id = ?');
      params.push(opts.jobId);
    }
    if (opts.status) {
      where.push('status = ?');
      params.push(opts.status);
    }
    return this.db
      .prepare(
        `SELECT * FROM runs ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY id DESC LIMIT ?`,
      )
      .all(...params, opts.limit ?? 100)
      .map((r) => this.runFromRow(r));
  }

  /** The newest completed full backup of a job (for "full every N days"). */
  lastFullRun(jobId: number): RunRecord | undefined {
    const r = this.db
      .prepare(
        `SELECT * FROM runs WHERE job_id = ? AND kind = 'full' AND status IN ('completed','completed-with-warnings')
         ORDER BY id DESC LIMIT 1`,
      )
      .get(jobId);
    return r ? this.runFromRow(r) : undefined;
  }

  /**
   * Runs left 'running' or 'queued' by a process that is gone (crash, power loss) are marked failed.
   * Runs of live processes on this machine (say, `tidemark job run` beside the app) are left alone.
   */
  failInterruptedRuns(now = Date.now()): number {
    const open = this.db
      .prepare("SELECT id, owner FROM runs WHERE status IN ('running', 'queued')")
      .all() as {
      id: number;
      owner: string | null;
    }[];
    const fail = this.db.prepare(
      `UPDATE runs SET status = 'failed', ended_at = ?,
         error = '{"name":"InterruptedError","code":"INTERRUPTED","message":"Tidemark stopped during this run"}'
       WHERE id = ?`,
    );
    let n = 0;
    for (const r of open) {
      if (r.owner && ownerAlive(r.owner)) continue;
      n += fail.run(now, r.id).changes;
    }
    return n;
  }

  addRunProblems(runId: number, problems: RunProblem[]): void {
    if (!problems.length) return;
    const base = this.db.prepare('SELECT coalesce(max(seq), 0) FROM run_problems WHERE run_id = ?').pluck();
    const ins = this.db.prepare(
      'INSERT INTO run_problems(run_id, seq, severity, path, message, code) VALUES (?, ?, ?, ?, ?, ?)',
    );
    this.db.transaction(() => {
      let seq = base.get(runId) as number;
      for (const p of problems) ins.run(runId, ++seq, p.severity, p.path ?? null, p.message, p.code ?? null);
    })();
  }

  runProblems(runId: number): RunProblem[] {
    return this.db
      .prepare('SELECT severity, path, message, code FROM run_problems WHERE run_id = ? ORDER BY seq')
      .all(runId)
      .map((r: any) => ({
        severity: r.severity,
        message: r.message,
        ...(r.path !== null ? { path: r.path } : {}),
        ...(r.code !== null ? { code: r.code } : {}),
      }));
  }

  addRunLog(runId: number, lines: { t: number; line: string }[]): void {
    if (!lines.length) return;
    const base = this.db.prepare('SELECT coalesce(max(seq), 0) FROM run_log WHERE run_id = ?').pluck();
    const ins = this.db.prepare('INSERT INTO run_log(run_id, seq, t, line) VALUES (?, ?, ?, ?)');
    this.db.transaction(() => {
      let seq = base.get(runId) as number;
      for (const l of lines) ins.run(runId, ++seq, l.t, l.line);
    })();
  }

  runLog(runId: number): { t: number; line: string }[] {
    return this.db.prepare('SELECT t, line FROM run_log WHERE run_id = ? ORDER BY seq').all(runId) as {
      t: number;
      line: string;
    }[];
  }

  addRunSamples(runId: number, samples: RunSample[]): void {
    if (!samples.length) return;
    const ins = this.db.prepare(
      `INSERT OR REPLACE INTO run_samples(run_id, t, read_bps, written_bps, files_ps, dedup_ratio)
       VALUES (?, ?, ?, ?, ?, ?)`,
    );
    this.db.transaction(() => {
      for (const s of samples) ins.run(runId, s.t, s.readBps, s.writtenBps, s.filesPerSec, s.dedupRatio);
    })();
  }

  runSamples(runId: number): RunSample[] {
    return this.db
      .prepare(
        `SELECT t, read_bps AS readBps, written_bps AS writtenBps, files_ps AS filesPerSec, dedup_ratio AS dedupRatio
         FROM run_samples WHERE run_id = ? ORDER BY t`,
      )
      .all(runId) as RunSample[];
  }

  // ---- snapshots cache -------------------------------------------------------------------------

  private snapFromRow(r: any): SnapshotRow {
    return {
      id: r.id,
      repositoryId: r.repository_id,
      snapId: r.snap_id,
      time: r.time,
      host: r.host,
      job: r.job,
      tree: r.tree,
      indexed: r.indexed === 1,
      snapshot: json(r.data),
    };
  }

  /** Adds (or refreshes) a snapshot in the cache; returns its catalog row. */
  upsertSnapshot(repositoryId: number, s: SnapshotEntry): SnapshotRow {
    this.db
      .prepare(
        `INSERT INTO snapshots(repository_id, snap_id, time, host, job, tree, data) VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(repository_id, snap_id) DO UPDATE SET data = excluded.data, time = excluded.time`,
      )
      .run(repositoryId, s.id, Date.parse(s.time), s.host, s.job ?? null, s.tree, JSON.stringify(s));
    return this.getSnapshot(repositoryId, s.id)!;
  }

  getSnapshot(repositoryId: number, snapIdOrPrefix: string): SnapshotRow | undefined {
    const rows = this.db
      .prepare('SELECT * FROM snapshots WHERE repository_id = ? AND snap_id >= ? AND snap_id < ? LIMIT 2')
      .all(repositoryId, snapIdOrPrefix, snapIdOrPrefix + '\uffff');
    if (rows.length === 0) return undefined;
    const exact = rows.find((r: any) => r.snap_id === snapIdOrPrefix);
    if (exact) return this.snapFromRow(exact);
    if (rows.length > 1) throw new UsageError(`snapshot prefix ${snapIdOrPrefix} is ambiguous`);
    return this.snapFromRow(rows[0]);
  }

  snapshotById(rowId: number): SnapshotRow | undefined {
    const r = this.db.prepare('SELECT * FROM snapshots WHERE id = ?').get(rowId);
    return r ? this.snapFromRow(r) : undefined;
  }

  listSnapshots(repositoryId?: number, opts: { job?: string } = {}): SnapshotRow[] {
    const where: string[] = [];
    const params: unknown[] = [];
    if (repositoryId !== undefined) {
      where.push('repository_id = ?');
      params.push(repositoryId);
    }
    if (opts.job !== undefined) {
      where.push('job = ?');
      params.push(opts.job);
    }
    return this.db
      .prepare(
        `SELECT * FROM snapshots ${where.length ? 'WHERE ' + where.join(' AND ') : ''} ORDER BY time, id`,
      )
      .all(...params)
      .map((r) => this.snapFromRow(r));
  }

  setSnapshotIndexed(rowId: number, indexed: boolean): void {
    this.db.prepare('UPDATE snapshots SET indexed = ? WHERE id = ?').run(indexed ? 1 : 0, rowId);
  }

  /** Drops snapshots from the cache and the file index (their shared directory data goes at gc()). */
  removeSnapshots(rowIds: number[]): void {
    const del = this.db.prepare('DELETE FROM snapshots WHERE id = ?');
    this.db.transaction(() => {
      for (const id of rowIds) {
        this.files.removeSnapshot(id);
        del.run(id);
      }
    })();
  }

  markSynced(repositoryId: number, at = Date.now()): void {
    this.db.prepare('UPDATE repositories SET last_sync_at = ? WHERE id = ?').run(at, repositoryId);
  }

  /**
   * Forgets everything the catalog learnt from repositories (snapshot cache and file index), keeping
   * the user's configuration (repositories, jobs) and run history. Used by `catalog rebuild`.
   */
  resetRepositoryCache(repositoryId?: number): void {
    this.db.transaction(() => {
      if (repositoryId === undefined) {
        this.db.exec(`DELETE FROM snapshot_dirs; DELETE FROM snapshots; DELETE FROM entries;
          DELETE FROM dir_versions; DELETE FROM dirs WHERE id > 1; DELETE FROM names WHERE id > 0;
          INSERT INTO names_fts(names_fts) VALUES ('delete-all');`);
      } else {
        const ids = this.listSnapshots(repositoryId).map((s) => s.id);
        this.removeSnapshots(ids);
      }
    })();
    this.files.gc();
  }
}
