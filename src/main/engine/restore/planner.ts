/**
 * The restore's planner (main thread): walks the snapshot's trees depth-first (fetched ahead,
 * ./treeAhead.ts), selects what is restored (./selection.ts), and plans the files in batches of at most
 * BATCH_FILES files or folders and `batchPieces` pieces (./prepare.ts: folders made, the overwrite policy, each file's blobs added to its packs'
 * plans, ./packQueue.ts). Folders and links are kept for the end (./metadata.ts); a file with several
 * names is written once and linked. The walk waits when the plan held reaches its bound.
 */
import type { TreeNode } from '../repo/types.js';
import { contentCount, isSafeName, nameBytes } from '../repo/tree.js';
import { AbortedError, UsageError } from '../errors.js';
import type { PackQueue } from './packQueue.js';
import { BATCH_FILES, newBatch, type Batch, type PlannedDir, type PlannedFile } from './plan.js';
import type { BatchPreparer } from './prepare.js';
import { SEP, type RestoreRun } from './run.js';
import type { Selection } from './selection.js';
import type { TreeAhead } from './treeAhead.js';

export class RestorePlanner {
  /** The files planned and not prepared yet, and their pieces. */
  private cur: Batch = newBatch();
  private curPieces = 0;
  /** The first name of each file with several (by device and inode): the others become hard links. */
  private readonly inodes = new Map<string, PlannedFile>();
  /** Anything (file, folder, link) the selection names. */
  private matched = false;

  constructor(
    private readonly run: RestoreRun,
    private readonly selection: Selection,
    private readonly trees: TreeAhead,
    private readonly preparer: BatchPreparer,
    private readonly packs: PackQueue,
  ) {}

  /** Walks the snapshot's root tree and plans everything selected; queues every pack at the end. */
  async plan(snapshot: { id: string; tree: string }): Promise<void> {
    const { run, selection, packs } = this;
    try {
      await this.walk(snapshot.tree, '/', [], 0, run.strip === '/' ? run.target : undefined, false);
    } finally {
      this.trees.stop(); // nothing more is fetched ahead (after an error or cancel too)
    }
    if (selection.patterns.length && !this.matched)
      throw new UsageError(
        `nothing in snapshot ${snapshot.id.slice(0, 8)} matches ${selection.patterns.join(', ')}`,
      );
    await this.flush();
    packs.queueAll();
    await this.preparer.ensureTarget();
    run.progress.filesTotal = run.walkedFiles; // exact, now that every folder was walked
    run.progress.bytesTotal = run.walkedBytes;
  }

  /** Prepares the batch planned so far, then waits if the plan held is at its bound. */
  private async flush(): Promise<void> {
    const b = this.cur;
    this.cur = newBatch();
    this.curPieces = 0;
    if (b.files.length || b.dirs.length) await this.preparer.prepare(b);
    await this.packs.makeRoom();
    if (this.packs.failure !== undefined) throw this.packs.failure;
  }

  /** Adds a file to the batch; a promise when the batch was handed over (no await per file). */
  private add(f: PlannedFile): Promise<void> | undefined {
    this.cur.files.push(f);
    this.curPieces += f.remaining;
    return this.cur.files.length >= BATCH_FILES || this.curPieces >= this.packs.slice
      ? this.flush()
      : undefined;
  }

  /**
   * Walks one folder. dirAbs: where it is restored (checked by targetOf once per folder), so a file in it
   * needs only its own name checked. announced: its files are in the progress totals already (from a
   * summary above it).
   */
  private async walk(
    treeId: string,
    snapPath: string,
    raws: Buffer[],
    depth: number,
    dirAbs: Buffer | undefined,
    announced: boolean,
  ): Promise<void> {
    const { run, selection, trees } = this;
    if (run.signal?.aborted) throw new AbortedError();
    if (this.packs.failure !== undefined) throw this.packs.failure;
    const tree = await trees.treeOf(treeId);
    const dirKey = dirAbs?.toString('latin1');
    for (let i = tree.nodes.length - 1; i >= 0; i--) {
      const node = tree.nodes[i];
      if (
        node.type === 'dir' &&
        node.subtree &&
        selection.placeOf((snapPath === '/' ? '' : snapPath) + '/' + node.name).wanted
      )
        trees.want(node.subtree);
    }
    trees.pump();
    for (const node of tree.nodes) {
      const raw = nameBytes(node);
      const childPath = (snapPath === '/' ? '' : snapPath) + '/' + node.name;
      const { wanted, underStrip } = selection.placeOf(childPath);
      if (!wanted) continue;
      if (node.type === 'dir') {
        const childRaws = [...raws, raw];
        const abs = underStrip ? selection.targetOf(childPath, childRaws) : undefined;
        if (abs) {
          const d: PlannedDir = {
            path: abs.toString('latin1'),
            mode: node.mode,
            uid: node.uid,
            gid: node.gid,
            mtimeNs: node.mtimeNs,
            depth,
          };
          run.dirs.push(d);
          this.cur.dirs.push(d);
          this.matched = true;
          if (this.cur.dirs.length >= BATCH_FILES) await this.flush(); // a folder of folders: bounded too
        }
        const whole = !announced && underStrip && selection.selected(childPath) && node.summary !== undefined;
        if (whole) {
          run.progress.filesTotal += node.summary!.files;
          run.progress.bytesTotal += node.summary!.bytes;
        }
        if (node.subtree)
          await this.walk(
            node.subtree,
            childPath,
            childRaws,
            depth + 1,
            abs ?? (childPath === run.strip ? run.target : undefined),
            announced || whole,
          );
        continue;
      }
      if (!selection.selected(childPath) || !underStrip) continue;
      const handed = this.planEntry(node, raw, childPath, raws, dirAbs, dirKey, announced);
      if (handed) await handed;
    }
  }

  /** Plans a file or symlink of a folder being walked (below the walk: synchronous, so that V8 compiles
   *  it on its own, small, instead of the whole async walk). A promise when the batch was handed over. */
  private planEntry(
    node: TreeNode,
    raw: Buffer,
    childPath: string,
    raws: Buffer[],
    dirAbs: Buffer | undefined,
    dirKey: string | undefined,
    announced: boolean,
  ): Promise<void> | undefined {
    const { run } = this;
    const inDir = dirAbs !== undefined && isSafeName(raw);
    const abs = inDir
      ? Buffer.concat([dirAbs, SEP, raw])
      : this.selection.targetOf(childPath, [...raws, raw]);
    if (!abs) return undefined;
    this.matched = true;
    if (node.type === 'symlink')
      run.symlinks.push({
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
      const first = key ? this.inodes.get(key) : undefined;
      if (first) {
        run.hardlinks.push({ path: abs.toString('latin1'), first });
        if (announced) {
          // a summary counts every name; a restore writes the content once
          run.progress.filesTotal--;
          run.progress.bytesTotal -= node.size ?? 0;
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
      if (key) this.inodes.set(key, f);
      run.walkedFiles++;
      run.walkedBytes += f.size;
      if (!announced) {
        run.progress.filesTotal++;
        run.progress.bytesTotal += f.size;
      }
      return this.add(f);
    }
    // fifo/socket/devices are never in snapshots (the backup skips them)
    return undefined;
  }
}
