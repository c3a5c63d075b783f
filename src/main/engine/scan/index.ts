/**
 * Scanning sources: turning lstat results into tree nodes, comparing them with the previous
 * snapshot's nodes, applying exclusions, and deciding which directories a change journal lets us skip.
 * Guarantees: never follows symlinks (so loops cannot happen); a node is "unchanged" only when size,
 * mtime, ctime and inode all match the previous snapshot (the always-correct level 3 of docs/architecture.md §3).
 * Not here: reading file contents (backup/worker), writing trees (backup/).
 */
import path from 'node:path';
import { minimatch } from 'minimatch';
import type { TreeNode } from '../repo/types.js';
import { hasContent } from '../repo/tree.js';
import type { ChangeHint } from '../operations.js';

export * from './stat.js';
import { nameFields, type EntryStat } from './stat.js';

/**
 * The tree node of an entry, from its name and lstat. Built as one object literal with the name's fields
 * set after it: spreading nameFields() into the literal made V8 take its slow path for every property
 * after the spread, ~10 µs a node (a noticeable share of the main thread's work in a full backup),
 * against ~0.2 µs this way. (Key order does not matter: encodeTree writes a fixed one.)
 */
export function metadataNode(raw: Buffer, st: EntryStat): TreeNode {
  const type = st.type;
  const { name, rawName } = nameFields(raw);
  const node: TreeNode = {
    name,
    type,
    mode: st.mode,
    mtimeNs: st.mtimeNs,
    ctimeNs: st.ctimeNs,
    uid: st.uid,
    gid: st.gid,
    inode: st.ino,
    dev: st.dev,
  };
  if (rawName !== undefined) node.rawName = rawName;
  if (type === 'file') {
    node.size = st.size;
    if (st.nlink > 1) node.nlink = st.nlink;
  }
  if (type === 'chardev' || type === 'blockdev') node.rdev = st.rdev;
  return node;
}

/** True when a file can reuse the previous snapshot's chunk list without being read. */
export function unchangedFile(prev: TreeNode | undefined, cur: TreeNode): boolean {
  return (
    !!prev &&
    prev.type === 'file' &&
    hasContent(prev) &&
    prev.size === cur.size &&
    prev.mtimeNs === cur.mtimeNs &&
    prev.ctimeNs === cur.ctimeNs &&
    prev.inode === cur.inode
  );
}

/**
 * Exclusion patterns (glob): a pattern without "/" matches a name anywhere ("*.tmp", "node_modules");
 * a pattern with "/" matches the absolute path ("/home/*\/.cache", "**\/Cache/**").
 */
export class Excluder {
  private readonly byName: string[] = [];
  private readonly byPath: string[] = [];

  constructor(readonly patterns: string[] = []) {
    for (const p of patterns) {
      const trimmed = p.trim();
      if (!trimmed) continue;
      if (trimmed.includes('/')) this.byPath.push(trimmed.replace(/\/+$/, ''));
      else this.byName.push(trimmed);
    }
  }

  /** True when there are no patterns at all (callers skip building path strings). */
  get empty(): boolean {
    return this.byName.length === 0 && this.byPath.length === 0;
  }

  excludes(absPath: string, name: string): boolean {
    for (const p of this.byName) if (minimatch(name, p, { dot: true })) return true;
    for (const p of this.byPath) if (minimatch(absPath, p, { dot: true })) return true;
    return false;
  }
}

/**
 * What a change hint allows for one directory:
 *  - 'reuse': nothing at or below changed: keep the previous subtree ID, touch nothing;
 *  - 'descend': the directory's own entries did not change, but something below did: reuse its
 *    previous entries and only re-stat/recurse into children that lead to changes;
 *  - 'scan': list and stat this directory's entries (and keep applying the hint below);
 *  - 'full': scan the whole subtree without the hint (a directory that moved in, say).
 */
export type HintDecision = 'reuse' | 'descend' | 'scan' | 'full';

export class HintPlan {
  private readonly ancestors = new Set<string>();

  constructor(readonly hint: ChangeHint) {
    const all = [...hint.dirtyDirs, ...(hint.dirtyTrees ?? [])];
    for (const d of all) {
      let p = path.dirname(d);
      for (;;) {
        if (this.ancestors.has(p)) break;
        this.ancestors.add(p);
        const up = path.dirname(p);
        if (up === p) break;
        p = up;
      }
    }
  }

  decide(dir: string): HintDecision {
    if (this.hint.dirtyTrees?.has(dir)) return 'full';
    if (this.hint.dirtyDirs.has(dir)) return 'scan';
    if (this.ancestors.has(dir)) return 'descend';
    return 'reuse';
  }

  /** True when a child directory (of a 'descend' directory) leads to a change. */
  leadsToChange(dir: string): boolean {
    return this.hint.dirtyDirs.has(dir) || !!this.hint.dirtyTrees?.has(dir) || this.ancestors.has(dir);
  }
}
