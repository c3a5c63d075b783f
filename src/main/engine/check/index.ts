/**
 * Verifying a repository. Structure (always): every index file decodes, every indexed pack exists
 * with a plausible size, every snapshot and tree decodes, every blob a snapshot needs is indexed.
 * With readData: every pack is read whole, its hash must equal its name, its header must decode, and
 * every blob must decrypt and match its ID. Problems name the damaged object and the snapshot paths
 * it affects. Unreferenced packs (left by an interrupted backup or prune) are reported, not errors.
 * Never writes to the repository.
 */
import { giveBuffer } from '../bufferPool.js';
import type { Repository } from '../repo/repository.js';
import { mapLimit } from '../repo/repository.js';
import type { CheckProblem, CheckReport, ProgressSink } from '../operations.js';
import type { ID, SnapshotEntry, TreeNode } from '../repo/types.js';
import { contentIds } from '../repo/tree.js';
import { storageId } from '../crypto/index.js';
import { decodeHeader } from '../repo/pack.js';
import { AbortedError } from '../errors.js';
import { acquireDecodePool, releasePool, defaultWorkerCount } from '../pool/index.js';
import { decodeBuffer, outcomesOf, packDecodeItems, type DecodeResult } from '../pool/wire.js';

export interface CheckOptions {
  readData?: boolean;
  signal?: AbortSignal;
  progress?: ProgressSink<{ phase: string; done: number; total: number }>;
  workers?: number;
}

/** Joins a node's block list in two parts (tree.ts) when it has one; the reason when its base cannot be
 *  read, or does not fit its patch. */
async function joinFailure(repo: Repository, n: TreeNode): Promise<string | undefined> {
  return repo.joinBlockList(n).then(
    () => undefined,
    (err: Error) => err.message,
  );
}

/** Calls `each` for every file path using one of `blobs`, across the given snapshots. */
async function findAffected(
  repo: Repository,
  snapshots: SnapshotEntry[],
  blobs: Set<string>,
  trees: Set<string>,
): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  const note = (blob: string, where: string) => {
    let l = out.get(blob);
    if (!l) out.set(blob, (l = []));
    if (l.length < 1000) l.push(where);
  };
  for (const s of snapshots) {
    const walk = async (treeId: ID, p: string): Promise<void> => {
      if (trees.has(treeId)) note(treeId, `${s.id.slice(0, 8)}:${p || '/'}`);
      let tree;
      try {
        tree = await repo.loadTree(treeId, { joinLists: false });
      } catch {
        return;
      }
      for (const n of tree.nodes) {
        const child = `${p}/${n.name}`;
        if (n.type === 'dir' && n.subtree) await walk(n.subtree, child);
        if (n.blockBase !== undefined && blobs.has(n.blockBase))
          note(n.blockBase, `${s.id.slice(0, 8)}:${child}`);
        if (await joinFailure(repo, n)) continue;
        for (const c of contentIds(n)) if (blobs.has(c)) note(c, `${s.id.slice(0, 8)}:${child}`);
      }
    };
    await walk(s.tree, '');
  }
  return out;
}

export async function check(repo: Repository, opts: CheckOptions = {}): Promise<CheckReport> {
  const problems: CheckProblem[] = [];
  const signal = opts.signal;
  await repo.loadIndex(true); // pick up what other writers added
  for (const e of repo.indexErrors)
    problems.push({ kind: 'corrupt-index', object: `index/${e.name}`, message: e.message, affects: [] });

  // packs that exist
  const stored = new Map<string, number>();
  for await (const o of repo.backend.list('data')) stored.set(o.name, o.size);
  const indexedPacks = new Set(repo.index.packs());
  const missingBlobs = new Set<string>();
  const packMaxEnd = new Map<string, number>();
  for (const [id, loc] of repo.index.entries()) {
    if (!stored.has(loc.pack)) missingBlobs.add(id);
    packMaxEnd.set(loc.pack, Math.max(packMaxEnd.get(loc.pack) ?? 0, loc.offset + loc.length));
  }
  for (const pack of indexedPacks) {
    if (!stored.has(pack))
      problems.push({
        kind: 'missing-pack',
        object: `data/${pack}`,
        message: `pack ${pack.slice(0, 12)} is indexed but missing`,
        affects: [],
      });
    else if ((stored.get(pack) ?? 0) < (packMaxEnd.get(pack) ?? 0))
      problems.push({
        kind: 'corrupt-pack',
        object: `data/${pack}`,
        message: `pack ${pack.slice(0, 12)} is shorter than its index says`,
        affects: [],
      });
  }

  // snapshots and trees
  const snapshotNames: string[] = [];
  for await (const o of repo.backend.list('snapshots')) snapshotNames.push(o.name);
  const snapshots: SnapshotEntry[] = [];
  for (const name of snapshotNames) {
    try {
      snapshots.push(await repo.loadSnapshot(name));
    } catch (err) {
      problems.push({
        kind: 'corrupt-snapshot',
        object: `snapshots/${name}`,
        message: (err as Error).message,
        affects: [],
      });
    }
  }
  const used = new Set<string>();
  const badTrees = new Set<string>();
  const absent = new Set<string>();
  const badLists = new Map<string, string>(); // base block lists stored but unreadable → why
  let done = 0;
  for (const s of snapshots) {
    const walk = async (treeId: ID): Promise<void> => {
      if (signal?.aborted) throw new AbortedError();
      if (used.has(treeId)) return;
      used.add(treeId);
      if (!repo.index.has(treeId)) {
        absent.add(treeId);
        return;
      }
      let tree;
      try {
        // lists in two parts are joined below, so that a bad base list is reported as that blob
        tree = await repo.loadTree(treeId, { joinLists: false });
      } catch (err) {
        badTrees.add(treeId);
        problems.push({
          kind: 'corrupt-tree',
          object: `tree ${treeId}`,
          message: (err as Error).message,
          affects: [],
        });
        return;
      }
      for (const n of tree.nodes) {
        if (n.type === 'dir' && n.subtree) await walk(n.subtree);
        if (n.blockBase !== undefined) {
          used.add(n.blockBase);
          if (!repo.index.has(n.blockBase)) absent.add(n.blockBase);
          else {
            const failure = await joinFailure(repo, n);
            if (failure) badLists.set(n.blockBase, failure);
          }
          if (!n.blockIds) continue; // its blocks are unknown without the base
        }
        for (const c of contentIds(n)) {
          used.add(c);
          if (!repo.index.has(c)) absent.add(c);
        }
      }
    };
    await walk(s.tree);
    opts.progress?.({ phase: 'snapshots', done: ++done, total: snapshots.length });
  }

  // read data
  const damaged = new Map<string, string>(); // blob → message
  if (opts.readData) {
    const pool = acquireDecodePool(repo.key, repo.config, opts.workers ?? defaultWorkerCount());
    try {
      const packs = [...stored.keys()].sort();
      let n = 0;
      await mapLimit(packs, 2, async (pack) => {
        if (signal?.aborted) throw new AbortedError();
        const bytes = await repo.backend.load('data', pack);
        let header;
        const hashOk = storageId(bytes) === pack;
        try {
          header = decodeHeader(repo.key, bytes, bytes.length, `pack ${pack.slice(0, 12)}`);
        } catch (err) {
          problems.push({
            kind: 'corrupt-pack',
            object: `data/${pack}`,
            message: (err as Error).message,
            affects: [],
          });
        }
        if (header) {
          const items = header.map((b) => ({
            id: b.id.toString('hex'),
            offset: b.offset,
            length: b.length,
            compressed: b.compressed,
            rawLength: b.rawLength,
          }));
          const { buffer, transfer } = decodeBuffer(bytes);
          const packed = packDecodeItems(items);
          const r = await pool.run<DecodeResult>({ op: 'decode', buffer, batch: packed.batch }, undefined, [
            ...transfer,
            ...packed.transfer,
          ]);
          giveBuffer(r.returned);
          outcomesOf(items, r.failed).forEach((res, j) => {
            if (!res.ok)
              damaged.set(
                items[j].id,
                `blob ${items[j].id.slice(0, 12)} in pack ${pack.slice(0, 12)}: ${res.message}`,
              );
          });
        }
        if (!hashOk && header && ![...damaged.values()].some((m) => m.includes(pack.slice(0, 12))))
          problems.push({
            kind: 'corrupt-pack',
            object: `data/${pack}`,
            message: `pack ${pack.slice(0, 12)} does not match its hash`,
            affects: [],
          });
        // every blob the index places in this pack must be there and intact
        if (!header)
          for (const [id, loc] of repo.index.entries())
            if (loc.pack === pack)
              damaged.set(id, `blob ${id.slice(0, 12)}: its pack ${pack.slice(0, 12)} is unreadable`);
        opts.progress?.({ phase: 'read-data', done: ++n, total: packs.length });
      });
    } finally {
      await releasePool(pool, !!signal?.aborted);
    }
  }

  // a base block list that cannot be joined is a damaged blob, whether or not its pack was read above
  for (const [id, message] of badLists) if (!damaged.has(id)) damaged.set(id, message);

  // name what every problem affects
  const lost = new Set<string>([...absent, ...missingBlobs].filter((b) => used.has(b)));
  const badBlobs = new Set<string>([...lost, ...[...damaged.keys()].filter((b) => used.has(b))]);
  if (badBlobs.size || badTrees.size) {
    const affected = await findAffected(repo, snapshots, badBlobs, new Set([...badTrees, ...[...badBlobs]]));
    for (const id of lost)
      problems.push({
        kind: 'missing-blob',
        object: `blob ${id}`,
        message: `blob ${id.slice(0, 12)} is needed but not stored`,
        affects: affected.get(id) ?? [],
      });
    for (const [id, message] of damaged)
      if (used.has(id))
        problems.push({
          kind: 'corrupt-blob',
          object: `blob ${id}`,
          message,
          affects: affected.get(id) ?? [],
        });
    for (const p of problems)
      if (p.kind === 'corrupt-tree') p.affects = affected.get(p.object.slice(5)) ?? [];
  }

  // unreferenced data
  const packsInUse = new Set<string>();
  let unusedBlobs = 0;
  for (const [id, loc] of repo.index.entries()) {
    if (used.has(id)) packsInUse.add(loc.pack);
    else unusedBlobs++;
  }
  const unreferencedPacks = [...stored.keys()].filter((p) => !packsInUse.has(p)).sort();
  return {
    ok: problems.length === 0,
    problems,
    unreferencedPacks,
    unusedBlobs,
    snapshots: snapshots.length,
    packs: stored.size,
    blobs: repo.index.size,
  };
}
