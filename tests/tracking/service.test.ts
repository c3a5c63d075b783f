import { describe, it, expect } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { lookup } from '../../src/main/engine/repo/browse.js';
import { TrackerService, journalBackup } from '../../src/main/tracking/index.js';
import { tempDir, writeTree } from '../helpers/fixtures.js';

describe('the tracker service and journal-planned backups', () => {
  it('plans incrementals from the journal, and falls back to a full scan across a tracker restart', async () => {
    const work = await tempDir('tm-svc-');
    const src = path.join(work, 'src');
    await writeTree(src, { a: { dir: { 'one.txt': 'one' } }, b: { dir: { 'two.txt': 'two' } } });
    const service = new TrackerService({ dataDir: path.join(work, 'data'), blockPin: false });
    await service.setRoots([src]);
    const journal = await service.journal();
    expect(journal).toBeDefined();
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    try {
      const first = await journalBackup(journal, repo, { paths: [src] }, 'job-1');
      expect(first.snapshot.scanMode?.mode).toBe('full-scan');
      expect(first.snapshot.journalCursor).toBeDefined();
      await fs.writeFile(path.join(src, 'b/two.txt'), 'two, edited');
      await fs.writeFile(path.join(src, 'b/three.txt'), 'three');
      const second = await journalBackup(journal, repo, { paths: [src] }, 'job-1');
      if (journal!.backend === 'none') {
        expect(second.snapshot.scanMode?.mode).toBe('full-scan'); // no tracker here: always correct, never wrong
      } else {
        expect(second.snapshot.scanMode?.mode).toBe('journal');
        expect(second.counters.readdir).toBe(1); // only b/ was listed
      }
      expect((await lookup(repo, second.snapshot, path.join(src, 'b/three.txt'))).node?.size).toBe(5);
      expect((await lookup(repo, second.snapshot, path.join(src, 'b/two.txt'))).node?.size).toBe(11);
      // a restarted tracker cannot vouch for the time it was not running
      await service.stop();
      await fs.writeFile(path.join(src, 'a/one.txt'), 'changed while nobody watched');
      await service.setRoots([src]);
      const third = await journalBackup(await service.journal(), repo, { paths: [src] }, 'job-1');
      expect(third.snapshot.scanMode?.mode).toBe('full-scan');
      expect(third.snapshot.scanMode?.reason).toBeTruthy();
      expect((await lookup(repo, third.snapshot, path.join(src, 'a/one.txt'))).node?.size).toBe(28);
    } finally {
      await service.stop();
    }
  });
});

describe('journal-planned backups from a point-in-time view', () => {
  it('takes the view after the journal cursor: a change made after the view is in the next backup', async () => {
    const work = await tempDir('tm-svc-view-');
    const src = path.join(work, 'src');
    const frozen = path.join(work, 'frozen'); // stands in for a filesystem snapshot: a copy at one instant
    await writeTree(src, { a: { dir: { 'one.txt': 'one' } }, b: { dir: { 'two.txt': 'two' } } });
    const service = new TrackerService({ dataDir: path.join(work, 'data'), blockPin: false });
    await service.setRoots([src]);
    const journal = await service.journal();
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    try {
      await journalBackup(journal, repo, { paths: [src] }, 'job-1');
      await fs.writeFile(path.join(src, 'a/one.txt'), 'one, before the view');
      const order: string[] = [];
      const viewed = await journalBackup(
        journal,
        repo,
        {
          paths: [src],
          prepareSourceViews: async () => {
            order.push('view');
            await fs.rm(frozen, { recursive: true, force: true });
            await fs.cp(src, frozen, { recursive: true, preserveTimestamps: true });
            // after the view: not in this backup, and the journal must hand it to the next one
            await fs.writeFile(path.join(src, 'b/two.txt'), 'two, after the view');
            return { views: [{ path: src, readFrom: frozen }], hidden: [] };
          },
        },
        'job-1',
        async (r, o) => {
          order.push('backup');
          expect(o.prepareSourceViews).toBeUndefined(); // made once, before the backup started
          return (await import('../../src/main/engine/backup/index.js')).backup(r, o);
        },
      );
      expect(order).toEqual(['view', 'backup']);
      expect((await lookup(repo, viewed.snapshot, path.join(src, 'a/one.txt'))).node?.size).toBe(20);
      expect((await lookup(repo, viewed.snapshot, path.join(src, 'b/two.txt'))).node?.size).toBe(3);
      const next = await journalBackup(journal, repo, { paths: [src] }, 'job-1');
      expect((await lookup(repo, next.snapshot, path.join(src, 'b/two.txt'))).node?.size).toBe(19);
      expect((await lookup(repo, next.snapshot, path.join(src, 'a/one.txt'))).node?.size).toBe(20);
    } finally {
      await service.stop();
    }
  });
});
