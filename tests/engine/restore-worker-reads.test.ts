/**
 * A restore from a folder repository hands each pack range to a decode worker as a file to read itself
 * (Backend.localFile, pipelineWorker's decodeFile), not as bytes the main thread read. What is damaged is
 * still named per file: a pack cut short fails the files whose blobs lie past its end, a pack gone fails
 * those in it, and every other file is restored.
 */
import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { BlobType } from '../../src/main/engine/repo/blobIndex.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { randomBytes, tempDir, writeTree } from '../helpers/fixtures.js';

describe('restore from a folder repository', () => {
  it('has the workers read the packs, and names the files a short or missing pack fails', async () => {
    const work = await tempDir('tm-worker-reads-');
    const src = path.join(work, 'src');
    await writeTree(src, {
      'cut.bin': randomBytes(600_000, 31),
      'gone.bin': randomBytes(600_000, 32),
      'fine.bin': randomBytes(700_000, 33),
      'note.txt': 'small and whole',
    });
    const repoDir = path.join(work, 'repo');
    const repo = await Repository.init(new LocalBackend(repoDir), 'pw', {
      kdf: { N: 1024 },
      packSize: 256 * 1024,
    });
    const r = await backup(repo, { paths: [src], workers: 1 });

    const fresh = await Repository.open(new LocalBackend(repoDir), 'pw');
    let dataLoads = 0;
    await fresh.loadIndex();
    const dataPacks = fresh.index.countsByPack(BlobType.Data); // packs of file content (not of trees)
    expect(dataPacks.size).toBeGreaterThan(2);
    const load = fresh.backend.load.bind(fresh.backend);
    fresh.backend.load = (type, name, offset, length) => {
      if (type === 'data' && dataPacks.has(name)) dataLoads++;
      return load(type, name, offset, length);
    };
    const first = await restore(fresh, {
      snapshot: r.snapshotId,
      target: path.join(work, 'out1'),
      relativeTo: src,
    });
    expect(first.errors).toEqual([]);
    for (const name of ['cut.bin', 'gone.bin', 'fine.bin', 'note.txt'])
      expect(
        (await fs.readFile(path.join(work, 'out1', name))).equals(await fs.readFile(path.join(src, name))),
      ).toBe(true);
    expect(dataLoads).toBe(0); // no pack of file content was read by this thread (trees are)

    // cut the pack holding the last blob of cut.bin just before that blob's end; remove gone.bin's packs
    const packOf = async (name: string, which: 'first' | 'last') => {
      const { node } = await lookup(fresh, r.snapshot, path.join(src, name));
      const ids = node!.content!;
      return fresh.index.get(ids[which === 'first' ? 0 : ids.length - 1])!;
    };
    const cut = await packOf('cut.bin', 'last');
    const packFile = (pack: string) => path.join(repoDir, 'data', pack.slice(0, 2), pack);
    await fs.truncate(packFile(cut.pack), cut.offset + cut.length - 1);
    const gone = await packOf('gone.bin', 'first');
    expect(gone.pack).not.toBe(cut.pack);
    await fs.rm(packFile(gone.pack));
    const fineLocs = (await lookup(fresh, r.snapshot, path.join(src, 'fine.bin'))).node!.content!.map(
      (id) => fresh.index.get(id)!.pack,
    );
    // (fine.bin shares neither pack, else it would fail too)
    expect(fineLocs.includes(cut.pack) || fineLocs.includes(gone.pack)).toBe(false);

    const out = path.join(work, 'out2');
    const second = await restore(fresh, { snapshot: r.snapshotId, target: out, relativeTo: src });
    const byName = new Map(second.errors.map((e) => [path.basename(e.path), e.message]));
    expect([...byName.keys()].sort()).toEqual(['cut.bin', 'gone.bin']);
    expect(byName.get('cut.bin')).toMatch(/shorter than its index says/);
    expect(byName.get('gone.bin')).toMatch(new RegExp(`reading pack ${gone.pack.slice(0, 12)}.*ENOENT`));
    expect(
      (await fs.readFile(path.join(out, 'fine.bin'))).equals(await fs.readFile(path.join(src, 'fine.bin'))),
    ).toBe(true);
    await expect(fs.access(path.join(out, 'cut.bin'))).rejects.toThrow(); // no silently wrong file
    await expect(fs.access(path.join(out, 'gone.bin'))).rejects.toThrow();
  });
});
