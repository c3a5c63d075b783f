// End to end with the backup engine: large files on a loop-mounted ext4 change in place (pwrite, punch-hole,
// append, O_DIRECT); a backup given the block-tracking ranges (ChangeHint.changedRanges) and a full backup
// of the same state must give the same tree, and the tracked snapshot must restore byte for byte.
// Both ways of cutting large files are covered: content-defined chunks (the ranges are widened to the
// previous chunks and re-chunked until the cuts fall back into step) and fixed-size blocks (VM disks and
// databases: exactly the touched blocks are read).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cbtAvailability, directWrite, hasPython, makeLoopExt4, mmapWrite, type LoopFs } from './helpers.js';
import { BlockTracker } from '../../src/main/tracking/blocks/tracker.js';
import { BlockChangeSession, computeChangedRanges } from '../../src/main/tracking/blocks/store.js';
import { loadCbtNative } from '../../src/main/tracking/blocks/native.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { MIN_BLOCK_SIZE } from '../../src/main/engine/backup/blockFiles.js';

const avail = cbtAvailability();
const MiB = 1 << 20;

describe.skipIf(!avail.ok)('backups with block tracking equal full backups', () => {
  let loop: LoopFs;
  let tracker: BlockTracker;
  let repo: Repository;
  beforeAll(async () => {
    loop = makeLoopExt4(512);
    const t = await BlockTracker.start([loop.mnt]);
    if (!t.ok) throw new Error(t.reason);
    tracker = t.tracker;
    repo = await Repository.init(new LocalBackend(path.join(loop.dir, 'repo')), 'pw', { kdf: { N: 1024 } });
  });
  afterAll(async () => {
    await repo?.close();
    tracker?.stop();
    loop?.cleanup();
  });

  const rounds = async (name: string, blockFiles: { minSize: number; patterns: string[] } | false) => {
    const load = loadCbtNative();
    if (!load.ok) throw new Error(load.reason);
    const src = path.join(loop.mnt, name);
    fs.mkdirSync(path.join(src, 'db'), { recursive: true });
    // pwrite, punch-hole + append, O_DIRECT, mmap + msync, truncation (shrink, then extend with a hole),
    // and a copy-on-write rewrite (new file renamed over the old: a new inode, read whole)
    const big = ['vm.img', 'db/mail.store', 'db/pages.db', 'mapped.vmdk', 'db/shrink.db', 'cow.img'].map(
      (n) => path.join(src, n),
    );
    const [, , , fMapped, fShrink, fCow] = big;
    for (const f of big) fs.writeFileSync(f, randomBytes(12 * MiB));
    fs.writeFileSync(path.join(src, 'notes.txt'), 'hello');
    const dsrc = path.join(loop.dir, `direct-src-${name}`);
    fs.writeFileSync(dsrc, randomBytes(16 * 4096));
    const opts = { dir: path.join(loop.dir, `store-${name}`), consumer: 'job', tracker, mapper: load.native };
    const srcTree = async (id: string) => (await lookup(repo, await repo.loadSnapshot(id), src)).treeId;

    let session = await BlockChangeSession.begin([src], opts);
    await computeChangedRanges(big, session);
    let parent = (await backup(repo, { paths: [src], job: 'job', blockFiles })).snapshotId;
    await session.commit(parent);

    for (let round = 0; round < 3; round++) {
      const sizesBefore = big.map((f) => fs.statSync(f).size); // as in the parent snapshot
      const fd = fs.openSync(big[0], 'r+');
      // in-place writes confined to the first 4 MiB, so the engine has whole chunks to reuse after them
      for (let i = 0; i < 20; i++)
        fs.writeSync(fd, randomBytes(3000), 0, 3000, Math.floor(Math.random() * (4 * MiB - 3000)));
      fs.closeSync(fd);
      execFileSync('fallocate', ['-p', '-o', String(MiB * (1 + round)), '-l', String(300_000), big[1]]);
      fs.appendFileSync(big[1], randomBytes(5000));
      directWrite(big[2], dsrc, 100 + round * 37, 8);
      for (let i = 0; i < 5; i++) {
        const off = Math.floor(Math.random() * (fs.statSync(fMapped).size - 70_000));
        if (hasPython()) mmapWrite(fMapped, off, randomBytes(1 + Math.floor(Math.random() * 65536)));
        else fs.writeFileSync(fMapped, randomBytes(4096), { flag: 'r+' }); // (no python3: pwrite at 0)
      }
      if (round < 2) fs.truncateSync(fShrink, fs.statSync(fShrink).size - (1 + round) * 777_777);
      else fs.truncateSync(fShrink, fs.statSync(fShrink).size + 3 * MiB + 5); // extend with a hole
      const cow = fs.readFileSync(fCow);
      randomBytes(1000).copy(cow, Math.floor(Math.random() * (cow.length - 1000)));
      fs.writeFileSync(`${fCow}.tmp`, cow);
      fs.renameSync(`${fCow}.tmp`, fCow);

      session = await BlockChangeSession.begin([src], { ...opts, parentSnapshot: parent });
      const whole: string[] = [];
      const changedRanges = await computeChangedRanges(big, session, {
        onWholeFile: (f, r) => whole.push(`${f}: ${r}`),
      });
      expect(whole).toEqual([`${fCow}: ${whole[0]?.split(': ').slice(1).join(': ')}`]);
      expect(whole[0]).toMatch(/new inode/);
      expect([...changedRanges.values()].every((r) => r.length > 0)).toBe(true);
      const tracked = await backup(repo, {
        paths: [src],
        job: 'job',
        blockFiles,
        parent,
        changeHint: { dirtyDirs: new Set([src, path.join(src, 'db')]), cursor: { round }, changedRanges },
      });
      await session.commit(tracked.snapshotId);
      const full = await backup(repo, { paths: [src], job: 'job', parent, forceFull: true, blockFiles });
      expect(await srcTree(tracked.snapshotId), `round ${round}`).toBe(await srcTree(full.snapshotId));
      // the engine really used the ranges: it read well under what the full backup read
      expect(tracked.snapshot.scanMode).toEqual({ mode: 'blocks' });
      expect(tracked.snapshot.stats.bytesRead).toBeLessThan(0.7 * full.snapshot.stats.bytesRead);
      if (blockFiles) {
        // fixed-size blocks: exactly the blocks the ranges touch, plus a tail that is not whole in both versions
        let expected = 0;
        big.forEach((f, k) => {
          const size = fs.statSync(f).size;
          const B = MIN_BLOCK_SIZE;
          const n = Math.ceil(size / B);
          const need = new Set<number>();
          for (let i = Math.floor(Math.min(size, sizesBefore[k]) / B); i < n; i++)
            if (!(size === sizesBefore[k] && i === n - 1)) need.add(i);
          const ranges = changedRanges.get(f);
          if (!ranges) {
            expected += size; // no ranges: read whole (the copy-on-write file)
            return;
          }
          const touched = new Set<number>();
          for (const r of ranges)
            for (let i = Math.floor(r.offset / B); i <= Math.floor((r.offset + r.length - 1) / B); i++)
              touched.add(i);
          if (touched.size > Math.ceil(sizesBefore[k] / B) / 2) {
            expected += size; // changes touch more than half the blocks (mmap writes back whole folios): read whole
            return;
          }
          for (const i of touched) if (i < n) need.add(i);
          for (const i of need) expected += Math.min(B, size - i * B);
        });
        expect(tracked.snapshot.stats.bytesRead).toBe(expected);
        const node = (await lookup(repo, tracked.snapshot, big[0])).node!;
        expect(node.blockSize).toBe(MIN_BLOCK_SIZE);
      }

      const target = path.join(loop.dir, `restore-${round}`);
      await restore(repo, { snapshot: tracked.snapshotId, target, relativeTo: src });
      for (const f of big) {
        const back = fs.readFileSync(path.join(target, path.relative(src, f)));
        expect(back.equals(fs.readFileSync(f)), `${path.relative(src, f)} round ${round}`).toBe(true);
      }
      fs.rmSync(target, { recursive: true });
      parent = tracked.snapshotId;
    }
  };

  it('identical trees and byte-exact restores over three rounds of in-place changes (content-defined chunks)', () =>
    rounds('src', false));
  it('identical trees and byte-exact restores over three rounds of in-place changes (fixed-size blocks)', () =>
    rounds('src-blocks', { minSize: MiB, patterns: ['*'] }));
});
