/**
 * Browsing, searching and version history of snapshots by walking their trees. Trees are
 * content-addressed, so a loaded tree is cached by ID and shared between snapshots (an unchanged folder
 * is read once for all of them). The catalog's file index, when wired in, answers browse and search
 * without touching the repository; this walker is the always-correct fallback.
 */
import type { SnapshotEntry, Tree, TreeNode } from '../engine/repo/types.js';
import { contentDigest } from '../engine/repo/tree.js';
import type { BrowseEntry, EntryType, FileVersion, SearchHit, SnapshotInfo } from '../../shared/api.js';
import type { RepoHandle } from './services.js';
import { ApiUsageError } from './errors.js';

const TREE_CACHE = 20_000;

export function snapshotInfo(s: SnapshotEntry): SnapshotInfo {
  return {
    id: s.id,
    time: s.time,
    host: s.host,
    paths: s.paths,
    tags: s.tags,
    files: s.stats?.files ?? 0,
    totalBytes: s.stats?.totalBytes ?? 0,
    newBytes: s.stats?.newBytes ?? 0,
    ...(s.massChange?.suspect ? { suspect: true } : {}),
  };
}

export function nsToIso(ns: string | undefined): string {
  if (!ns) return new Date(0).toISOString();
  try {
    return new Date(Number(BigInt(ns) / 1_000_000n)).toISOString();
  } catch {
    return new Date(0).toISOString();
  }
}

function entryType(t: TreeNode['type']): EntryType {
  return t === 'file' || t === 'dir' || t === 'symlink' ? t : 'other';
}

/** Splits '/a/b' (or 'C:\\a\\b' as stored) into its components. */
export function splitPath(p: string): string[] {
  return p.split(/[\\/]+/).filter((c) => c.length > 0);
}

export function joinPath(dir: string, name: string): string {
  return dir === '/' || dir === '' ? `/${name}` : `${dir}/${name}`;
}

export class TreeWalker {
  private cache = new Map<string, Tree>();

  async tree(repo: RepoHandle, id: string): Promise<Tree> {
    const hit = this.cache.get(id);
    if (hit) return hit;
    const t = await repo.loadTree(id);
    if (this.cache.size >= TREE_CACHE) this.cache.delete(this.cache.keys().next().value as string);
    this.cache.set(id, t);
    return t;
  }

  /** The node at a path inside a snapshot, or null (the root itself is returned as a synthetic dir). */
  async nodeAt(repo: RepoHandle, snap: SnapshotEntry, path: string): Promise<TreeNode | null> {
    const parts = splitPath(path);
    let treeId = snap.tree;
    let node: TreeNode = { name: '', type: 'dir', mode: 0o755, mtimeNs: '0', subtree: snap.tree };
    for (const part of parts) {
      if (!treeId) return null;
      const tree = await this.tree(repo, treeId);
      const next = tree.nodes.find((n) => n.name === part);
      if (!next) return null;
      node = next;
      treeId = next.type === 'dir' ? (next.subtree ?? '') : '';
    }
    return node;
  }

  async browse(repo: RepoHandle, snap: SnapshotEntry, dirPath: string): Promise<BrowseEntry[]> {
    const node = await this.nodeAt(repo, snap, dirPath);
    if (!node) throw new ApiUsageError('NOT_FOUND', `${dirPath} is not in this snapshot`);
    if (node.type !== 'dir' || !node.subtree)
      throw new ApiUsageError('NOT_A_DIRECTORY', `${dirPath} is not a folder`);
    const tree = await this.tree(repo, node.subtree);
    const base = splitPath(dirPath).length ? '/' + splitPath(dirPath).join('/') : '/';
    const out = tree.nodes.map((n) => ({
      name: n.name,
      path: joinPath(base, n.name),
      type: entryType(n.type),
      size: n.size ?? 0,
      mtime: nsToIso(n.mtimeNs),
    }));
    out.sort((a, b) =>
      (a.type === 'dir') !== (b.type === 'dir') ? (a.type === 'dir' ? -1 : 1) : a.name.localeCompare(b.name),
    );
    return out;
  }

  /** Case-insensitive substring search on names, newest snapshot first. */
  async search(repo: RepoHandle, snaps: SnapshotEntry[], query: string, limit: number): Promise<SearchHit[]> {
    const q = query.toLowerCase();
    const hits: SearchHit[] = [];
    const ordered = [...snaps].sort((a, b) => b.time.localeCompare(a.time));
    for (const snap of ordered) {
      const stack: { id: string; path: string }[] = [{ id: snap.tree, path: '' }];
      while (stack.length > 0) {
        const { id, path } = stack.pop()!;
        const tree = await this.tree(repo, id);
        for (const n of tree.nodes) {
          const p = `${path}/${n.name}`;
          if (n.name.toLowerCase().includes(q)) {
            hits.push({
              snapshotId: snap.id,
              snapshotTime: snap.time,
              path: p,
              type: entryType(n.type),
              size: n.size ?? 0,
              mtime: nsToIso(n.mtimeNs),
            });
            if (hits.length >= limit) return hits;
          }
          if (n.type === 'dir' && n.subtree) stack.push({ id: n.subtree, path: p });
        }
      }
    }
    return hits;
  }

  /** Every snapshot holding the path, newest first, marking where the content changed. */
  async versions(repo: RepoHandle, snaps: SnapshotEntry[], path: string): Promise<FileVersion[]> {
    const ordered = [...snaps].sort((a, b) => a.time.localeCompare(b.time));
    const out: FileVersion[] = [];
    let prevKey: string | null = null;
    for (const snap of ordered) {
      const node = await this.nodeAt(repo, snap, path);
      if (!node) {
        prevKey = null;
        continue;
      }
      const key = `${node.type}:${node.size ?? 0}:${contentDigest(node)}:${node.subtree ?? ''}`;
      out.push({
        snapshotId: snap.id,
        snapshotTime: snap.time,
        size: node.size ?? 0,
        mtime: nsToIso(node.mtimeNs),
        changed: key !== prevKey,
      });
      prevKey = key;
    }
    return out.reverse();
  }
}
