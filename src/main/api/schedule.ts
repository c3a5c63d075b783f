/**
 * Turns a job's schedule into cron patterns and next-run times, and a small timer that starts due
 * jobs. It is the fallback used until the catalog's scheduler (engine/schedule) is wired in; it does not
 * catch up runs missed while the app was closed.
 */
import { Cron } from 'croner';
import type { Job, Schedule } from '../../shared/api.js';

export function cronPattern(s: Schedule): string | null {
  switch (s.kind) {
    case 'manual':
      return null;
    case 'cron':
      return s.expressions[0] ?? null;
    case 'hourly':
      return `${s.minute} * * * *`;
    case 'every':
      return `0 */${s.hours} * * *`;
    case 'daily': {
      const [h, m] = s.time.split(':').map(Number);
      return `${m} ${h} * * *`;
    }
    case 'weekly': {
      const [h, m] = s.time.split(':').map(Number);
      return `${m} ${h} * * ${[...s.days].sort().join(',')}`;
    }
  }
}

export function nextRunAt(s: Schedule, from: Date = new Date()): string | null {
  const pattern = cronPattern(s);
  if (!pattern) return null;
  const next = new Cron(pattern, { paused: true }).nextRun(from);
  return next ? next.toISOString() : null;
}

/** Checks every `intervalMs` which jobs came due since the last check and starts them. */
export class SimpleScheduler {
  private timer?: ReturnType<typeof setInterval>;
  private lastCheck: number;

  constructor(
    private listJobs: () => Promise<Job[]>,
    private runJob: (job: Job) => Promise<unknown>,
    private now: () => number = Date.now,
    private intervalMs = 30_000,
  ) {
    this.lastCheck = now();
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref?.();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  async tick(): Promise<void> {
    const now = this.now();
    const since = new Date(this.lastCheck);
    this.lastCheck = now;
    for (const job of await this.listJobs()) {
      const next = nextRunAt(job.schedule, since);
      if (next && Date.parse(next) <= now) await this.runJob(job).catch(() => {});
    }
  }
}
