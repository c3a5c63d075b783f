/**
 * The catalog and the JobRunner against the real engine: a repository in a temp folder, real backups,
 * retention through the engine's forget, and a catalog rebuilt from the repository.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import { KeyFileSecretStore } from '../../src/main/engine/catalog/secrets.js';
import { rebuildRepository } from '../../src/main/engine/catalog/sync.js';
import { JobRunner } from '../../src/main/engine/schedule/runner.js';
import {
  createJobEngine,
  openCatalogRepository,
  storeRepositorySecrets,
} from '../../src/main/engine/schedule/engine.js';
import { initRepository } from '../../src/main/engine/repo/repository.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';

let tmp: string;
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-catalog-int-'));
});
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

function write(rel: string, content: string) {
  const p = path.join(tmp, 'src', rel);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
}

describe('catalog with the real engine', () => {
  it('runs jobs, indexes snapshots, applies retention and rebuilds identically', async () => {
    const repoDir = path.join(tmp, 'repo');
    const init = await initRepository(new LocalBackend(repoDir), 'pw-123', { kdf: { N: 1024 } });
    await init.close();
    write('docs/report.txt', 'first version');
    write('docs/notes.md', 'notes');
    write('photos/IMG_0001.jpg', 'jpeg bytes');

    const dataDir = path.join(tmp, 'data');
    const secrets = new KeyFileSecretStore(dataDir);
    const catalog = new Catalog(dataDir);
    const repository = catalog.addRepository({ name: 'local', location: repoDir, options: {} });
    await storeRepositorySecrets(secrets, repository.id, { password: 'pw-123' });
    const job = catalog.addJob({
      name: 'home',
      repositoryId: repository.id,
      sources: [path.join(tmp, 'src')],
      excludes: [],
      schedule: { kind: 'manual' },
      retention: { keepLast: 2 },
      compressionLevel: 3,
      options: { verifyAfterBackup: true, workers: 1 },
      enabled: true,
    });
    const runner = new JobRunner({ catalog, engine: createJobEngine({ secrets }) });

    const r1 = await runner.run(job);
    expect(r1.error).toBeNull();
    // the run's problems go with its status, so a warning names its cause when this fails
    const outcome = (r: { id: number; status: string }) => ({
      status: r.status,
      problems: catalog.runProblems(r.id),
    });
    expect(outcome(r1)).toEqual({ status: 'completed', problems: [] });
    expect(r1.verify).toMatchObject({ ok: true });
    write('docs/report.txt', 'second version, longer');
    const r2 = await runner.run(job);
    write('docs/new.txt', 'added');
    const r3 = await runner.run(job);
    expect([outcome(r2), outcome(r3)]).toEqual([
      { status: 'completed', problems: [] },
      { status: 'completed', problems: [] },
    ]);

    // keepLast 2: the first snapshot is gone from the repository and the catalog
    const snaps = catalog.listSnapshots(repository.id);
    expect(snaps.map((s) => s.snapId)).toEqual([r2.snapshotId, r3.snapshotId]);
    const docsPath = path.join(tmp, 'src', 'docs').split(path.sep).join('/');
    const listing = catalog.files.list(snaps[1].id, docsPath);
    expect(listing?.map((e) => e.name)).toEqual(['new.txt', 'notes.md', 'report.txt']);
    expect(catalog.files.search('img_0001').map((h) => h.path)).toEqual([
      path.join(tmp, 'src', 'photos', 'IMG_0001.jpg').split(path.sep).join('/'),
    ]);
    const hist = catalog.files.history(docsPath + '/report.txt');
    expect(hist.map((h) => [h.size, h.changed])).toEqual([
      [22, true],
      [22, false],
    ]);
    expect(catalog.runSamples(r1.id).length).toBeGreaterThan(0);

    const results = (c: Catalog) => {
      const rows = c.listSnapshots();
      return {
        snaps: rows.map((s) => s.snapId),
        lists: rows.map((s) => c.files.list(s.id, docsPath)),
        search: c.files
          .search('.txt')
          .map((h) => [h.path, h.snapshots.map((id) => c.snapshotById(id)!.snapId)]),
        history: c.files.history(docsPath + '/report.txt').map((h) => ({ ...h, snapshot: 0 })),
      };
    };
    const before = results(catalog);
    catalog.close();

    // delete the catalog database, rebuild it from the repository
    for (const f of fs.readdirSync(dataDir))
      if (f.startsWith('catalog.sqlite')) fs.rmSync(path.join(dataDir, f));
    const fresh = new Catalog(dataDir);
    const repo2 = fresh.addRepository({ name: 'local', location: repoDir, options: {} });
    await storeRepositorySecrets(secrets, repo2.id, { password: 'pw-123' });
    const repo = await openCatalogRepository(secrets, fresh.getRepository(repo2.id));
    try {
      const res = await rebuildRepository(fresh, repo2.id, repo);
      expect(res.indexed).toBe(2);
    } finally {
      await repo.close();
    }
    expect(results(fresh)).toEqual(before);
    fresh.close();
    // the password lives in the 0600 key file, not in the database
    const db = fs.readFileSync(path.join(dataDir, 'catalog.sqlite'));
    expect(db.includes(Buffer.from('pw-123'))).toBe(false);
    if (process.platform !== 'win32') expect(fs.statSync(secrets.file).mode & 0o777).toBe(0o600);
  });

  it("cuts a job's VM disks and databases into fixed-size blocks unless the job turns it off", async () => {
    const repoDir = path.join(tmp, 'repo');
    (await initRepository(new LocalBackend(repoDir), 'pw-123', { kdf: { N: 1024 } })).close();
    // a 64 MiB disk image, sparse but for one page: its zero blocks are one blob
    write('vm/disk.img', '');
    const disk = path.join(tmp, 'src', 'vm', 'disk.img');
    fs.truncateSync(disk, 64 * 1024 * 1024);
    const fd = fs.openSync(disk, 'r+');
    fs.writeSync(fd, Buffer.alloc(4096, 7), 0, 4096, 1 << 20);
    fs.closeSync(fd);
    const dataDir = path.join(tmp, 'data');
    const secrets = new KeyFileSecretStore(dataDir);
    const catalog = new Catalog(dataDir);
    const repository = catalog.addRepository({ name: 'local', location: repoDir, options: {} });
    await storeRepositorySecrets(secrets, repository.id, { password: 'pw-123' });
    const runner = new JobRunner({ catalog, engine: createJobEngine({ secrets }) });
    const blockSizeOf = async (blockFiles: boolean | undefined) => {
      const job = catalog.addJob({
        name: `blocks-${blockFiles}`,
        repositoryId: repository.id,
        sources: [path.join(tmp, 'src')],
        excludes: [],
        schedule: { kind: 'manual' },
        retention: {},
        compressionLevel: 3,
        options: { workers: 1, ...(blockFiles === undefined ? {} : { blockFiles }) },
        enabled: true,
      });
      // a new time, so the file is read again rather than kept as in the other job's snapshot
      fs.utimesSync(disk, new Date(), new Date(Date.now() - Math.random() * 1e9));
      const r = await runner.run(job);
      expect({ status: r.status, problems: catalog.runProblems(r.id) }).toEqual({
        status: 'completed',
        problems: [],
      });
      const repo = await openCatalogRepository(secrets, catalog.getRepository(repository.id));
      try {
        const snap = await repo.loadSnapshot(r.snapshotId!);
        return (await lookup(repo, snap, disk)).node?.blockSize;
      } finally {
        await repo.close();
      }
    };
    expect(await blockSizeOf(undefined)).toBe(4096); // a job option, on unless turned off
    expect(await blockSizeOf(false)).toBeUndefined();
    catalog.close();
  });
});
