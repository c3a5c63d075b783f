import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import { KeyFileSecretStore, secretKeys } from '../../src/main/engine/catalog/secrets.js';
import Database from 'better-sqlite3';
import { MIGRATIONS, migrate, openCatalogDb, schemaVersion } from '../../src/main/engine/catalog/db.js';
import { splitSecretOptions, storeRepositorySecrets } from '../../src/main/engine/schedule/engine.js';
import { syncRepository } from '../../src/main/engine/catalog/sync.js';
import { FakeRepo } from './fakeRepo.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-catalog-crud-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('KeyFileSecretStore', () => {
  it('keeps secrets in a 0600 file, survives reopening, deletes', async () => {
    const s = new KeyFileSecretStore(dir);
    expect(await s.get('x')).toBeUndefined();
    await s.set(secretKeys.repositoryPassword(1), 'hunter2');
    await s.set('other', 'v');
    if (process.platform !== 'win32') expect(fs.statSync(s.file).mode & 0o777).toBe(0o600);
    const again = new KeyFileSecretStore(dir);
    expect(await again.get('repository/1/password')).toBe('hunter2');
    await again.delete('other');
    expect(await s.get('other')).toBeUndefined();
    expect(fs.readdirSync(dir)).toEqual(['secrets.json']); // no temp files left behind
    if (process.platform !== 'win32') {
      fs.chmodSync(s.file, 0o644);
      await s.get('x');
      expect(fs.statSync(s.file).mode & 0o777).toBe(0o600);
    }
  });

  it('splits backend options so secret keys go to the store', async () => {
    const { plain, secret } = splitSecretOptions({
      endpoint: 'http://x',
      accessKeyId: 'AK',
      secretAccessKey: 'SK',
    });
    expect(plain).toEqual({ endpoint: 'http://x', accessKeyId: 'AK' });
    expect(secret).toEqual({ secretAccessKey: 'SK' });
    const s = new KeyFileSecretStore(dir);
    await storeRepositorySecrets(s, 7, { password: 'pw', options: secret });
    expect(await s.get('repository/7/option/secretAccessKey')).toBe('SK');
    expect(await s.get('repository/7/password')).toBe('pw');
  });
});

describe('Catalog records', () => {
  it('refuses secrets in repository options', () => {
    const c = new Catalog(dir);
    expect(() =>
      c.addRepository({ name: 's3', location: 's3:host/b', options: { secretAccessKey: 'SK' } }),
    ).toThrow(/secret/);
    expect(() => c.addRepository({ name: 's3', location: 's3:host/b', options: { password: 'x' } })).toThrow(
      /secret/,
    );
    const r = c.addRepository({
      name: 's3',
      location: 's3:host/b',
      options: { accessKeyId: 'AK', region: 'eu' },
    });
    expect(c.getRepository(r.id).options).toEqual({ accessKeyId: 'AK', region: 'eu' });
    c.close();
  });

  it('stores jobs as data, resets the schedule bookmark when the schedule changes, guards repositories', () => {
    const c = new Catalog(dir);
    const r = c.addRepository({ name: 'usb', location: '/mnt/usb', options: {} });
    const j = c.addJob(
      {
        name: 'docs',
        repositoryId: r.id,
        sources: ['/home/a/Documents'],
        excludes: ['*.tmp'],
        schedule: { kind: 'daily', times: ['02:00'] },
        retention: { keepDaily: 7 },
        compressionLevel: 6,
        options: { verifyAfterBackup: true, fullEveryDays: 30 },
        enabled: true,
      },
      1000,
    );
    expect(c.findJob('docs')).toEqual(j);
    expect(c.findJob(j.key)?.id).toBe(j.id);
    expect(j.schedCheckedAt).toBe(1000);
    c.setJobCheckedAt(j.id, 5000);
    expect(c.updateJob(j.id, { compressionLevel: 1 }, 6000).schedCheckedAt).toBe(5000);
    expect(c.updateJob(j.id, { schedule: { kind: 'hourly' } }, 7000).schedCheckedAt).toBe(7000);
    expect(() => c.removeRepository(r.id)).toThrow(/used by 1 job/);
    expect(() => c.addJob({ ...j, name: 'x', sources: [] })).toThrow(/at least one source/);
    const run = c.createRun({ jobId: j.id, trigger: 'manual', status: 'running' });
    c.addRunLog(run.id, [{ t: 1, line: 'a' }]);
    c.addRunLog(run.id, [{ t: 2, line: 'b' }]);
    expect(c.runLog(run.id).map((l) => l.line)).toEqual(['a', 'b']);
    c.removeJob(j.id);
    expect(() => c.getRun(run.id)).toThrow(/not found/); // runs go with their job
    c.removeRepository(r.id);
    expect(c.listRepositories()).toEqual([]);
    c.close();
  });

  it('refuses a catalog written by a newer schema', () => {
    const db = openCatalogDb(dir);
    const v = schemaVersion(db);
    db.pragma(`user_version = ${v + 5}`);
    expect(() => migrate(db)).toThrow(/newer Tidemark/);
    db.close();
  });

  it('resets everything learnt from repositories and learns it again', async () => {
    const c = new Catalog('', { memory: true });
    const r = c.addRepository({ name: 'a', location: '/a', options: {} });
    const f = new FakeRepo();
    f.addSnapshot({ x: { 'hello.txt': 'h' } }, '2025-01-01T00:00:00Z');
    await syncRepository(c, r.id, f);
    expect(c.files.search('hello')).toHaveLength(1);
    c.resetRepositoryCache();
    expect(c.files.search('hello')).toEqual([]);
    expect(c.listSnapshots()).toEqual([]);
    expect(c.db.prepare('SELECT count(*) FROM names').pluck().get()).toBe(1); // only the root's empty name
    expect(c.listRepositories()).toHaveLength(1); // configuration stays
    await syncRepository(c, r.id, f);
    expect(c.files.search('hello').map((h) => h.path)).toEqual(['/x/hello.txt']);
    c.close();
  });

  it('builds the name index after a first bulk load, and restores it if a crash left it dropped', async () => {
    const indexExists = (c: Catalog) =>
      c.db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'entries_by_name'").pluck().get() === 1;
    const c = new Catalog(dir);
    const r = c.addRepository({ name: 'a', location: '/a', options: {} });
    const f = new FakeRepo();
    f.addSnapshot({ x: { 'hello.txt': 'h' } }, '2025-01-01T00:00:00Z');
    let during: boolean | undefined;
    await syncRepository(c, r.id, f, { onIndexed: () => (during = indexExists(c)) });
    expect(during).toBe(false); // dropped while the empty index was bulk-loaded
    expect(indexExists(c)).toBe(true);
    c.db.exec('DROP INDEX entries_by_name'); // as if the process died mid-load
    c.close();
    const again = new Catalog(dir);
    expect(indexExists(again)).toBe(true);
    expect(again.files.search('hello')).toHaveLength(1);
    again.close();
  });

  it('migrates a version-1 catalog forward, keeping its data', () => {
    // a database as version 1 left it
    const v1 = openCatalogDbAt(dir, 1);
    v1.prepare(
      "INSERT INTO repositories(name, location, options, created_at) VALUES ('r', '/r', '{}', 1)",
    ).run();
    v1.prepare(
      `INSERT INTO jobs(key, name, repository_id, sources, schedule, created_at, updated_at)
       VALUES ('job-1', 'j', 1, '["/a"]', '{"kind":"manual"}', 1, 1)`,
    ).run();
    v1.prepare("INSERT INTO runs(job_id, trigger, status) VALUES (1, 'manual', 'running')").run();
    v1.close();
    const c = new Catalog(dir);
    expect(schemaVersion(c.db)).toBe(MIGRATIONS.length);
    expect(c.getRun(1).status).toBe('running');
    expect(c.db.prepare('SELECT owner FROM runs WHERE id = 1').pluck().get()).toBeNull();
    expect(c.failInterruptedRuns()).toBe(1); // no owner recorded: interrupted
    expect(c.findJob('j')?.sources).toEqual(['/a']);
    c.close();
  });
});

function openCatalogDbAt(dir: string, version: number) {
  const db = new Database(path.join(dir, 'catalog.sqlite'));
  migrate(db, MIGRATIONS.slice(0, version));
  return db;
}
