/**
 * Restore tests (engine/restoretest): a random sample of a snapshot's files is restored by the restore
 * engine into a temporary folder and compared piece by piece with the stored hashes; block files are
 * added when asked; the folder is gone afterwards. A damaged pack fails exactly the files it holds, a
 * restored file that differs by one byte is caught, the sample follows its random source and its byte
 * budget, and a temporary folder that cannot be made is an error, not a verdict.
 */
import { describe, it, expect, beforeAll } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { contentIds } from '../../src/main/engine/repo/tree.js';
import { restoreTest, compareRestored, RestoreTestError } from '../../src/main/engine/restoretest/index.js';
import { tempDir, writeTree, randomBytes, seededRandom, type TreeSpec } from '../helpers/fixtures.js';

const KiB = 1024;

describe('restore tests', () => {
  let work: string;
  let src: string;
  let tmpBase: string;
  let repo: Repository;
  let snapshot: string;
  const FILES = 40;

  beforeAll(async () => {
    work = await tempDir('tm-rtest-');
    src = path.join(work, 'src');
    tmpBase = path.join(work, 'tmp');
    await fs.mkdir(tmpBase);
    const docs: TreeSpec = {};
    for (let i = 0; i < FILES; i++)
      docs[`f${String(i).padStart(2, '0')}.bin`] = randomBytes(20 * KiB + i * 7 * KiB, i + 1);
    await writeTree(src, { docs: { dir: docs }, 'empty.txt': '', 'vm.img': randomBytes(1024 * KiB, 99) });
    repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', {
      kdf: { N: 1024 },
      chunker: { min: 16 * KiB, avg: 32 * KiB, max: 128 * KiB },
      packSize: 128 * KiB,
    });
    const r = await backup(repo, { paths: [src], blockFiles: { patterns: ['*.img'], minSize: KiB } });
    snapshot = r.snapshotId;
  });

  const leftovers = async () =>
    (await fs.readdir(tmpBase)).filter((n) => n.startsWith('tidemark-restore-test-'));

  it('restores a random sample, compares it with the stored hashes, and cleans up', async () => {
    const r = await restoreTest(repo, { snapshot, files: 10, tempDir: tmpBase, random: seededRandom(7) });
    expect(r.failures).toEqual([]);
    expect(r.ok).toBe(true);
    expect(r.filesChecked).toBe(10);
    expect(r.blockFilesChecked).toBe(0);
    expect(r.candidates).toBe(FILES); // the empty file and the block file are not drawn
    expect(r.bytesChecked).toBeGreaterThan(10 * 20 * KiB);
    expect(await leftovers()).toEqual([]);
  });

  it('draws by its random source, within the byte budget', async () => {
    const picks = async (seed: number, maxSampleBytes?: number) => {
      const seen: string[] = [];
      const r = await restoreTest(repo, {
        snapshot,
        files: 5,
        tempDir: tmpBase,
        random: seededRandom(seed),
        maxSampleBytes,
        progress: (p) => {
          if (p.phase === 'comparing') seen.push(`${p.filesDone}/${p.filesTotal}`);
        },
      });
      return { r, seen };
    };
    const a = await picks(1);
    const b = await picks(1);
    expect(a.r.bytesChecked).toBe(b.r.bytesChecked); // the same random source draws the same files
    expect(a.seen.at(-1)).toBe('5/5');
    const small = await picks(2, 100 * KiB);
    expect(small.r.bytesChecked).toBeLessThanOrEqual(100 * KiB);
    expect(small.r.filesChecked).toBeLessThan(5);
  });

  it('restores every block file when asked', async () => {
    const r = await restoreTest(repo, { snapshot, files: 2, allBlockFiles: true, tempDir: tmpBase });
    expect(r.ok).toBe(true);
    expect(r.blockFilesChecked).toBe(1);
    expect(r.filesChecked).toBe(3);
    expect(r.allBlockFiles).toBe(true);
    expect(r.bytesChecked).toBeGreaterThanOrEqual(1024 * KiB);
  });

  it('a damaged pack fails the files it holds, by name', async () => {
    // a copy of the repository with one byte flipped in the pack holding f05.bin's first chunk
    const copy = path.join(work, 'damaged');
    await fs.cp(path.join(work, 'repo'), copy, { recursive: true });
    const damaged = await Repository.open(new LocalBackend(copy), 'pw');
    try {
      await damaged.loadIndex();
      const snap = await damaged.loadSnapshot(snapshot);
      const { node } = await lookup(damaged, snap, path.posix.join(src, 'docs/f05.bin'));
      const loc = damaged.index.get(contentIds(node!)[0])!;
      const file = damaged.backend.localFile!('data', loc.pack)!;
      await fs.chmod(file, 0o644);
      const bytes = await fs.readFile(file);
      bytes[loc.offset + 9] ^= 0xff;
      await fs.writeFile(file, bytes);
      // every file, so the damaged one is among them
      const r = await restoreTest(damaged, { snapshot, files: 1000, tempDir: tmpBase });
      expect(r.ok).toBe(false);
      expect(r.filesChecked).toBe(FILES);
      expect(r.failures.map((f) => f.path)).toContain(path.posix.join(src, 'docs/f05.bin'));
      // only files with a blob in that pack fail
      const inPack = new Set<string>();
      for (const [id, l] of damaged.index.entries()) if (l.pack === loc.pack) inPack.add(id);
      for (const f of r.failures) {
        const n = (await lookup(damaged, snap, f.path)).node!;
        expect(
          contentIds(n).some((id) => inPack.has(id)),
          f.path,
        ).toBe(true);
      }
      expect(await leftovers()).toEqual([]);
    } finally {
      await damaged.close();
    }
  });

  it('catches a restored file that differs by one byte, or in size', async () => {
    const target = path.join(work, 'one');
    await restore(repo, { snapshot, target, include: [path.posix.join(src, 'docs/f10.bin')] });
    const file = path.join(target, src, 'docs/f10.bin');
    const { node } = await lookup(
      repo,
      await repo.loadSnapshot(snapshot),
      path.posix.join(src, 'docs/f10.bin'),
    );
    expect(await compareRestored(repo, file, node!)).toBeUndefined();
    const bytes = await fs.readFile(file);
    bytes[bytes.length - 100] ^= 1;
    await fs.writeFile(file, bytes);
    expect(await compareRestored(repo, file, node!)).toMatch(/differ from the stored hash/);
    await fs.appendFile(file, 'x');
    expect(await compareRestored(repo, file, node!)).toMatch(/instead of/);
    await fs.rm(file);
    expect(await compareRestored(repo, file, node!)).toMatch(/not restored/);
  });

  it('a temporary folder that cannot be made is an error, not a failed test', async () => {
    await expect(
      restoreTest(repo, { snapshot, files: 3, tempDir: path.join(work, 'no', 'such', 'folder') }),
    ).rejects.toBeInstanceOf(RestoreTestError);
  });
});
