/**
 * Reading snapshots as file trees: walk, look up a path, find names across snapshots, and diff two
 * snapshots. Diff and find skip identical subtrees by ID (the Merkle property), so comparing two
 * snapshots of a mostly unchanged disk reads only the trees that differ.
 */
import { minimatch } from 'minimatch';
import type { Repository } from './repository.js';
import type { ID, SnapshotEntry, TreeNode } from './types.js';
import { contentIds } from './tree.js';
import { NotFoundError } from '../errors.js';

export interface WalkEntry {
  path: string;
  node: TreeNode;
}

const joinPath = (dir: string, name: string) => (dir === '/' ? '/' + name : dir + '/' + name);

/** The node at `path` (absolute, "/" for the root) of a snapshot, with its tree for directories. */
export async function lookup(
  repo: Repository,
  snapshot: SnapshotEntry,
  path: string,
): Promise<{ node?: TreeNode; treeId?: ID }> {
  const parts = path.split('/').filter(Boolean);
  let treeId: ID | undefined = snapshot.tree;
  let node: TreeNode | undefined;
  for (const part of parts) {
    if (!treeId) throw new NotFoundError(`${path} in snapshot ${snapshot.id.slice(0, 8)}`);
    const tree = await repo.loadTree(treeId);
    node = tree.nodes.find((n) => n.name === part);
    if (!node) throw new NotFoundError(`${path} in snapshot ${snapshot.id.slice(0, 8)}`);
    treeId = node.type === 'dir' ? node.subtree : undefined;
  }
  return { node, treeId };
}

/** Walks everything below a tree, depth-first, in name order. */
export async function* walk(repo: Repository, treeId: ID, base = '/'): AsyncGenerator<WalkEntry> {
  const tree = await repo.loadTree(treeId);
  for (const node of tree.nodes) {
    const p = joinPath(base, node.name);
    yield { path: p, node };
    if (node.type === 'dir' && node.subtree) yield* walk(repo, node.subtree, p);
  }
}

/** Finds entries whose name (or path, when the pattern has a "/") matches a glob, across snapshots. */
export async function* find(
  repo: Repository,
  snapshots: SnapshotEntry[],
  pattern: string,
): AsyncGenerator<{ snapshot: SnapshotEntry; entry: WalkEntry }> {
  const byPath = pattern.includes('/');
  const seenTrees = new Map<ID, WalkEntry[]>(); // identical subtrees are searched once
  const search = async (treeId: ID, base: string): Promise<WalkEntry[]> => {
    const cached = seenTrees.get(treeId + '\0' + base);
    if (cached) return cached;
    const out: WalkEntry[] = [];
    const tree = await repo.loadTree(treeId);
    for (const node of tree.nodes) {
      const p = joinPath(base, node.name);
      if (minimatch(byPath ? p : node.name, pattern, { dot: true, nocase: true }))
        out.push({ path: p, node });
      if (node.type === 'dir' && node.subtree) out.push(...(await search(node.subtree, p)));
    }
    seenTrees.set(treeId + '\0' + base, out);
    return out;
  };
  for (const s of snapshots) for (const entry of await search(s.tree, '/')) yield { snapshot: s, entry };
}

export type DiffKind = 'added' | 'removed' | 'modified' | 'metadata';

export interface DiffEntry {
  kind: DiffKind;
  path: string;
  type: string;
}

function sameContent(a: TreeNode, b: TreeNode): boolean {
  if (a.type !== b.type) return false;
  if (a.type === 'file') {
    if (a.size !== b.size) return false;
    if (a.blockIds && b.blockIds) return a.blockIds.equals(b.blockIds);
    return contentIds(a).join() === contentIds(b).join();
  }
  if (a.type === 'symlink') return a.linkTarget === b.linkTarget && a.linkTargetRaw === b.linkTargetRaw;
  return true;
}

function sameMetadata(a: TreeNode, b: TreeNode): boolean {
  return a.mode === b.mode && a.mtimeNs === b.mtimeNs && a.uid === b.uid && a.gid === b.gid;
}

/** Differences between two trees; identical subtree IDs are skipped without reading them. */
export async function* diff(
  repo: Repository,
  a: ID | undefined,
  b: ID | undefined,
  base = '/',
): AsyncGenerator<DiffEntry> {
  if (a === b) return;
  const ta = a ? (await repo.loadTree(a)).nodes : [];
  const tb = b ? (await repo.loadTree(b)).nodes : [];
  const mb = new Map(tb.map((n) => [n.name, n]));
  const ma = new Map(ta.map((n) => [n.name, n]));
  const names = [...new Set([...ma.keys(), ...mb.keys()])].sort();
  for (const name of names) {
    const x = ma.get(name);
    const y = mb.get(name);
    const p = joinPath(base, name);
    if (x && !y) {
      yield { kind: 'removed', path: p, type: x.type };
      if (x.type === 'dir') yield* diff(repo, x.subtree, undefined, p);
    } else if (!x && y) {
      yield { kind: 'added', path: p, type: y.type };
      if (y.type === 'dir') yield* diff(repo, undefined, y.subtree, p);
    } else if (x && y) {
      if (x.type === 'dir' && y.type === 'dir') {
        if (!sameMetadata(x, y) && x.subtree === y.subtree) yield { kind: 'metadata', path: p, type: 'dir' };
        yield* diff(repo, x.subtree, y.subtree, p);
      } else if (!sameContent(x, y)) {
        if (x.type !== y.type) {
          yield { kind: 'removed', path: p, type: x.type };
          if (x.type === 'dir') yield* diff(repo, x.subtree, undefined, p);
          yield { kind: 'added', path: p, type: y.type };
          if (y.type === 'dir') yield* diff(repo, undefined, y.subtree, p);
        } else yield { kind: 'modified', path: p, type: y.type };
      } else if (!sameMetadata(x, y)) yield { kind: 'metadata', path: p, type: y.type };
    }
  }
}
