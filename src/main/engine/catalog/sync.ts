/**
 * Bringing the catalog's snapshot cache and file index in line with a repository: new snapshots are
 * added and indexed, snapshots gone from the repository (forgotten elsewhere) are dropped. Because
 * this only reads the repository, the catalog can always be rebuilt from it (`catalog rebuild`).
 */
import type { Catalog, SnapshotRow } from './catalog.js';
import type { TreeSource, IndexStats } from './fileIndex.js';
import type { SnapshotEntry } from '../repo/types.js';
import type { AlarmDismissal } from '../repo/holds.js';
import { syncAlarms } from './alarms.js';

/** What syncing needs from an open repository (repo.Repository satisfies it). */
export interface SnapshotSource extends TreeSource {
  /** `damaged` receives the snapshots whose files cannot be read (left out of the list). */
  listSnapshots(opts?: { damaged?: (id: string, err: Error) => void }): Promise<SnapshotEntry[]>;
  /** The mass-change alarms' dismissals (repo/holds.ts); absent: alarms are cached as undismissed. */
  listDismissals?(): Promise<AlarmDismissal[]>;
}

export interface SyncResult {
  added: number;
  removed: number;
  indexed: number;
  /** Totals over the snapshots indexed now. */
  index: IndexStats;
  /** Snapshots whose files could not be read (kept as cached, if they were). */
  damaged: string[];
}

export interface SyncOptions {
  signal?: AbortSignal;
  /** Index the file trees of new snapshots (default true). */
  index?: boolean;
  /** Called after each snapshot is indexed. */
  onIndexed?: (row: SnapshotRow, stats: IndexStats) => void;
}

export function syncRepository(
  catalog: Catalog,
  repositoryId: number,
  source: SnapshotSource,
  opts: SyncOptions = {},
): Promise<SyncResult> {
  // Runs of jobs for different repositories may finish together: their syncs take turns.
  return catalog.files.exclusive(() => syncLocked(catalog, repositoryId, source, opts));
}

async function syncLocked(
  catalog: Catalog,
  repositoryId: number,
  source: SnapshotSource,
  opts: SyncOptions,
): Promise<SyncResult> {
  // a damaged snapshot file does not stop the others' sync; its cached row stays (check reports it, and
  // repair replaces or drops the snapshot, after which it is gone from the repository and from here)
  const damaged: string[] = [];
  const snapshots = await source.listSnapshots({ damaged: (id) => damaged.push(id) });
  syncAlarms(catalog, repositoryId, snapshots, (await source.listDismissals?.()) ?? []);
  const inRepo = new Set([...snapshots.map((s) => s.id), ...damaged]);
  const cached = catalog.listSnapshots(repositoryId);
  const cachedIds = new Set(cached.map((s) => s.snapId));
  const gone = cached.filter((s) => !inRepo.has(s.snapId)).map((s) => s.id);
  if (gone.length) catalog.removeSnapshots(gone);
  let added = 0;
  // Snapshots are immutable: only new ones need writing.
  catalog.db.transaction(() => {
    for (const s of snapshots) {
      if (cachedIds.has(s.id)) continue;
      added++;
      catalog.upsertSnapshot(repositoryId, s);
    }
  })();
  const total: IndexStats = { dirsVisited: 0, newDirVersions: 0, reusedDirVersions: 0, newEntries: 0 };
  let indexed = 0;
  if (opts.index !== false) {
    const rows = catalog.listSnapshots(repositoryId);
    const todo = rows.filter((r) => !r.indexed);
    // A first index (or a long backlog) writes mostly new names: keep them all in memory meanwhile.
    const preloadNames = todo.length > 0 && (todo.length === rows.length || todo.length >= 10);
    try {
      await catalog.files.bulkLoad(async () => {
        for (const row of todo) {
          const stats = await indexSnapshotRow(catalog, row, source, opts.signal, preloadNames);
          for (const k of Object.keys(total) as (keyof IndexStats)[]) total[k] += stats[k];
          indexed++;
          opts.onIndexed?.(row, stats);
        }
      });
    } finally {
      catalog.releaseMemory();
    }
  }
  if (gone.length) catalog.files.gc();
  catalog.markSynced(repositoryId);
  return { added, removed: gone.length, indexed, index: total, damaged };
}

/** Indexes one cached snapshot and marks it indexed. */
export async function indexSnapshotRow(
  catalog: Catalog,
  row: SnapshotRow,
  source: TreeSource,
  signal?: AbortSignal,
  preloadNames = false,
): Promise<IndexStats> {
  catalog.setSnapshotIndexed(row.id, false);
  const stats = await catalog.files.indexSnapshot(row.id, row.tree, source, { signal, preloadNames });
  catalog.setSnapshotIndexed(row.id, true);
  return stats;
}

/** `catalog rebuild`: forget what the catalog learnt from a repository and read it again. */
export async function rebuildRepository(
  catalog: Catalog,
  repositoryId: number,
  source: SnapshotSource,
  opts: SyncOptions = {},
): Promise<SyncResult> {
  return catalog.files.exclusive(() => {
    catalog.resetRepositoryCache(repositoryId);
    return syncLocked(catalog, repositoryId, source, opts);
  });
}
