/**
 * The catalog's view of mass-change alarms (engine/alarm, repo/holds.ts): which snapshots of a
 * repository were suspect, and which of those alarms were dismissed. Like the snapshot cache it is
 * rebuilt from the repository by every sync (the suspect flag is in the snapshot, the dismissal an
 * `alarms/` object), so it never disagrees with what forget and other computers see.
 */
import type { Catalog } from './catalog.js';
import type { AlarmDismissal } from '../repo/holds.js';
import type { MassChangeVerdict, SnapshotEntry } from '../repo/types.js';

export interface CatalogAlarm {
  repositoryId: number;
  snapId: string;
  time: number;
  host: string;
  job: string | null;
  verdict: MassChangeVerdict;
  dismissal: AlarmDismissal | null;
}

/** Replaces a repository's alarms with what its snapshots and dismissals say now. */
export function syncAlarms(
  catalog: Catalog,
  repositoryId: number,
  snapshots: SnapshotEntry[],
  dismissals: AlarmDismissal[],
): void {
  const byId = new Map(dismissals.map((d) => [d.snapshot, d]));
  const insert = catalog.db.prepare(
    `INSERT INTO alarms(repository_id, snap_id, time, host, job, verdict, dismissed_at, dismissal)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  );
  catalog.db.transaction(() => {
    catalog.db.prepare('DELETE FROM alarms WHERE repository_id = ?').run(repositoryId);
    for (const s of snapshots) {
      if (!s.massChange?.suspect) continue;
      const d = byId.get(s.id);
      insert.run(
        repositoryId,
        s.id,
        Date.parse(s.time),
        s.host,
        s.job ?? null,
        JSON.stringify(s.massChange),
        d ? Date.parse(d.dismissedAt) : null,
        d ? JSON.stringify(d) : null,
      );
    }
  })();
}

/** Alarms (nobody dismissed, unless `all`), newest first; of one repository or all. */
export function listAlarms(
  catalog: Catalog,
  opts: { repositoryId?: number; all?: boolean } = {},
): CatalogAlarm[] {
  const rows = catalog.db
    .prepare(
      `SELECT * FROM alarms WHERE (? IS NULL OR repository_id = ?) AND (? OR dismissed_at IS NULL)
       ORDER BY time DESC`,
    )
    .all(opts.repositoryId ?? null, opts.repositoryId ?? null, opts.all ? 1 : 0) as {
    repository_id: number;
    snap_id: string;
    time: number;
    host: string;
    job: string | null;
    verdict: string;
    dismissal: string | null;
  }[];
  return rows.map((r) => ({
    repositoryId: r.repository_id,
    snapId: r.snap_id,
    time: r.time,
    host: r.host,
    job: r.job,
    verdict: JSON.parse(r.verdict) as MassChangeVerdict,
    dismissal: r.dismissal ? (JSON.parse(r.dismissal) as AlarmDismissal) : null,
  }));
}
