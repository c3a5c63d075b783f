// Backups from btrfs snapshots, on a loop-device btrfs filesystem (root; skipped with the reason where
// that cannot be had): the snapshot is what is read (a change made after it is not in the backup), the
// tree records the original paths and leaves the snapshots' folder out, an unchanged file is reused by the
// next snapshot backup (the device numbers are mapped back), a subvolume nested in a source gets its
// own snapshot, a snapshot left by a killed process is removed by the next run, and the open-files proof:
// a SQLite database (WAL) and a large file rewritten in place, written all through the backup, restore
// consistent every time.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import type { Repository } from '../../src/main/engine/repo/repository.js';
import { SourceSnapshots, SnapshotRegistry } from '../../src/main/engine/snapshot/index.js';
import { btrfsSkipReason, makeBtrfs, sh, type TestFs } from './helpers.js';
import { backupWhileWriting, scratchRepository } from './proof.js';

const skip = btrfsSkipReason();
const here = path.dirname(fileURLToPath(import.meta.url));
const ours = (mnt: string) =>
  sh('btrfs', ['subvolume', 'list', mnt])
    .split('\n')
    .filter((l) => l.includes('tidemark-'));

describe.skipIf(!!skip)(`backups from btrfs snapshots${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let fsys: TestFs;
  let repo: Repository;
  let scratch: string;
  let stateDir: string;

  beforeAll(async () => {
    fsys = makeBtrfs();
    ({ repo, dir: scratch } = await scratchRepository());
    stateDir = path.join(scratch, 'state');
  });
  afterAll(async () => {
    await repo?.close();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
    fsys?.cleanup();
  });

  it('reads the snapshot, records the original paths, reuses unchanged files next time, and releases it', async () => {
    const src = path.join(fsys.data, 'docs');
    fs.mkdirSync(path.join(src, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(src, 'a.txt'), 'as it was');
    fs.writeFileSync(path.join(src, 'sub', 'b.txt'), 'b');
    sh('btrfs', ['subvolume', 'create', path.join(src, 'inner')]);
    fs.writeFileSync(path.join(src, 'inner', 'c.txt'), 'in a nested subvolume');
    // the snapshot folder lives at the subvolume's root: make the source that root so it is inside it
    const source = fsys.data;
    const lines: string[] = [];
    const snaps = new SourceSnapshots({ stateDir, mode: 'always', log: (l) => lines.push(l) });
    const first = await backup(repo, {
      paths: [source],
      host: 'btrfs',
      prepareSourceViews: async () => {
        const taken = await snaps.take([source]);
        fs.writeFileSync(path.join(src, 'a.txt'), 'changed after the snapshot');
        fs.writeFileSync(path.join(src, 'inner', 'c.txt'), 'changed too');
        return taken;
      },
    });
    expect(ours(fsys.mnt)).toHaveLength(2); // the source's subvolume and the nested one, until released
    await snaps.release();
    expect(ours(fsys.mnt)).toEqual([]);
    expect(await new SnapshotRegistry(stateDir).list()).toEqual([]);
    expect(snaps.report.sources.map((s) => [s.path, s.snapshot?.kind, !!s.nested])).toEqual([
      [source, 'btrfs', false],
      [path.join(src, 'inner'), 'btrfs', true],
    ]);
    expect(lines.some((l) => l.includes(`${source} is read from tidemark-`))).toBe(true);
    expect(first.snapshot.paths).toEqual([source]);

    const target = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-snap-btrfs-restore-'));
    try {
      await restore(repo, { snapshot: first.snapshotId, target, relativeTo: source });
      expect(fs.readFileSync(path.join(target, 'docs', 'a.txt'), 'utf8')).toBe('as it was');
      expect(fs.readFileSync(path.join(target, 'docs', 'inner', 'c.txt'), 'utf8')).toBe(
        'in a nested subvolume',
      );
      expect(fs.readFileSync(path.join(target, 'docs', 'sub', 'b.txt'), 'utf8')).toBe('b');
      // the folder the snapshots are kept in is not part of the backup
      expect(fs.readdirSync(target)).toEqual(['docs']);
    } finally {
      fs.rmSync(target, { recursive: true, force: true });
    }

    // the next snapshot backup reads only what changed: the others keep their recorded device and inode
    const again = new SourceSnapshots({ stateDir, mode: 'always' });
    const second = await backup(repo, {
      paths: [source],
      host: 'btrfs',
      prepareSourceViews: () => again.take([source]),
    });
    await again.release();
    expect(second.snapshot.stats.files).toBe(3);
    expect(second.snapshot.stats.filesRead).toBe(2); // a.txt and inner/c.txt
    expect(second.snapshot.stats.filesUnchanged).toBe(1);
    sh('btrfs', ['subvolume', 'delete', path.join(src, 'inner')]);
    fs.rmSync(src, { recursive: true, force: true });
  }, 120_000);

  it('removes the snapshots a killed process left behind, at the next run', async () => {
    const source = fsys.data;
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', path.join(here, 'fixtures', 'take-and-hang.ts'), stateDir, source],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const said = await new Promise<string>((resolve, reject) => {
      child.once('exit', (code) =>
        reject(new Error(`the child exited (${code}) before taking its snapshot`)),
      );
      child.stdout!.once('data', (d: Buffer) => resolve(d.toString()));
    });
    child.removeAllListeners('exit');
    const name = /taken (tidemark-\S+)/.exec(said)![1];
    const gone = new Promise((r) => child.once('close', r));
    child.kill('SIGKILL');
    await gone;
    expect(ours(fsys.mnt).some((l) => l.includes(name))).toBe(true);
    expect((await new SnapshotRegistry(stateDir).list()).map((r) => r.name)).toContain(name);

    const next = new SourceSnapshots({ stateDir, mode: 'always' });
    await next.take([source]);
    expect(next.report.leftoversRemoved).toContain(name);
    await next.release();
    expect(ours(fsys.mnt)).toEqual([]);
    expect(await new SnapshotRegistry(stateDir).list()).toEqual([]);
  }, 120_000);

  // The open-files proof (bench/snapshot.ts runs it ≥ 20 times each way and shows that live reads tear).
  for (const kind of ['sqlite', 'file'] as const)
    it(`a ${kind === 'sqlite' ? 'SQLite database (WAL) written' : 'large file rewritten in place'} during the backup restores consistent, 3 times out of 3`, async () => {
      const source = path.join(fsys.data, `proof-${kind}`);
      fs.mkdirSync(source);
      try {
        for (let i = 0; i < 3; i++) {
          const r = await backupWhileWriting(repo, source, kind, true, stateDir);
          expect(r.report?.sources[0].snapshot?.kind).toBe('btrfs');
          expect(r.problem, `iteration ${i}`).toBeUndefined();
          expect(r.warnings).toEqual([]);
        }
        expect(ours(fsys.mnt)).toEqual([]);
      } finally {
        fs.rmSync(source, { recursive: true, force: true });
      }
    }, 300_000);
});
