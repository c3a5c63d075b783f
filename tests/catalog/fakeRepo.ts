/**
 * A fake repository for catalog tests: file trees declared as data become content-addressed trees
 * (a Merkle tree: an unchanged folder keeps its ID), and snapshots point at their roots.
 */
import { emptySnapshotStats } from '../../src/main/engine/repo/types.js';
import crypto from 'node:crypto';
import type { SnapshotEntry, Tree, TreeNode } from '../../src/main/engine/repo/types.js';

/** A folder: name → file content (string) or sub-folder. */
export interface FakeDir {
  [name: string]: string | FakeDir;
}

const hash = (s: string) => crypto.createHash('sha256').update(s).digest('hex');

export class FakeRepo {
  readonly trees = new Map<string, Tree>();
  readonly snapshots: SnapshotEntry[] = [];
  loadTreeCalls = 0;

  storeDir(dir: FakeDir, mtimeNs = '1700000000000000000'): string {
    const nodes: TreeNode[] = Object.keys(dir)
      .sort()
      .map((name) => {
        const v = dir[name];
        if (typeof v === 'string') {
          return { name, type: 'file', mode: 0o644, mtimeNs, size: v.length, content: [hash('blob:' + v)] };
        }
        return { name, type: 'dir', mode: 0o755, mtimeNs, subtree: this.storeDir(v, mtimeNs) };
      });
    const tree: Tree = { nodes };
    const id = hash(JSON.stringify(tree));
    this.trees.set(id, tree);
    return id;
  }

  addSnapshot(root: FakeDir, time: string, extra: Partial<SnapshotEntry> = {}): SnapshotEntry {
    const tree = this.storeDir(root);
    const s: SnapshotEntry = {
      id: hash(`snap:${time}:${tree}:${this.snapshots.length}`),
      version: 1,
      time,
      host: 'pc',
      paths: ['/'],
      tags: [],
      tree,
      stats: emptySnapshotStats(),
      skipped: [],
      ...extra,
    };
    this.snapshots.push(s);
    return s;
  }

  async listSnapshots(): Promise<SnapshotEntry[]> {
    return [...this.snapshots];
  }

  async loadTree(id: string): Promise<Tree> {
    this.loadTreeCalls++;
    const t = this.trees.get(id);
    if (!t) throw new Error(`tree ${id} not found`);
    return t;
  }
}
