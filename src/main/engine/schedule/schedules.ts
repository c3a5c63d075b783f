/**
 * Schedules as users describe them (hourly, every N hours, daily at set times, weekly), turned into
 * cron expressions evaluated by croner in the schedule's time zone, so DST changes are handled by a
 * well-kept library: a time that does not exist (spring forward) runs at the next valid time, a time
 * that exists twice (fall back) runs once.
 */
import { Cron } from 'croner';
import type { Schedule } from '../catalog/types.js';
import { UsageError } from '../errors.js';

function hhmm(t: string): { h: number; m: number } {
  const m = /^(\d{1,2}):(\d{2})$/.exec(t.trim());
  if (!m || Number(m[1]) > 23 || Number(m[2]) > 59)
    throw new UsageError(`invalid time "${t}": use HH:MM (24-hour)`);
  return { h: Number(m[1]), m: Number(m[2]) };
}

/** The cron expressions (minute hour dom month dow) a schedule fires on; [] for manual. */
export function scheduleToCron(s: Schedule): string[] {
  switch (s.kind) {
    case 'manual':
      return [];
    case 'hourly':
      return [`${s.minute ?? 0} * * * *`];
    case 'every-hours': {
      if (!Number.isInteger(s.hours) || s.hours < 1 || s.hours > 24)
        throw new UsageError('every-hours needs a whole number of hours between 1 and 24');
      return [s.hours === 24 ? `${s.minute ?? 0} 0 * * *` : `${s.minute ?? 0} */${s.hours} * * *`];
    }
    case 'daily': {
      if (!s.times.length) throw new UsageError('a daily schedule needs at least one time');
      return s.times.map((t) => {
        const { h, m } = hhmm(t);
        return `${m} ${h} * * *`;
      });
    }
    case 'weekly': {
      if (!s.days.length || s.days.some((d) => !Number.isInteger(d) || d < 0 || d > 6))
        throw new UsageError('a weekly schedule needs days between 0 (Sunday) and 6 (Saturday)');
      const { h, m } = hhmm(s.time);
      return [`${m} ${h} * * ${[...new Set(s.days)].sort().join(',')}`];
    }
    case 'cron':
      return s.expressions;
  }
}

const cronCache = new Map<string, Cron[]>();

function crons(s: Schedule): Cron[] {
  const key = JSON.stringify(s);
  let list = cronCache.get(key);
  if (!list) {
    const tz = s.kind === 'manual' ? undefined : s.timeZone;
    list = scheduleToCron(s).map((expr) => {
      try {
        return new Cron(expr, { paused: true, ...(tz ? { timezone: tz } : {}) });
      } catch (err) {
        throw new UsageError(`invalid schedule "${expr}": ${(err as Error).message}`);
      }
    });
    if (cronCache.size > 500) cronCache.clear();
    cronCache.set(key, list);
  }
  return list;
}

/** Validates a schedule (throws UsageError). */
export function validateSchedule(s: Schedule): void {
  crons(s);
}

/** The first fire time strictly after `after` (ms since epoch), or null for manual schedules. */
export function nextFireTime(s: Schedule, after: number): number | null {
  let best: number | null = null;
  for (const c of crons(s)) {
    const d = c.nextRun(new Date(after));
    if (d && (best === null || d.getTime() < best)) best = d.getTime();
  }
  return best;
}

/** The last fire time at or before `at`, or null. */
export function previousFireTime(s: Schedule, at: number): number | null {
  let best: number | null = null;
  for (const c of crons(s)) {
    const d = c.previousRuns(1, new Date(at + 1))[0];
    if (d && (best === null || d.getTime() > best)) best = d.getTime();
  }
  return best;
}

/**
 * The fire times in (after, until]: how many (counted up to `max`; `capped` when there were more),
 * the first and the last. Bounded work however long the machine was off.
 */
export function fireTimesBetween(
  s: Schedule,
  after: number,
  until: number,
  max = 1000,
): { count: number; capped: boolean; first: number | null; last: number | null } {
  let count = 0;
  let first: number | null = null;
  let last: number | null = null;
  let t = after;
  for (;;) {
    const n = nextFireTime(s, t);
    if (n === null || n > until) return { count, capped: false, first, last };
    if (first === null) first = n;
    last = n;
    count++;
    t = n;
    if (count >= max) break;
  }
  const prev = previousFireTime(s, until);
  if (prev !== null && prev > t) return { count, capped: true, first, last: prev };
  return { count, capped: nextFireTime(s, t)! <= until, first, last };
}

/** A short human description ("daily at 02:30", "every 4 hours"). */
export function describeSchedule(s: Schedule): string {
  switch (s.kind) {
    case 'manual':
      return 'manual';
    case 'hourly':
      return `hourly at :${String(s.minute ?? 0).padStart(2, '0')}`;
    case 'every-hours':
      return `every ${s.hours} hours`;
    case 'daily':
      return `daily at ${s.times.join(', ')}`;
    case 'weekly': {
      const names = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
      return `weekly on ${s.days.map((d) => names[d]).join(', ')} at ${s.time}`;
    }
    case 'cron':
      return `cron ${s.expressions.join(' | ')}`;
  }
}
