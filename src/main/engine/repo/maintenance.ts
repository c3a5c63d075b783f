/**
 * Who maintains a shared repository: one host at a time prunes on schedule (kopia's "maintenance
 * owner" idea), instead of every PC pruning whenever its own catalog thinks a prune is due.
 *
 * The record is an encrypted object of type `maintenance` naming the owner host, its prune interval,
 * when it took over and when it last pruned (all in the store's time, see Backend.storeNow). Objects
 * are immutable, so every change is a new record with the next *generation*, named by the generation
 * number (`000000000042`) and written with create-if-absent:
 *
 * - Two hosts that change the record at once both try to create the same next generation; the store
 *   lets exactly one create it (If-None-Match on S3, link() in a folder, a map in memory), the other
 *   gets ObjectExistsError and reads the winner. On stores whose conditional create is not atomic (the
 *   S3 backend's HEAD-then-PUT fallback), claims are additionally serialised by the repository's
 *   exclusive lock, whose write-then-list protocol admits at most one holder.
 * - After writing, the writer lists the records: the highest generation is the current one (a writer
 *   that read a stale record and recreated an old, already removed generation finds a higher one and
 *   withdraws). Records two or more generations old are removed by whoever writes the next one.
 *
 * Rules: nobody owns a new repository until the first scheduled run claims it. The owner prunes when
 * its interval has passed since its last prune. Another host takes over when the owner has not pruned
 * (or, never having pruned, not claimed) for twice its interval (at least `MIN_TAKEOVER_MS`): the owner
 * is gone; the takeover is recorded with its reason. A record that appeared while a host was deciding
 * (a newer generation than the one it judged) proves its writer alive: a host that loses a claim or
 * takeover race accepts the winner instead of judging the winner's fresh record idle. `claim` with `force` takes over from a live
 * owner (the user's decision, `tidemark maintenance claim --force`).
 *
 * What it does not do: prune (repo/retention.ts does that, under the exclusive lock, from any host on
 * demand), or decide anything from a PC's own clock.
 */
import crypto from 'node:crypto';
import type { Backend } from '../backend/types.js';
import { innermostBackend } from '../backend/open.js';
import type { MasterKey } from '../crypto/index.js';
import { ObjectExistsError, NotFoundError, CorruptObjectError } from '../errors.js';
import { decodeObject, encodeObject } from './objects.js';
import { acquireLock, storeClock } from './lock.js';

export interface TakeoverNote {
  /** The owner before. */
  from: string;
  /** Why (e.g. "pc1 has not pruned since … (interval 7 days)", "claimed on pc2 by the user"). */
  reason: string;
  at: string;
}

export interface MaintenanceRecord {
  version: 1;
  generation: number;
  /** The host that prunes on schedule. */
  owner: string;
  /** The owner's prune interval (ms). */
  intervalMs: number;
  /** When the owner took over (store time, ISO). */
  claimedAt: string;
  /** When the owner last pruned (store time, ISO), or null. */
  lastPruneAt: string | null;
  /** What this generation recorded. */
  event: 'claim' | 'takeover' | 'prune';
  /** When this generation was written (store time, ISO). */
  writtenAt: string;
  /** The latest change of owner that was not the first claim, carried forward. */
  takeover?: TakeoverNote;
  /** Makes every record's bytes unique. */
  nonce: string;
}

export interface MaintenanceState {
  record: MaintenanceRecord;
  /** The object's name (its generation, zero-padded). */
  name: string;
}

/** However short an owner's interval, another host waits at least this long before taking over. */
export const MIN_TAKEOVER_MS = 24 * 3_600_000;

const NAME = /^\d{12}$/;
const nameOf = (generation: number) => String(generation).padStart(12, '0');

async function generations(backend: Backend): Promise<number[]> {
  const out: number[] = [];
  for await (const o of backend.list('maintenance')) if (NAME.test(o.name)) out.push(Number(o.name));
  return out.sort((a, b) => b - a);
}

/** The current maintenance record (highest generation that can be read), or undefined when none. */
export async function readMaintenance(
  backend: Backend,
  key: MasterKey,
): Promise<MaintenanceState | undefined> {
  for (const g of await generations(backend)) {
    const name = nameOf(g);
    try {
      const plain = decodeObject(key, await backend.load('maintenance', name), `maintenance/${name}`);
      const record = JSON.parse(plain.toString('utf8')) as MaintenanceRecord;
      if (record.generation !== g)
        throw new CorruptObjectError(`maintenance/${name} names another generation`);
      return { record, name };
    } catch (err) {
      // removed between list and load (a newer one exists), or damaged: the next older one counts
      if (err instanceof NotFoundError || err instanceof CorruptObjectError || err instanceof SyntaxError)
        continue;
      throw err;
    }
  }
  return undefined;
}

/** Whether the store creates objects conditionally in one atomic step (S3 stores may not). */
async function atomicCreate(backend: Backend): Promise<boolean> {
  const store = innermostBackend(backend) as { conditionalWrites?: () => Promise<boolean> };
  return store.conditionalWrites ? store.conditionalWrites() : true;
}

/**
 * Writes `next` as generation `prev + 1`. Returns undefined when another writer got there first (the
 * store refused the create, or a higher generation exists afterwards). Low level: use claim/record.
 */
export async function writeMaintenanceGeneration(
  backend: Backend,
  key: MasterKey,
  next: Omit<MaintenanceRecord, 'generation' | 'nonce' | 'version'>,
  prev: number,
): Promise<MaintenanceRecord | undefined> {
  const record: MaintenanceRecord = {
    version: 1,
    generation: prev + 1,
    ...next,
    nonce: crypto.randomBytes(8).toString('hex'),
  };
  const name = nameOf(record.generation);
  try {
    await backend.save('maintenance', name, encodeObject(key, Buffer.from(JSON.stringify(record))), {
      ifNotExists: true,
    });
  } catch (err) {
    if (err instanceof ObjectExistsError) return undefined;
    throw err;
  }
  const gens = await generations(backend);
  if (gens[0] > record.generation) {
    await backend.remove('maintenance', name).catch(() => {});
    return undefined;
  }
  for (const g of gens)
    if (g < record.generation - 1) await backend.remove('maintenance', nameOf(g)).catch(() => {});
  return record;
}

/** Runs `fn` under the exclusive repository lock when the store's conditional create is not atomic. */
async function serialised<T>(
  backend: Backend,
  key: MasterKey,
  host: string,
  fn: () => Promise<T>,
): Promise<T> {
  if (await atomicCreate(backend)) return fn();
  const lock = await acquireLock(backend, key, {
    exclusive: true,
    purpose: 'maintenance claim',
    host,
    waitMs: 30_000,
  });
  try {
    return await fn();
  } finally {
    await lock.release().catch(() => {});
  }
}

/** How long since the owner last showed life (pruned, or claimed when it never pruned), store time. */
function idleMs(r: MaintenanceRecord, storeNow: number): number {
  return storeNow - Date.parse(r.lastPruneAt ?? r.claimedAt);
}

function ownerReason(r: MaintenanceRecord): string {
  return `${r.owner} maintains this repository (${r.lastPruneAt ? `last pruned ${r.lastPruneAt}` : `since ${r.claimedAt}, not pruned yet`})`;
}

export function takeoverAfterMs(r: MaintenanceRecord, minMs = MIN_TAKEOVER_MS): number {
  return Math.max(2 * r.intervalMs, minMs);
}

export interface ClaimOptions {
  host: string;
  intervalMs: number;
  /** Take over even from an owner that is still active (the user's decision). */
  force?: boolean;
  /** Why, for the takeover note (default: derived). */
  reason?: string;
  /** Minimum wait before taking over from an idle owner (default MIN_TAKEOVER_MS; tests use less). */
  minTakeoverMs?: number;
  /**
   * The generation the caller judged (0: none existed). A newer record owned by another host is proof
   * that it is alive — it was written while this host was deciding — so it is not taken over in the
   * same breath (without this, a PC that lost a takeover race re-judges the winner's fresh record and,
   * with a short interval, takes over again: two PCs prune). Default: the first record this call reads.
   */
  judgedGeneration?: number;
}

export interface ClaimResult {
  /** True when this host is the owner afterwards. */
  owner: boolean;
  /** True when this call changed the owner (first claim or takeover). */
  changed: boolean;
  record: MaintenanceRecord;
  /** Why the claim was not made, when it was not. */
  reason?: string;
}

/**
 * Makes `host` the maintenance owner when nobody owns the repository, the owner has been idle for
 * longer than its takeover time, or `force` is set. Concurrent claims resolve to exactly one owner.
 */
export async function claimMaintenance(
  backend: Backend,
  key: MasterKey,
  opts: ClaimOptions,
): Promise<ClaimResult> {
  return serialised(backend, key, opts.host, async () => {
    let judged = opts.judgedGeneration;
    for (let attempt = 0; ; attempt++) {
      const cur = await readMaintenance(backend, key);
      const now = (await storeClock(backend)).now;
      const at = new Date(now).toISOString();
      if (cur && cur.record.owner === opts.host) {
        // already ours; a changed interval is written with the next prune
        return { owner: true, changed: false, record: cur.record };
      }
      judged ??= cur?.record.generation ?? 0;
      if (cur && cur.record.generation > judged && !opts.force) {
        // another host claimed or took over while this one was deciding: it is alive
        return {
          owner: false,
          changed: false,
          record: cur.record,
          reason: `${cur.record.owner} ${cur.record.event === 'takeover' ? 'took over' : 'claimed'} maintenance at the same time`,
        };
      }
      let takeover: TakeoverNote | undefined;
      if (cur) {
        const r = cur.record;
        const idle = idleMs(r, now);
        const limit = takeoverAfterMs(r, opts.minTakeoverMs);
        if (!opts.force && idle < limit) {
          return {
            owner: false,
            changed: false,
            record: r,
            reason: ownerReason(r),
          };
        }
        takeover = {
          from: r.owner,
          reason:
            opts.reason ??
            (opts.force && idle < limit
              ? `claimed on ${opts.host} by the user`
              : `${r.owner} has not ${r.lastPruneAt ? `pruned since ${r.lastPruneAt}` : `pruned since it claimed maintenance at ${r.claimedAt}`} (interval ${fmtDuration(r.intervalMs)}, takeover after ${fmtDuration(limit)})`),
          at,
        };
      }
      const written = await writeMaintenanceGeneration(
        backend,
        key,
        {
          owner: opts.host,
          intervalMs: opts.intervalMs,
          claimedAt: at,
          lastPruneAt: null,
          event: takeover ? 'takeover' : 'claim',
          writtenAt: at,
          ...(takeover ? { takeover } : cur?.record.takeover ? { takeover: cur.record.takeover } : {}),
        },
        cur ? cur.record.generation : 0,
      );
      if (written) return { owner: true, changed: true, record: written };
      // someone else changed the record at the same moment: judge again on what they wrote
      if (attempt >= 5) {
        const now2 = await readMaintenance(backend, key);
        if (!now2) throw new Error('the maintenance record keeps changing; try again');
        return { owner: now2.record.owner === opts.host, changed: false, record: now2.record };
      }
    }
  });
}

/**
 * Records a finished prune by the owner. Returns false (and writes nothing) when `host` no longer
 * owns maintenance (another host took over meanwhile).
 */
export async function recordPrune(
  backend: Backend,
  key: MasterKey,
  opts: { host: string; intervalMs: number },
): Promise<boolean> {
  return serialised(backend, key, opts.host, async () => {
    for (let attempt = 0; attempt < 5; attempt++) {
      const cur = await readMaintenance(backend, key);
      if (!cur || cur.record.owner !== opts.host) return false;
      const at = new Date((await storeClock(backend)).now).toISOString();
      const { generation: _g, nonce: _n, version: _v, ...keep } = cur.record;
      const written = await writeMaintenanceGeneration(
        backend,
        key,
        { ...keep, intervalMs: opts.intervalMs, lastPruneAt: at, event: 'prune', writtenAt: at },
        cur.record.generation,
      );
      if (written) return true;
    }
    return false;
  });
}

export interface MaintenanceDecision {
  /** Prune now. */
  prune: boolean;
  /** One line for the run log. */
  reason: string;
  record?: MaintenanceRecord;
  /** This run made the host owner (first claim or takeover). */
  claimed?: 'claim' | 'takeover';
}

/**
 * Whether `host` should prune on this scheduled run: it owns maintenance (claiming a repository nobody
 * owns, or taking over from an owner that has been idle too long) and its interval has passed.
 */
export async function maintenanceDue(
  backend: Backend,
  key: MasterKey,
  opts: { host: string; intervalMs: number; minTakeoverMs?: number },
): Promise<MaintenanceDecision> {
  let cur = (await readMaintenance(backend, key))?.record;
  const judgedGeneration = cur?.generation ?? 0;
  let claimed: MaintenanceDecision['claimed'];
  if (cur && cur.owner !== opts.host) {
    // the usual case for every other PC: the owner is active, nothing to write (and no lock to take)
    const idle = idleMs(cur, (await storeClock(backend)).now);
    if (idle < takeoverAfterMs(cur, opts.minTakeoverMs))
      return { prune: false, reason: `maintenance: ${ownerReason(cur)}`, record: cur };
  }
  if (!cur || cur.owner !== opts.host) {
    const c = await claimMaintenance(backend, key, { ...opts, judgedGeneration });
    cur = c.record;
    if (!c.owner)
      return {
        prune: false,
        reason: `maintenance: ${c.reason ?? `${cur.owner} maintains this repository`}`,
        record: cur,
      };
    if (c.changed) claimed = c.record.event === 'takeover' ? 'takeover' : 'claim';
  }
  const now = (await storeClock(backend)).now;
  const since = cur.lastPruneAt ? now - Date.parse(cur.lastPruneAt) : Infinity;
  const prune = since >= opts.intervalMs;
  const what =
    claimed === 'takeover'
      ? `took over maintenance from ${cur.takeover?.from} (${cur.takeover?.reason})`
      : claimed === 'claim'
        ? 'this host now maintains the repository'
        : 'this host maintains the repository';
  return {
    prune,
    claimed,
    record: cur,
    reason: `maintenance: ${what}; ${cur.lastPruneAt ? `last pruned ${cur.lastPruneAt}` : 'not pruned yet'}${prune ? ', pruning now' : `, next prune after ${new Date(Date.parse(cur.lastPruneAt!) + opts.intervalMs).toISOString()}`}`,
  };
}

export function fmtDuration(ms: number): string {
  if (ms >= 86_400_000) return `${+(ms / 86_400_000).toFixed(1)} days`;
  if (ms >= 3_600_000) return `${+(ms / 3_600_000).toFixed(1)} hours`;
  if (ms >= 60_000) return `${+(ms / 60_000).toFixed(1)} minutes`;
  return `${Math.round(ms / 1000)} s`;
}
