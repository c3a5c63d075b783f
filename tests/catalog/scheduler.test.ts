import os from 'node:os';
import { spawnSync } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import type { Job, JobSpec, RunRecord, Schedule } from '../../src/main/engine/catalog/types.js';
import { Scheduler, type Clock, type RunRequest } from '../../src/main/engine/schedule/scheduler.js';
import { nextFireTime, scheduleToCron, fireTimesBetween } from '../../src/main/engine/schedule/schedules.js';
import type { RunEvents } from '../../src/main/engine/schedule/events.js';

/** A clock tests move by hand; timers fire in time order as it moves. */
class FakeClock implements Clock {
  private timers: { at: number; fn: () => void; id: number }[] = [];
  private seq = 0;
  constructor(public t: number) {}
  now() {
    return this.t;
  }
  setTimer(fn: () => void, ms: number) {
    const id = ++this.seq;
    this.timers.push({ at: this.t + ms, fn, id });
    return id;
  }
  clearTimer(h: unknown) {
    this.timers = this.timers.filter((x) => x.id !== h);
  }
  /** Moves time forward, firing due timers in order (a timer may set new ones). */
  async advanceTo(t: number) {
    for (;;) {
      this.timers.sort((a, b) => a.at - b.at);
      const next = this.timers[0];
      if (!next || next.at > t) break;
      this.timers.shift();
      this.t = Math.max(this.t, next.at);
      next.fn();
      await flushPromises();
    }
    this.t = t;
  }
  /** Jumps without firing timers (the machine was asleep); the late timer fires on the next advance. */
  sleepUntil(t: number) {
    this.t = t;
  }
  pending() {
    return this.timers.length;
  }
}

const flushPromises = () => new Promise((r) => setImmediate(r));

interface Deferred {
  resolve: () => void;
}

/** A runner that records calls and completes when told to (or at once). */
class FakeRunner {
  calls: { jobId: number; req: RunRequest; at: number }[] = [];
  holds: Deferred[] = [];
  active = 0;
  maxActive = 0;
  constructor(
    private catalog: Catalog,
    private clock: FakeClock,
    public hold = false,
  ) {}
  async run(job: Job, req: RunRequest): Promise<RunRecord> {
    this.calls.push({ jobId: job.id, req, at: this.clock.now() });
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    this.catalog.updateRun(req.runId, { status: 'running', startedAt: this.clock.now() });
    if (this.hold) await new Promise<void>((resolve) => this.holds.push({ resolve }));
    this.active--;
    this.catalog.updateRun(req.runId, { status: 'completed', endedAt: this.clock.now() });
    return this.catalog.getRun(req.runId);
  }
}

let catalog: Catalog;
let repoA: number;
let repoB: number;
beforeEach(() => {
  catalog = new Catalog('', { memory: true });
  repoA = catalog.addRepository({ name: 'a', location: '/a', options: {} }).id;
  repoB = catalog.addRepository({ name: 'b', location: '/b', options: {} }).id;
});
afterEach(() => catalog.close());

function addJob(name: string, schedule: Schedule, now: number, extra: Partial<JobSpec> = {}): Job {
  return catalog.addJob(
    {
      name,
      repositoryId: repoA,
      sources: ['/home'],
      excludes: [],
      schedule,
      retention: {},
      compressionLevel: 3,
      options: {},
      enabled: true,
      ...extra,
    },
    now,
  );
}

function collect(s: Scheduler) {
  const ev: { type: keyof RunEvents; payload: any }[] = [];
  for (const type of ['run-queued', 'run-missed', 'run-skipped'] as const) {
    s.events.on(type, (payload) => ev.push({ type, payload }));
  }
  return ev;
}

const iso = (t: number) => new Date(t).toISOString();
const T = (s: string) => Date.parse(s);
const BERLIN = 'Europe/Berlin';

describe('schedules', () => {
  it('turns user schedules into cron expressions', () => {
    expect(scheduleToCron({ kind: 'daily', times: ['02:30', '14:00'] })).toEqual([
      '30 2 * * *',
      '0 14 * * *',
    ]);
    expect(scheduleToCron({ kind: 'weekly', days: [5, 1], time: '09:15' })).toEqual(['15 9 * * 1,5']);
    expect(scheduleToCron({ kind: 'every-hours', hours: 6 })).toEqual(['0 */6 * * *']);
    expect(scheduleToCron({ kind: 'hourly', minute: 5 })).toEqual(['5 * * * *']);
    expect(() => scheduleToCron({ kind: 'daily', times: ['25:00'] })).toThrow(/invalid time/);
    expect(nextFireTime({ kind: 'manual' }, 0)).toBeNull();
  });

  it('handles DST in the schedule time zone: a missing time runs once at the next valid time, a doubled one once', () => {
    const s: Schedule = { kind: 'daily', times: ['02:30'], timeZone: BERLIN };
    let t = T('2025-03-28T12:00:00Z');
    const spring: string[] = [];
    for (let i = 0; i < 4; i++) spring.push(iso((t = nextFireTime(s, t)!)));
    expect(spring).toEqual([
      '2025-03-29T01:30:00.000Z', // 02:30 CET
      '2025-03-30T01:00:00.000Z', // 02:30 does not exist: 03:00 CEST
      '2025-03-31T00:30:00.000Z', // 02:30 CEST
      '2025-04-01T00:30:00.000Z',
    ]);
    const fall = fireTimesBetween(s, T('2025-10-25T12:00:00Z'), T('2025-10-27T12:00:00Z'));
    expect(fall.count).toBe(2); // 26 October: 02:30 happens twice on the wall clock, runs once
    expect(iso(fall.first!)).toBe('2025-10-26T00:30:00.000Z');
    expect(iso(fall.last!)).toBe('2025-10-27T01:30:00.000Z');
  });

  it('counts missed fire times with bounded work after a long shutdown', () => {
    const everyMinute: Schedule = { kind: 'cron', expressions: ['* * * * *'], timeZone: 'UTC' };
    const r = fireTimesBetween(everyMinute, T('2024-01-01T00:00:30Z'), T('2025-01-01T00:00:30Z'));
    expect(r).toEqual({
      count: 1000,
      capped: true,
      first: T('2024-01-01T00:01:00Z'),
      last: T('2025-01-01T00:00:00Z'),
    });
    const small = fireTimesBetween(everyMinute, T('2024-01-01T00:00:30Z'), T('2024-01-01T00:10:00Z'));
    expect(small).toEqual({
      count: 10,
      capped: false,
      first: T('2024-01-01T00:01:00Z'),
      last: T('2024-01-01T00:10:00Z'),
    });
  });
});

describe('Scheduler', () => {
  it('runs a job at its time, once, and waits for the next', async () => {
    const clock = new FakeClock(T('2025-06-01T10:00:00Z'));
    const job = addJob('docs', { kind: 'daily', times: ['02:00'], timeZone: BERLIN }, clock.now());
    const runner = new FakeRunner(catalog, clock);
    const s = new Scheduler({ catalog, runner, clock });
    const ev = collect(s);
    s.start();
    expect(s.nextRun(catalog.getJob(job.id))).toBe(T('2025-06-02T00:00:00Z'));
    await clock.advanceTo(T('2025-06-01T23:59:00Z'));
    expect(runner.calls).toHaveLength(0);
    await clock.advanceTo(T('2025-06-02T00:00:30Z'));
    expect(runner.calls.map((c) => [c.req.trigger, iso(c.req.scheduledFor!)])).toEqual([
      ['schedule', '2025-06-02T00:00:00.000Z'],
    ]);
    await clock.advanceTo(T('2025-06-02T23:00:00Z'));
    expect(runner.calls).toHaveLength(1);
    await clock.advanceTo(T('2025-06-03T00:01:00Z'));
    expect(runner.calls).toHaveLength(2);
    expect(ev.filter((e) => e.type === 'run-missed')).toEqual([]);
    const runs = catalog.listRuns({ jobId: job.id });
    expect(runs.map((r) => r.status)).toEqual(['completed', 'completed']);
    await s.stop();
  });

  it('after a shutdown, records ONE missed run and catches up once', async () => {
    const clock = new FakeClock(T('2025-06-01T10:00:00Z'));
    const job = addJob('docs', { kind: 'daily', times: ['02:00'], timeZone: BERLIN }, clock.now());
    // Tidemark is not running for three and a half days
    clock.sleepUntil(T('2025-06-04T22:00:00Z'));
    const runner = new FakeRunner(catalog, clock);
    const s = new Scheduler({ catalog, runner, clock });
    const ev = collect(s);
    s.start();
    await flushPromises();
    const missed = ev.filter((e) => e.type === 'run-missed');
    expect(missed).toHaveLength(1);
    expect(missed[0].payload).toMatchObject({ jobId: job.id, missedCount: 3, willCatchUp: true });
    expect(iso(missed[0].payload.scheduledFor)).toBe('2025-06-04T00:00:00.000Z');
    expect(runner.calls.map((c) => c.req.trigger)).toEqual(['catch-up']);
    const runs = catalog.listRuns({ jobId: job.id });
    expect(runs.map((r) => [r.kind, r.status])).toEqual([
      ['backup', 'completed'],
      ['missed', 'missed'],
    ]);
    expect(runs[1].counters).toMatchObject({ missedCount: 3 });
    // nothing more until the next fire time
    s.tick();
    await clock.advanceTo(T('2025-06-04T23:59:00Z'));
    expect(runner.calls).toHaveLength(1);
    await clock.advanceTo(T('2025-06-05T00:00:10Z'));
    expect(runner.calls.map((c) => c.req.trigger)).toEqual(['catch-up', 'schedule']);
    await s.stop();
  });

  it('notices a sleep across a fire time when the late timer fires', async () => {
    const clock = new FakeClock(T('2025-06-01T10:00:00Z'));
    addJob('photos', { kind: 'every-hours', hours: 4, timeZone: 'UTC' }, clock.now());
    const runner = new FakeRunner(catalog, clock);
    const s = new Scheduler({ catalog, runner, clock });
    const ev = collect(s);
    s.start();
    await clock.advanceTo(T('2025-06-01T11:00:00Z'));
    clock.sleepUntil(T('2025-06-01T21:30:00Z')); // lid closed 11:00 → 21:30: 12:00, 16:00, 20:00 missed
    await clock.advanceTo(T('2025-06-01T21:31:00Z'));
    expect(ev.filter((e) => e.type === 'run-missed').map((e) => e.payload.missedCount)).toEqual([3]);
    expect(runner.calls.map((c) => c.req.trigger)).toEqual(['catch-up']);
    await clock.advanceTo(T('2025-06-02T00:00:30Z'));
    expect(runner.calls.map((c) => c.req.trigger)).toEqual(['catch-up', 'schedule']);
    await s.stop();
  });

  it('does not catch up when the job says so, but still records the missed run', async () => {
    const clock = new FakeClock(T('2025-06-01T10:00:00Z'));
    addJob('x', { kind: 'hourly' }, clock.now(), { options: { catchUp: false } });
    clock.sleepUntil(T('2025-06-01T15:30:00Z'));
    const runner = new FakeRunner(catalog, clock);
    const s = new Scheduler({ catalog, runner, clock });
    const ev = collect(s);
    s.start();
    await flushPromises();
    expect(ev.filter((e) => e.type === 'run-missed').map((e) => e.payload.willCatchUp)).toEqual([false]);
    expect(runner.calls).toHaveLength(0);
    await s.stop();
  });

  it('never overlaps runs of one job', async () => {
    const clock = new FakeClock(T('2025-06-01T10:30:00Z'));
    const job = addJob('big', { kind: 'hourly', timeZone: 'UTC' }, clock.now());
    const runner = new FakeRunner(catalog, clock, true);
    const s = new Scheduler({ catalog, runner, clock });
    const ev = collect(s);
    s.start();
    await clock.advanceTo(T('2025-06-01T11:00:10Z'));
    expect(runner.calls).toHaveLength(1);
    await clock.advanceTo(T('2025-06-01T12:00:10Z')); // still running at the next hour
    expect(runner.calls).toHaveLength(1);
    expect(ev.filter((e) => e.type === 'run-skipped')).toHaveLength(1);
    // a manual "run now" returns the running run instead of starting another
    const again = s.runNow(job.id);
    expect(again.runId).toBe(runner.calls[0].req.runId);
    runner.holds.shift()!.resolve();
    await flushPromises();
    await clock.advanceTo(T('2025-06-01T13:00:10Z'));
    expect(runner.calls).toHaveLength(2);
    expect(runner.maxActive).toBe(1);
    runner.holds.shift()!.resolve();
    await s.stop();
  });

  it('lets one writer at a time into a repository, and runs different repositories in parallel', async () => {
    const clock = new FakeClock(T('2025-06-01T10:30:00Z'));
    const daily: Schedule = { kind: 'daily', times: ['12:00'], timeZone: 'UTC' };
    const a1 = addJob('a1', daily, clock.now());
    const a2 = addJob('a2', daily, clock.now());
    const b1 = addJob('b1', daily, clock.now(), { repositoryId: repoB });
    const runner = new FakeRunner(catalog, clock, true);
    const s = new Scheduler({ catalog, runner, clock, concurrency: 2 });
    s.start();
    await clock.advanceTo(T('2025-06-01T12:00:05Z'));
    // a1 and b1 run (different repositories); a2 waits for repository A
    expect(runner.calls.map((c) => c.jobId)).toEqual([a1.id, b1.id]);
    expect(s.status()).toEqual({ running: [a1.id, b1.id], queued: [a2.id] });
    expect(catalog.listRuns({ jobId: a2.id })[0].status).toBe('queued');
    runner.holds.shift()!.resolve(); // a1 done
    await flushPromises();
    expect(runner.calls.map((c) => c.jobId)).toEqual([a1.id, b1.id, a2.id]);
    runner.holds.forEach((h) => h.resolve());
    await s.stop();
  });

  it('respects the concurrency limit across repositories', async () => {
    const clock = new FakeClock(T('2025-06-01T10:30:00Z'));
    const daily: Schedule = { kind: 'daily', times: ['12:00'], timeZone: 'UTC' };
    addJob('a1', daily, clock.now());
    addJob('b1', daily, clock.now(), { repositoryId: repoB });
    const runner = new FakeRunner(catalog, clock, true);
    const s = new Scheduler({ catalog, runner, clock, concurrency: 1 });
    s.start();
    await clock.advanceTo(T('2025-06-01T12:00:05Z'));
    expect(runner.calls).toHaveLength(1);
    runner.holds.shift()!.resolve();
    await flushPromises();
    expect(runner.calls).toHaveLength(2);
    expect(runner.maxActive).toBe(1);
    runner.holds.shift()!.resolve();
    await s.stop();
  });

  it('runs exactly once a day across both DST changes (Europe/Berlin)', async () => {
    for (const [start, end, expected] of [
      [
        '2025-03-28T12:00:00Z',
        '2025-04-01T12:00:00Z',
        [
          '2025-03-29T01:30:00.000Z',
          '2025-03-30T01:00:00.000Z',
          '2025-03-31T00:30:00.000Z',
          '2025-04-01T00:30:00.000Z',
        ],
      ],
      [
        '2025-10-24T12:00:00Z',
        '2025-10-28T12:00:00Z',
        [
          '2025-10-25T00:30:00.000Z',
          '2025-10-26T00:30:00.000Z',
          '2025-10-27T01:30:00.000Z',
          '2025-10-28T01:30:00.000Z',
        ],
      ],
    ] as const) {
      const clock = new FakeClock(T(start));
      const job = addJob(`dst-${start}`, { kind: 'daily', times: ['02:30'], timeZone: BERLIN }, clock.now());
      const runner = new FakeRunner(catalog, clock);
      // long sleeps: the timer must aim at the fire times itself
      const s = new Scheduler({ catalog, runner, clock, maxSleepMs: 86_400_000 });
      const ev = collect(s);
      s.start();
      await clock.advanceTo(T(end));
      expect(runner.calls.map((c) => iso(c.at))).toEqual(expected);
      expect(runner.calls.every((c) => c.req.trigger === 'schedule')).toBe(true);
      expect(ev.filter((e) => e.type === 'run-missed')).toEqual([]);
      await s.stop();
      catalog.removeJob(job.id);
    }
  });

  it('marks runs a crash left open as failed on start, and can cancel a queued run', async () => {
    const clock = new FakeClock(T('2025-06-01T10:30:00Z'));
    const job = addJob('j', { kind: 'manual' }, clock.now());
    const job2 = addJob('j2', { kind: 'manual' }, clock.now());
    const stale = catalog.createRun({ jobId: job.id, trigger: 'manual', status: 'running', startedAt: 1 });
    const dead = spawnSync(process.execPath, ['-e', '0']).pid; // a process that has exited
    catalog.db.prepare('UPDATE runs SET owner = ? WHERE id = ?').run(`${os.hostname()}:${dead}`, stale.id);
    // a run of another live process (say `tidemark job run` beside the app) is left alone
    const live = catalog.createRun({ jobId: job2.id, trigger: 'manual', status: 'running', startedAt: 1 });
    catalog.db
      .prepare('UPDATE runs SET owner = ? WHERE id = ?')
      .run(`${os.hostname()}:${process.ppid}`, live.id);
    const runner = new FakeRunner(catalog, clock, true);
    const s = new Scheduler({ catalog, runner, clock });
    s.start();
    expect(catalog.getRun(stale.id)).toMatchObject({ status: 'failed', error: { code: 'INTERRUPTED' } });
    expect(catalog.getRun(live.id).status).toBe('running');
    const first = s.runNow(job.id);
    const second = s.runNow(job2.id); // same repository: queued
    expect(s.status().queued).toEqual([job2.id]);
    expect(s.cancel(job2.id)).toBe(true);
    expect((await second.promise).status).toBe('cancelled');
    expect(catalog.getRun(second.runId).status).toBe('cancelled');
    runner.holds.shift()!.resolve();
    expect((await first.promise).status).toBe('completed');
    expect(runner.calls.map((c) => c.jobId)).toEqual([job.id]);
    await s.stop();
  });

  it('drops a queued run whose job was removed meanwhile', async () => {
    const clock = new FakeClock(T('2025-06-01T10:30:00Z'));
    const a = addJob('a', { kind: 'manual' }, clock.now());
    const b = addJob('b', { kind: 'manual' }, clock.now());
    const runner = new FakeRunner(catalog, clock, true);
    const s = new Scheduler({ catalog, runner, clock });
    const first = s.runNow(a.id);
    const second = s.runNow(b.id);
    catalog.removeJob(b.id);
    runner.holds.shift()!.resolve();
    expect((await first.promise).status).toBe('completed');
    expect((await second.promise).status).toBe('cancelled');
    expect(runner.calls.map((c) => c.jobId)).toEqual([a.id]);
    await s.stop();
  });

  it('fires once when two schedulers share the catalog (the app and the headless scheduler)', async () => {
    const clock = new FakeClock(T('2025-06-01T10:30:00Z'));
    addJob('shared', { kind: 'daily', times: ['12:00'], timeZone: 'UTC' }, clock.now());
    const r1 = new FakeRunner(catalog, clock);
    const r2 = new FakeRunner(catalog, clock);
    const s1 = new Scheduler({ catalog, runner: r1, clock });
    const s2 = new Scheduler({ catalog, runner: r2, clock });
    s1.start();
    s2.start();
    await clock.advanceTo(T('2025-06-01T12:00:30Z'));
    await clock.advanceTo(T('2025-06-02T12:00:30Z'));
    expect(r1.calls.length + r2.calls.length).toBe(2);
    expect(catalog.listRuns().filter((r) => r.status === 'completed')).toHaveLength(2);
    await s1.stop();
    await s2.stop();
  });
});
