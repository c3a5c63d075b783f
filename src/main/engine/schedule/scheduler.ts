/**
 * The scheduler: decides when jobs run and keeps runs from stepping on each other.
 *
 * - Each job's schedule is evaluated with croner (schedules.ts). The catalog remembers, per job, the
 *   time up to which fire times have been handled (`schedCheckedAt`), so nothing fires twice and
 *   nothing is forgotten across restarts.
 * - A fire time that passed more than `graceMs` ago (the machine slept or Tidemark was not running)
 *   is recorded as ONE "missed" run, however many fire times were missed, and the job runs once to
 *   catch up (unless the job disables catch-up).
 * - A job never runs twice at once: a fire time that comes while it is running or queued is skipped.
 * - One writer per repository: runs of jobs sharing a repository queue behind each other. Runs for
 *   different repositories go in parallel up to `concurrency`.
 * - Time comes from an injected clock, so tests drive it (DST changes, sleep, shutdown).
 *
 * Not here: what a run does (JobRunner), and persistence beyond the catalog's rows.
 */
import type { Job, RunRecord, RunTrigger } from '../catalog/types.js';
import { fireTimesBetween, nextFireTime } from './schedules.js';
import { createRunEvents, type RunEventEmitter } from './events.js';
import { PauseGate } from '../pauseGate.js';

export interface Clock {
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimer: (h) => clearTimeout(h as NodeJS.Timeout),
};

/** What the scheduler needs from the catalog. */
export interface SchedulerCatalog {
  listJobs(): Job[];
  getJob(id: number): Job;
  /** Compare-and-set of the job's schedule bookmark (false: another scheduler moved it first). */
  claimJobCheck(id: number, expected: number | null, at: number): boolean;
  createRun(r: {
    jobId: number | null;
    kind?: RunRecord['kind'];
    trigger: RunTrigger;
    status: RunRecord['status'];
    scheduledFor?: number | null;
    startedAt?: number | null;
    endedAt?: number | null;
  }): RunRecord;
  updateRun(id: number, patch: { status?: RunRecord['status']; counters?: Record<string, unknown> }): void;
  failInterruptedRuns(now?: number): number;
}

export interface RunRequest {
  trigger: RunTrigger;
  /** Force a full backup (re-read everything). */
  full?: boolean;
  scheduledFor?: number | null;
  runId: number;
  signal: AbortSignal;
  /** Lets the run be paused (the backup waits before each file it starts). */
  pauseGate?: PauseGate;
}

/** A gate a running backup waits at while it is closed (the engine's one gate, ../pauseGate.ts). */
export { PauseGate };

/** What the scheduler needs to execute a run (JobRunner implements it). */
export interface RunExecutor {
  run(job: Job, req: RunRequest): Promise<RunRecord>;
}

export interface SchedulerOptions {
  catalog: SchedulerCatalog;
  runner: RunExecutor;
  clock?: Clock;
  events?: RunEventEmitter;
  /** Runs in parallel across different repositories (default 1). */
  concurrency?: number;
  /** A fire time noticed later than this is "missed" (default 5 minutes). */
  graceMs?: number;
  /** Longest sleep between checks, so a wake-up from sleep is noticed soon (default 60 s). */
  maxSleepMs?: number;
}

interface Pending {
  job: Job;
  trigger: RunTrigger;
  full: boolean;
  scheduledFor: number | null;
  runId: number;
  controller: AbortController;
  gate: PauseGate;
  promise: Promise<RunRecord>;
  resolve: (r: RunRecord) => void;
  reject: (e: unknown) => void;
}

export class Scheduler {
  readonly events: RunEventEmitter;
  private readonly catalog: SchedulerCatalog;
  private readonly runner: RunExecutor;
  private readonly clock: Clock;
  private concurrency: number;
  private readonly graceMs: number;
  private readonly maxSleepMs: number;
  private timer: unknown;
  private started = false;
  private readonly queue: Pending[] = [];
  private readonly running = new Map<number, Pending>(); // jobId → run
  private readonly busyRepos = new Set<number>();

  constructor(opts: SchedulerOptions) {
    this.catalog = opts.catalog;
    this.runner = opts.runner;
    this.clock = opts.clock ?? systemClock;
    this.events = opts.events ?? createRunEvents();
    this.concurrency = Math.max(1, opts.concurrency ?? 1);
    this.graceMs = opts.graceMs ?? 5 * 60_000;
    this.maxSleepMs = opts.maxSleepMs ?? 60_000;
  }

  setConcurrency(n: number): void {
    this.concurrency = Math.max(1, n);
    this.dispatch();
  }

  /** Starts timing: marks runs a crash left open as failed, then checks for due and missed runs. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.catalog.failInterruptedRuns(this.clock.now());
    this.tick();
  }

  /** Stops timing; with `cancelRuns`, aborts running and queued runs. Resolves when runs have ended. */
  async stop(opts: { cancelRuns?: boolean } = {}): Promise<void> {
    this.started = false;
    if (this.timer !== undefined) this.clock.clearTimer(this.timer);
    this.timer = undefined;
    const all = [...this.running.values(), ...this.queue];
    if (opts.cancelRuns) for (const p of all) p.controller.abort();
    await Promise.allSettled(all.map((p) => p.promise));
  }

  /** Jobs running now and queued, in order. */
  status(): { running: number[]; queued: number[] } {
    return { running: [...this.running.keys()], queued: this.queue.map((p) => p.job.id) };
  }

  /** The next time a job is due, or null (manual or disabled). */
  nextRun(job: Job): number | null {
    if (!job.enabled) return null;
    return nextFireTime(job.schedule, job.schedCheckedAt ?? job.createdAt);
  }

  /**
   * Checks every job against the clock: queues due runs, records missed ones, and sets the timer for
   * the next check. Called by the timer; tests call it after moving their clock.
   */
  tick(): void {
    const now = this.clock.now();
    let soonest = Infinity;
    for (const job of this.catalog.listJobs()) {
      if (!job.enabled || job.schedule.kind === 'manual') continue;
      const from = job.schedCheckedAt ?? job.createdAt;
      const next = nextFireTime(job.schedule, from);
      if (next === null) continue;
      if (next > now) {
        soonest = Math.min(soonest, next);
        continue;
      }
      // Claim these fire times; another scheduler sharing the catalog may have claimed them already.
      if (!this.catalog.claimJobCheck(job.id, job.schedCheckedAt, now)) continue;
      const fired = fireTimesBetween(job.schedule, from, now);
      const latest = fired.last ?? next;
      const after = nextFireTime(job.schedule, now);
      if (after !== null) soonest = Math.min(soonest, after);

      if (now - latest > this.graceMs) {
        const catchUp = job.options.catchUp !== false;
        const missed = this.catalog.createRun({
          jobId: job.id,
          kind: 'missed',
          trigger: 'schedule',
          status: 'missed',
          scheduledFor: latest,
          endedAt: now,
        });
        this.catalog.updateRun(missed.id, {
          counters: { missedCount: fired.count, missedCountCapped: fired.capped, firstMissed: fired.first },
        });
        this.events.emit('run-missed', {
          jobId: job.id,
          runId: missed.id,
          scheduledFor: latest,
          missedCount: fired.count,
          willCatchUp: catchUp && !this.isActive(job.id),
        });
        if (catchUp) this.enqueueScheduled(job, 'catch-up', latest);
      } else {
        this.enqueueScheduled(job, 'schedule', latest);
      }
    }
    if (this.started) {
      if (this.timer !== undefined) this.clock.clearTimer(this.timer);
      const wait = Math.max(1000, Math.min(this.maxSleepMs, soonest - now));
      this.timer = this.clock.setTimer(() => {
        this.timer = undefined;
        if (this.started) this.tick();
      }, wait);
    }
  }

  private isActive(jobId: number): boolean {
    return this.running.has(jobId) || this.queue.some((p) => p.job.id === jobId);
  }

  private enqueueScheduled(job: Job, trigger: RunTrigger, scheduledFor: number): void {
    if (this.isActive(job.id)) {
      this.events.emit('run-skipped', {
        jobId: job.id,
        scheduledFor,
        reason: 'the previous run is still going',
      });
      return;
    }
    void this.enqueue(job, { trigger, scheduledFor }).promise.catch(() => {});
  }

  /**
   * Runs a job now (or as soon as its repository is free). If the job is already running or queued,
   * returns that run instead of starting another.
   */
  runNow(jobId: number, opts: { full?: boolean } = {}): { runId: number; promise: Promise<RunRecord> } {
    const active = this.running.get(jobId) ?? this.queue.find((p) => p.job.id === jobId);
    if (active) return { runId: active.runId, promise: active.promise };
    const p = this.enqueue(this.catalog.getJob(jobId), { trigger: 'manual', full: opts.full });
    return { runId: p.runId, promise: p.promise };
  }

  /** Pauses or resumes a job's running backup; false when it is not running. */
  pause(jobId: number, paused: boolean): boolean {
    const p = this.running.get(jobId);
    if (!p) return false;
    p.gate.set(paused);
    return true;
  }

  /** True while a job's running backup is paused. */
  isPaused(jobId: number): boolean {
    return !!this.running.get(jobId)?.gate.paused;
  }

  /** Cancels a job's running or queued run. */
  cancel(jobId: number): boolean {
    const p = this.running.get(jobId);
    if (p) {
      p.gate.set(false); // a paused run must wake up to see the cancel
      p.controller.abort();
      return true;
    }
    const i = this.queue.findIndex((q) => q.job.id === jobId);
    if (i < 0) return false;
    const [q] = this.queue.splice(i, 1);
    const now = this.clock.now();
    this.catalog.updateRun(q.runId, { status: 'cancelled' });
    this.events.emit('run-finished', {
      jobId,
      runId: q.runId,
      status: 'cancelled',
      snapshotId: null,
      warnings: 0,
      at: now,
    });
    q.resolve({ ...this.placeholder(q), status: 'cancelled', endedAt: now });
    return true;
  }

  private placeholder(p: Pending): RunRecord {
    return {
      id: p.runId,
      jobId: p.job.id,
      kind: p.full ? 'full' : 'backup',
      trigger: p.trigger,
      status: 'queued',
      scheduledFor: p.scheduledFor,
      startedAt: null,
      endedAt: null,
      snapshotId: null,
      counters: {},
      error: null,
      verify: null,
      retention: null,
    };
  }

  private enqueue(job: Job, o: { trigger: RunTrigger; full?: boolean; scheduledFor?: number }): Pending {
    const run = this.catalog.createRun({
      jobId: job.id,
      kind: o.full ? 'full' : 'backup',
      trigger: o.trigger,
      status: 'queued',
      scheduledFor: o.scheduledFor ?? null,
    });
    let resolve!: (r: RunRecord) => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<RunRecord>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const p: Pending = {
      job,
      trigger: o.trigger,
      full: !!o.full,
      scheduledFor: o.scheduledFor ?? null,
      runId: run.id,
      controller: new AbortController(),
      gate: new PauseGate(),
      promise,
      resolve,
      reject,
    };
    this.queue.push(p);
    this.events.emit('run-queued', { jobId: job.id, runId: run.id, trigger: o.trigger, full: p.full });
    this.dispatch();
    return p;
  }

  private dispatch(): void {
    for (let i = 0; i < this.queue.length && this.running.size < this.concurrency;) {
      const p = this.queue[i];
      if (this.busyRepos.has(p.job.repositoryId) || this.running.has(p.job.id)) {
        i++;
        continue;
      }
      this.queue.splice(i, 1);
      this.startRun(p);
    }
  }

  private startRun(p: Pending): void {
    // Re-read the job: it may have been edited, or removed, while queued.
    let job: Job;
    try {
      job = this.catalog.getJob(p.job.id);
    } catch {
      p.resolve({ ...this.placeholder(p), status: 'cancelled', endedAt: this.clock.now() });
      this.dispatch();
      return;
    }
    this.running.set(job.id, p);
    this.busyRepos.add(job.repositoryId);
    const release = () => {
      this.running.delete(job.id);
      this.busyRepos.delete(job.repositoryId);
      this.dispatch();
    };
    this.runner
      .run(job, {
        trigger: p.trigger,
        full: p.full,
        scheduledFor: p.scheduledFor,
        runId: p.runId,
        signal: p.controller.signal,
        pauseGate: p.gate,
      })
      .then(
        (r) => {
          release();
          p.resolve(r);
        },
        (err) => {
          release();
          p.reject(err);
        },
      );
  }
}
