/**
 * Block-level tracking on the backup's side (docs/architecture.md §3 level 1): for a changed large file,
 * the byte ranges block tracking reports and the previous snapshot's chunk list, when both can be
 * trusted, become the worker's `incremental` (only chunks touching a changed range are read again).
 * When the changes touch most of the file, one sequential read of it is faster: then there is none.
 */
import type { Repository } from '../repo/repository.js';
import type { TreeNode } from '../repo/types.js';
import type { ChangedRanges } from '../operations.js';
import { contentCount, contentIds, hasContent } from '../repo/tree.js';
import type { BackupFileTask } from '../pool/wire.js';
import { show, type BackupRun } from './run.js';

export class Incrementals {
  /** The ranges, once they arrived (they may still be on their way: ChangeHint.changedRanges). */
  private changedRanges: ChangedRanges | undefined;

  constructor(
    private readonly run: BackupRun,
    private readonly repo: Repository,
    /** Resolves to the ranges, or undefined when there are none to trust. */
    private readonly rangesReady: Promise<ChangedRanges | undefined>,
  ) {}

  /** Waits for the ranges (a file with a previous version is about to be read). */
  async arrive(): Promise<void> {
    this.changedRanges = await this.rangesReady;
  }

  /** Level 1: the previous chunk list and the changed ranges, when they can be trusted. */
  of(abs: Buffer, node: TreeNode, prev: TreeNode | undefined): BackupFileTask['incremental'] {
    const ranges = this.changedRanges?.get(show(abs));
    if (
      !ranges ||
      !prev ||
      !hasContent(prev) ||
      prev.type !== 'file' ||
      prev.inode !== node.inode ||
      prev.dev !== node.dev ||
      prev.blockSize !== node.blockSize
    )
      return undefined;
    if (node.blockSize) {
      // Fixed-size blocks. The previous blocks are trusted to be stored, as for a file whose metadata did
      // not change: the parent is a snapshot, so prune keeps them, and it cannot run during a backup.
      // The worker is not sent the previous list: it leaves reused blocks empty and they are filled here.
      const B = node.blockSize;
      const prevCount = contentCount(prev);
      if (prevCount !== Math.ceil((prev.size ?? 0) / B)) return undefined;
      const blocks = new Set<number>();
      for (const r of ranges)
        for (let b = Math.floor(r.offset / B); b <= Math.floor((r.offset + r.length - 1) / B); b++) {
          blocks.add(b);
          if (blocks.size > prevCount / 2) {
            this.run.log(`${show(abs)}: changes touch more than half of its blocks; reading the whole file`);
            return undefined;
          }
        }
      return {
        prevIds: [],
        prevCount,
        prevSizes: [],
        prevSize: prev.size ?? 0,
        changed: ranges,
      };
    }
    const prevIds = contentIds(prev);
    const prevSizes: number[] = [];
    for (const id of prevIds) {
      const loc = this.repo.index.get(id);
      if (!loc) return undefined;
      prevSizes.push(loc.rawLength);
    }
    if (prevSizes.reduce((a, b) => a + b, 0) !== prev.size) return undefined;
    // When the changes touch most chunks, one sequential read of the whole file is faster.
    const sorted = [...ranges].sort((a, b) => a.offset - b.offset);
    let touched = 0;
    let r = 0;
    let off = 0;
    for (const len of prevSizes) {
      while (r < sorted.length && sorted[r].offset + sorted[r].length <= off) r++;
      if (r < sorted.length && sorted[r].offset < off + len) touched++;
      off += len;
    }
    if (touched > prevSizes.length / 2) {
      this.run.log(
        `${show(abs)}: changes touch ${touched} of ${prevSizes.length} chunks; reading the whole file`,
      );
      return undefined;
    }
    return { prevIds, prevSizes, changed: ranges };
  }
}
