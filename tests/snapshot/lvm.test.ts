// Backups from LVM snapshots (thin and classic), on volume groups made on loop devices (root and a kernel
// with device-mapper; skipped with the reason otherwise — this project's build machines have no
// device-mapper, so these run only where one exists). Each volume group has a unique name and is removed
// with its loop device even when a test fails. The same proof as btrfs: the snapshot is what is read, a
// snapshot left by a killed process is removed by the next run, and a SQLite database (WAL) and a large
// file rewritten in place during the backup restore consistent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import type { Repository } from '../../src/main/engine/repo/repository.js';
import { LVM_TAG } from '../../src/main/engine/snapshot/linux/lvm.js';
import { SourceSnapshots, SnapshotRegistry } from '../../src/main/engine/snapshot/index.js';
import { lvmSkipReason, makeLvm, sh } from './helpers.js';
import { backupWhileWriting, scratchRepository } from './proof.js';

const skip = lvmSkipReason();
const here = path.dirname(fileURLToPath(import.meta.url));

for (const kind of ['thin', 'classic'] as const) {
  describe.skipIf(!!skip)(`backups from LVM ${kind} snapshots${skip ? ` (skipped: ${skip})` : ''}`, () => {
    let fsys: ReturnType<typeof makeLvm>;
    let repo: Repository;
    let scratch: string;
    let stateDir: string;
    const tagged = () =>
      sh('lvs', ['--noheadings', '-o', 'lv_name', `@${LVM_TAG}`])
        .split('\n')
        .map((l) => l.trim())
        .filter(
          (l) => l && fsys && sh('lvs', ['--noheadings', '-o', 'vg_name', `@${LVM_TAG}`]).includes(fsys.vg),
        );

    beforeAll(async () => {
      fsys = makeLvm(kind);
      ({ repo, dir: scratch } = await scratchRepository());
      stateDir = path.join(scratch, 'state');
    });
    afterAll(async () => {
      await repo?.close();
      if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
      fsys?.cleanup();
    });

    it('reads the snapshot (mounted read-only), records the original paths, and releases it', async () => {
      const src = path.join(fsys.data, 'docs');
      fs.mkdirSync(src, { recursive: true });
      fs.writeFileSync(path.join(src, 'a.txt'), 'as it was');
      const snaps = new SourceSnapshots({ stateDir, mode: 'always' });
      const r = await backup(repo, {
        paths: [src],
        host: 'lvm',
        prepareSourceViews: async () => {
          const taken = await snaps.take([src]);
          fs.writeFileSync(path.join(src, 'a.txt'), 'changed after the snapshot');
          return taken;
        },
      });
      expect(snaps.report.sources[0].snapshot?.kind).toBe(kind === 'thin' ? 'lvm-thin' : 'lvm');
      expect(await snaps.problems()).toEqual([]);
      await snaps.release();
      expect(tagged()).toEqual([]);
      const target = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-snap-lvm-restore-'));
      try {
        await restore(repo, { snapshot: r.snapshotId, target, relativeTo: src });
        expect(fs.readFileSync(path.join(target, 'a.txt'), 'utf8')).toBe('as it was');
      } finally {
        fs.rmSync(target, { recursive: true, force: true });
      }
      // unchanged files are reused by the next snapshot backup (device numbers mapped back)
      const again = new SourceSnapshots({ stateDir, mode: 'always' });
      const second = await backup(repo, {
        paths: [src],
        host: 'lvm',
        prepareSourceViews: () => again.take([src]),
      });
      await again.release();
      expect(second.snapshot.stats.filesRead).toBe(1);
    }, 180_000);

    it('removes a snapshot a killed process left behind, at the next run', async () => {
      const src = path.join(fsys.data, 'docs');
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', path.join(here, 'fixtures', 'take-and-hang.ts'), stateDir, src],
        { stdio: ['ignore', 'pipe', 'inherit'] },
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
      expect(tagged()).toContain(name);
      const next = new SourceSnapshots({ stateDir, mode: 'always' });
      await next.take([src]);
      expect(next.report.leftoversRemoved).toContain(name);
      await next.release();
      expect(tagged()).toEqual([]);
      expect(await new SnapshotRegistry(stateDir).list()).toEqual([]);
    }, 180_000);

    for (const work of ['sqlite', 'file'] as const)
      it(`a ${work === 'sqlite' ? 'SQLite database (WAL) written' : 'large file rewritten in place'} during the backup restores consistent, 3 times out of 3`, async () => {
        const source = path.join(fsys.data, `proof-${work}`);
        fs.mkdirSync(source);
        try {
          for (let i = 0; i < 3; i++) {
            const r = await backupWhileWriting(repo, source, work, true, stateDir);
            expect(r.problem, `iteration ${i}`).toBeUndefined();
          }
          expect(tagged()).toEqual([]);
        } finally {
          fs.rmSync(source, { recursive: true, force: true });
        }
      }, 300_000);
  });
}
