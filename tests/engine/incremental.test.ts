import { describe, it, expect, beforeAll } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { diff, lookup } from '../../src/main/engine/repo/browse.js';
import type { SnapshotEntry } from '../../src/main/engine/repo/types.js';
import {
  tempDir,
  writeTree,
  randomBytes,
  describeTree,
  expectSameTrees,
  dirSize,
} from '../helpers/fixtures.js';

const MiB = 1024 * 1024;

describe('incremental backups and deduplication', () => {
  let work: string;
  let src: string;
  let repoDir: string;
  let repo: Repository;

  // the tree ID of the source folder (the snapshot root also records /tmp, which other tests touch)
  const srcTree = async (snap: SnapshotEntry) => (await lookup(repo, snap, src)).treeId;

  beforeAll(async () => {
    work = await tempDir('tm-inc-');
    src = path.join(work, 'src');
    repoDir = path.join(work, 'repo');
    await writeTree(src, {
      docs: {
        dir: {
          'a.txt': 'alpha\n'.repeat(1000),
          'b.txt': 'beta\n'.repeat(1000),
          photos: { dir: { 'p1.jpg': randomBytes(2 * MiB, 11), 'p2.jpg': randomBytes(MiB, 12) } },
        },
      },
      'big.bin': randomBytes(100 * MiB, 13),
      'notes.md': '# notes\n',
    });
    repo = await Repository.init(new LocalBackend(repoDir), 'pw', { kdf: { N: 1024 } });
  });

  it('a second backup of an unchanged tree reads nothing and adds (almost) nothing', async () => {
    const first = await backup(repo, { paths: [src] });
    const sizeAfterFirst = await dirSize(repoDir);
    const second = await backup(repo, { paths: [src] });
    expect(second.snapshot.parent).toBe(first.snapshotId);
    expect(second.snapshot.stats.bytesRead).toBe(0);
    expect(second.snapshot.stats.filesRead).toBe(0);
    expect(second.snapshot.stats.filesUnchanged).toBe(first.snapshot.stats.files);
    expect(await srcTree(second.snapshot)).toBe(await srcTree(first.snapshot)); // the source's subtree kept its ID
    const added = (await dirSize(repoDir)) - sizeAfterFirst;
    expect(added).toBeLessThan(4096); // just the snapshot manifest (and a lock, removed)
    // no file data; at most the trees of /tmp and / when other programs touched /tmp meanwhile
    expect(second.snapshot.stats.newBytes).toBeLessThan(2048);
  });

  it('re-reads only files whose size, mtime, ctime or inode changed', async () => {
    await fs.appendFile(path.join(src, 'notes.md'), 'more\n');
    const r = await backup(repo, { paths: [src] });
    expect(r.snapshot.stats.filesRead).toBe(1);
    expect(r.snapshot.stats.bytesRead).toBe((await fs.stat(path.join(src, 'notes.md'))).size);
    // a change of ctime only (chmod) makes the file be read again, but adds no data
    await fs.chmod(path.join(src, 'docs/a.txt'), 0o600);
    const r2 = await backup(repo, { paths: [src] });
    expect(r2.snapshot.stats.filesRead).toBe(1);
    expect(r2.snapshot.stats.newBytes).toBeLessThan(32 * 1024); // only the changed trees, no file data
    // a touch with an old mtime but same size is still detected (ctime changed)
    await fs.writeFile(path.join(src, 'docs/b.txt'), 'BETA\n'.repeat(1000));
    await fs.utimes(path.join(src, 'docs/b.txt'), new Date(2000, 1, 1), new Date(2000, 1, 1));
    const r3 = await backup(repo, { paths: [src] });
    expect(r3.snapshot.stats.filesRead).toBe(1);
    const changes = [];
    for await (const d of diff(repo, r2.snapshot.tree, r3.snapshot.tree)) changes.push(`${d.kind} ${d.path}`);
    expect(changes).toContain(`modified ${src}/docs/b.txt`);
  });

  it('moving a folder adds only tree data', async () => {
    const sizeBefore = await dirSize(repoDir);
    await fs.rename(path.join(src, 'docs/photos'), path.join(src, 'photos-moved'));
    const r = await backup(repo, { paths: [src] });
    const added = (await dirSize(repoDir)) - sizeBefore;
    expect(r.snapshot.stats.newBytes).toBeLessThan(64 * 1024);
    expect(added).toBeLessThan(64 * 1024);
  });

  it('inserting one byte at the start of a 100 MiB file adds under 3 MiB', async () => {
    const sizeBefore = await dirSize(repoDir);
    const big = path.join(src, 'big.bin');
    const data = await fs.readFile(big);
    await fs.writeFile(big, Buffer.concat([Buffer.from([7]), data]));
    const r = await backup(repo, { paths: [src] });
    const added = (await dirSize(repoDir)) - sizeBefore;
    expect(r.snapshot.stats.bytesRead).toBe(100 * MiB + 1);
    expect(added).toBeLessThan(3 * MiB);
    // and it restores exactly
    const target = path.join(work, 'restored');
    await restore(repo, { snapshot: r.snapshotId, target, relativeTo: src });
    expectSameTrees(await describeTree(src), await describeTree(target));
  });

  it('excludes names and paths', async () => {
    await writeTree(path.join(src, 'cache'), { 'x.tmp': 'tmp', 'keep.txt': 'keep' });
    const r = await backup(repo, { paths: [src], excludes: ['*.tmp', `${src}/photos-moved`] });
    const names: string[] = [];
    const { walk } = await import('../../src/main/engine/repo/browse.js');
    for await (const e of walk(repo, r.snapshot.tree)) names.push(e.path);
    expect(names).toContain(`${src}/cache/keep.txt`);
    expect(names).not.toContain(`${src}/cache/x.tmp`);
    expect(names.some((n) => n.startsWith(`${src}/photos-moved`))).toBe(false);
  });

  it('a forced full backup re-reads everything and produces the same tree', async () => {
    const a = await backup(repo, { paths: [src] });
    const b = await backup(repo, { paths: [src], forceFull: true });
    expect(b.snapshot.stats.filesRead).toBe(b.snapshot.stats.files);
    expect(await srcTree(b.snapshot)).toBe(await srcTree(a.snapshot));
    expect(b.snapshot.stats.newBytes).toBeLessThan(2048); // only ancestor trees, never file data
  });
});
