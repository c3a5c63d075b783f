/**
 * A restore from a folder repository hands each pack range to a decode worker as a file to read itself
 * (Backend.localFile, restore/worker/packRange.ts decodeFile), not as bytes the main thread read. What is damaged is
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
import { BlobType, type BlobLocation } from '../../src/main/engine/repo/blobIndex.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { directIoFilesystem } from '../../src/main/engine/aligned.js';
import { randomBytes, tempDir, writeTree } from '../helpers/fixtures.js';

describe('restore from a folder repository', () => {
  it('has the workers read the packs, and names the files a short or missing pack fails', async () => {
    const work = await tempDir('tm-worker-reads-');
    const src = path.join(work, 'src');
    // several files are in flight even with one worker, so a pack may mix blobs of different files (the
    // chunk boundaries move with the repository's chunker key): the packs to damage are chosen below
    await writeTree(src, {
      'a-cut.bin': randomBytes(600_000, 31),
      'b-gone.bin': randomBytes(9 * 1024 * 1024, 32),
      'c-fine.bin': randomBytes(700_000, 33),
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
    const names = ['a-cut.bin', 'b-gone.bin', 'c-fine.bin', 'note.txt'];
    for (const name of names)
      expect(
        (await fs.readFile(path.join(work, 'out1', name))).equals(await fs.readFile(path.join(src, name))),
      ).toBe(true);
    expect(dataLoads).toBe(0); // no pack of file content was read by this thread (trees are)
    // past the page cache where the repository's folder is on a local disk (the temp folder here and in
    // CI): every blob of the files lies in a range read so
    let blobBytes = 0;
    for (const [, loc] of fresh.index.entries()) if (dataPacks.has(loc.pack)) blobBytes += loc.length;
    if (await directIoFilesystem(repoDir)) expect(first.bytesReadDirect).toBeGreaterThanOrEqual(blobBytes);
    else expect(first.bytesReadDirect).toBe(0);

    // cut the pack holding a-cut.bin's last blob just before that blob's end; remove a pack holding blobs of
    // b-gone.bin's only (nine MiB in 256 KiB packs: several such packs)
    const locsOf = new Map<string, BlobLocation[]>();
    for (const name of names) {
      const { node } = await lookup(fresh, r.snapshot, path.join(src, name));
      locsOf.set(
        name,
        node!.content!.map((id) => fresh.index.get(id)!),
      );
    }
    const cutLocs = locsOf.get('a-cut.bin')!;
    const cut = cutLocs[cutLocs.length - 1];
    const cutAt = cut.offset + cut.length - 1;
    const othersPacks = new Set(
      names.filter((n) => n !== 'b-gone.bin').flatMap((n) => locsOf.get(n)!.map((l) => l.pack)),
    );
    const gone = locsOf.get('b-gone.bin')!.find((l) => !othersPacks.has(l.pack))!;
    expect(gone).toBeDefined();
    const packFile = (pack: string) => path.join(repoDir, 'data', pack.slice(0, 2), pack);
    await fs.truncate(packFile(cut.pack), cutAt);
    await fs.rm(packFile(gone.pack));
    // the files with a blob in the removed pack or past the cut
    const damaged = names.filter((n) =>
      locsOf
        .get(n)!
        .some((l) => l.pack === gone.pack || (l.pack === cut.pack && l.offset + l.length > cutAt)),
    );
    expect(damaged).toContain('a-cut.bin');
    expect(damaged).toContain('b-gone.bin');
    expect(damaged.length).toBeLessThan(names.length); // some file is still whole (c-fine.bin at least,
    // unless it shares the cut pack past the cut)

    const out = path.join(work, 'out2');
    const second = await restore(fresh, { snapshot: r.snapshotId, target: out, relativeTo: src });
    const byName = new Map(second.errors.map((e) => [path.basename(e.path), e.message]));
    expect([...byName.keys()].sort()).toEqual(damaged.sort());
    expect(byName.get('a-cut.bin')).toMatch(/shorter than its index says/);
    expect(byName.get('b-gone.bin')).toMatch(new RegExp(`reading pack ${gone.pack.slice(0, 12)}.*ENOENT`));
    for (const name of names.filter((n) => !damaged.includes(n)))
      expect((await fs.readFile(path.join(out, name))).equals(await fs.readFile(path.join(src, name)))).toBe(
        true,
      );
    for (const name of damaged) await expect(fs.access(path.join(out, name))).rejects.toThrow(); // none wrong
  });
});
