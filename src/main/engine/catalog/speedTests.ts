/**
 * The catalog's record of destination speed tests (the speed_tests table): what each test measured,
 * per destination, so the app can show whether a destination got slower over time. Results are plain
 * JSON as the speed test produced them; `place` identifies the destination (the same folder, or the
 * same bucket and prefix on the same store) whatever job it belongs to.
 */
import type { DB } from './db.js';

export interface SpeedTestRow {
  id: number;
  place: string;
  location: string;
  jobId: number | null;
  startedAt: number;
  endedAt: number;
  status: 'completed' | 'failed' | 'cancelled';
  settings: Record<string, unknown>;
  results: unknown[];
  estimate: Record<string, unknown> | null;
  notes: string[];
  error: { name: string; code: string; message: string } | null;
}

const parse = <T>(s: string | null, none: T): T => (s === null ? none : (JSON.parse(s) as T));

export class SpeedTestLog {
  constructor(private readonly db: DB) {}

  add(r: Omit<SpeedTestRow, 'id'>): SpeedTestRow {
    const res = this.db
      .prepare(
        `INSERT INTO speed_tests(place, location, job_id, started_at, ended_at, status, settings, results,
           estimate, notes, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        r.place,
        r.location,
        r.jobId,
        r.startedAt,
        r.endedAt,
        r.status,
        JSON.stringify(r.settings),
        JSON.stringify(r.results),
        r.estimate === null ? null : JSON.stringify(r.estimate),
        JSON.stringify(r.notes),
        r.error === null ? null : JSON.stringify(r.error),
      );
    return { ...r, id: Number(res.lastInsertRowid) };
  }

  /** Newest first: of one destination (`place`), of one job, or all. */
  list(filter: { place?: string; jobId?: number; limit?: number } = {}): SpeedTestRow[] {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.place !== undefined) {
      where.push('place = ?');
      params.push(filter.place);
    }
    if (filter.jobId !== undefined) {
      where.push('job_id = ?');
      params.push(filter.jobId);
    }
    const rows = this.db
      .prepare(
        `SELECT * FROM speed_tests ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY started_at DESC, id DESC LIMIT ?`,
      )
      .all(...params, filter.limit ?? 100) as Record<string, unknown>[];
    return rows.map((r) => ({
      id: r.id as number,
      place: r.place as string,
      location: r.location as string,
      jobId: (r.job_id as number | null) ?? null,
      startedAt: r.started_at as number,
      endedAt: r.ended_at as number,
      status: r.status as SpeedTestRow['status'],
      settings: parse(r.settings as string, {}),
      results: parse(r.results as string, []),
      estimate: parse(r.estimate as string | null, null),
      notes: parse(r.notes as string, []),
      error: parse(r.error as string | null, null),
    }));
  }
}
