/**
 * The backup's sources (main thread): the paths given, normalized; the snapshot to compare with (the
 * newest of this host with exactly these sources); and the tree the sources hang under, which mirrors
 * their absolute paths (/home/ann/Documents → home/ann/Documents), saved around the walk of each source.
 */
import path from 'node:path';
import type { Repository } from '../repo/repository.js';
import type { ID, SnapshotEntry, Tree, TreeNode } from '../repo/types.js';
import { UsageError } from '../errors.js';
import { metadataNode, type EntryStat } from '../scan/index.js';
import type { BackupRun } from './run.js';
import { byName, type SavedDir, type TreeSaver } from './treeSaver.js';
import type { Walker } from './walk.js';

/** Normalizes source paths: absolute, no duplicates, none inside another. */
export function normalizeSources(paths: string[]): string[] {
  if (!paths.length) throw new UsageError('nothing to back up: give at least one path');
  const abs = [...new Set(paths.map((p) => path.resolve(p)))].sort();
  return abs.filter(
    (p) => !abs.some((q) => q !== p && p.startsWith(q.endsWith(path.sep) ? q : q + path.sep)),
  );
}

function sameSources(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((p, i) => p === b[i]);
}

/**
 * Finds the snapshot to compare with: the newest of this host with exactly these sources. A damaged
 * snapshot file is passed over (logged): the backup then compares with an older one, or reads everything,
 * rather than failing every night until the repository is repaired.
 */
export async function findParent(
  repo: Repository,
  host: string,
  paths: string[],
  explicit?: ID,
  log?: (line: string) => void,
): Promise<SnapshotEntry | undefined> {
  if (explicit) return repo.loadSnapshot(explicit);
  const all = await repo.listSnapshots({
    damaged: (id, err) =>
      log?.(
        `snapshot ${id.slice(0, 12)} is damaged and not used as the parent: ${err.message} (tidemark repair mends it)`,
      ),
  });
  const sorted = [...paths].sort();
  for (let i = all.length - 1; i >= 0; i--) {
    if (all[i].host === host && sameSources([...all[i].paths].sort(), sorted)) return all[i];
  }
  return undefined;
}

/** The sources as a trie of path components; a source itself is a leaf (null). */
type SourceTrie = Map<string, SourceTrie | null>;

function sourceTrie(sources: string[]): SourceTrie {
  const trie: SourceTrie = new Map();
  for (const s of sources) {
    const parts = s.split(path.sep).filter(Boolean);
    let m = trie;
    parts.forEach((part, i) => {
      if (i === parts.length - 1) m.set(part, null);
      else {
        if (!(m.get(part) instanceof Map)) m.set(part, new Map());
        m = m.get(part) as SourceTrie;
      }
    });
  }
  return trie;
}

/** Saves the tree of the sources (walking each) under the root; returns the root tree's ID. */
export async function saveSources(
  run: BackupRun,
  repo: Repository,
  walker: Walker,
  trees: TreeSaver,
  sources: string[],
  prevRoot: Tree | undefined,
): Promise<ID> {
  const saveVirtual = async (
    prefix: string,
    children: SourceTrie,
    prevTree: Tree | undefined,
  ): Promise<SavedDir> => {
    const prevNodes = byName(prevTree);
    const nodes: TreeNode[] = [];
    for (const [name, sub] of [...children].sort((a, b) =>
      Buffer.compare(Buffer.from(a[0]), Buffer.from(b[0])),
    )) {
      const abs = prefix === path.sep ? path.sep + name : prefix + path.sep + name;
      const absBuf = Buffer.from(abs);
      const prev = prevNodes.get(Buffer.from(name).toString('latin1'));
      let st: EntryStat;
      try {
        st = await walker.lstat(absBuf);
      } catch (err) {
        run.skip(abs, err, (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : undefined);
        continue;
      }
      if (sub === null) {
        const node = await walker.saveEntry(absBuf, Buffer.from(name), st, prev, 'scan');
        if (node) nodes.push(node);
      } else {
        const node = metadataNode(Buffer.from(name), st);
        if (node.type !== 'dir') {
          run.skip(abs, undefined, 'is not a folder');
          continue;
        }
        const prevSub = prev?.type === 'dir' && prev.subtree ? await repo.loadTree(prev.subtree) : undefined;
        const saved = await saveVirtual(abs, sub, prevSub);
        node.subtree = saved.id;
        node.summary = saved.summary;
        nodes.push(node);
      }
    }
    return trees.save(nodes);
  };
  return (await saveVirtual(path.sep, sourceTrie(sources), prevRoot)).id;
}
