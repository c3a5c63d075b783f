/**
 * The tree saver (main thread): a folder's nodes become a tree blob, saved once its children are done
 * (bottom-up, so a snapshot is a Merkle tree), with the summary of what is below it (files, folders,
 * bytes: counted without loading the trees when the next backup reuses it). A folder whose nodes are all
 * the previous snapshot's very same objects keeps the previous tree ID, not even re-encoded. Here too: the
 * comparisons with the previous snapshot that decide whether an entry is unchanged.
 */
import type { Repository } from '../repo/repository.js';
import type { DirSummary, ID, Tree, TreeNode } from '../repo/types.js';
import { nameBytes } from '../repo/tree.js';
import type { EntryStat } from '../scan/index.js';

export interface SavedDir {
  id: ID;
  summary: DirSummary;
}

export class TreeSaver {
  constructor(private readonly repo: Repository) {}

  /** Saves a folder's tree (a duplicate of a stored one is not stored again). */
  async save(nodes: TreeNode[]): Promise<SavedDir> {
    return { id: await this.repo.saveTree({ nodes }), summary: summarize(nodes) };
  }

  /** The previous tree when `nodes` are exactly its nodes (nothing changed here), else a new one. */
  async saveOrKeep(
    nodes: TreeNode[],
    prevTree: Tree | undefined,
    prevTreeId: ID | undefined,
  ): Promise<SavedDir> {
    if (prevTree && nodes.length === prevTree.nodes.length && nodes.every((n, i) => n === prevTree.nodes[i]))
      return { id: prevTreeId!, summary: summarize(nodes) }; // nothing changed here: same tree, not re-encoded
    return this.save(nodes);
  }
}

export function summarize(nodes: TreeNode[]): DirSummary {
  const summary: DirSummary = { files: 0, dirs: 0, bytes: 0 };
  for (const n of nodes) {
    if (n.type === 'file') {
      summary.files++;
      summary.bytes += n.size ?? 0;
    } else if (n.type === 'dir') {
      summary.dirs += 1 + (n.summary?.dirs ?? 0);
      summary.files += n.summary?.files ?? 0;
      summary.bytes += n.summary?.bytes ?? 0;
    }
  }
  return summary;
}

/** A previous tree's nodes by raw name. */
export function byName(tree: Tree | undefined): Map<string, TreeNode> {
  const m = new Map<string, TreeNode>();
  for (const n of tree?.nodes ?? []) m.set(nameBytes(n).toString('latin1'), n);
  return m;
}

/** True when an entry's lstat matches the previous snapshot's node in everything a tree records. */
export function sameMetadata(prev: TreeNode, st: EntryStat): boolean {
  return (
    prev.type === st.type &&
    prev.mode === st.mode &&
    prev.mtimeNs === st.mtimeNs &&
    prev.ctimeNs === st.ctimeNs &&
    prev.inode === st.ino &&
    prev.dev === st.dev &&
    prev.uid === st.uid &&
    prev.gid === st.gid &&
    (st.type !== 'file' || (prev.size === st.size && (prev.nlink ?? 1) === (st.nlink > 1 ? st.nlink : 1))) &&
    prev.rdev === (st.type === 'chardev' || st.type === 'blockdev' ? st.rdev : undefined) &&
    prev.atimeNs === undefined &&
    prev.user === undefined &&
    prev.group === undefined
  );
}

export function sameSummary(a: DirSummary, b: DirSummary | undefined): boolean {
  return !!b && a.files === b.files && a.dirs === b.dirs && a.bytes === b.bytes;
}
