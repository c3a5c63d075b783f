/**
 * Repair's snapshot side: which snapshots still have everything they need, which data blobs they lack
 * (and in which files those were), and new trees for the ones that do not — the same folders without
 * the files and folders whose content or listing is lost, with their folders' totals recounted. A tree
 * that lost nothing keeps its ID, so a rebuilt snapshot shares everything that survived with the others.
 * A tree is judged once, however many snapshots contain it.
 *
 * When snapshot files themselves are damaged, their root trees are usually still there, referred to by
 * nothing: `orphanRoots` finds such trees, and `describeRecovered` gives them back their paths (and host
 * and job) from the snapshots whose sources they match.
 */
import os from 'node:os';
import type { Repository } from '../repo/repository.js';
import type { DirSummary, ID, Snapshot, SnapshotEntry, Tree, TreeNode } from '../repo/types.js';
import { emptySnapshotStats } from '../repo/types.js';
import { contentIds, encodeTree } from '../repo/tree.js';
import { blobIdHex } from '../crypto/index.js';
import { AbortedError } from '../errors.js';
import type { FileRef } from './sources.js';

/** A file or folder a rebuilt tree leaves out, relative to that tree ('' is the tree's own folder). */
export interface LostEntry {
  rel: string;
  kind: 'file' | 'folder';
  reason: string;
}

export interface TreeOutcome {
  /** The tree to use now: the same ID when nothing was lost below it, null when its listing is lost. */
  id: ID | null;
  summary: DirSummary;
  /** The totals before (of the listing as stored). */
  before: DirSummary;
  lost: LostEntry[];
  /** Counts of everything lost below (the list above is capped). */
  lostFiles: number;
  lostFolders: number;
}

/** Lost entries kept per tree (the counts stay exact). */
const LOST_LIST_CAP = 1000;
/** Files kept per wanted blob (a blob shared by many files is found in the first readable one). */
const REFS_PER_BLOB = 4;

const join = (dir: string, name: string) => (dir === '/' ? `/${name}` : `${dir}/${name}`);

/** The totals of a folder's entries, counted as the backup counts them. */
export function summarize(nodes: TreeNode[]): DirSummary {
  const s: DirSummary = { files: 0, dirs: 0, bytes: 0 };
  for (const n of nodes) {
    if (n.type === 'file') {
      s.files++;
      s.bytes += n.size ?? 0;
    } else if (n.type === 'dir') {
      s.dirs += 1 + (n.summary?.dirs ?? 0);
      s.files += n.summary?.files ?? 0;
      s.bytes += n.summary?.bytes ?? 0;
    }
  }
  return s;
}

export class SnapshotRepair {
  private readonly surveyed = new Map<ID, Promise<boolean>>();
  private readonly rebuilt = new Map<ID, Promise<TreeOutcome>>();
  /** Data blobs some file needs that no pack holds soundly, with (some of) the files that use them. */
  readonly wanted = new Map<string, FileRef[]>();

  constructor(
    private readonly repo: Repository,
    private readonly opts: { save: boolean; signal?: AbortSignal },
  ) {}

  /** Whether a blob is stored soundly (or being stored by this repair). */
  private sound(id: string): boolean {
    return this.repo.hasBlob(id);
  }

  private async load(id: ID): Promise<Tree> {
    if (this.opts.signal?.aborted) throw new AbortedError();
    // block lists in two parts are joined node by node (a lost base loses that file, not the folder)
    return this.repo.loadTree(id, { joinLists: false, cache: false });
  }

  /** The node with its block list joined, or undefined when its base list is lost or does not fit. */
  private async joined(n: TreeNode): Promise<TreeNode | undefined> {
    if (n.blockBase === undefined) return n;
    if (!this.sound(n.blockBase)) return undefined;
    const copy = { ...n };
    try {
      await this.repo.joinBlockList(copy);
      return copy;
    } catch {
      return undefined;
    }
  }

  /** Walks a snapshot, noting the data blobs it lacks; true when it lacks nothing. */
  surveySnapshot(s: SnapshotEntry): Promise<boolean> {
    return this.surveyTree(s.tree, '/');
  }

  private surveyTree(id: ID, abs: string): Promise<boolean> {
    let p = this.surveyed.get(id);
    if (!p) {
      p = this.surveyTreeOnce(id, abs);
      this.surveyed.set(id, p);
    }
    return p;
  }

  private async surveyTreeOnce(id: ID, abs: string): Promise<boolean> {
    if (!this.sound(id)) return false;
    let tree: Tree;
    try {
      tree = await this.load(id);
    } catch (err) {
      if (err instanceof AbortedError) throw err;
      return false;
    }
    let whole = true;
    for (const n of tree.nodes) {
      const p = join(abs, n.name);
      if (n.type === 'dir' && n.subtree) {
        if (!(await this.surveyTree(n.subtree, p))) whole = false;
        continue;
      }
      if (n.type !== 'file') continue;
      const j = await this.joined(n);
      if (!j) {
        whole = false;
        continue;
      }
      for (const c of contentIds(j)) {
        if (this.sound(c)) continue;
        whole = false;
        let refs = this.wanted.get(c);
        if (!refs) this.wanted.set(c, (refs = []));
        if (refs.length < REFS_PER_BLOB && !refs.some((r) => r.path === p)) refs.push({ path: p, node: j });
      }
    }
    return whole;
  }

  /** The tree to use in place of `id`: the same when nothing below it is lost. */
  rebuildTree(id: ID): Promise<TreeOutcome> {
    let p = this.rebuilt.get(id);
    if (!p) {
      p = this.rebuildTreeOnce(id);
      this.rebuilt.set(id, p);
    }
    return p;
  }

  private async rebuildTreeOnce(id: ID): Promise<TreeOutcome> {
    const none: DirSummary = { files: 0, dirs: 0, bytes: 0 };
    const lostFolder = (reason: string): TreeOutcome => ({
      id: null,
      summary: none,
      before: none,
      lost: [{ rel: '', kind: 'folder', reason }],
      lostFiles: 0,
      lostFolders: 1,
    });
    if (!this.sound(id)) return lostFolder('its listing (tree) is lost');
    let tree: Tree;
    try {
      tree = await this.load(id);
    } catch (err) {
      if (err instanceof AbortedError) throw err;
      return lostFolder(`its listing (tree) is damaged: ${(err as Error).message}`);
    }
    const nodes: TreeNode[] = [];
    const lost: LostEntry[] = [];
    let lostFiles = 0;
    let lostFolders = 0;
    let changed = false;
    const note = (e: LostEntry) => {
      if (lost.length < LOST_LIST_CAP) lost.push(e);
    };
    for (const n of tree.nodes) {
      const rel = `/${n.name}`;
      if (n.type === 'dir' && n.subtree) {
        const o = await this.rebuildTree(n.subtree);
        for (const e of o.lost) note({ ...e, rel: rel + e.rel });
        lostFiles += o.lostFiles;
        lostFolders += o.lostFolders;
        if (o.id === null) changed = true;
        else if (o.id !== n.subtree) {
          nodes.push({ ...n, subtree: o.id, summary: o.summary });
          changed = true;
        } else nodes.push(n);
        continue;
      }
      if (n.type === 'file') {
        const j = await this.joined(n);
        const ids = j ? contentIds(j) : [];
        const missing = ids.filter((c) => !this.sound(c)).length;
        if (!j || missing) {
          note({
            rel,
            kind: 'file',
            reason: j
              ? `${missing} of its ${ids.length} piece(s) are lost`
              : 'its block list is lost or damaged',
          });
          lostFiles++;
          changed = true;
          continue;
        }
      }
      nodes.push(n);
    }
    const before = summarize(tree.nodes);
    const summary = summarize(nodes);
    if (!changed) return { id, summary, before, lost, lostFiles, lostFolders };
    const next: Tree = { nodes };
    const newId = this.opts.save
      ? await this.repo.saveTree(next)
      : blobIdHex(this.repo.key.id, encodeTree(next));
    return { id: newId, summary, before, lost, lostFiles, lostFolders };
  }

  /**
   * Trees no other tree refers to that are not the root of a snapshot in `roots`: the roots of snapshots
   * whose files are lost (and of snapshots forgotten but not yet pruned, which cannot be told apart).
   * `candidates` are the tree-type blobs stored soundly (base block lists among them are skipped).
   */
  async orphanRoots(candidates: ID[], roots: Set<ID>): Promise<ID[]> {
    const referenced = new Set<ID>();
    const trees: ID[] = [];
    for (const id of candidates) {
      let tree: Tree;
      try {
        tree = await this.load(id);
      } catch (err) {
        if (err instanceof AbortedError) throw err;
        continue; // a base block list, or not a tree
      }
      trees.push(id);
      for (const n of tree.nodes) {
        if (n.subtree) referenced.add(n.subtree);
        if (n.blockBase) referenced.add(n.blockBase);
      }
    }
    return trees.filter((id) => !referenced.has(id) && !roots.has(id)).sort();
  }

  /**
   * A snapshot for a recovered root tree: the paths, host, user and job of the newest snapshot whose
   * sources it matches (a job's snapshots all back up the same paths), else the paths it leads to.
   */
  async describeRecovered(
    tree: ID,
    outcome: TreeOutcome,
    others: SnapshotEntry[],
    time: string,
  ): Promise<Snapshot> {
    let best: { s: SnapshotEntry; score: number } | undefined;
    const tried = new Set<string>();
    for (const s of [...others].reverse()) {
      const key = JSON.stringify(s.paths);
      if (tried.has(key)) continue;
      tried.add(key);
      const score = await this.matchPaths(tree, s.paths);
      if (score > 0 && (!best || score > best.score)) best = { s, score };
    }
    const hosts = new Map<string, number>();
    for (const s of others) hosts.set(s.host, (hosts.get(s.host) ?? 0) + 1);
    const commonHost = [...hosts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? os.hostname();
    const from = best?.s;
    return {
      version: 1,
      time,
      host: from?.host ?? commonHost,
      ...(from?.username ? { username: from.username } : {}),
      paths: from?.paths ?? [await this.leadsTo(tree)],
      tags: ['recovered'],
      ...(from?.job ? { job: from.job } : {}),
      tree: outcome.id ?? tree,
      ...(from?.excludes ? { excludes: from.excludes } : {}),
      stats: {
        ...emptySnapshotStats(),
        files: outcome.summary.files,
        dirs: outcome.summary.dirs,
        totalBytes: outcome.summary.bytes,
      },
      skipped: [],
    };
  }

  /** How many of `paths` the tree holds, when it holds nothing else on the way to them (else 0). */
  private async matchPaths(tree: ID, paths: string[]): Promise<number> {
    type Trie = Map<string, Trie | null>;
    const trie: Trie = new Map();
    for (const p of paths) {
      const parts = p.split('/').filter(Boolean);
      let m = trie;
      parts.forEach((part, i) => {
        if (i === parts.length - 1) m.set(part, null);
        else {
          if (!(m.get(part) instanceof Map)) m.set(part, new Map());
          m = m.get(part) as Trie;
        }
      });
    }
    const walk = async (id: ID, level: Trie): Promise<number> => {
      let t: Tree;
      try {
        t = await this.load(id);
      } catch (err) {
        if (err instanceof AbortedError) throw err;
        return 0;
      }
      let score = 0;
      for (const n of t.nodes) {
        if (!level.has(n.name)) return 0; // something the sources do not lead to
        const sub = level.get(n.name);
        if (sub === null) score++;
        else if (n.type === 'dir' && n.subtree) {
          const s = await walk(n.subtree, sub as Trie);
          if (s === 0) return 0;
          score += s;
        } else return 0;
      }
      return score;
    };
    return walk(tree, trie);
  }

  /** The folder a tree leads to through folders of one entry each (its likely source). */
  private async leadsTo(tree: ID): Promise<string> {
    let p = '/';
    let id = tree;
    for (;;) {
      let t: Tree;
      try {
        t = await this.load(id);
      } catch (err) {
        if (err instanceof AbortedError) throw err;
        return p;
      }
      const only = t.nodes.length === 1 ? t.nodes[0] : undefined;
      if (!only || only.type !== 'dir' || !only.subtree) return p;
      const next = join(p, only.name);
      // stop above a folder that holds more than one entry: that folder is most likely the source
      let inner: Tree;
      try {
        inner = await this.load(only.subtree);
      } catch {
        return next;
      }
      if (inner.nodes.length !== 1 || inner.nodes[0].type !== 'dir') return next;
      p = next;
      id = only.subtree;
    }
  }
}
