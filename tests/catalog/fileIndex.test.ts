import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import { syncRepository, rebuildRepository } from '../../src/main/engine/catalog/sync.js';
import { CATALOG_FILE, schemaVersion, MIGRATIONS } from '../../src/main/engine/catalog/db.js';
import { FakeRepo, type FakeDir } from './fakeRepo.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-catalog-'));
});
afterEach(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

function homeV1(): FakeDir {
  return {
    home: {
      ann: {
        Documents: { 'Annual Report 2024.pdf': 'r1', 'notes.txt': 'n1', taxes: { '2023.xlsx': 't23' } },
        Photos: { 'IMG_0001.JPG': 'p1', 'IMG_0002.JPG': 'p2' },
      },
    },
    etc: { hosts: 'h' },
  };
}

describe('file index', () => {
  it('creates the schema with migrations, WAL and foreign keys', () => {
    const c = new Catalog(dir);
    expect(schemaVersion(c.db)).toBe(MIGRATIONS.length);
    expect(c.db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(c.db.pragma('foreign_keys', { simple: true })).toBe(1);
    c.close();
    // reopening does not re-run migrations
    const c2 = new Catalog(dir);
    expect(schemaVersion(c2.db)).toBe(MIGRATIONS.length);
    c2.close();
  });

  it('browses, searches and lists versions; unchanged folders are indexed once', async () => {
    const repo = new FakeRepo();
    const v1 = homeV1();
    repo.addSnapshot(v1, '2025-01-01T10:00:00Z');
    const v2 = homeV1();
    ((v2.home as FakeDir).ann as any).Documents['notes.txt'] = 'n2 changed';
    ((v2.home as FakeDir).ann as any).Documents['report draft.docx'] = 'd';
    repo.addSnapshot(v2, '2025-01-02T10:00:00Z');
    repo.addSnapshot(v2, '2025-01-03T10:00:00Z');

    const c = new Catalog(dir);
    const r = c.addRepository({ name: 'usb', location: '/mnt/usb', options: {} });
    const res = await syncRepository(c, r.id, repo);
    expect(res.added).toBe(3);
    expect(res.indexed).toBe(3);
    // v1: 7 dirs (/ home ann Documents taxes Photos etc); v2 rewrites /, home, ann, Documents only;
    // v3 is identical to v2, so it reuses its root.
    expect(res.index.newDirVersions).toBe(7 + 4);
    expect(res.index.dirsVisited).toBe(7 + 7 + 1);
    expect(res.index.newEntries).toBe(12 + 9);
    const snaps = c.listSnapshots(r.id);
    expect(snaps.map((s) => s.indexed)).toEqual([true, true, true]);

    const docs = c.files.list(snaps[1].id, '/home/ann/Documents')!;
    expect(docs.map((e) => [e.name, e.type, e.size])).toEqual([
      ['Annual Report 2024.pdf', 'file', 2],
      ['notes.txt', 'file', 10],
      ['report draft.docx', 'file', 1],
      ['taxes', 'dir', null],
    ]);
    expect(docs[0].path).toBe('/home/ann/Documents/Annual Report 2024.pdf');
    expect(docs[0].mtime).toBe(1700000000000);
    expect(c.files.list(snaps[0].id, '/home/ann/Documents')!.map((e) => e.name)).toEqual([
      'Annual Report 2024.pdf',
      'notes.txt',
      'taxes',
    ]);
    expect(c.files.list(snaps[0].id, '/')!.map((e) => e.name)).toEqual(['etc', 'home']);
    // a path that is a file, or missing, is not a listable directory
    expect(c.files.list(snaps[0].id, '/etc/hosts')).toBeUndefined();
    expect(c.files.list(snaps[0].id, '/nope')).toBeUndefined();

    // case-insensitive substring search across snapshots
    const hits = c.files.search('report');
    expect(hits.map((h) => [h.path, h.snapshots.length])).toEqual([
      ['/home/ann/Documents/Annual Report 2024.pdf', 3],
      ['/home/ann/Documents/report draft.docx', 2],
    ]);
    expect(hits[1].snapshots).toEqual([snaps[2].id, snaps[1].id]); // newest first
    expect(c.files.search('img_').map((h) => h.name)).toEqual(['IMG_0001.JPG', 'IMG_0002.JPG']);
    expect(c.files.search('2').length).toBeGreaterThan(0); // short queries scan names
    expect(c.files.search('zzz')).toEqual([]);
    expect(c.files.search('*.JPG').map((h) => h.name)).toEqual(['IMG_0001.JPG', 'IMG_0002.JPG']);
    expect(c.files.search('img_000?.jpg').map((h) => h.name)).toEqual(['IMG_0001.JPG', 'IMG_0002.JPG']);
    expect(c.files.search('*.t?t').map((h) => h.path)).toEqual(['/home/ann/Documents/notes.txt']);
    expect(c.files.search('report*').map((h) => h.name)).toEqual(['report draft.docx']); // anchored at the start
    expect(c.files.search('*')).toHaveLength(13); // every path ever indexed
    expect(c.files.search('%')).toEqual([]); // LIKE wildcards are literal
    expect(c.files.search('report', { snapshots: [snaps[0].id] }).map((h) => h.name)).toEqual([
      'Annual Report 2024.pdf',
    ]);

    const hist = c.files.history('/home/ann/Documents/notes.txt');
    expect(hist.map((h) => [h.snapId, h.size, h.changed])).toEqual([
      [snaps[0].snapId, 2, true],
      [snaps[1].snapId, 10, true],
      [snaps[2].snapId, 10, false],
    ]);
    expect(c.files.history('/home/ann/Photos/IMG_0001.JPG').map((h) => h.changed)).toEqual([
      true,
      false,
      false,
    ]);
    expect(c.files.history('/missing/file')).toEqual([]);
    c.close();
  });

  it('rebuilding a deleted catalog gives the same browse, search and version results', async () => {
    const repo = new FakeRepo();
    let tree = homeV1();
    for (let i = 0; i < 5; i++) {
      tree = JSON.parse(JSON.stringify(tree));
      (tree.home as any).ann.Documents[`day${i}.txt`] = `content ${i}`;
      (tree.home as any).ann.Documents['notes.txt'] = `notes v${i % 2}`;
      repo.addSnapshot(tree, `2025-02-0${i + 1}T08:00:00Z`);
    }
    const snapshotResults = (c: Catalog) => {
      const rows = c.listSnapshots();
      return {
        snaps: rows.map((s) => [s.snapId, s.time, s.indexed]),
        lists: rows.map((s) => [
          c.files.list(s.id, '/'),
          c.files.list(s.id, '/home/ann/Documents'),
          c.files.list(s.id, '/home/ann/Documents/taxes'),
        ]),
        search: c.files
          .search('.txt')
          .map((h) => [h.path, h.snapshots.map((id) => c.snapshotById(id)!.snapId)]),
        history: c.files.history('/home/ann/Documents/notes.txt').map((h) => ({ ...h, snapshot: 0 })),
      };
    };
    const c1 = new Catalog(dir);
    const r1 = c1.addRepository({ name: 'usb', location: '/mnt/usb', options: {} });
    await syncRepository(c1, r1.id, repo);
    const before = snapshotResults(c1);
    c1.close();
    for (const f of fs.readdirSync(dir)) if (f.startsWith(CATALOG_FILE)) fs.rmSync(path.join(dir, f));
    expect(fs.readdirSync(dir)).toEqual([]);

    const c2 = new Catalog(dir);
    const r2 = c2.addRepository({ name: 'usb', location: '/mnt/usb', options: {} });
    await rebuildRepository(c2, r2.id, repo);
    expect(snapshotResults(c2)).toEqual(before);
    // rebuilding in place is idempotent too
    await rebuildRepository(c2, r2.id, repo);
    expect(snapshotResults(c2)).toEqual(before);
    expect(before.history.map((h) => h.changed)).toEqual([true, true, true, true, true]);
    expect(before.search.length).toBe(6);
    c2.close();
  });

  it('drops forgotten snapshots and garbage-collects rows no snapshot uses', async () => {
    const repo = new FakeRepo();
    repo.addSnapshot({ a: { 'old.txt': '1' } }, '2025-01-01T00:00:00Z');
    repo.addSnapshot({ a: { 'new.txt': '2' } }, '2025-01-02T00:00:00Z');
    const c = new Catalog(dir);
    const r = c.addRepository({ name: 'r', location: '/r', options: {} });
    await syncRepository(c, r.id, repo);
    expect(c.files.search('old').length).toBe(1);
    repo.snapshots.shift();
    const res = await syncRepository(c, r.id, repo);
    expect(res.removed).toBe(1);
    expect(c.files.search('old')).toEqual([]);
    expect(c.db.prepare('SELECT count(*) FROM dir_versions').pluck().get()).toBe(2);
    expect(c.db.prepare("SELECT count(*) FROM names WHERE name = 'old.txt'").pluck().get()).toBe(0);
    expect(c.files.search('new').map((h) => h.path)).toEqual(['/a/new.txt']);
    c.close();
  });

  it('a second snapshot of an unchanged tree loads no trees', async () => {
    const repo = new FakeRepo();
    repo.addSnapshot(homeV1(), '2025-01-01T00:00:00Z');
    repo.addSnapshot(homeV1(), '2025-01-02T00:00:00Z');
    const c = new Catalog(dir);
    const r = c.addRepository({ name: 'r', location: '/r', options: {} });
    const res = await syncRepository(c, r.id, repo);
    expect(repo.loadTreeCalls).toBe(7);
    expect(res.index.reusedDirVersions).toBe(1);
    const snaps = c.listSnapshots(r.id);
    expect(c.files.snapshotDirCount(snaps[1].id)).toBe(7);
    expect(c.files.list(snaps[1].id, '/home/ann/Photos')!.length).toBe(2);
    c.close();
  });

  it('syncs of two repositories at once take turns and both end up indexed', async () => {
    const a = new FakeRepo();
    const b = new FakeRepo();
    for (let i = 0; i < 3; i++) {
      a.addSnapshot(
        { a: { [`file${i}.txt`]: `a${i}`, deep: { x: { y: 'z' } } } },
        `2025-01-0${i + 1}T00:00:00Z`,
      );
      b.addSnapshot({ b: { [`other${i}.txt`]: `b${i}` } }, `2025-01-0${i + 1}T00:00:00Z`);
    }
    const c = new Catalog(dir);
    const ra = c.addRepository({ name: 'a', location: '/a', options: {} });
    const rb = c.addRepository({ name: 'b', location: '/b', options: {} });
    const [sa, sb] = await Promise.all([syncRepository(c, ra.id, a), syncRepository(c, rb.id, b)]);
    expect([sa.indexed, sb.indexed]).toEqual([3, 3]);
    expect(c.listSnapshots().every((s) => s.indexed)).toBe(true);
    expect(c.files.search('file', { repositoryId: ra.id }).map((h) => h.path)).toEqual([
      '/a/file0.txt',
      '/a/file1.txt',
      '/a/file2.txt',
    ]);
    expect(c.files.search('other', { repositoryId: ra.id })).toEqual([]);
    expect(c.files.search('other2', { repositoryId: rb.id }).map((h) => h.snapshots.length)).toEqual([1]);
    c.close();
  });

  it('stays correct when its lookup caches overflow while indexing', async () => {
    const tree: FakeDir = {};
    for (let d = 0; d < 30; d++) {
      const sub: FakeDir = {};
      for (let f = 0; f < 40; f++) sub[`f${f % 25}-${d % 7}.txt`] = `${d}/${f}`;
      tree[`dir${d}`] = { inner: sub, [`same${d % 3}`]: { x: 'y' } };
    }
    const repo = new FakeRepo();
    repo.addSnapshot(tree, '2025-01-01T00:00:00Z');
    tree.dir0 = { changed: 'yes' };
    repo.addSnapshot(tree, '2025-01-02T00:00:00Z');
    const small = new Catalog(path.join(dir, 'small'));
    small.files.cacheLimits = { names: 5, dirs: 3 };
    const big = new Catalog(path.join(dir, 'big'));
    for (const c of [small, big]) {
      const r = c.addRepository({ name: 'r', location: '/r', options: {} });
      await syncRepository(c, r.id, repo);
    }
    const view = (c: Catalog) => {
      const snaps = c.listSnapshots();
      return {
        lists: snaps.map((s) => [c.files.list(s.id, '/dir5/inner'), c.files.list(s.id, '/dir0')]),
        search: c.files.search('f1').map((h) => [h.path, h.snapshots.length]),
        names: c.db.prepare('SELECT count(*) FROM names').pluck().get(),
        dirs: c.db.prepare('SELECT count(*) FROM dirs').pluck().get(),
      };
    };
    expect(view(small)).toEqual(view(big));
    expect(view(small).search.length).toBeGreaterThan(100);
    small.close();
    big.close();
  });

  it('gives its caches back after each sync, and syncs one snapshot at a time index the same as all at once', async () => {
    const trees: FakeDir[] = [];
    for (let v = 0; v < 4; v++) {
      const tree: FakeDir = {};
      for (let d = 0; d < 12; d++) {
        const sub: FakeDir = {};
        for (let f = 0; f < 15; f++) sub[`f${f}-${(d + v) % 5}.txt`] = `${d}/${f}/${f % (v + 2)}`;
        tree[`dir${d}`] = { inner: sub, [`v${v}`]: { x: `${v}` }, 'stable.txt': `${d}-${v >> 1}` };
      }
      trees.push(tree);
    }
    const repo = new FakeRepo();
    const stepwise = new Catalog(path.join(dir, 'stepwise'));
    const rs = stepwise.addRepository({ name: 'r', location: '/r', options: {} });
    for (const [v, tree] of trees.entries()) {
      repo.addSnapshot(tree, `2025-01-0${v + 1}T00:00:00Z`);
      expect((await syncRepository(stepwise, rs.id, repo)).indexed).toBe(1);
      // a long-lived process (the app) keeps nothing of an indexing run between runs
      expect(stepwise.files.cacheSizes()).toEqual({ names: 0, dirs: 0 });
    }
    const atOnce = new Catalog(path.join(dir, 'at-once'));
    const ra = atOnce.addRepository({ name: 'r', location: '/r', options: {} });
    expect((await syncRepository(atOnce, ra.id, repo)).indexed).toBe(4);
    expect(atOnce.files.cacheSizes()).toEqual({ names: 0, dirs: 0 });
    const view = (c: Catalog) => {
      const snaps = c.listSnapshots();
      return {
        lists: snaps.map((s) => [c.files.list(s.id, '/dir3/inner'), c.files.list(s.id, '/')]),
        search: c.files.search('f1').map((h) => [h.path, h.snapshots.length]),
        versions: c.files.history('/dir2/stable.txt').map((v) => [v.time, v.size, v.changed]),
        names: c.db.prepare('SELECT count(*) FROM names').pluck().get(),
        dirs: c.db.prepare('SELECT count(*) FROM dirs').pluck().get(),
        entries: c.db.prepare('SELECT count(*) FROM entries').pluck().get(),
      };
    };
    expect(view(stepwise)).toEqual(view(atOnce));
    expect(view(stepwise).search.length).toBeGreaterThan(20);
    expect(view(stepwise).versions.length).toBeGreaterThan(1);
    stepwise.close();
    atOnce.close();
  });

  it('finds non-ASCII names in the usual case spellings', async () => {
    const repo = new FakeRepo();
    repo.addSnapshot(
      { Bilder: { 'Über uns.txt': '1', 'ÄRGER.md': '2', 'straße.pdf': '3', 'Ökologie.doc': '4' } },
      '2025-01-01T00:00:00Z',
    );
    const c = new Catalog(dir);
    const r = c.addRepository({ name: 'r', location: '/r', options: {} });
    await syncRepository(c, r.id, repo);
    expect(c.files.search('über').map((h) => h.name)).toEqual(['Über uns.txt']);
    expect(c.files.search('ärger').map((h) => h.name)).toEqual(['ÄRGER.md']);
    expect(c.files.search('STRASSE')).toEqual([]); // no ß folding
    expect(c.files.search('straße').map((h) => h.name)).toEqual(['straße.pdf']);
    expect(c.files.search('ökolog').map((h) => h.name)).toEqual(['Ökologie.doc']);
    expect(c.files.search('ök*').map((h) => h.name)).toEqual(['Ökologie.doc']);
    c.close();
  });

  it('tells versions apart by content even when size and mtime are equal', async () => {
    const repo = new FakeRepo();
    repo.addSnapshot({ d: { 'a.bin': 'AAAA' } }, '2025-01-01T00:00:00Z');
    repo.addSnapshot({ d: { 'a.bin': 'BBBB' } }, '2025-01-02T00:00:00Z');
    repo.addSnapshot({ d: { 'a.bin': 'BBBB', 'b.bin': 'x' } }, '2025-01-03T00:00:00Z');
    const c = new Catalog(dir);
    const r = c.addRepository({ name: 'r', location: '/r', options: {} });
    await syncRepository(c, r.id, repo);
    const h = c.files.history('/d/a.bin');
    expect(h.map((v) => [v.size, v.mtime, v.changed])).toEqual([
      [4, 1700000000000, true],
      [4, 1700000000000, true],
      [4, 1700000000000, false],
    ]);
    expect(h[0].fingerprint).not.toBe(h[1].fingerprint);
    c.close();
  });
});
