/**
 * Repository locks with leases. Backups take shared locks, prune takes an exclusive one. A lock is an
 * encrypted object naming host, pid and an expiry; the holder refreshes it (writes a new one, removes
 * the old) every third of the lease, so a crashed process blocks nobody for longer than one lease.
 * Protocol (works on object stores without atomic rename): write own lock, then list; a conflicting
 * live lock makes the newcomer withdraw. Expired locks are removed by whoever finds them.
 *
 * Time: `created`/`expires` are written in the store's time and others' leases are judged in it
 * (Backend.storeNow — an object store's Date header), not in each PC's own, so a PC whose clock runs
 * hours ahead does not take over live locks and one whose clock runs behind does not keep a dead lock
 * alive. The holder times its own lease with its local clock from the moment it wrote the lock (only
 * elapsed time matters there). The measured offset (store − local) is kept for a skew warning.
 */
import os from 'node:os';
import type { Backend, SaveOptions } from '../backend/types.js';
import type { MasterKey } from '../crypto/index.js';
import { loadJson, saveJson } from './objects.js';
import { RepoLockedError } from '../errors.js';

/** Lock objects are not fsynced: other processes see them without it, and after a crash of this computer
 *  a lock of ours is stale anyway. A backup's first write does not wait for the disk (two fsyncs,
 *  milliseconds each, more behind the block tracker's sync of the source filesystem). */
const LOCK_SAVE: SaveOptions = { ephemeral: true };

export interface LockInfo {
  host: string;
  pid: number;
  exclusive: boolean;
  created: string;
  expires: string;
  purpose: string;
}

export const DEFAULT_LEASE_MS = Number(process.env.TIDEMARK_LOCK_LEASE_MS) || 5 * 60_000;

/** A difference between the store's clock and ours beyond this is worth a warning in the run log. */
export const CLOCK_SKEW_WARN_MS = 5 * 60_000;

/** The store's time now and its offset from the local clock `now` (store − local, ms). */
export async function storeClock(
  backend: Backend,
  now: () => number = Date.now,
): Promise<{ now: number; offsetMs: number }> {
  if (!backend.storeNow) {
    const t = now();
    return { now: t, offsetMs: 0 };
  }
  // The backend's estimate is based on the system clock; an injected local clock (tests) may differ.
  // Our clock is read before and after asking: a store time inside that window is no measurable
  // offset (a folder's clock is ours, and the await between two readings can take a millisecond).
  const before = now();
  const store = await backend.storeNow();
  const after = now();
  const offsetMs = store < before ? store - before : store > after ? store - after : 0;
  return { now: store, offsetMs };
}

/** A warning for the run log when the store's clock and ours disagree by more than CLOCK_SKEW_WARN_MS. */
export function clockSkewWarning(offsetMs: number, location: string): string | undefined {
  if (Math.abs(offsetMs) <= CLOCK_SKEW_WARN_MS) return undefined;
  const mins = Math.round(Math.abs(offsetMs) / 60_000);
  const dir = offsetMs > 0 ? 'behind' : 'ahead of';
  return (
    `this computer's clock is ${mins} minute(s) ${dir} the clock of ${location}; lock leases and prune ` +
    `are judged by the store's clock, but set this computer's time right (automatic time sync)`
  );
}

function processAlive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class RepoLock {
  private timer?: NodeJS.Timeout;
  private released = false;
  private refreshing?: Promise<void>;
  /** When (local clock) the lease we hold runs out unless a refresh succeeds. */
  private expiresAt: number;
  /** Why the last refresh failed, if it did. */
  lastRefreshError?: string;

  constructor(
    private readonly backend: Backend,
    private readonly key: MasterKey,
    public id: string,
    readonly info: LockInfo,
    private readonly leaseMs: number,
    /** Local clock; `writtenAt` is when (on it) the lock was written. */
    private readonly now: () => number = Date.now,
    writtenAt = now(),
    /** The store's clock minus ours when the lock was taken (refreshed with each renewal). */
    public clockOffsetMs = 0,
  ) {
    this.expiresAt = writtenAt + leaseMs;
    this.timer = setInterval(
      () =>
        void this.refresh().catch((err: Error) => {
          this.lastRefreshError = err.message;
        }),
      Math.max(1000, leaseMs / 3),
    );
    this.timer.unref();
  }

  /** True when the lease ran out without being renewed: others may now treat the lock as stale, so
   *  the holder must not commit anything (a backup fails instead of saving its snapshot). */
  get lapsed(): boolean {
    // a little early: others judge the lease on the store's clock, known to about a second (S3 Date
    // headers are whole seconds), so the holder stops before anyone could see the lease as run out
    return this.now() > this.expiresAt - Math.min(2000, this.leaseMs / 10);
  }

  /** Throws when the lease lapsed (see `lapsed`). */
  assertHeld(what: string): void {
    if (this.lapsed)
      throw new RepoLockedError(
        `the repository lock could not be renewed in time (${this.lastRefreshError ?? 'no reason known'}); ${what} was stopped so that nothing is committed without it`,
      );
  }

  private async refresh(): Promise<void> {
    if (this.released || this.refreshing) return;
    this.refreshing = (async () => {
      const started = this.now();
      const store = await storeClock(this.backend, this.now);
      const info = { ...this.info, expires: new Date(store.now + this.leaseMs).toISOString() };
      const { id } = await saveJson(this.backend, this.key, 'locks', info, LOCK_SAVE);
      const old = this.id;
      this.id = id;
      this.expiresAt = started + this.leaseMs;
      this.clockOffsetMs = store.offsetMs;
      this.lastRefreshError = undefined;
      await this.backend.remove('locks', old);
      if (this.released) await this.backend.remove('locks', id);
    })().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  async release(): Promise<void> {
    this.released = true;
    if (this.timer) clearInterval(this.timer);
    await this.refreshing?.catch(() => {});
    await this.backend.remove('locks', this.id);
  }
}

export async function listLocks(backend: Backend, key: MasterKey): Promise<{ id: string; info: LockInfo }[]> {
  const out: { id: string; info: LockInfo }[] = [];
  for await (const o of backend.list('locks')) {
    try {
      out.push({ id: o.name, info: await loadJson<LockInfo>(backend, key, 'locks', o.name) });
    } catch {
      // vanished between list and load (released/refreshed), or damaged: ignore it
    }
  }
  return out;
}

export interface LockOptions {
  exclusive: boolean;
  purpose: string;
  leaseMs?: number;
  /** The local clock (injectable for tests of PCs with wrong clocks). */
  now?: () => number;
  /** The host name written into the lock (default: this computer's). */
  host?: string;
}

/**
 * Takes a lock; with `waitMs`, a conflicting lock is waited for (polling with backoff) instead of
 * failing at once — a nightly backup that meets a running prune starts when the prune is done.
 */
export async function acquireLock(
  backend: Backend,
  key: MasterKey,
  opts: LockOptions & { waitMs?: number },
): Promise<RepoLock> {
  const deadline = Date.now() + (opts.waitMs ?? 0);
  let delay = 500;
  for (;;) {
    try {
      return await tryAcquireLock(backend, key, opts);
    } catch (err) {
      if (!(err instanceof RepoLockedError) || Date.now() + delay > deadline) throw err;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(10_000, delay * 2);
    }
  }
}

async function tryAcquireLock(backend: Backend, key: MasterKey, opts: LockOptions): Promise<RepoLock> {
  const leaseMs = opts.leaseMs ?? DEFAULT_LEASE_MS;
  const now = opts.now ?? Date.now;
  const host = opts.host ?? os.hostname();
  const writtenAt = now();
  const store = await storeClock(backend, now);
  const info: LockInfo = {
    host,
    pid: process.pid,
    exclusive: opts.exclusive,
    created: new Date(store.now).toISOString(),
    expires: new Date(store.now + leaseMs).toISOString(),
    purpose: opts.purpose,
  };
  const { id } = await saveJson(backend, key, 'locks', info, LOCK_SAVE);
  const others = (await listLocks(backend, key)).filter((l) => l.id !== id);
  // others' leases are judged by the store's clock (as of after the listing), never by ours
  const judgeAt = others.length ? (await storeClock(backend, now)).now : store.now;
  for (const l of others) {
    // a lock of a process on this computer that no longer runs is stale at once (crash, kill -9)
    const expired =
      !(Date.parse(l.info.expires) >= judgeAt) || (l.info.host === host && !processAlive(l.info.pid));
    if (expired) {
      await backend.remove('locks', l.id);
      continue;
    }
    if (opts.exclusive || l.info.exclusive) {
      await backend.remove('locks', id);
      throw new RepoLockedError(
        `the repository is locked by ${l.info.purpose} on ${l.info.host} (pid ${l.info.pid}) until ${l.info.expires}; ` +
          `try again later (a lock of a crashed process expires by itself)`,
      );
    }
  }
  return new RepoLock(backend, key, id, info, leaseMs, now, writtenAt, store.offsetMs);
}
