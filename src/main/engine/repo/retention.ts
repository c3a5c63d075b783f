/**
 * forget and prune. `forget` removes snapshot manifests chosen by a retention policy (the policy
 * itself is the pure function in ./retentionPolicy.ts). `prune` then removes data no snapshot needs:
 * under an exclusive lock it finds every used blob, repacks partly-used packs, writes one new full
 * index, deletes the old index files, and only then deletes obsolete packs. A crash at any step
 * leaves every snapshot restorable (at worst extra packs and duplicate index entries remain).
 * Prune refuses to delete anything when a snapshot's trees cannot be read completely.
 */
import type { Repository } from './repository.js';
import type { ForgetDecision, PruneResult, ProgressSink, RetentionPolicy } from '../operations.js';
import type { ID, SnapshotEntry } from './types.js';
import { contentIds } from './tree.js';
import { applyRetentionPolicy, groupSnapshots, type GroupBy } from './retentionPolicy.js';
import { CorruptObjectError, AbortedError, TidemarkError } from '../errors.js';
import { BlobType, type BlobLocation } from './blobIndex.js';
import { decodeIndex, type IndexPack } from './indexFile.js';
import { DEFAULT_LEASE_MS, storeClock } from './lock.js';
import { decodeObject } from './objects.js';
import { heldSnapshots, holdReason, listDismissals } from './holds.js';
import { lockingStore } from './immutability.js';
import { innermostBackend } from '../backend/open.js';

export interface ForgetOptions {
  dryRun?: boolean;
  groupBy?: GroupBy[];
  /** Only consider snapshots of this host / job. */
  host?: string;
  job?: string;
  now?: Date;
}

export async function forget(
  repo: Repository,
  policy: RetentionPolicy,
  opts: ForgetOptions = {},
): Promise<ForgetDecision> {
  if (!opts.dryRun) repo.assertMayDelete('forget');
  let all = await repo.listSnapshots();
  // whatever the policy says, a mass-change alarm nobody dismissed holds the snapshots before it (holds.ts)
  const held = heldSnapshots(all, await listDismissals(repo));
  if (opts.host) all = all.filter((s) => s.host === opts.host);
  if (opts.job) all = all.filter((s) => s.job === opts.job);
  const decision: ForgetDecision = { keep: [], remove: [] };
  for (const group of groupSnapshots(all, opts.groupBy).values()) {
    const d = applyRetentionPolicy(group, policy, opts.now);
    decision.keep.push(...d.keep);
    for (const s of d.remove) {
      const alarm = held.get(s.id);
      if (alarm) decision.keep.push({ snapshot: s, reasons: [holdReason(alarm)] });
      else decision.remove.push(s);
    }
  }
  if (!opts.dryRun) for (const s of decision.remove) await repo.removeSnapshot(s.id);
  return decision;
}

export interface PruneOptions {
  /** Repack a pack when at least this fraction of its bytes is unused (default 0.1). */
  repackThreshold?: number;
  dryRun?: boolean;
  signal?: AbortSignal;
  progress?: ProgressSink<{ phase: string; done: number; total: number }>;
  leaseMs?: number;
  /** How long to wait for other locks (running backups) to go away (default: fail at once). */
  lockWaitMs?: number;
  /** Packs no index mentions are kept while younger than this: a backup whose lock lapsed (a hung
   *  process, a wrong clock) may be about to index them. Default 2 lock leases (10 minutes). */
  graceMs?: number;
}

/** Every blob (trees and data) the given snapshots need; throws when any tree cannot be read. */
export async function usedBlobs(
  repo: Repository,
  snapshots: SnapshotEntry[],
  signal?: AbortSignal,
): Promise<Set<ID>> {
  const used = new Set<ID>();
  const walk = async (treeId: ID): Promise<void> => {
    if (used.has(treeId)) return;
    if (signal?.aborted) throw new AbortedError();
    used.add(treeId);
    const tree = await repo.loadTree(treeId).catch((err) => {
      throw new CorruptObjectError(
        `tree ${treeId.slice(0, 12)} cannot be read (${(err as Error).message}); run "tidemark check" — prune deletes nothing until this is fixed`,
      );
    });
    for (const n of tree.nodes) {
      if (n.type === 'dir' && n.subtree) await walk(n.subtree);
      if (n.blockBase !== undefined) used.add(n.blockBase); // a base block list (tree.ts)
      for (const c of contentIds(n)) used.add(c);
    }
  };
  for (const s of snapshots) await walk(s.tree);
  return used;
}

export async function prune(repo: Repository, opts: PruneOptions = {}): Promise<PruneResult> {
  if (!opts.dryRun) repo.assertMayDelete('prune');
  const lock = await repo.lock(true, 'prune', opts.leaseMs, opts.lockWaitMs);
  try {
    await repo.loadIndex(true); // pick up what other writers added
    const oldIndexFiles = [...repo.indexFiles];
    // every snapshot must be read to know what is used: a damaged one stops prune before it deletes anything
    const snapshots = await repo.listSnapshots().catch((err: unknown) => {
      if (!(err instanceof CorruptObjectError)) throw err;
      throw new CorruptObjectError(
        `${err.message}; prune deletes nothing until "tidemark repair" has mended the repository`,
        { cause: err },
      );
    });
    const used = await usedBlobs(repo, snapshots, opts.signal);
    for (const id of used) {
      if (!repo.index.has(id))
        throw new CorruptObjectError(
          `blob ${id.slice(0, 12)} is needed but missing; run "tidemark check" — prune deletes nothing until this is fixed`,
        );
    }
    const stored = new Map<string, number>();
    const young = new Set<string>();
    const envGrace = process.env.TIDEMARK_PRUNE_GRACE_MS;
    const grace =
      opts.graceMs ?? (envGrace !== undefined && envGrace !== '' ? Number(envGrace) : 2 * DEFAULT_LEASE_MS);
    // modification times are the store's, so "young" is judged by the store's clock too
    const storeNow = (await storeClock(repo.backend)).now;
    for await (const o of repo.backend.list('data')) {
      stored.set(o.name, o.size);
      if (o.modified === undefined || storeNow - o.modified < grace) young.add(o.name);
    }

    // per pack: used and unused bytes
    const packUse = new Map<
      string,
      { used: { id: ID; loc: BlobLocation }[]; unusedBytes: number; usedBytes: number }
    >();
    for (const [id, loc] of repo.index.entries()) {
      let u = packUse.get(loc.pack);
      if (!u) packUse.set(loc.pack, (u = { used: [], unusedBytes: 0, usedBytes: 0 }));
      if (used.has(id)) {
        u.used.push({ id, loc });
        u.usedBytes += loc.length;
      } else u.unusedBytes += loc.length;
    }
    const threshold = opts.repackThreshold ?? 0.1;
    const remove = new Set<string>();
    const repack: string[] = [];
    for (const [pack, size] of stored) {
      const u = packUse.get(pack);
      if (!u && young.has(pack)) continue; // unindexed and recent: maybe a running backup's; kept for now
      if (!u || u.used.length === 0) remove.add(pack);
      else {
        // bytes not used from this pack: blobs no snapshot needs, and copies of blobs the index places
        // in another pack (concurrent writers stored the same chunk) — everything but the used blobs
        const unused = Math.max(u.unusedBytes, size - u.usedBytes - 4096);
        if (unused > 0 && unused >= threshold * size) repack.push(pack);
      }
    }
    for (const pack of packUse.keys())
      if (!stored.has(pack) && packUse.get(pack)!.used.length) {
        throw new CorruptObjectError(
          `pack ${pack.slice(0, 12)} is missing but needed; run "tidemark check" — prune deletes nothing until this is fixed`,
        );
      }
    const result: PruneResult = {
      packsRemoved: remove.size + repack.length,
      packsRewritten: repack.length,
      bytesFreed: 0,
      blobsRemoved: 0,
    };
    for (const [id] of repo.index.entries()) if (!used.has(id)) result.blobsRemoved++;
    for (const p of [...remove, ...repack]) result.bytesFreed += stored.get(p) ?? 0;
    if (opts.dryRun) return result;
    // a folder's temporary files from a crash mid-write (streamed packs: backend/local/stream.ts), aged
    // like the unindexed packs above; housekeeping of the store below any wrapper, not an object removal
    const folder = innermostBackend(repo.backend) as {
      removeLeftovers?: (before: number) => Promise<number>;
    };
    await folder.removeLeftovers?.(storeNow - grace);

    // 1. repack the used blobs of partly-used packs into new packs (verifying each blob)
    const moved = new Set<string>();
    let done = 0;
    for (const pack of repack) {
      if (opts.signal?.aborted) throw new AbortedError();
      const bytes = await repo.backend.load('data', pack);
      for (const { id, loc } of packUse.get(pack)!.used) {
        const sealed = bytes.subarray(loc.offset, loc.offset + loc.length);
        repo.decodeBlob(id, sealed, loc); // throws on damage: never copy a damaged blob silently
        moved.add(id);
        await repo.addSealedBlob(
          loc.type as BlobType,
          Buffer.from(id, 'hex'),
          Buffer.from(sealed),
          loc.rawLength,
          loc.compressed,
        );
      }
      opts.progress?.({ phase: 'repack', done: ++done, total: repack.length });
    }
    await repo.flush(); // new packs + an index file for them

    // 2. one new full index of everything kept
    const newIndex: IndexPack[] = [];
    const byPack = new Map<string, IndexPack>();
    for (const [id, loc] of repo.index.entries()) {
      if (!used.has(id)) continue;
      if (remove.has(loc.pack) || repack.includes(loc.pack)) continue; // moved blobs were added under their new pack
      let e = byPack.get(loc.pack);
      if (!e) {
        byPack.set(loc.pack, (e = { pack: loc.pack, blobs: [] }));
        newIndex.push(e);
      }
      e.blobs.push({ id: Buffer.from(id, 'hex'), loc });
    }
    // moved blobs: the in-memory index still points at their old pack (first location wins), so
    // find their new location among the packs written in step 1.
    const written = [...repo.indexFiles].filter((f) => !oldIndexFiles.includes(f));
    for (const f of written) {
      const plain = decodeObject(repo.key, await repo.backend.load('index', f), `index/${f.slice(0, 12)}`);
      decodeIndex(plain, f, (idBuf, loc) => {
        const id = idBuf.toString('hex');
        if (!moved.has(id)) return;
        let e = byPack.get(loc.pack);
        if (!e) {
          byPack.set(loc.pack, (e = { pack: loc.pack, blobs: [] }));
          newIndex.push(e);
        }
        e.blobs.push({ id: Buffer.from(idBuf), loc });
        moved.delete(id);
      });
    }
    if (moved.size)
      throw new TidemarkError(
        'PRUNE_INTERNAL',
        `prune lost track of ${moved.size} repacked blobs; nothing was deleted`,
      );
    const { id: fullIndex } = await repo.saveIndexFile(newIndex);

    // 3. old index files go, then the packs nothing refers to any more (only while our lock still holds)
    lock.assertHeld('the prune');
    for (const f of [...oldIndexFiles, ...written])
      if (f !== fullIndex) await repo.backend.remove('index', f);
    for (const p of [...remove, ...repack]) await repo.backend.remove('data', p);
    repo.invalidateIndex();
    // S3 object lock: what is current stays locked for the whole period; removed versions are freed once
    // their lock runs out (the store kept them: a delete only put a marker on top)
    const store = repo.immutability?.objectLock ? lockingStore(repo.backend) : undefined;
    if (store) {
      const extended = await store.extendObjectLocks();
      result.objectLock = { extended, ...(await store.purgeExpiredVersions()) };
    }
    return result;
  } finally {
    await lock.release().catch(() => {});
  }
}
