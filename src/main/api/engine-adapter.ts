/**
 * The real engine behind the API's small `Engine` interface: repositories opened from a location
 * string with a password, and the engine's backup, restore and retention operations.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { openBackend, type BackendOptions } from '../engine/backend/open.js';
import { Repository } from '../engine/repo/repository.js';
import type {
  BackupOptions,
  BackupResult,
  CheckReport,
  RestoreOptions,
  RestoreResult,
  RetentionPolicy,
} from '../engine/operations.js';
import { backup } from '../engine/backup/index.js';
import { restore } from '../engine/restore/index.js';
import { forget, prune } from '../engine/repo/retention.js';
import { check } from '../engine/check/index.js';
import { restoreTest, type RestoreTestOptions, type RestoreTestResult } from '../engine/restoretest/index.js';
import { repair, type RepairOptions, type RepairReport } from '../engine/repair/index.js';
import { readMaintenance, takeoverAfterMs } from '../engine/repo/maintenance.js';
import type { MaintenanceInfo } from '../../shared/api.js';
import { dismissAlarm, heldCount, listDismissals } from '../engine/repo/holds.js';
import type { ImmutabilityOptions } from '../engine/repo/immutability.js';
import type { SnapshotEntry } from '../engine/repo/types.js';
import type { Engine, RepoHandle } from './services.js';

class RealHandle implements RepoHandle {
  constructor(readonly repo: Repository) {}
  get immutability() {
    return this.repo.immutability;
  }
  /** Damaged snapshot files already reported (each once per handle). */
  private readonly damaged = new Set<string>();
  /** The snapshots to browse: a damaged snapshot file is left out (and logged) instead of hiding every
   *  other snapshot of the repository; the job's check reports it and repair mends it. */
  listSnapshots(opts: { damaged?: (id: string, err: Error) => void } = {}) {
    return this.repo.listSnapshots({
      damaged: (id, err) => {
        opts.damaged?.(id, err);
        if (this.damaged.has(id)) return;
        this.damaged.add(id);
        console.warn(`tidemark: snapshot ${id.slice(0, 12)} is damaged and not shown: ${err.message}`);
      },
    });
  }
  loadTree(id: string) {
    return this.repo.loadTree(id);
  }
  listDismissals() {
    return listDismissals(this.repo);
  }
  dismissAlarm(snapshot: SnapshotEntry, opts: { note?: string }) {
    return dismissAlarm(this.repo, snapshot, opts);
  }
  /** Its index, when loaded, picks up the new index files (a new handle would derive the key again:
   *  32 MiB of scrypt after every run); an index not loaded yet is loaded fresh when first needed. */
  async refresh() {
    if (this.repo.indexIsLoaded) await this.repo.loadIndex(true);
  }
  close() {
    return this.repo.close();
  }
}

async function dirBytes(dir: string): Promise<number> {
  let total = 0;
  const stack = [dir];
  while (stack.length) {
    const d = stack.pop()!;
    for (const e of await fs.readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) stack.push(p);
      else if (e.isFile()) total += (await fs.stat(p).catch(() => ({ size: 0 }))).size;
    }
  }
  return total;
}

export class RealEngine implements Engine {
  /** The engine's backup has no pause point yet (see the report of issue 7). */
  readonly supportsPause: boolean = true;

  async exists(location: string, options: BackendOptions = {}): Promise<boolean> {
    const backend = await openBackend(location, options);
    try {
      return await backend.exists();
    } finally {
      await backend.close();
    }
  }

  async init(
    location: string,
    password: string,
    options: BackendOptions = {},
    protect: ImmutabilityOptions = {},
  ): Promise<RepoHandle> {
    return new RealHandle(await Repository.init(await openBackend(location, options), password, protect));
  }

  async open(location: string, password: string, options: BackendOptions = {}): Promise<RepoHandle> {
    const backend = await openBackend(location, options);
    try {
      return new RealHandle(await Repository.open(backend, password));
    } catch (err) {
      await backend.close().catch(() => {});
      throw err;
    }
  }

  async backup(handle: RepoHandle, opts: BackupOptions): Promise<BackupResult> {
    return backup((handle as RealHandle).repo, opts);
  }

  async restore(handle: RepoHandle, opts: RestoreOptions): Promise<RestoreResult> {
    return restore((handle as RealHandle).repo, opts);
  }

  async forget(handle: RepoHandle, policy: RetentionPolicy): Promise<void> {
    await forget((handle as RealHandle).repo, policy, { dryRun: false });
  }

  check(handle: RepoHandle, opts: { readData: boolean; signal?: AbortSignal }): Promise<CheckReport> {
    return check((handle as RealHandle).repo, opts);
  }

  restoreTest(handle: RepoHandle, opts: RestoreTestOptions): Promise<RestoreTestResult> {
    return restoreTest((handle as RealHandle).repo, opts);
  }

  repair(handle: RepoHandle, opts: RepairOptions): Promise<RepairReport> {
    return repair((handle as RealHandle).repo, opts);
  }

  unlockMaintenance(handle: RepoHandle, password: string): Promise<void> {
    return (handle as RealHandle).repo.unlockMaintenance(password);
  }

  async cleanUp(handle: RepoHandle, opts: { retention: RetentionPolicy; job: string; signal?: AbortSignal }) {
    const repo = (handle as RealHandle).repo;
    const d = await forget(repo, opts.retention, { job: opts.job });
    const p = await prune(repo, { signal: opts.signal });
    return {
      snapshotsKept: d.keep.length,
      snapshotsRemoved: d.remove.length,
      snapshotsHeld: heldCount(d.keep),
      packsRemoved: p.packsRemoved,
      packsRewritten: p.packsRewritten,
      bytesFreed: p.bytesFreed,
    };
  }

  async maintenance(handle: RepoHandle): Promise<MaintenanceInfo | null> {
    const repo = (handle as RealHandle).repo;
    const r = (await readMaintenance(repo.backend, repo.key))?.record;
    if (!r) return null;
    return {
      owner: r.owner,
      intervalMs: r.intervalMs,
      claimedAt: r.claimedAt,
      lastPruneAt: r.lastPruneAt,
      takeoverAfter: new Date(Date.parse(r.lastPruneAt ?? r.claimedAt) + takeoverAfterMs(r)).toISOString(),
      ...(r.takeover ? { takeover: r.takeover } : {}),
    };
  }

  async changePassword(
    location: string,
    oldPassword: string,
    newPassword: string,
    options: BackendOptions = {},
  ): Promise<void> {
    const h = (await this.open(location, oldPassword, options)) as RealHandle;
    try {
      await h.repo.changePassword(newPassword);
    } finally {
      await h.close();
    }
  }

  async repoBytes(location: string): Promise<number | null> {
    if (/^[a-z0-9]+:/i.test(location) && !location.startsWith('local:') && !/^[a-zA-Z]:[\\/]/.test(location))
      return null;
    return dirBytes(path.resolve(location.replace(/^local:/, '')));
  }
}
