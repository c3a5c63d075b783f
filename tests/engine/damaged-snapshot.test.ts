/**
 * One damaged snapshot file does not take the repository's other snapshots with it: browsing (the CLI's
 * `snapshots` and `find`, the catalog's sync) lists the others and names the damaged one; the next backup
 * compares with the newest readable snapshot and says why; prune and forget, which must see every
 * snapshot to know what is still used, refuse before deleting anything and point at repair.
 */
import { describe, it, expect, beforeAll } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { prune } from '../../src/main/engine/repo/retention.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { CorruptObjectError } from '../../src/main/engine/errors.js';
import { Catalog } from '../../src/main/engine/catalog/index.js';
import { syncRepository } from '../../src/main/engine/catalog/sync.js';
import { tempDir, writeTree, randomBytes, runCli, cliEnv, listRepoFiles } from '../helpers/fixtures.js';

const PW = 'pw';
let work: string;
let src: string;
let repoDir: string;
const ids: string[] = [];
/** The newest snapshot's file as written, and with a flipped byte. */
let good: Buffer;
let bad: Buffer;
const snapFile = () => path.join(repoDir, 'snapshots', ids[1]);

const open = () => Repository.open(new LocalBackend(repoDir), PW);

beforeAll(async () => {
  work = await tempDir('damaged-snap-');
  src = path.join(work, 'src');
  repoDir = path.join(work, 'repo');
  await writeTree(src, { 'a.txt': 'first', docs: { dir: { 'b.bin': randomBytes(200_000, 1) } } });
  const repo = await Repository.init(new LocalBackend(repoDir), PW, { kdf: { N: 1024 } });
  try {
    ids.push((await backup(repo, { paths: [src] })).snapshotId);
    await writeTree(src, { 'a.txt': 'second', docs: { dir: { 'c.bin': randomBytes(150_000, 2) } } });
    ids.push((await backup(repo, { paths: [src] })).snapshotId);
  } finally {
    await repo.close();
  }
  // a flipped byte in the newest snapshot's file
  await fs.chmod(snapFile(), 0o644);
  good = await fs.readFile(snapFile());
  bad = Buffer.from(good);
  bad[40] ^= 0x5a;
  await fs.writeFile(snapFile(), bad);
}, 120_000);

describe('a damaged snapshot file', () => {
  it('fails a full listing, and a browsing one leaves it out and names it', async () => {
    const repo = await open();
    try {
      await expect(repo.listSnapshots()).rejects.toBeInstanceOf(CorruptObjectError);
      const damaged: string[] = [];
      const list = await repo.listSnapshots({ damaged: (id) => damaged.push(id) });
      expect(list.map((s) => s.id)).toEqual([ids[0]]);
      expect(damaged).toEqual([ids[1]]);
    } finally {
      await repo.close();
    }
  });

  it('the CLI lists and finds in the others, with a warning naming it', async () => {
    const env = cliEnv({ TIDEMARK_PASSWORD: PW });
    const snaps = await runCli(['-r', repoDir, '--json', 'snapshots'], env);
    expect(snaps.code).toBe(0);
    expect((snaps.json as { id: string }[]).map((s) => s.id)).toEqual([ids[0]]);
    expect(snaps.stderr).toContain(`snapshot ${ids[1].slice(0, 8)} is damaged`);
    expect(snaps.stderr).toContain('tidemark repair');
    const found = await runCli(['-r', repoDir, '--json', 'find', 'b.bin'], env);
    expect(found.code).toBe(0);
    expect(JSON.stringify(found.json)).toContain('b.bin');
    expect(found.stderr).toContain(`snapshot ${ids[1].slice(0, 8)} is damaged`);
  }, 60_000);

  it('the catalog syncs the others, reports it, and keeps what it knew of it', async () => {
    const catalog = new Catalog('', { memory: true });
    try {
      const repositoryId = catalog.addRepository({ name: 'r', location: repoDir, options: {} }).id;
      const repo = await open();
      try {
        await fs.writeFile(snapFile(), good);
        expect((await syncRepository(catalog, repositoryId, repo)).damaged).toEqual([]);
        expect(catalog.listSnapshots(repositoryId).map((s) => s.snapId)).toEqual(ids);
        await fs.writeFile(snapFile(), bad);
        const r = await syncRepository(catalog, repositoryId, repo);
        expect(r.damaged).toEqual([ids[1]]);
        expect(r.removed).toBe(0);
        expect(catalog.listSnapshots(repositoryId).map((s) => s.snapId)).toEqual(ids);
      } finally {
        await repo.close();
      }
      // a catalog that never knew it syncs the others
      const fresh = catalog.addRepository({ name: 'r2', location: repoDir + '-copy', options: {} }).id;
      const repo2 = await open();
      try {
        expect((await syncRepository(catalog, fresh, repo2)).damaged).toEqual([ids[1]]);
        expect(catalog.listSnapshots(fresh).map((s) => s.snapId)).toEqual([ids[0]]);
      } finally {
        await repo2.close();
      }
    } finally {
      await fs.writeFile(snapFile(), bad);
      catalog.close();
    }
  });

  it('prune refuses before deleting anything; a backup compares with the newest readable snapshot', async () => {
    const before = await listRepoFiles(repoDir);
    let repo = await open();
    try {
      const err = await prune(repo).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(CorruptObjectError);
      expect((err as Error).message).toContain('prune deletes nothing');
      expect(await listRepoFiles(repoDir)).toEqual(before);

      const log: string[] = [];
      const r = await backup(repo, { paths: [src], log: (l) => log.push(l) });
      expect(r.status).toBe('completed');
      expect(log.join('\n')).toContain(
        `snapshot ${ids[1].slice(0, 12)} is damaged and not used as the parent`,
      );
      const snap = await repo.loadSnapshot(r.snapshotId);
      expect(snap.parent).toBe(ids[0]);
    } finally {
      await repo.close();
    }
    // the new snapshot holds today's files, byte for byte
    repo = await open();
    try {
      const target = path.join(work, 'restored');
      const snap = (await repo.listSnapshots({ damaged: () => {} })).at(-1)!;
      await restore(repo, { snapshot: snap.id, target });
      const out = path.join(target, src);
      expect(await fs.readFile(path.join(out, 'a.txt'), 'utf8')).toBe('second');
      expect(await fs.readFile(path.join(out, 'docs/c.bin'))).toEqual(randomBytes(150_000, 2));
    } finally {
      await repo.close();
    }
  }, 120_000);
});
