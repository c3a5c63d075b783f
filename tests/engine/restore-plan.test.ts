/**
 * The restore plan reads subtrees ahead of its walk: a whole restore of a wide, deep tree is byte-exact
 * (the walk keeps its order), and restoring one folder reads only the trees on the way to it and below
 * it, never its siblings'.
 */
import { describe, it, expect } from 'vitest';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { tempDir, writeTree, describeTree, expectSameTrees, type TreeSpec } from '../helpers/fixtures.js';

function wideTree(width: number, depth: number, tag: string): TreeSpec {
  const spec: TreeSpec = {};
  for (let i = 0; i < width; i++) {
    spec[`f${i}.txt`] = `${tag}/${i}\n`.repeat(i + 1);
    if (depth > 0) spec[`d${i}`] = { dir: wideTree(width, depth - 1, `${tag}/${i}`) };
  }
  return spec;
}

describe('restore plan', () => {
  it('restores a wide, deep tree exactly and reads only the trees a partial restore needs', async () => {
    const work = await tempDir('tm-plan-');
    const src = path.join(work, 'src');
    await writeTree(src, wideTree(5, 3, 'x')); // 156 folders, 780 files
    const repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
    const { snapshot } = await backup(repo, { paths: [src] });

    const all = path.join(work, 'all');
    const r = await restore(repo, { snapshot: snapshot.id, target: all, relativeTo: src });
    expect(r.errors).toEqual([]);
    expect(r.filesRestored).toBe(780);
    expectSameTrees(await describeTree(src), await describeTree(all));

    // the trees a restore of src/d2/d0 needs: the folders on the way down, d2/d0 and its 5 subfolders
    const want = path.join(src, 'd2', 'd0');
    const ancestors = ['/'];
    for (const part of want.split('/').filter(Boolean))
      ancestors.push(path.posix.join(ancestors[ancestors.length - 1], part));
    const needed = new Set<string>();
    for (const p of ancestors) needed.add((await lookup(repo, snapshot, p)).treeId!);
    for (let i = 0; i < 5; i++) needed.add((await lookup(repo, snapshot, path.join(want, `d${i}`))).treeId!);
    const sibling = (await lookup(repo, snapshot, path.join(src, 'd1'))).treeId!;
    expect(needed.has(sibling)).toBe(false);

    // a fresh repository object (empty tree cache) that records the trees it reads
    const again = await Repository.open(new LocalBackend(path.join(work, 'repo')), 'pw');
    const loaded = new Set<string>();
    const loadTree = again.loadTree.bind(again);
    again.loadTree = async (id) => {
      loaded.add(id);
      return loadTree(id);
    };
    const part = path.join(work, 'part');
    const p = await restore(again, { snapshot: snapshot.id, target: part, include: [want], relativeTo: src });
    expect(p.errors).toEqual([]);
    expect(p.filesRestored).toBe(5 + 5 * 5);
    expectSameTrees(await describeTree(want), await describeTree(path.join(part, 'd2', 'd0')));
    expect([...loaded].sort()).toEqual([...needed].sort());
  });
});
