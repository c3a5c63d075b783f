/**
 * A block file's list of block IDs (main thread), from what its worker task read: the whole list, or
 * after an incremental only the blocks read, patched into the previous list. A long list is stored in two
 * parts (repo/tree.ts: a base blob and a patch in the tree node).
 */
import type { Repository } from '../repo/repository.js';
import { BlobType } from '../repo/blobIndex.js';
import type { TreeNode } from '../repo/types.js';
import { blockIdsOf } from '../repo/tree.js';
import type { BackupFileResult } from '../pool/wire.js';
import { LIST_IN_PARTS_FROM, nextPatch } from './blockFiles.js';

/** A block file's list from the worker's result. After an incremental the worker lists only the blocks
 *  it read; every other block is the previous snapshot's, so a copy of that list is patched in place. */
function blockList(r: BackupFileResult, prev: TreeNode | undefined, what: string): Buffer {
  const got = Buffer.from(r.blockIds!.buffer, r.blockIds!.byteOffset, r.blockIds!.byteLength);
  if (!r.readBlocks) return got;
  const ID = 32;
  const count = r.blockCount!;
  const prevIds = prev ? blockIdsOf(prev) : undefined;
  const out = Buffer.allocUnsafe(count * ID);
  const reused = Math.min(prevIds?.length ?? 0, out.length) / ID; // blocks taken from the previous list
  prevIds?.copy(out, 0, 0, reused * ID);
  let beyond = 0; // read blocks past the previous list: together they must cover the rest
  r.readBlocks.forEach((b, k) => {
    got.copy(out, b * ID, k * ID, (k + 1) * ID);
    if (b >= reused) beyond++;
  });
  if (got.length !== r.readBlocks.length * ID || beyond !== count - reused)
    throw new Error(`${what}: the block list does not cover the file (internal error)`);
  return out;
}

/**
 * A block file's list from the worker's result. A long one is stored in two parts (repo/tree.ts): when
 * the previous snapshot's list is in parts and the worker read only some blocks, the new patch comes from
 * the previous patch and the blocks read — the base is not even loaded (the walk loads previous trees
 * without joining their lists); otherwise the whole list is made (joining the previous one when needed)
 * and, if long, written as a new base.
 */
export async function saveBlockList(
  repo: Repository,
  node: TreeNode,
  r: BackupFileResult,
  prev: TreeNode | undefined,
  what: string,
  listInPartsFrom = LIST_IN_PARTS_FROM,
): Promise<void> {
  const from = listInPartsFrom;
  const count = r.blockCount ?? r.blockIds!.length / 32;
  if (count >= from && prev?.blockBase !== undefined && prev.blockPatch && r.readBlocks) {
    const patch = nextPatch(prev.blockPatch, prev.blockCount ?? 0, r.readBlocks, r.blockIds!, count);
    if (patch) {
      node.blockBase = prev.blockBase;
      node.blockCount = count;
      node.blockPatch = patch;
      return;
    }
  }
  // the previous list, whole, is needed only to patch a copy of it (the worker read some blocks)
  if (r.readBlocks && prev?.blockBase !== undefined && !prev.blockIds) await repo.joinBlockList(prev);
  const ids = (node.blockIds = blockList(r, prev, what));
  if (count < from) return;
  node.blockBase = await repo.saveBlob(BlobType.Tree, ids);
  node.blockCount = count;
  node.blockPatch = Buffer.alloc(0);
}
