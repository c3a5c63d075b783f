/**
 * Restore: materialise files from a snapshot.
 * The plan (walk the trees, select what `include` asks for, decide per existing file with the
 * overwrite policy) is made in batches of files; a pack is read as soon as the walk has asked for every
 * blob in it, while the walk goes on, and the plan held stays bounded however large the snapshot. Each
 * pack is read once (but for blobs asked for again after it was read), in coalesced ranges; workers
 * decrypt, decompress and verify blobs and write them with synchronous calls: whole single-blob files,
 * and the pieces of larger files at their offsets into files the main thread created and sized first (all-zero
 * chunks are not written, so sparse files stay sparse; plaintext never comes back to the main thread).
 * Files in folders this run created are not looked up first. Metadata comes last: files, then
 * hardlinks and symlinks, then directories deepest first (so their mtimes stick).
 * Guarantees: never writes outside the target folder — names are validated, parents are verified to
 * be real directories, files are opened with O_NOFOLLOW, symlinks are created only at the end.
 * A damaged blob fails only the files that use it; they are removed and reported by name.
 */
import { giveBuffer } from '../bufferPool.js';
import fs from 'node:fs/promises';
import { constants as C } from 'node:fs';
import path from 'node:path';
import type { Repository } from '../repo/repository.js';
import { mapLimit } from '../repo/repository.js';
import { BlobType, type BlobLocation } from '../repo/blobIndex.js';
import type { Tree, TreeNode } from '../repo/types.js';
import type { RestoreError, RestoreOptions, RestoreProgress, RestoreResult } from '../operations.js';
import { nameBytes, isSafeName, contentCount, contentIds } from '../repo/tree.js';
import { AbortedError, TidemarkError, UnsafePathError, UsageError } from '../errors.js';
import {
  type WorkerPool,
  acquireDecodePool,
  releasePool,
  decodeBuffer,
  defaultWorkerCount,
} from '../workers/index.js';
import type { DecodeResult } from '../workers/protocol.js';
import { type DecodeItem, type DecodeOutcome, outcomesOf, packDecodeItems } from '../workers/decodeBatch.js';
import { setTimes } from './times.js';
import { directIoFilesystem } from '../aligned.js';

/** A file to write. A million-file restore holds tens of thousands at once (up to `planLimit` pieces),
 *  so it holds what the writes and the metadata need, not its tree node (let go once its pieces are
 *  planned), nor its path in the snapshot (`displayOf` derives it from `abs`). */
interface PlannedFile extends Meta {
  abs: Buffer;
  /** The folder it is restored into (latin1: one string shared by the folder's files), where the walk
   *  knew it: whether this run made that folder is looked up by it. */
  dir: string | undefined;
  /** Until its pieces are planned. */
  node?: TreeNode;
  size: number;
  /** Made of one blob: a worker writes it whole. */
  single: boolean;
  remaining: number;
  failed?: string;
  /** Created (and sized) by a worker writing it whole, or by `prepare`. */
  created?: boolean;
  /** Set once `prepare` started creating and sizing it. */
  ready?: Promise<void>;
  /** To be written (not skipped by the overwrite policy, nothing in the way). */
  chosen?: boolean;
}

/** A folder to make, and its metadata to set at the end. Kept for every folder until then, so it is
 *  small: the path as a latin1 string (a small Buffer is a slice of an 8 KiB pool slab and would keep
 *  the whole slab alive: ~90 MB for the 10,502 folders of a million-file restore), and only the fields
 *  `applyMetadata` needs. */
interface PlannedDir extends Meta {
  path: string;
  depth: number;
}

type Meta = Pick<TreeNode, 'mode' | 'uid' | 'gid' | 'mtimeNs'>;

interface Use {
  file: PlannedFile;
  offset: number;
}

const SEP = Buffer.from(path.sep);

export async function restore(repo: Repository, opts: RestoreOptions): Promise<RestoreResult> {
  const started = Date.now();
  const signal = opts.signal;
  const policy = opts.overwrite ?? 'overwrite';
  const target = Buffer.from(path.resolve(opts.target));
  const targetPath = target.toString('latin1');
  const strip = opts.relativeTo ? path.posix.resolve('/', opts.relativeTo) : '/';
  /** A planned file's path in the snapshot (what errors and the progress show): its target path is the
   *  target folder and then its names from the snapshot, below `strip`. */
  const displayOf = (f: PlannedFile): string => {
    const rest = f.abs.subarray(target.length + SEP.length).toString();
    return (strip === '/' ? '' : strip) + '/' + (path.sep === '/' ? rest : rest.split(path.sep).join('/'));
  };
  const errors: RestoreError[] = [];
  const progress: RestoreProgress = {
    phase: 'planning',
    filesTotal: 0,
    bytesTotal: 0,
    filesDone: 0,
    bytesDone: 0,
    errors: 0,
    elapsedMs: 0,
  };
  const emit = () => {
    progress.elapsedMs = Date.now() - started;
    progress.errors = errors.length;
    opts.progress?.({ ...progress });
  };
  const ticker = setInterval(emit, 250);
  const isRoot = process.getuid?.() === 0;
  let pool: WorkerPool | undefined;
  const dirs: PlannedDir[] = []; // every folder, for its metadata at the end
  // links are made at the end: their paths are kept as latin1 strings, like folders' (PlannedDir)
  // (and a symlink's target, as latin1 too, with only the metadata it needs: not its tree node)
  const symlinks: { path: string; target: string; uid?: number; gid?: number; mtimeNs: string }[] = [];
  const hardlinks: { path: string; first: PlannedFile }[] = [];
  let skippedCount = 0;
  let matched = false; // anything (file, folder, link) the selection names
  // exact totals as walked (the progress shows folders' summaries ahead of the walk)
  let walkedFiles = 0;
  let walkedBytes = 0;
  const chosen = { files: 0, bytes: 0 }; // files decided to be written
  const failedTotals = { files: 0, bytes: 0 };

  // The pipeline: the walk (this function) plans batches of files and prepares them (folders, the
  // decision per existing file), adding what each file needs to the plan of each pack; a pack is queued
  // once the walk has asked for every data blob the index lists in it (so it is read once, whole, while
  // the walk goes on), the others when the walk ends or the plan held passes `planLimit`. Four loops
  // (RESTORE_LOOPS) take the queued packs, mostly in order (takeJob), and hand their ranges to the decode
  // workers.
  const jobs: PackJob[] = [];
  const pending = new Map<string, PackPlan>(); // packs planned, not queued yet
  const dispatched = new Set<string>(); // packs queued once (a later use is queued at the end)
  let held = 0; // uses planned and not written: in `pending` and in queued or running jobs
  let walkDone = false;
  let failure: unknown;
  const changed = new Notify();

  try {
    // the index (to pick up what other writers added) and the snapshot are read at the same time
    const indexLoaded = repo.loadIndex(true);
    indexLoaded.catch(() => {}); // awaited below (after a failure to find the snapshot: not at all)
    const snap = await repo.loadSnapshot(opts.snapshot);
    await indexLoaded;
    emit();
    // the workers start while the plan is made
    pool = acquireDecodePool(repo.key, repo.config, opts.workers ?? defaultWorkerCount());
    const blobsIn = repo.index.countsByPack(BlobType.Data);
    const planLimit = Math.max(1, opts.planLimit ?? DEFAULT_PLAN_LIMIT);
    const queue = (pack: string, plan: PackPlan) => {
      pending.delete(pack);
      dispatched.add(pack);
      let bytes = 0;
      for (const b of plan.blobs) bytes += b.length;
      jobs.push({
        pack,
        blobs: plan.blobs,
        uses: plan.uses,
        count: plan.count,
        bulk: bytes >= plan.blobs.length * BULK_BLOB,
      });
      progress.phase = 'restoring';
      changed.notify();
    };
    const queueAll = () => {
      for (const pack of [...pending.keys()].sort()) queue(pack, pending.get(pack)!);
    };

    const fail = (f: PlannedFile, message: string, code = 'CORRUPT_OBJECT') => {
      if (f.failed) return;
      f.failed = message;
      if (f.chosen) {
        failedTotals.files++;
        failedTotals.bytes += f.size;
      }
      const shown = displayOf(f);
      errors.push({ path: shown, code, message: `cannot restore ${shown}: ${message}` });
    };
    /** Creates the file empty at its final size (sparse) once, before any piece is written into it. */
    const prepare = (f: PlannedFile): Promise<void> => {
      f.created = true;
      f.ready ??= (async () => {
        const fh = await fs.open(f.abs, C.O_WRONLY | C.O_CREAT | C.O_TRUNC | C.O_NOFOLLOW, 0o600);
        try {
          if (f.size) await fh.truncate(f.size);
        } finally {
          await fh.close();
        }
      })().catch((err: NodeJS.ErrnoException) => fail(f, err.message, err.code ?? 'EIO'));
      return f.ready;
    };
    const finished = async (f: PlannedFile) => {
      if (!f.failed) await prepare(f); // nothing had to be written: create it, sized (sparse)
      if (f.failed) {
        await fs.rm(f.abs, { force: true });
        return;
      }
      await applyMetadata(f.abs, f, isRoot).catch((err) =>
        errors.push({ path: displayOf(f), code: err.code ?? 'EIO', message: err.message }),
      );
      progress.filesDone++;
    };

    /** Adds the blobs a file needs (and where in it each goes) to the plans of their packs, queueing each
     *  pack whose every data blob is now asked for; fails the file if a blob is missing from the index
     *  (nothing of it is planned then). Synchronous, apart from prepareBatch's awaits: V8 compiles this
     *  hot loop on its own, where inside the large async function it cost ~0.2 s of compile time on a
     *  helper thread (`node --trace-opt`, a CLI restore of the bench dataset). */
    const planPieces = (f: PlannedFile, node: TreeNode): void => {
      const ids = contentIds(node);
      const locs = new Array<BlobLocation>(ids.length);
      for (let k = 0; k < ids.length; k++) {
        const loc = repo.index.get(ids[k]);
        if (!loc) {
          fail(f, `blob ${ids[k].slice(0, 12)} is missing from the repository`);
          return; // nothing of it is written (finished removes what is in the way)
        }
        locs[k] = loc;
      }
      let at = 0; // where the blob goes in the file
      for (let k = 0; k < ids.length; k++) {
        const id = ids[k];
        const loc = locs[k];
        let plan = pending.get(loc.pack);
        if (!plan) pending.set(loc.pack, (plan = { blobs: [], uses: new Map(), count: 0 }));
        const use = { file: f, offset: at };
        const list = plan.uses.get(id);
        // a list made with its first use holds one slot; an empty one grows to 16 at its first push (~150
        // bytes more per blob, all of them kept until the pack is restored: most of them are copied by the
        // young-generation GC, which the walk's plan keeps busy)
        if (list) list.push(use);
        else {
          plan.uses.set(id, [use]);
          // where it lies in its pack, copied out of the index's answer (one object kept, not two)
          plan.blobs.push({
            id,
            offset: loc.offset,
            length: loc.length,
            rawLength: loc.rawLength,
            compressed: loc.compressed,
          });
        }
        at += loc.rawLength;
        plan.count++;
        held++;
        if (!dispatched.has(loc.pack) && plan.blobs.length === blobsIn.get(loc.pack)) queue(loc.pack, plan);
      }
    };

    // ---- one batch: folders, decisions, the pack ranges it needs ---------------------------------
    const knownDirs = new Set<string>();
    const madeDirs = new Set<string>(); // created by this run: nothing in them is in the way
    let targetReady = false;
    const prepareBatch = async (b: Batch): Promise<void> => {
      if (!targetReady) {
        await ensureDir(targetPath, target, knownDirs, madeDirs);
        targetReady = true;
      }
      // level by level (a folder's parents are made before it: here or in an earlier batch), up to 16
      // at a time within a level
      const levels: PlannedDir[][] = [];
      for (const d of b.dirs) (levels[d.depth] ??= []).push(d);
      for (const level of levels)
        if (level) await mapLimit(level, 16, (d) => ensureDir(d.path, target, knownDirs, madeDirs));

      // decide per existing file (files in folders this run created are not looked up)
      const toWrite: PlannedFile[] = [];
      const existing: PlannedFile[] = [];
      for (const f of b.files)
        (madeDirs.has(f.dir ?? path.dirname(f.abs.toString('latin1'))) ? toWrite : existing).push(f);
      await mapLimit(existing, 16, async (f) => {
        let st;
        try {
          st = await fs.lstat(f.abs);
        } catch {
          toWrite.push(f);
          return;
        }
        if (st.isDirectory()) {
          errors.push({ path: displayOf(f), code: 'EISDIR', message: 'a folder of that name is in the way' });
          return;
        }
        if (
          policy === 'skip' ||
          (policy === 'if-newer' && st.mtimeMs >= Number(BigInt(f.mtimeNs) / 1000000n))
        ) {
          skippedCount++;
          walkedFiles--;
          walkedBytes -= f.size;
          progress.filesTotal--;
          progress.bytesTotal -= f.size;
          return;
        }
        if (policy === 'keep-both') f.abs = await freeName(f.abs);
        else await fs.rm(f.abs, { force: true }); // never write through an existing symlink or hardlink
        toWrite.push(f);
      });

      // the blobs each file needs, and where in it
      for (const f of toWrite) {
        f.chosen = true;
        chosen.files++;
        chosen.bytes += f.size;
        const node = f.node!;
        f.node = undefined; // its pieces are planned below (or it fails): the node is not needed after
        if (node.blockBase !== undefined && !node.blockIds) {
          try {
            await repo.joinBlockList(node);
          } catch (err) {
            fail(f, (err as Error).message);
            continue;
          }
        }
        planPieces(f, node);
      }
      // files without content (empty), or failed already, are done now
      await mapLimit(
        toWrite.filter((f) => f.remaining === 0 || f.failed),
        16,
        finished,
      );
    };

    // ---- plan: walk the trees, in batches --------------------------------------------------------
    const includes = (opts.include ?? []).map((p) => path.posix.resolve('/', p));
    const selected = (p: string) =>
      includes.length === 0 ||
      includes.some((inc) => p === inc || p.startsWith(inc === '/' ? '/' : inc + '/'));
    const leadsTo = (p: string) =>
      includes.length === 0 || includes.some((inc) => inc === p || inc.startsWith(p === '/' ? '/' : p + '/'));
    const inodes = new Map<string, PlannedFile>();

    const targetOf = (snapPath: string, raws: Buffer[]): Buffer | undefined => {
      // raws: raw name components from the snapshot root; strip the relativeTo prefix
      const stripParts = strip === '/' ? 0 : strip.split('/').filter(Boolean).length;
      const rest = raws.slice(stripParts);
      if (rest.length === 0) return undefined;
      for (const r of rest)
        if (!isSafeName(r))
          throw new UnsafePathError(
            `refusing the unsafe name ${JSON.stringify(r.toString())} in ${snapPath}`,
          );
      const parts: Buffer[] = [target];
      for (const r of rest) parts.push(SEP, r);
      const out = Buffer.concat(parts);
      // belt and braces: the joined path must stay inside target
      const rel = path.relative(targetPath, out.toString('latin1'));
      if (rel.startsWith('..') || path.isAbsolute(rel))
        throw new UnsafePathError(`${snapPath} would be written outside ${opts.target}`);
      return out;
    };

    // Packs are queued whole, when complete, not batch by batch: a large file's blobs lie in many packs,
    // between other files' blobs, and reading a pack's part for each batch reads ranges again (batches
    // cut at 16-256 MiB made the bench's restore read 21% more bytes in 3x the ranges and take 10-20%
    // longer). On the bench's dataset 19 of 37 packs are complete after its first files (large ones).
    let cur: Batch = newBatch();
    const flush = async () => {
      const b = cur;
      cur = newBatch();
      if (b.files.length || b.dirs.length) await prepareBatch(b);
      if (held > planLimit) {
        // the plan held is at its bound: queue every pack planned, and go on when half is written
        queueAll();
        while (held > planLimit / 2 && failure === undefined) await changed.wait();
      }
      if (failure !== undefined) throw failure;
    };
    /** Adds a file to the batch; a promise when the batch was handed over (no await per file). */
    const add = (f: PlannedFile): Promise<void> | undefined => {
      cur.files.push(f);
      return cur.files.length >= BATCH_FILES ? flush() : undefined;
    };

    // Subtrees are fetched ahead of the walk (the selected child folders of each folder as soon as it
    // is read; up to 32 reads at once and 256 trees not yet walked), so a cold walk no longer waits for
    // one read at a time. A stack, so they arrive in the order the depth-first walk wants them.
    // block lists in two parts (tree.ts) are joined file by file below: a damaged base list fails that
    // file, not its whole folder; and the trees are not cached (each is walked once; see loadTree)
    const loadTree = (id: string) => repo.loadTree(id, { joinLists: false, cache: false });
    const ahead = new Map<string, Promise<Tree>>();
    const stack: string[] = [];
    let fetching = 0;
    const pump = () => {
      while (fetching < 32 && ahead.size < 256 && stack.length) {
        const id = stack.pop()!;
        if (ahead.has(id)) continue;
        fetching++;
        const p = loadTree(id).finally(() => {
          fetching--;
          pump();
        });
        p.catch(() => {}); // reported where the walk awaits it
        ahead.set(id, p);
      }
    };
    const treeOf = (id: string): Promise<Tree> => {
      const p = ahead.get(id);
      ahead.delete(id);
      return p ?? loadTree(id);
    };
    /** Whether the walk goes into a path at all, and whether it lies inside what is restored (not above
     *  the relativeTo folder). */
    const everything = includes.length === 0 && strip === '/';
    const WHOLE = { wanted: true, underStrip: true };
    const placeOf = (childPath: string) => {
      if (everything) return WHOLE; // a whole restore: every path is wanted and inside it
      const underStrip = strip === '/' || childPath === strip || childPath.startsWith(strip + '/');
      const aboveStrip = strip !== '/' && strip.startsWith(childPath + '/');
      return {
        wanted: (selected(childPath) || leadsTo(childPath)) && (underStrip || aboveStrip),
        underStrip,
      };
    };
    /** Plans a file or symlink of a folder being walked (below the walk: synchronous, so that V8 compiles
     *  it on its own, small, instead of the whole async walk). A promise when the batch was handed over. */
    const planEntry = (
      node: TreeNode,
      raw: Buffer,
      childPath: string,
      raws: Buffer[],
      dirAbs: Buffer | undefined,
      dirKey: string | undefined,
      announced: boolean,
    ): Promise<void> | undefined => {
      const inDir = dirAbs !== undefined && isSafeName(raw);
      const abs = inDir ? Buffer.concat([dirAbs, SEP, raw]) : targetOf(childPath, [...raws, raw]);
      if (!abs) return undefined;
      matched = true;
      if (node.type === 'symlink')
        symlinks.push({
          path: abs.toString('latin1'),
          target: (node.linkTargetRaw !== undefined
            ? Buffer.from(node.linkTargetRaw, 'base64')
            : Buffer.from(node.linkTarget ?? '')
          ).toString('latin1'),
          uid: node.uid,
          gid: node.gid,
          mtimeNs: node.mtimeNs,
        });
      else if (node.type === 'file') {
        const key =
          node.nlink && node.nlink > 1 && node.inode !== undefined ? `${node.dev}:${node.inode}` : undefined;
        const first = key ? inodes.get(key) : undefined;
        if (first) {
          hardlinks.push({ path: abs.toString('latin1'), first });
          if (announced) {
            // a summary counts every name; a restore writes the content once
            progress.filesTotal--;
            progress.bytesTotal -= node.size ?? 0;
          }
          return undefined;
        }
        const count = contentCount(node);
        const f: PlannedFile = {
          abs,
          dir: inDir ? dirKey : undefined,
          node,
          size: node.size ?? 0,
          mode: node.mode,
          uid: node.uid,
          gid: node.gid,
          mtimeNs: node.mtimeNs,
          single: count === 1,
          remaining: count,
          // set later; named now so every planned file keeps one shape, its fields inside the object
          failed: undefined,
          created: false,
          ready: undefined,
          chosen: false,
        };
        if (key) inodes.set(key, f);
        walkedFiles++;
        walkedBytes += f.size;
        if (!announced) {
          progress.filesTotal++;
          progress.bytesTotal += f.size;
        }
        return add(f);
      }
      // fifo/socket/devices are never in snapshots (the backup skips them)
      return undefined;
    };

    // dirAbs: where the folder being walked is restored (checked by targetOf once per folder), so a file
    // in it needs only its own name checked. announced: the folder's files are in the progress totals
    // already (from a summary above it).
    const walk = async (
      treeId: string,
      snapPath: string,
      raws: Buffer[],
      depth: number,
      dirAbs: Buffer | undefined,
      announced: boolean,
    ): Promise<void> => {
      if (signal?.aborted) throw new AbortedError();
      if (failure !== undefined) throw failure;
      const tree = await treeOf(treeId);
      const dirKey = dirAbs?.toString('latin1');
      for (let i = tree.nodes.length - 1; i >= 0; i--) {
        const node = tree.nodes[i];
        if (
          node.type === 'dir' &&
          node.subtree &&
          placeOf((snapPath === '/' ? '' : snapPath) + '/' + node.name).wanted
        )
          stack.push(node.subtree);
      }
      pump();
      for (const node of tree.nodes) {
        const raw = nameBytes(node);
        const childPath = (snapPath === '/' ? '' : snapPath) + '/' + node.name;
        const { wanted, underStrip } = placeOf(childPath);
        if (!wanted) continue;
        if (node.type === 'dir') {
          const childRaws = [...raws, raw];
          const abs = underStrip ? targetOf(childPath, childRaws) : undefined;
          if (abs) {
            const d: PlannedDir = {
              path: abs.toString('latin1'),
              mode: node.mode,
              uid: node.uid,
              gid: node.gid,
              mtimeNs: node.mtimeNs,
              depth,
            };
            dirs.push(d);
            cur.dirs.push(d);
            matched = true;
          }
          const whole = !announced && underStrip && selected(childPath) && node.summary !== undefined;
          if (whole) {
            progress.filesTotal += node.summary!.files;
            progress.bytesTotal += node.summary!.bytes;
          }
          if (node.subtree)
            await walk(
              node.subtree,
              childPath,
              childRaws,
              depth + 1,
              abs ?? (childPath === strip ? target : undefined),
              announced || whole,
            );
          continue;
        }
        if (!selected(childPath) || !underStrip) continue;
        const handed = planEntry(node, raw, childPath, raws, dirAbs, dirKey, announced);
        if (handed) await handed;
      }
    };
    const planner = async () => {
      try {
        await walk(snap.tree, '/', [], 0, strip === '/' ? target : undefined, false);
      } finally {
        stack.length = 0; // nothing more is fetched ahead (after an error or cancel too)
      }
      if (includes.length && !matched)
        throw new UsageError(`nothing in snapshot ${snap.id.slice(0, 8)} matches ${includes.join(', ')}`);
      await flush();
      queueAll();
      if (!targetReady) await ensureDir(targetPath, target, knownDirs, madeDirs);
      progress.filesTotal = walkedFiles; // exact, now that every folder was walked
      progress.bytesTotal = walkedBytes;
    };

    // ---- content: pack ranges, in the order the batches queued them -----------------------------
    // long runs of a file's pieces are written past the page cache where the target is on a local disk
    // (the workers' PartWriter)
    let direct: boolean | undefined;
    let directBytes = 0;
    // and a folder repository's packs are read past it where its folder is on a local disk: a restore
    // reads each range once (pipelineWorker's readDirect)
    let readDirect: boolean | undefined;
    let readDirectBytes = 0;
    const runJob = async ({ pack, blobs, uses }: PackJob) => {
      blobs.sort((a, b) => a.offset - b.offset);
      // a folder repository's pack is read by the worker that decodes it (pipelineWorker's decodeFile)
      const file = repo.backend.localFile?.('data', pack);
      for (const range of coalesce(blobs)) {
        let data: Buffer | undefined;
        let readError: string | undefined;
        if (!file)
          try {
            data = await repo.backend.load('data', pack, range.start, range.end - range.start);
            if (data.length !== range.end - range.start)
              readError = `pack ${pack.slice(0, 12)} is shorter than its index says`;
          } catch (err) {
            readError = `reading pack ${pack.slice(0, 12)}: ${(err as Error).message}`;
          }
        // Files made of a single blob are written whole by the worker that decodes it (synchronous
        // calls, off this thread); pieces of other files are written by it too, at their offsets.
        const whole: PlannedFile[][] = [];
        const pieces: Use[][] = [];
        const items: DecodeItem[] = range.blobs.map((b, i) => {
          const all = uses.get(b.id) ?? NONE;
          if (all.length === 1) {
            // (most blobs: one file's, whole)
            const own = wholeUse(all[0]);
            whole[i] = own ? [all[0].file] : NONE;
            pieces[i] = own ? NONE : all;
          } else {
            const mine = all.filter(wholeUse);
            whole[i] = mine.map((u) => u.file);
            pieces[i] = all.filter((u) => !mine.includes(u));
          }
          for (const f of whole[i]) f.created = true; // claimed by the worker
          uses.delete(b.id); // planned work is dropped as it is handed out
          return {
            id: b.id,
            offset: b.offset - range.start,
            length: b.length,
            compressed: b.compressed,
            rawLength: b.rawLength,
            // (no empty lists: every object in a task is cloned into the worker)
            writes: whole[i].length
              ? whole[i].map((f) => ({
                  path: f.abs,
                  mode: f.mode,
                  uid: f.uid,
                  gid: f.gid,
                  mtimeNs: f.mtimeNs,
                }))
              : undefined,
            parts: undefined,
          };
        });
        // files receiving pieces exist at their full size before a worker writes into them
        const targets = new Set<PlannedFile>();
        for (const p of pieces) for (const u of p) if (!u.file.failed) targets.add(u.file);
        await mapLimit([...targets], 16, prepare);
        items.forEach((it, i) => {
          for (const u of pieces[i])
            if (!u.file.failed) (it.parts ??= []).push({ path: u.file.abs, offset: u.offset });
        });
        let outcomes: DecodeOutcome[];
        direct ??= await directIoFilesystem(targetPath); // the target exists once a file is prepared
        if (readError) outcomes = items.map(() => ({ ok: false as const, message: readError! }));
        else {
          const { batch, transfer } = packDecodeItems(items);
          let result: DecodeResult;
          if (file) {
            const length = range.end - range.start;
            readDirect ??= await directIoFilesystem(file);
            result = await pool!.run<DecodeResult>(
              {
                op: 'decode',
                file: { path: file, offset: range.start, length, pack, direct: readDirect },
                batch,
                chown: isRoot,
                direct,
              },
              undefined,
              transfer,
            );
          } else {
            const { buffer, transfer: moved } = decodeBuffer(data!);
            data = undefined;
            result = await pool!.run<DecodeResult>(
              { op: 'decode', buffer, batch, chown: isRoot, direct },
              undefined,
              [...transfer, ...moved],
            );
            giveBuffer(result.returned); // the worker is done with it: the next pack range reuses it
          }
          directBytes += result.direct ?? 0;
          readDirectBytes += result.readDirect ?? 0;
          outcomes = outcomesOf(items, result.failed);
        }
        items.forEach((it, i) => {
          const r = outcomes[i];
          whole[i].forEach((f, k) => {
            f.remaining = 0;
            const err = r.ok ? r.writes?.[k] : { message: r.message };
            if (err) {
              // a write that failed has its own error code (ENOSPC, EACCES…); only a blob is damaged
              if (r.ok) fail(f, err.message, err.code ?? 'EIO');
              else
                fail(
                  f,
                  `blob ${it.id.slice(0, 12)} in pack ${pack.slice(0, 12)} is damaged (${err.message})`,
                );
              void fs.rm(f.abs, { force: true }).catch(() => {});
            } else {
              progress.filesDone++;
              progress.bytesDone += it.rawLength;
            }
          });
        });
        // the pieces the worker wrote (or could not); files with every piece written are finished
        const complete: PlannedFile[] = [];
        let shown: PlannedFile | undefined;
        items.forEach((it, i) => {
          const r = outcomes[i];
          let k = 0;
          for (const use of pieces[i]) {
            const f = use.file;
            const written = it.parts?.[k]?.path === f.abs && it.parts[k].offset === use.offset;
            const err = !r.ok ? undefined : written ? r.parts?.[k] : null;
            if (written) k++;
            if (!r.ok)
              fail(f, `blob ${it.id.slice(0, 12)} in pack ${pack.slice(0, 12)} is damaged (${r.message})`);
            else if (err) fail(f, err.message, err.code ?? 'EIO');
            else progress.bytesDone += it.rawLength;
            if (--f.remaining === 0) complete.push(f);
            shown = f;
          }
        });
        if (shown) progress.currentFile = displayOf(shown);
        await mapLimit(complete, 16, finished);
      }
    };
    // Packs of large blobs (bulk) are mostly waiting for the disk, packs of small files mostly CPU: while
    // BULK_LOOPS loops are on bulk packs, the next free loop takes a pack of small files if one is queued,
    // so that the two overlap instead of the bulk packs queued first holding every loop.
    let bulkRunning = 0;
    const takeJob = (): PackJob | undefined => {
      if (bulkRunning >= BULK_LOOPS) {
        const i = jobs.findIndex((j) => !j.bulk);
        if (i >= 0) return jobs.splice(i, 1)[0];
      }
      return jobs.shift();
    };
    const loop = async () => {
      for (;;) {
        if (failure !== undefined) return;
        if (signal?.aborted) throw new AbortedError();
        const job = takeJob();
        if (!job) {
          if (walkDone) return;
          await changed.wait();
          continue;
        }
        if (job.bulk) bulkRunning++;
        try {
          await runJob(job);
        } finally {
          if (job.bulk) bulkRunning--;
        }
        held -= job.count;
        changed.notify();
      }
    };
    const task = (fn: () => Promise<void>, last?: () => void) =>
      fn()
        .catch((err) => {
          failure ??= err;
        })
        .finally(() => {
          last?.();
          changed.notify();
        });
    const loops = Array.from({ length: RESTORE_LOOPS }, () => task(loop));
    await Promise.all([task(planner, () => (walkDone = true)), ...loops]);
    if (failure !== undefined) throw failure;

    // ---- links and metadata -------------------------------------------------------------------
    progress.phase = 'metadata';
    for (const h of hardlinks) {
      const abs = Buffer.from(h.path, 'latin1');
      if (h.first.failed || !h.first.chosen) {
        errors.push({ path: abs.toString(), code: 'EIO', message: 'hard link target was not restored' });
        continue;
      }
      await fs.rm(abs, { force: true });
      await fs
        .link(h.first.abs, abs)
        .catch((err) => errors.push({ path: abs.toString(), code: err.code, message: err.message }));
    }
    for (const s of symlinks) {
      const abs = Buffer.from(s.path, 'latin1');
      try {
        const exists = await fs.lstat(abs).then(
          () => true,
          () => false,
        );
        if (exists) {
          if (policy === 'skip') {
            skippedCount++;
            continue;
          }
          await fs.rm(abs, { force: true });
        }
        await fs.symlink(Buffer.from(s.target, 'latin1'), abs);
        if (isRoot && s.uid !== undefined) await fs.lchown(abs, s.uid, s.gid ?? 0);
        await setTimes(abs, s.mtimeNs, s.mtimeNs, true);
      } catch (err) {
        errors.push({
          path: abs.toString(),
          code: (err as NodeJS.ErrnoException).code ?? 'EIO',
          message: (err as Error).message,
        });
      }
    }
    // deepest first (a folder made read-only or unreadable does not stop its subfolders' metadata being
    // set), the folders of one depth 16 at a time: setting one folder's metadata changes nothing of
    // another's (a million-file restore has ~10,000 folders, three calls each)
    const levels: PlannedDir[][] = [];
    for (const d of dirs) (levels[d.depth] ??= []).push(d);
    for (const level of levels.reverse())
      if (level)
        await mapLimit(level, 16, (d) =>
          applyMetadata(Buffer.from(d.path, 'latin1'), d, isRoot).catch(() => {}),
        );
    progress.phase = 'done';
    emit();
    return {
      filesRestored: chosen.files - failedTotals.files,
      bytesRestored: chosen.bytes - failedTotals.bytes,
      skipped: skippedCount,
      errors,
      bytesWrittenDirect: directBytes,
      bytesReadDirect: readDirectBytes,
    };
  } finally {
    clearInterval(ticker);
    if (pool) await releasePool(pool, !!signal?.aborted);
  }
}

/** Files planned and prepared together (folders made, existing files looked at). */
const BATCH_FILES = 1024;
/** The uses (a file's piece from a blob) a restore holds planned and not written: a planned small
 *  file takes ~1 KB of heap (its record, path, use and blob entry; a heap snapshot of a million-file
 *  restore). The bench's default dataset (30,035 files, about as many uses) stays under it; a
 *  million small files reach it (a pack of them holds ~33,000 blobs, two are filled at once). */
export const DEFAULT_PLAN_LIMIT = 65536;

interface Batch {
  files: PlannedFile[];
  dirs: PlannedDir[];
}

const newBatch = (): Batch => ({ files: [], dirs: [] });

/** A blob a restore reads: its ID and where it lies in its pack. */
interface PlannedBlob {
  id: string;
  offset: number;
  length: number;
  rawLength: number;
  compressed: boolean;
}

/** What a restore needs from one pack: its blobs, and for each the files (and offsets) it goes to. */
interface PackPlan {
  blobs: PlannedBlob[];
  uses: Map<string, Use[]>;
  /** Uses in all. */
  count: number;
}

interface PackJob extends PackPlan {
  pack: string;
  /** Its blobs are large on average (BULK_BLOB or more): a range of them is mostly read and written,
   *  little decoded, where a range of small files is mostly decoding and creating files. */
  bulk: boolean;
}

const BULK_BLOB = 128 * 1024;

/** An empty list shared where a blob has no file to write whole or no piece (frozen: never added to). */
const NONE = Object.freeze([]) as never[];

/** Whether a use is a file made of this one blob, to be written whole by the worker (not yet claimed). */
const wholeUse = (u: Use) => u.offset === 0 && u.file.single && !u.file.failed && !u.file.created;
/** Loops taking queued packs, each handing one range at a time to the workers, and how many may be on
 *  bulk packs while packs of small files wait (see takeJob). CLI restore of the bench dataset, six runs
 *  alternating: three loops in queue order 3.14-3.71 s (mean 3.44), four with at most one or two on bulk
 *  packs while others wait 2.85-3.40 (3.19 either way); five loops in queue order were no faster than
 *  three. */
export const RESTORE_LOOPS = 4;
const BULK_LOOPS = 2;

/** Wakes everyone waiting, whenever something they may wait for changed. */
class Notify {
  private waiters: (() => void)[] = [];
  wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const resolve of w) resolve();
  }
}

/**
 * Creates a directory (and parents) below root, refusing to go through anything but real directories:
 * a file or symlink in the way is replaced, never followed. `known` remembers verified folders.
 */
async function ensureDir(abs: string, root: Buffer, known: Set<string>, made: Set<string>): Promise<void> {
  const rootStr = root.toString('latin1');
  const rel = path.relative(rootStr, abs);
  const parts = rel ? rel.split(path.sep) : [];
  const check = async (p: string) => {
    if (known.has(p)) return;
    const pb = Buffer.from(p, 'latin1');
    if (made.has(path.dirname(p))) {
      // in a folder this run made (mode 0700 until the end): nothing can be in the way, nobody else can
      // put anything there, so one mkdir does (an EEXIST — the same folder named twice — goes the long way)
      const createdNow = await fs.mkdir(pb, { mode: 0o700 }).then(
        () => true,
        (err) => {
          if (err.code !== 'EEXIST') throw err;
          return false;
        },
      );
      if (createdNow) {
        made.add(p);
        known.add(p);
        return;
      }
    }
    const st = await fs.lstat(pb).catch((err) => {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    });
    if (st && !st.isDirectory()) {
      if (p === rootStr) throw new TidemarkError('TARGET_NOT_DIR', `the restore target ${p} is not a folder`);
      await fs.rm(pb, { force: true });
    }
    if (!st || !st.isDirectory()) {
      const createdNow = await fs.mkdir(pb, { recursive: p === rootStr, mode: 0o700 }).then(
        () => true,
        (err) => {
          if (err.code !== 'EEXIST') throw err;
          return false;
        },
      );
      if (createdNow) made.add(p);
      if (!(await fs.lstat(pb)).isDirectory()) throw new UnsafePathError(`${p} is not a folder`);
    }
    known.add(p);
  };
  await check(rootStr);
  let cur = rootStr;
  for (const part of parts) {
    if (part === '..' || part === '')
      throw new UnsafePathError(`refusing path ${Buffer.from(abs, 'latin1').toString()}`);
    cur = cur + path.sep + part;
    await check(cur);
  }
}

async function freeName(abs: Buffer): Promise<Buffer> {
  const s = abs.toString('latin1');
  const ext = path.extname(s);
  const base = s.slice(0, s.length - ext.length);
  for (let i = 1; ; i++) {
    const candidate = Buffer.from(`${base} (restored${i > 1 ? ' ' + i : ''})${ext}`, 'latin1');
    try {
      await fs.lstat(candidate);
    } catch {
      return candidate;
    }
  }
}

async function applyMetadata(abs: Buffer, node: Meta, isRoot: boolean): Promise<void> {
  if (isRoot && node.uid !== undefined) await fs.lchown(abs, node.uid, node.gid ?? 0);
  await fs.chmod(abs, node.mode & 0o7777);
  await setTimes(abs, node.mtimeNs, node.mtimeNs, true);
}

function coalesce(blobs: PlannedBlob[]): { start: number; end: number; blobs: PlannedBlob[] }[] {
  const out: { start: number; end: number; blobs: PlannedBlob[] }[] = [];
  for (const b of blobs) {
    const last = out[out.length - 1];
    const end = b.offset + b.length;
    if (last && b.offset - last.end < 512 * 1024 && end - last.start < 4 * 1024 * 1024) {
      last.end = Math.max(last.end, end);
      last.blobs.push(b);
    } else out.push({ start: b.offset, end, blobs: [b] });
  }
  return out;
}
