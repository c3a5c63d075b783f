import { emptySnapshotStats } from '../../src/main/engine/repo/types.js';
import { describe, expect, it } from 'vitest';
import {
  applyRetentionPolicy,
  describePolicy,
  groupSnapshots,
  isoWeek,
} from '../../src/main/engine/repo/retentionPolicy.js';
import type { SnapshotEntry } from '../../src/main/engine/repo/types.js';

function snap(time: string, extra: Partial<SnapshotEntry> = {}): SnapshotEntry {
  return {
    id: `id-${time}`,
    version: 1,
    time,
    host: 'pc',
    paths: ['/home/a'],
    tags: [],
    tree: 't',
    stats: emptySnapshotStats(),
    skipped: [],
    ...extra,
  };
}

/** One backup every day at 02:00 UTC for two years (2024 is a leap year), plus three more on the last day. */
function twoYears(): SnapshotEntry[] {
  const out: SnapshotEntry[] = [];
  for (let t = Date.UTC(2024, 0, 1, 2); t <= Date.UTC(2025, 11, 31, 2); t += 86_400_000) {
    out.push(snap(new Date(t).toISOString()));
  }
  for (const h of ['08', '14', '20']) out.push(snap(`2025-12-31T${h}:00:00.000Z`));
  return out;
}

const day = (d: string, h = '02') => `${d}T${h}:00:00.000Z`;

describe('applyRetentionPolicy', () => {
  it('keeps exactly the grandfather-father-son set over a two-year history', () => {
    const all = twoYears();
    expect(all).toHaveLength(734);
    const decision = applyRetentionPolicy(
      // shuffled input: order must not matter
      [...all].sort((a, b) =>
        a.id.split('').reverse().join('') < b.id.split('').reverse().join('') ? -1 : 1,
      ),
      { keepLast: 3, keepDaily: 7, keepWeekly: 4, keepMonthly: 12, keepYearly: 3 },
      new Date('2026-01-01T00:00:00Z'),
      { timeZone: 'UTC' },
    );
    const kept = decision.keep.map((k) => k.snapshot.time);
    expect(kept).toEqual([
      day('2025-12-31', '20'),
      day('2025-12-31', '14'),
      day('2025-12-31', '08'),
      // 2025-12-31 02:00 is not the newest of its day and not among the last 3: removed
      day('2025-12-30'),
      day('2025-12-29'),
      day('2025-12-28'),
      day('2025-12-27'),
      day('2025-12-26'),
      day('2025-12-25'),
      day('2025-12-21'), // weekly: Sunday closing ISO week 51 (12-28 closes week 52)
      day('2025-12-14'),
      day('2025-11-30'), // monthly: last snapshot of each month
      day('2025-10-31'),
      day('2025-09-30'),
      day('2025-08-31'),
      day('2025-07-31'),
      day('2025-06-30'),
      day('2025-05-31'),
      day('2025-04-30'),
      day('2025-03-31'),
      day('2025-02-28'),
      day('2025-01-31'),
      day('2024-12-31'), // yearly: only two years exist, so only two yearly slots are used
    ]);
    expect(decision.remove).toHaveLength(734 - 23);
    expect(decision.remove.map((s) => s.time)).toContain(day('2025-12-31'));
    expect(decision.remove[decision.remove.length - 1].time).toBe(day('2024-01-01'));
    // newest snapshot is kept for every reason
    expect(decision.keep[0].reasons).toEqual(['last', 'daily', 'weekly', 'monthly', 'yearly']);
    expect(decision.keep.find((k) => k.snapshot.time === day('2025-12-28'))!.reasons).toEqual([
      'daily',
      'weekly',
    ]);
    expect(decision.keep.find((k) => k.snapshot.time === day('2024-12-31'))!.reasons).toEqual(['yearly']);
  });

  it('a period without snapshots does not use up a slot', () => {
    const snaps = [
      day('2025-06-10'),
      day('2025-04-03'),
      day('2025-04-01'),
      day('2025-01-20'),
      day('2024-12-01'),
    ].map((t) => snap(t));
    const d = applyRetentionPolicy(snaps, { keepMonthly: 3 }, new Date('2025-07-01T00:00:00Z'), {
      timeZone: 'UTC',
    });
    expect(d.keep.map((k) => k.snapshot.time)).toEqual([
      day('2025-06-10'),
      day('2025-04-03'),
      day('2025-01-20'),
    ]);
    expect(d.remove.map((s) => s.time)).toEqual([day('2025-04-01'), day('2024-12-01')]);
  });

  it('computes days in the given time zone', () => {
    const snaps = [
      snap('2025-06-01T23:00:00.000Z'),
      snap('2025-06-01T21:00:00.000Z'),
      snap('2025-05-31T12:00:00.000Z'),
    ];
    const now = new Date('2025-06-05T00:00:00Z');
    const utc = applyRetentionPolicy(snaps, { keepDaily: 2 }, now, { timeZone: 'UTC' });
    expect(utc.keep.map((k) => k.snapshot.time)).toEqual([
      '2025-06-01T23:00:00.000Z',
      '2025-05-31T12:00:00.000Z',
    ]);
    // In Berlin (UTC+2 in summer) 23:00Z is already June 2nd.
    const berlin = applyRetentionPolicy(snaps, { keepDaily: 2 }, now, { timeZone: 'Europe/Berlin' });
    expect(berlin.keep.map((k) => k.snapshot.time)).toEqual([
      '2025-06-01T23:00:00.000Z',
      '2025-06-01T21:00:00.000Z',
    ]);
  });

  it('keeps tagged snapshots, treats -1 as unlimited, and never deletes with an empty policy', () => {
    const snaps = [
      snap(day('2025-01-03')),
      snap(day('2025-01-02')),
      snap(day('2025-01-01'), { tags: ['before-upgrade'] }),
      snap(day('2024-12-31')),
    ];
    const now = new Date('2025-02-01T00:00:00Z');
    const tagged = applyRetentionPolicy(snaps, { keepLast: 1, keepTags: ['before-upgrade'] }, now);
    expect(tagged.keep.map((k) => [k.snapshot.time, k.reasons])).toEqual([
      [day('2025-01-03'), ['last']],
      [day('2025-01-01'), ['tag']],
    ]);
    expect(applyRetentionPolicy(snaps, { keepDaily: -1 }, now, { timeZone: 'UTC' }).remove).toEqual([]);
    const empty = applyRetentionPolicy(snaps, {}, now);
    expect(empty.remove).toEqual([]);
    expect(empty.keep[0].reasons).toEqual(['no policy']);
  });

  it('always keeps snapshots dated after now (clock skew)', () => {
    const snaps = [snap(day('2030-01-01')), snap(day('2025-01-02')), snap(day('2025-01-01'))];
    const d = applyRetentionPolicy(snaps, { keepLast: 1 }, new Date('2025-02-01T00:00:00Z'));
    expect(d.keep.map((k) => [k.snapshot.time, k.reasons])).toEqual([
      [day('2030-01-01'), ['in the future', 'last']],
    ]);
    expect(d.remove).toHaveLength(2);
  });

  it('keeps the newest of each hour for keepHourly', () => {
    const snaps = ['10:05', '10:45', '11:10', '12:59', '12:01'].map((t) => snap(`2025-03-01T${t}:00.000Z`));
    const d = applyRetentionPolicy(snaps, { keepHourly: 2 }, new Date('2025-03-02T00:00:00Z'), {
      timeZone: 'UTC',
    });
    expect(d.keep.map((k) => k.snapshot.time)).toEqual([
      '2025-03-01T12:59:00.000Z',
      '2025-03-01T11:10:00.000Z',
    ]);
  });
});

describe('retention helpers', () => {
  it('isoWeek follows ISO-8601', () => {
    expect(isoWeek(2025, 12, 29)).toEqual({ weekYear: 2026, week: 1 });
    expect(isoWeek(2021, 1, 3)).toEqual({ weekYear: 2020, week: 53 });
    expect(isoWeek(2024, 12, 30)).toEqual({ weekYear: 2025, week: 1 });
    expect(isoWeek(2025, 6, 15)).toEqual({ weekYear: 2025, week: 24 });
  });

  it('groups by host and paths', () => {
    const g = groupSnapshots([
      snap(day('2025-01-01')),
      snap(day('2025-01-02'), { paths: ['/home/b'] }),
      snap(day('2025-01-03'), { host: 'laptop' }),
      snap(day('2025-01-04')),
    ]);
    expect([...g.values()].map((v) => v.length)).toEqual([2, 1, 1]);
  });

  it('describes a policy', () => {
    expect(describePolicy({ keepLast: 3, keepDaily: 7, keepYearly: -1 })).toBe(
      'keep last 3, daily 7, yearly all',
    );
    expect(describePolicy({})).toBe('keep everything (no policy)');
  });
});
