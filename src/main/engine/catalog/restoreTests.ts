/**
 * The catalog's record of restore tests (schedule/restoreTests.ts runs them): one row per test with its
 * verdict, what it restored and what failed, newest last. Unlike snapshots, these are not a cache of the
 * repository: they say what this computer proved, and when.
 */
import type { DB } from './db.js';
import type { RestoreTestRecord } from './types.js';

type NewRecord = Omit<RestoreTestRecord, 'id'>;

const json = <T>(s: string | null): T => (s === null ? null : JSON.parse(s)) as T;

export class RestoreTestLog {
  constructor(private readonly db: DB) {}

  private fromRow(r: any): RestoreTestRecord {
    return {
      id: r.id,
      jobId: r.job_id,
      runId: r.run_id,
      repositoryId: r.repository_id,
      snapshotId: r.snapshot_id,
      trigger: r.trigger,
      status: r.status,
      startedAt: r.started_at,
      endedAt: r.ended_at,
      files: r.files,
      bytes: r.bytes,
      blockFiles: r.block_files,
      allBlockFiles: !!r.all_block_files,
      failures: json(r.failures) ?? [],
      skipped: json(r.skipped) ?? [],
      error: json(r.error),
    };
  }

  add(t: NewRecord): RestoreTestRecord {
    const res = this.db
      .prepare(
        `INSERT INTO restore_tests(job_id, run_id, repository_id, snapshot_id, trigger, status, started_at,
           ended_at, files, bytes, block_files, all_block_files, failures, skipped, error)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        t.jobId,
        t.runId,
        t.repositoryId,
        t.snapshotId,
        t.trigger,
        t.status,
        t.startedAt,
        t.endedAt,
        t.files,
        t.bytes,
        t.blockFiles,
        t.allBlockFiles ? 1 : 0,
        JSON.stringify(t.failures),
        JSON.stringify(t.skipped),
        t.error ? JSON.stringify(t.error) : null,
      );
    return this.get(Number(res.lastInsertRowid))!;
  }

  get(id: number): RestoreTestRecord | undefined {
    const r = this.db.prepare('SELECT * FROM restore_tests WHERE id = ?').get(id);
    return r ? this.fromRow(r) : undefined;
  }

  /** Newest first. */
  list(opts: { jobId?: number; limit?: number } = {}): RestoreTestRecord[] {
    const where = opts.jobId !== undefined ? 'WHERE job_id = ?' : '';
    const params = opts.jobId !== undefined ? [opts.jobId] : [];
    return this.db
      .prepare(`SELECT * FROM restore_tests ${where} ORDER BY id DESC LIMIT ?`)
      .all(...params, opts.limit ?? 100)
      .map((r) => this.fromRow(r));
  }

  /** The newest test of a job that was made (passed or failed; with `allBlockFiles`, one of those). */
  last(jobId: number, opts: { allBlockFiles?: boolean } = {}): RestoreTestRecord | undefined {
    const r = this.db
      .prepare(
        `SELECT * FROM restore_tests WHERE job_id = ? AND status IN ('passed','failed')
         ${opts.allBlockFiles ? 'AND all_block_files = 1' : ''} ORDER BY id DESC LIMIT 1`,
      )
      .get(jobId);
    return r ? this.fromRow(r) : undefined;
  }
}
