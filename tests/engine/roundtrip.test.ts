import { describe, it, expect, beforeAll } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { check } from '../../src/main/engine/check/index.js';
import { nanosecondTimes } from '../../src/main/engine/restore/times.js';
import {
  tempDir,
  writeTree,
  randomBytes,
  describeTree,
  expectSameTrees,
  isRoot,
} from '../helpers/fixtures.js';

const OLD = new Date('2001-02-03T04:05:06.789Z');
const BAD_TARGET = Buffer.concat([Buffer.from('to-'), Buffer.from([0xff, 0xfe, 0x80])]);

describe('metadata and content round-trip', () => {
  let work: string;
  let src: string;
  let repo: Repository;

  beforeAll(async () => {
    work = await tempDir('tm-rt-');
    src = path.join(work, 'src');
    await writeTree(src, {
      'hello.txt': 'hello world\n',
      'empty.txt': '',
      'random.bin': randomBytes(3 * 1024 * 1024 + 17, 2),
      'text.log': 'line of compressible text\n'.repeat(50_000),
      'exec.sh': { file: '#!/bin/sh\necho hi\n', mode: 0o755 },
      'private.key': { file: 'secret', mode: 0o600, mtime: OLD },
      // permission bits the umask would strip, special bits, read-only: created with their mode or given it
      'group-writable.txt': { file: 'shared', mode: 0o666 },
      'setuid.bin': { file: 'runs as its owner', mode: 0o4755 },
      'read-only.txt': { file: 'do not edit', mode: 0o444 },
      'setgid-dir': { dir: { 'x.txt': 'x' }, mode: 0o2750 },
      'owned.txt': { file: 'owned by 1234', ...(isRoot ? { uid: 1234, gid: 4321 } : {}) },
      'link-rel': { symlink: 'hello.txt' },
      'link-abs': { symlink: '/nonexistent/target' },
      'link-loop-a': { symlink: 'link-loop-b' },
      'link-loop-b': { symlink: 'link-loop-a' },
      emptydir: { dir: {} },
      nested: { dir: { a: { dir: { b: { dir: { 'c.txt': 'deep' } } } } } },
      'hard1.txt': 'shared by two names',
      'hard2.txt': { hardlinkTo: 'hard1.txt' },
      'ünïcødé 名前.txt': 'unicode name',
    });
    // a name that is not valid UTF-8
    await fs.writeFile(
      Buffer.concat([Buffer.from(src + '/bad-'), Buffer.from([0xff, 0xfe, 0x80]), Buffer.from('.txt')]),
      'latin1 name',
    );
    // a symlink whose target is not valid UTF-8 (restored byte for byte)
    await fs.symlink(BAD_TARGET, path.join(src, 'link-bad-target'));
    // a very long path (> 1000 bytes) made of long names
    let deep = src;
    for (let i = 0; i < 5; i++) deep = path.join(deep, `${'long-folder-name-'.repeat(14)}${i}`);
    await fs.mkdir(deep, { recursive: true });
    await fs.writeFile(path.join(deep, 'at-the-bottom.txt'), 'deep file');
    // a sparse file: 64 MiB with data at the start, middle and end
    const fh = await fs.open(path.join(src, 'sparse.img'), 'w');
    await fh.write(randomBytes(100_000, 3), 0, 100_000, 0);
    await fh.write(randomBytes(5000, 4), 0, 5000, 32 * 1024 * 1024);
    await fh.truncate(64 * 1024 * 1024);
    await fh.close();
    await fs.utimes(path.join(src, 'hello.txt'), OLD, new Date('2020-01-01T00:00:00.123456Z'));
    repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', { kdf: { N: 1024 } });
  });

  it('restores every byte and every piece of metadata', async () => {
    const r = await backup(repo, { paths: [src] });
    expect(r.status).toBe('completed');
    const target = path.join(work, 'restored');
    const rr = await restore(repo, { snapshot: r.snapshotId, target, relativeTo: src });
    expect(rr.errors).toEqual([]);
    expectSameTrees(
      await describeTree(src, { dirMtime: true }),
      await describeTree(target, { dirMtime: true }),
    );
    if (isRoot) expect((await fs.stat(path.join(target, 'owned.txt'))).uid).toBe(1234);
    expect(await fs.readlink(path.join(target, 'link-bad-target'), { encoding: 'buffer' })).toEqual(
      BAD_TARGET,
    );
    // hardlinks are restored as links
    const [a, b] = await Promise.all([
      fs.stat(path.join(target, 'hard1.txt')),
      fs.stat(path.join(target, 'hard2.txt')),
    ]);
    expect(a.ino).toBe(b.ino);
    // the sparse file is restored sparse: far fewer blocks than its size
    const sp = await fs.stat(path.join(target, 'sparse.img'));
    expect(sp.size).toBe(64 * 1024 * 1024);
    expect(sp.blocks * 512).toBeLessThan(16 * 1024 * 1024);
    // mtime survives to the nanosecond (native utimensat; the fallback is exact to about a microsecond)
    for (const name of ['hello.txt', 'random.bin', 'link-rel', 'nested', 'read-only.txt', 'setuid.bin']) {
      const want = (await fs.lstat(path.join(src, name), { bigint: true })).mtimeNs;
      const got = (await fs.lstat(path.join(target, name), { bigint: true })).mtimeNs;
      if (nanosecondTimes) expect(got).toBe(want);
      else expect(Math.abs(Number(got - want)) / 1000).toBeLessThan(2);
    }
    const report = await check(repo, { readData: true });
    expect(report.problems).toEqual([]);
    expect(report.unreferencedPacks).toEqual([]); // a backup leaves no empty or stray packs
    expect(report.ok).toBe(true);
  });

  it('restores in place to the original absolute paths with target "/"-style layout', async () => {
    const r = await backup(repo, { paths: [path.join(src, 'nested')] });
    const target = path.join(work, 'layout');
    await restore(repo, { snapshot: r.snapshotId, target });
    expect(await fs.readFile(path.join(target, src, 'nested/a/b/c.txt'), 'utf8')).toBe('deep');
  });

  it('backs up and restores a file larger than 4 GiB', async () => {
    const big = path.join(work, 'big');
    await fs.mkdir(big);
    const fh = await fs.open(path.join(big, 'huge.img'), 'w');
    const marker = randomBytes(1 << 20, 9);
    await fh.write(marker, 0, marker.length, 0);
    await fh.write(marker, 0, marker.length, 4 * 1024 * 1024 * 1024 + 12345);
    await fh.truncate(4 * 1024 * 1024 * 1024 + 12345 + (1 << 20) + 99);
    await fh.close();
    const r = await backup(repo, { paths: [big] });
    expect(r.snapshot.stats.totalBytes).toBe(4 * 1024 * 1024 * 1024 + 12345 + (1 << 20) + 99);
    const target = path.join(work, 'big-restored');
    await restore(repo, { snapshot: r.snapshotId, target, relativeTo: big });
    const out = await fs.open(path.join(target, 'huge.img'), 'r');
    const st = await out.stat();
    expect(st.size).toBe(4 * 1024 * 1024 * 1024 + 12345 + (1 << 20) + 99);
    const back = Buffer.alloc(marker.length);
    await out.read(back, 0, back.length, 4 * 1024 * 1024 * 1024 + 12345);
    expect(back.equals(marker)).toBe(true);
    await out.read(back, 0, back.length, 0);
    expect(back.equals(marker)).toBe(true);
    expect(st.blocks * 512).toBeLessThan(64 * 1024 * 1024); // restored sparse
    await out.close();
  }, 180_000);
});
