/**
 * Mass-change alarms as the API shows them (engine/alarm, repo/holds.ts): a job's suspect snapshots,
 * with what changed, how many snapshots each holds from deletion, and whether the user dismissed it.
 * Computed from the repository itself (its snapshots and alarms/ objects), so the app, the CLI and
 * other computers always agree on which alarms stand.
 */
import type { AlarmInfo, Job } from '../../shared/api.js';
import { activeAlarms, heldSnapshots, type AlarmDismissal } from '../engine/repo/holds.js';
import type { SnapshotEntry } from '../engine/repo/types.js';

/**
 * The job's alarms, newest first: those nobody dismissed, or every one with `includeDismissed`.
 * `own` are the job's snapshots, `all` every snapshot in its repository (holds span a host's jobs).
 */
export function jobAlarms(
  job: Job,
  own: SnapshotEntry[],
  all: SnapshotEntry[],
  dismissals: AlarmDismissal[],
  includeDismissed = false,
): AlarmInfo[] {
  const active = new Set(activeAlarms(own, dismissals).map((s) => s.id));
  const held = heldSnapshots(all, dismissals);
  const holds = new Map<string, number>();
  for (const alarm of held.values()) holds.set(alarm.id, (holds.get(alarm.id) ?? 0) + 1);
  return own
    .filter((s) => s.massChange?.suspect && (includeDismissed || active.has(s.id)))
    .sort((a, b) => (a.time < b.time ? 1 : a.time > b.time ? -1 : 0))
    .map((s) => {
      const v = s.massChange!;
      const d = dismissals.find((x) => x.snapshot === s.id);
      return {
        jobId: job.id,
        jobName: job.name,
        snapshotId: s.id,
        time: s.time,
        host: s.host,
        suspicious: v.suspicious,
        threshold: v.threshold,
        reasons: v.reasons,
        examples: v.examples,
        held: holds.get(s.id) ?? 0,
        ...(d ? { dismissed: { at: d.dismissedAt, host: d.host, ...(d.note ? { note: d.note } : {}) } } : {}),
      };
    });
}
