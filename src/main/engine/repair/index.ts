/**
 * Repair: makes a damaged repository consistent again from what survives, and says what could not be
 * saved. It handles every kind of damage `check` reports:
 * - packs (a flipped byte, a truncated or missing pack): every pack is read whole and every blob in it
 *   verified (packs.ts); the sound blobs of a damaged pack are copied into new packs;
 * - index files (damaged or lost): a new full index is written from what the packs hold;
 * - blobs that no pack holds soundly: read again from the files they came from where those still hold
 *   the same bytes (same content → same keyed ID; sources.ts);
 * - trees and snapshots: a snapshot that still lacks something gets new trees without the files and
 *   folders that are lost (snapshots.ts), saved as a new snapshot tagged "repaired" that names the one
 *   it replaces; a snapshot whose root folder is lost is removed; the root trees of damaged snapshot
 *   files are saved as new snapshots tagged "recovered".
 *
 * Guarantees: it takes the repository's exclusive lock (like prune) and never makes things worse. It
 * writes new objects first (packs, then one full index, then snapshots) and removes old index files,
 * damaged packs and replaced snapshots only after those are written, and only while its lock holds. A
 * crash at any point leaves a repository that `check` reports on and a second repair finishes: a
 * snapshot that a saved repaired one names is removed, not rebuilt twice; a recovered root tree is a
 * snapshot's root the second time. A read that fails (rather than returning damaged bytes) stops
 * repair before it changes anything.
 * Not here: it does not prune (unused sound blobs stay), and it does not rebuild a lost folder listing
 * from the source folder (a tree's bytes depend on metadata read at backup time).
 */
import type { Repository } from '../repo/repository.js';
import { BlobIndex, BlobType, type BlobLocation } from '../repo/blobIndex.js';
import { decodeIndex, type IndexPack } from '../repo/indexFile.js';
import { decodeObject, loadJson } from '../repo/objects.js';
import type { ID, Snapshot, SnapshotEntry } from '../repo/types.js';
import type { ProgressSink } from '../operations.js';
import { AbortedError, CorruptObjectError, NotFoundError, TidemarkError } from '../errors.js';
import { surveyPacks } from './packs.js';
import { recoverFromSources } from './sources.js';
import { SnapshotRepair, type TreeOutcome } from './snapshots.js';
import { breather } from './breathe.js';

export type RepairPhase = 'packs' | 'snapshots' | 'sources' | 'rebuild' | 'writing' | 'cleanup';

export interface RepairOptions {
  /** Find out and report, write nothing. */
  dryRun?: boolean;
  /** Read blobs no pack holds soundly again from the files that used them (default true). */
  fromSources?: boolean;
  signal?: AbortSignal;
  progress?: ProgressSink<{ phase: RepairPhase; done: number; total: number }>;
  /** One line per notable step, for a run log. */
  log?: (line: string) => void;
  workers?: number;
  leaseMs?: number;
  /** How long to wait for running backups to finish (default: fail at once). */
  lockWaitMs?: number;
}

export interface RepairLost {
  /** "snapshot:/path" of what is lost, or a snapshot's ID alone when the whole snapshot is. */
  where: string;
  kind: 'file' | 'folder' | 'snapshot';
  reason: string;
}

export interface RepairReport {
  dryRun: boolean;
  /** True when the repository had nothing to repair. */
  clean: boolean;
  packs: {
    read: number;
    /** Damaged packs (removed, unless a dry run) and how many of their blobs were saved. */
    damaged: { pack: string; problem: string; salvaged: number; lost: number }[];
    /** Packs the index named that are not stored. */
    missing: string[];
    /** Sound packs no index file listed in full (indexed again). */
    unindexed: number;
  };
  index: {
    /** Index files that could not be read. */
    damaged: string[];
    /** Index files replaced by one new full index (0 when the index needed nothing). */
    replaced: number;
  };
  blobs: {
    /** Sound blobs copied out of damaged packs. */
    salvaged: number;
    /** Lost blobs read again from source files. */
    fromSources: number;
    /** Blobs some snapshot needs that could not be saved. */
    lost: number;
  };
  /** Source files that gave back lost blobs. */
  sources: { path: string; blobs: number }[];
  /** Source files that could not be read, and why. */
  unreadableSources: { path: string; reason: string }[];
  snapshots: {
    checked: number;
    /** Snapshots saved again without what is lost (the old one is removed). */
    rebuilt: { from: ID; to: ID; lostFiles: number; lostFolders: number }[];
    /** Snapshots removed: damaged files, and snapshots whose whole content is lost. */
    removed: { id: ID; reason: string }[];
    /** Root trees of damaged snapshot files saved as new snapshots. */
    recovered: { id: ID; tree: ID; paths: string[]; time: string }[];
  };
  /** What could not be saved (capped; `lostCount` is exact). */
  lost: RepairLost[];
  lostCount: number;
}

const LOST_CAP = 10_000;

/** Damage found and nothing may be written (the report says what a repair would do). */
export class RepairNeededError extends TidemarkError {
  constructor(message: string) {
    super('REPAIR_NEEDED', message);
  }
}

async function readSnapshots(
  repo: Repository,
): Promise<{ readable: SnapshotEntry[]; damaged: { id: ID; reason: string }[] }> {
  const names: string[] = [];
  for await (const o of repo.backend.list('snapshots')) names.push(o.name);
  const readable: SnapshotEntry[] = [];
  const damaged: { id: ID; reason: string }[] = [];
  for (const name of names.sort()) {
    try {
      readable.push({ ...(await loadJson<Snapshot>(repo.backend, repo.key, 'snapshots', name)), id: name });
    } catch (err) {
      if (err instanceof NotFoundError) continue;
      if (!(err instanceof CorruptObjectError)) throw err;
      damaged.push({ id: name, reason: err.message });
    }
  }
  readable.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : a.id < b.id ? -1 : 1));
  return { readable, damaged };
}

export async function repair(repo: Repository, opts: RepairOptions = {}): Promise<RepairReport> {
  const dryRun = !!opts.dryRun;
  const save = !dryRun;
  const signal = opts.signal;
  const log = opts.log ?? (() => {});
  const progress = (phase: RepairPhase, done: number, total: number) =>
    opts.progress?.({ phase, done, total });
  // an append-only repository still locked would refuse the removals at the end, after the new packs,
  // index and snapshots were written: refuse before anything is written instead
  if (save) repo.assertMayDelete('repair (it removes damaged packs, index files and snapshots)');
  const lock = await repo.lock(true, 'repair', opts.leaseMs, opts.lockWaitMs);
  try {
    // ---- what the index says, and what the packs hold ----------------------------------------------
    repo.invalidateIndex(); // nothing read before the lock is trusted
    await repo.loadIndex();
    const oldIndexFiles = [...repo.indexFiles, ...repo.indexErrors.map((e) => e.name)];
    const damagedIndex = repo.indexErrors.map((e) => e.name).sort();
    const indexed = new Map<string, { id: string; loc: BlobLocation }[]>();
    const breathe = breather();
    for (const [id, loc] of repo.index.entries()) {
      if (breathe.due) await breathe.rest();
      let l = indexed.get(loc.pack);
      if (!l) indexed.set(loc.pack, (l = []));
      l.push({ id, loc });
    }
    const survey = await surveyPacks(repo, indexed, {
      signal,
      workers: opts.workers,
      progress: (d, t) => progress('packs', d, t),
    });
    const scans = [...survey.packs.values()];
    const intact = scans.filter((s) => s.intact);
    const damaged = scans.filter((s) => !s.intact);
    // The index to work with from here: every sound blob, in an intact pack where there is one, else
    // where it lies soundly in a damaged pack (read from there until it is copied out).
    const fresh = new BlobIndex();
    for (const s of intact)
      for (const [id, loc] of s.sound) {
        fresh.add(id, loc);
        if (breathe.due) await breathe.rest();
      }
    const salvage = new Map<string, { id: string; loc: BlobLocation }[]>();
    for (const s of damaged)
      for (const [id, loc] of s.sound)
        if (fresh.add(id, loc)) {
          let l = salvage.get(s.pack);
          if (!l) salvage.set(s.pack, (l = []));
          l.push({ id, loc });
        }
    // an index entry that is not where it says (a missing or damaged pack, a wrong place) is stale
    let staleEntries = 0;
    for (const [pack, blobs] of indexed) {
      const scan = survey.packs.get(pack);
      for (const b of blobs) {
        if (breathe.due) await breathe.rest();
        const at = scan?.sound.get(b.id);
        if (!scan?.intact || !at || at.offset !== b.loc.offset) staleEntries++;
      }
    }
    repo.index = fresh;
    for (const s of damaged) log(`damaged pack ${s.pack.slice(0, 12)}: ${s.problem}`);
    for (const p of survey.missing.keys()) log(`missing pack ${p.slice(0, 12)} (named by the index)`);
    for (const f of damagedIndex) log(`damaged index file ${f.slice(0, 12)}`);

    // ---- snapshots: which lack something, and what ------------------------------------------------
    const { readable, damaged: damagedSnapshots } = await readSnapshots(repo);
    for (const d of damagedSnapshots) log(`damaged snapshot file ${d.id.slice(0, 12)}: ${d.reason}`);
    const trees = new SnapshotRepair(repo, { save, signal });
    // the trees stored before this repair writes any: where the roots of damaged snapshot files are
    const storedTrees: ID[] = [];
    if (damagedSnapshots.length)
      for (const [id, loc] of repo.index.entries()) {
        if (loc.type === BlobType.Tree) storedTrees.push(id);
        if (breathe.due) await breathe.rest();
      }
    const whole = new Map<ID, boolean>();
    let n = 0;
    for (const s of readable) {
      whole.set(s.id, await trees.surveySnapshot(s));
      progress('snapshots', ++n, readable.length);
    }

    // ---- lost data blobs, from the files they came from ----------------------------------------------
    const report: RepairReport = {
      dryRun,
      clean: false,
      packs: {
        read: scans.length,
        damaged: damaged.map((s) => ({
          pack: s.pack,
          problem: s.problem ?? 'damaged',
          salvaged: salvage.get(s.pack)?.length ?? 0,
          lost: [...s.unsound].filter((id) => !fresh.has(id)).length,
        })),
        missing: [...survey.missing.keys()].sort(),
        unindexed: survey.unindexed.filter((p) => survey.packs.get(p)?.intact).length,
      },
      index: { damaged: damagedIndex, replaced: 0 },
      blobs: { salvaged: [...salvage.values()].reduce((a, l) => a + l.length, 0), fromSources: 0, lost: 0 },
      sources: [],
      unreadableSources: [],
      snapshots: { checked: readable.length, rebuilt: [], removed: [], recovered: [] },
      lost: [],
      lostCount: 0,
    };
    if (trees.wanted.size && opts.fromSources !== false) {
      log(`${trees.wanted.size} lost blob(s) are needed: looking for them in the source files`);
      const found = await recoverFromSources(repo, trees.wanted, {
        save,
        rawLength: (id) => survey.rawLengths.get(id),
        signal,
        progress: (d, t) => progress('sources', d, t),
      });
      report.blobs.fromSources = found.found.size;
      report.sources = found.files;
      report.unreadableSources = found.unreadable;
      for (const f of found.files) log(`source ${f.path}: ${f.blobs} lost blob(s) read again`);
      // a dry run saves nothing: count what it found as there for what follows
      if (!save) for (const id of found.found) repo.index.add(id, { ...PLACEHOLDER });
      if (save) await repo.flush();
    }

    // ---- new trees where something is still lost ---------------------------------------------------
    const rebuilt: { from: SnapshotEntry; outcome: TreeOutcome }[] = [];
    const removeSnapshots: { id: ID; reason: string }[] = [];
    const lost: RepairLost[] = [];
    let lostCount = 0;
    const noteLost = (l: RepairLost) => {
      lostCount++;
      if (lost.length < LOST_CAP) lost.push(l);
    };
    const repairedFrom = new Set(readable.map((s) => s.repairedFrom).filter((x): x is ID => !!x));
    n = 0;
    for (const s of readable) {
      progress('rebuild', ++n, readable.length);
      if (whole.get(s.id)) continue;
      const o = await trees.rebuildTree(s.tree);
      if (o.id === s.tree) continue;
      const short = s.id.slice(0, 8);
      for (const e of o.lost) noteLost({ where: `${short}:${e.rel || '/'}`, kind: e.kind, reason: e.reason });
      lostCount += o.lostFiles + o.lostFolders - o.lost.length;
      if (o.id === null) {
        removeSnapshots.push({ id: s.id, reason: 'its root folder (tree) is lost' });
        noteLost({ where: short, kind: 'snapshot', reason: 'its root folder (tree) is lost' });
        continue;
      }
      if (repairedFrom.has(s.id)) {
        // an earlier repair saved this snapshot's replacement and stopped before removing it
        removeSnapshots.push({ id: s.id, reason: 'replaced by a repaired snapshot' });
        continue;
      }
      rebuilt.push({ from: s, outcome: o });
    }

    // ---- root trees of damaged snapshot files ------------------------------------------------------
    const recovered: Snapshot[] = [];
    if (damagedSnapshots.length) {
      const roots = new Set(readable.map((s) => s.tree));
      for (const r of rebuilt) roots.add(r.outcome.id!);
      const packTimes = new Map<string, number>();
      for await (const o of repo.backend.list('data')) if (o.modified) packTimes.set(o.name, o.modified);
      for (const root of await trees.orphanRoots(storedTrees, roots)) {
        const o = await trees.rebuildTree(root);
        if (o.id === null || roots.has(o.id)) continue; // recovered by an earlier repair
        const pack = repo.index.get(root)?.pack;
        const time = new Date(packTimes.get(pack ?? '') ?? Date.now()).toISOString();
        recovered.push(await trees.describeRecovered(root, o, readable, time));
        for (const e of o.lost)
          noteLost({
            where: `recovered ${root.slice(0, 8)}:${e.rel || '/'}`,
            kind: e.kind,
            reason: e.reason,
          });
        lostCount += o.lostFiles + o.lostFolders - o.lost.length;
      }
      for (const d of damagedSnapshots) {
        removeSnapshots.push({ id: d.id, reason: `the snapshot file is damaged (${d.reason})` });
        noteLost({
          where: d.id.slice(0, 8),
          kind: 'snapshot',
          reason: recovered.length
            ? 'its file is damaged; see the recovered snapshots for its content'
            : 'its file is damaged and its root folder is not found among the stored trees',
        });
      }
    }
    report.lost = lost;
    report.lostCount = lostCount;
    const needed = new Set<string>();
    for (const [id] of trees.wanted) if (!repo.hasBlob(id)) needed.add(id);
    report.blobs.lost = needed.size;

    const indexStale =
      damagedIndex.length > 0 || staleEntries > 0 || survey.missing.size > 0 || report.packs.unindexed > 0;
    const changes =
      indexStale ||
      damaged.length > 0 ||
      rebuilt.length > 0 ||
      removeSnapshots.length > 0 ||
      recovered.length > 0 ||
      report.blobs.fromSources > 0;
    report.snapshots.removed = removeSnapshots;
    if (!changes) {
      report.clean = true;
      return report;
    }
    if (dryRun) {
      report.index.replaced = oldIndexFiles.length;
      report.snapshots.rebuilt = rebuilt.map((r) => ({
        from: r.from.id,
        to: '',
        lostFiles: r.outcome.lostFiles,
        lostFolders: r.outcome.lostFolders,
      }));
      report.snapshots.recovered = recovered.map((s) => ({
        id: '',
        tree: s.tree,
        paths: s.paths,
        time: s.time,
      }));
      return report;
    }

    // ---- write: copies of sound blobs, new trees, one full index, then the snapshots -----------------
    if (signal?.aborted) throw new AbortedError();
    let done = 0;
    for (const [pack, blobs] of salvage) {
      progress('writing', ++done, salvage.size);
      const bytes = await repo.backend.load('data', pack);
      for (const { id, loc } of blobs) {
        const sealed = bytes.subarray(loc.offset, loc.offset + loc.length);
        repo.decodeBlob(id, sealed, loc); // verified again: never copy a damaged blob
        await new Promise<void>((r) => setImmediate(r)); // one blob (≤ 4 MiB) opened per turn of the loop
        await repo.addSealedBlob(
          loc.type as BlobType,
          Buffer.from(id, 'hex'),
          Buffer.from(sealed),
          loc.rawLength,
          loc.compressed,
        );
      }
    }
    await repo.flush();
    const written = [...repo.indexFiles].filter((f) => !oldIndexFiles.includes(f));
    const full: IndexPack[] = [];
    for (const s of intact)
      if (s.header?.length)
        full.push({
          pack: s.pack,
          blobs: s.header.map((b) => ({
            id: b.id,
            loc: {
              pack: s.pack,
              offset: b.offset,
              length: b.length,
              rawLength: b.rawLength,
              type: b.type,
              compressed: b.compressed,
            },
          })),
        });
    const byPack = new Map<string, IndexPack>();
    for (const f of written) {
      const plain = decodeObject(repo.key, await repo.backend.load('index', f), `index/${f.slice(0, 12)}`);
      decodeIndex(plain, f, (idBuf, loc) => {
        let e = byPack.get(loc.pack);
        if (!e) {
          byPack.set(loc.pack, (e = { pack: loc.pack, blobs: [] }));
          full.push(e);
        }
        e.blobs.push({ id: Buffer.from(idBuf), loc });
      });
    }
    const { id: fullIndex } = await repo.saveIndexFile(full);
    log(`wrote a new index of ${full.length} pack(s)`);
    for (const r of rebuilt) {
      const { id: _old, ...rest } = r.from;
      const o = r.outcome;
      const stats = {
        ...rest.stats,
        files: Math.max(0, rest.stats.files + o.summary.files - o.before.files),
        dirs: Math.max(0, rest.stats.dirs + o.summary.dirs - o.before.dirs),
        totalBytes: Math.max(0, rest.stats.totalBytes + o.summary.bytes - o.before.bytes),
      };
      const snapshot: Snapshot = {
        ...rest,
        tree: o.id!,
        tags: [...new Set([...rest.tags, 'repaired'])],
        stats,
        repairedFrom: r.from.id,
      };
      const to = await repo.saveSnapshot(snapshot);
      report.snapshots.rebuilt.push({
        from: r.from.id,
        to,
        lostFiles: o.lostFiles,
        lostFolders: o.lostFolders,
      });
      removeSnapshots.push({ id: r.from.id, reason: `replaced by repaired snapshot ${to.slice(0, 8)}` });
      log(
        `snapshot ${r.from.id.slice(0, 8)} saved again as ${to.slice(0, 8)} without ${o.lostFiles} lost file(s)`,
      );
    }
    for (const s of recovered) {
      const id = await repo.saveSnapshot(s);
      report.snapshots.recovered.push({ id, tree: s.tree, paths: s.paths, time: s.time });
      log(`root tree ${s.tree.slice(0, 12)} saved as recovered snapshot ${id.slice(0, 8)}`);
    }

    // ---- remove what is replaced, only while the lock holds -------------------------------------------
    lock.assertHeld('the repair');
    const oldFiles = [...oldIndexFiles, ...written].filter((f) => f !== fullIndex);
    let k = 0;
    const total = oldFiles.length + damaged.length + survey.missing.size + removeSnapshots.length;
    for (const f of oldFiles) {
      await repo.backend.remove('index', f);
      progress('cleanup', ++k, total);
    }
    report.index.replaced = oldFiles.length;
    for (const s of damaged) {
      lock.assertHeld('the repair');
      await repo.backend.remove('data', s.pack);
      progress('cleanup', ++k, total);
    }
    for (const r of removeSnapshots) {
      lock.assertHeld('the repair');
      await repo.backend.remove('snapshots', r.id);
      progress('cleanup', ++k, total);
    }
    report.snapshots.removed = removeSnapshots;
    return report;
  } finally {
    repo.invalidateIndex(); // the index this repair worked with is not the stored one (a dry run's least of all)
    await lock.release().catch(() => {});
  }
}

/** A dry run's stand-in location for a blob it found in a source file (never read). */
const PLACEHOLDER: BlobLocation = {
  pack: '0'.repeat(64),
  offset: 0,
  length: 0,
  rawLength: 0,
  type: BlobType.Data,
  compressed: false,
};
