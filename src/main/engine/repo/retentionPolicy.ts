/**
 * Grandfather-father-son retention as a pure function: given the snapshots of ONE group (one job, or
 * one host+paths) and a policy, decide which snapshots to keep and why. The engine's `forget`
 * (repo/retention.ts) and the scheduler both call this; neither deletes anything here.
 *
 * Rules (the restic/kopia model users know):
 * - Snapshots are considered newest first.
 * - keepLast N keeps the N newest snapshots.
 * - keepHourly/Daily/Weekly/Monthly/Yearly N keep, for each of the N most recent periods that HAVE a
 *   snapshot, the newest snapshot of that period. A period without snapshots does not use up a slot.
 *   Weeks are ISO-8601 weeks (Monday first). Periods are computed in the local time zone unless
 *   `opts.timeZone` names an IANA zone.
 * - A count of -1 (or Infinity) means "every period".
 * - keepTags: a snapshot with any of these tags is always kept.
 * - One snapshot can be kept for several reasons; all are listed.
 * - Safety: a policy that keeps nothing at all (no rule set) keeps everything, and a snapshot dated
 *   after `now` (clock skew) is always kept, so a wrong clock never deletes the newest backups.
 */
import type { SnapshotEntry } from './types.js';
import type { ForgetDecision, RetentionPolicy } from '../operations.js';

export interface RetentionOptions {
  /** IANA time zone for the period buckets (default: the process's local zone). */
  timeZone?: string;
}

interface Parts {
  year: number;
  month: number; // 1..12
  day: number;
  hour: number;
}

function partsGetter(timeZone: string | undefined): (d: Date) => Parts {
  if (!timeZone) {
    return (d) => ({ year: d.getFullYear(), month: d.getMonth() + 1, day: d.getDate(), hour: d.getHours() });
  }
  const fmt = new Intl.DateTimeFormat('en-US', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: 'numeric',
    day: 'numeric',
    hour: 'numeric',
  });
  return (d) => {
    const p: Record<string, number> = {};
    for (const part of fmt.formatToParts(d)) if (part.type !== 'literal') p[part.type] = Number(part.value);
    return { year: p.year, month: p.month, day: p.day, hour: p.hour % 24 };
  };
}

/** ISO-8601 week number and week-year of a calendar date. */
export function isoWeek(year: number, month: number, day: number): { weekYear: number; week: number } {
  const d = new Date(Date.UTC(year, month - 1, day));
  const dow = d.getUTCDay() || 7; // Monday=1 … Sunday=7
  d.setUTCDate(d.getUTCDate() + 4 - dow); // the Thursday of this week decides the year
  const weekYear = d.getUTCFullYear();
  const jan1 = Date.UTC(weekYear, 0, 1);
  const week = Math.floor((d.getTime() - jan1) / 86_400_000 / 7) + 1;
  return { weekYear, week };
}

const RULES: { key: keyof RetentionPolicy; reason: string; bucket: (p: Parts) => number }[] = [
  {
    key: 'keepHourly',
    reason: 'hourly',
    bucket: (p) => ((p.year * 100 + p.month) * 100 + p.day) * 100 + p.hour,
  },
  { key: 'keepDaily', reason: 'daily', bucket: (p) => (p.year * 100 + p.month) * 100 + p.day },
  {
    key: 'keepWeekly',
    reason: 'weekly',
    bucket: (p) => {
      const w = isoWeek(p.year, p.month, p.day);
      return w.weekYear * 100 + w.week;
    },
  },
  { key: 'keepMonthly', reason: 'monthly', bucket: (p) => p.year * 100 + p.month },
  { key: 'keepYearly', reason: 'yearly', bucket: (p) => p.year },
];

function normaliseCount(n: number | undefined): number {
  if (n === undefined || n === null || Number.isNaN(n)) return 0;
  if (n < 0 || n === Infinity) return Infinity;
  return Math.floor(n);
}

/** True when the policy has at least one rule that keeps something. */
export function policyIsEmpty(policy: RetentionPolicy): boolean {
  return (
    normaliseCount(policy.keepLast) === 0 &&
    RULES.every((r) => normaliseCount(policy[r.key] as number | undefined) === 0) &&
    !(policy.keepTags && policy.keepTags.length > 0)
  );
}

/**
 * Decide which snapshots survive `policy`. `snapshots` may be in any order; `keep` and `remove` are
 * returned newest first. Apply it per group (see groupSnapshots) — it does not group by itself.
 */
export function applyRetentionPolicy(
  snapshots: readonly SnapshotEntry[],
  policy: RetentionPolicy,
  now: Date = new Date(),
  opts: RetentionOptions = {},
): ForgetDecision {
  const sorted = [...snapshots].sort((a, b) => {
    const d = Date.parse(b.time) - Date.parse(a.time);
    return d !== 0 ? d : a.id < b.id ? 1 : a.id > b.id ? -1 : 0;
  });
  const reasons = new Map<string, string[]>();
  const add = (s: SnapshotEntry, r: string) => {
    const list = reasons.get(s.id);
    if (list) list.push(r);
    else reasons.set(s.id, [r]);
  };

  if (policyIsEmpty(policy)) {
    for (const s of sorted) add(s, 'no policy');
  } else {
    const nowMs = now.getTime();
    for (const s of sorted) if (Date.parse(s.time) > nowMs) add(s, 'in the future');

    const keepLast = normaliseCount(policy.keepLast);
    for (let i = 0; i < sorted.length && i < keepLast; i++) add(sorted[i], 'last');

    if (policy.keepTags && policy.keepTags.length > 0) {
      const tags = new Set(policy.keepTags);
      for (const s of sorted) if (s.tags?.some((t) => tags.has(t))) add(s, 'tag');
    }

    const parts = partsGetter(opts.timeZone);
    const partsOf = sorted.map((s) => parts(new Date(s.time)));
    for (const rule of RULES) {
      let left = normaliseCount(policy[rule.key] as number | undefined);
      if (left === 0) continue;
      let last: number | undefined;
      for (let i = 0; i < sorted.length && left > 0; i++) {
        const b = rule.bucket(partsOf[i]);
        if (b !== last) {
          add(sorted[i], rule.reason);
          last = b;
          left--;
        }
      }
    }
  }

  const decision: ForgetDecision = { keep: [], remove: [] };
  for (const s of sorted) {
    const r = reasons.get(s.id);
    if (r) decision.keep.push({ snapshot: s, reasons: r });
    else decision.remove.push(s);
  }
  return decision;
}

export type GroupBy = 'host' | 'paths' | 'tags' | 'job';

/** Split snapshots into the groups retention is applied to (default: host + paths, like restic). */
export function groupSnapshots(
  snapshots: readonly SnapshotEntry[],
  by: readonly GroupBy[] = ['host', 'paths'],
): Map<string, SnapshotEntry[]> {
  const groups = new Map<string, SnapshotEntry[]>();
  for (const s of snapshots) {
    const key = JSON.stringify(
      by.map((k) =>
        k === 'host'
          ? s.host
          : k === 'paths'
            ? [...s.paths].sort()
            : k === 'tags'
              ? [...(s.tags ?? [])].sort()
              : (s.job ?? ''),
      ),
    );
    const g = groups.get(key);
    if (g) g.push(s);
    else groups.set(key, [s]);
  }
  return groups;
}

/** Human-readable one-line summary of a policy (for logs and the dry-run preview). */
export function describePolicy(policy: RetentionPolicy): string {
  const parts: string[] = [];
  const fmt = (n: number | undefined) => (normaliseCount(n) === Infinity ? 'all' : String(normaliseCount(n)));
  if (policy.keepLast) parts.push(`last ${fmt(policy.keepLast)}`);
  for (const r of RULES) {
    const n = policy[r.key] as number | undefined;
    if (n) parts.push(`${r.reason} ${fmt(n)}`);
  }
  if (policy.keepTags?.length) parts.push(`tags ${policy.keepTags.join(',')}`);
  return parts.length ? `keep ${parts.join(', ')}` : 'keep everything (no policy)';
}
