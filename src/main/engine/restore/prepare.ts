/**
 * A batch of planned files made ready to write (main thread): its folders made, level by level (a
 * folder's parents before it: here or in an earlier batch); each file that may exist decided with the
 * overwrite policy (files in folders this run made are not looked up); then the blobs each file to write
 * needs added to the plans of their packs (./packQueue.ts). Files with nothing to write (empty, or
 * failed already) are finished at once.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Repository } from '../repo/repository.js';
import { mapLimit } from '../repo/repository.js';
import type { TargetFiles } from './files.js';
import { freeName, type TargetFolders } from './folders.js';
import type { PackQueue } from './packQueue.js';
import type { Batch, PlannedDir, PlannedFile } from './plan.js';
import type { RestoreRun } from './run.js';

export class BatchPreparer {
  private targetReady = false;

  constructor(
    private readonly run: RestoreRun,
    private readonly repo: Repository,
    private readonly folders: TargetFolders,
    private readonly files: TargetFiles,
    private readonly packs: PackQueue,
  ) {}

  /** Makes the target folder, once. */
  async ensureTarget(): Promise<void> {
    if (this.targetReady) return;
    await this.folders.ensure(this.run.targetPath);
    this.targetReady = true;
  }

  async prepare(b: Batch): Promise<void> {
    const { run, folders } = this;
    if (!this.targetReady) await this.ensureTarget();
    // level by level (a folder's parents are made before it: here or in an earlier batch), up to 16
    // at a time within a level
    const levels: PlannedDir[][] = [];
    for (const d of b.dirs) (levels[d.depth] ??= []).push(d);
    for (const level of levels) if (level) await mapLimit(level, 16, (d) => folders.ensure(d.path));

    // decide per existing file (files in folders this run created are not looked up)
    const toWrite: PlannedFile[] = [];
    const existing: PlannedFile[] = [];
    for (const f of b.files)
      (folders.madeHere(f.dir ?? path.dirname(f.abs.toString('latin1'))) ? toWrite : existing).push(f);
    await mapLimit(existing, 16, async (f) => {
      let st;
      try {
        st = await fs.lstat(f.abs);
      } catch {
        toWrite.push(f);
        return;
      }
      if (st.isDirectory()) {
        run.errors.push({
          path: run.displayOf(f),
          code: 'EISDIR',
          message: 'a folder of that name is in the way',
        });
        return;
      }
      if (
        run.policy === 'skip' ||
        (run.policy === 'if-newer' && st.mtimeMs >= Number(BigInt(f.mtimeNs) / 1000000n))
      ) {
        run.skippedCount++;
        run.walkedFiles--;
        run.walkedBytes -= f.size;
        run.progress.filesTotal--;
        run.progress.bytesTotal -= f.size;
        return;
      }
      if (run.policy === 'keep-both') f.abs = await freeName(f.abs);
      else await fs.rm(f.abs, { force: true }); // never write through an existing symlink or hardlink
      toWrite.push(f);
    });

    // the blobs each file needs, and where in it; files without content (empty), or failed already, are
    // done at once. Which they are is decided as each file is planned: once this loop waits (a block list
    // joined, room in the plan), files planned before it may be written whole and have nothing left
    // either, and finishing those again would create them anew, empty.
    const { packs } = this;
    const done: PlannedFile[] = [];
    for (const f of toWrite) {
      f.chosen = true;
      run.chosen.files++;
      run.chosen.bytes += f.size;
      const node = f.node!;
      f.node = undefined; // its pieces are planned below (or it fails): the node is not needed after
      if (node.blockBase !== undefined && !node.blockIds) {
        try {
          await this.repo.joinBlockList(node);
        } catch (err) {
          run.fail(f, (err as Error).message);
          done.push(f);
          continue;
        }
      }
      let at = packs.plan(f, node, undefined, packs.slice);
      if (f.remaining === 0 || f.failed) done.push(f);
      // a file of many pieces is planned a slice at a time, waiting for room in between
      for (; at; at = packs.plan(f, node, at, packs.slice)) {
        await packs.makeRoom();
        if (packs.failure !== undefined) throw packs.failure;
      }
    }
    await mapLimit(done, 16, this.files.finished);
  }
}
