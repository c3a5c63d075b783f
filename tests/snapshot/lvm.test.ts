// LVM snapshots on volume groups made on loop devices (root and a kernel with device-mapper; skipped with
// the reason otherwise). This project's build machines have no device-mapper: there these tests run in a
// guest with Debian's kernel (scripts/kvm-guest.sh, driven by lvm-kvm.test.ts). Each volume group has a
// unique name and is removed with its loop device even when a test fails.
//
// First the provider on real volumes (no backup): a thin snapshot, a classic copy-on-write one, one of
// XFS (mounted nouuid), an overflowed classic snapshot reported after the fact, a volume mounted by its
// /dev/dm-N name, and a snapshot left behind found by its LVM tag alone. Then backups, as for btrfs: the
// snapshot is what is read, a snapshot left by a killed process is removed by the next run, and a SQLite
// database (WAL) and a large file rewritten in place during the backup restore consistent.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import type { Repository } from '../../src/main/engine/repo/repository.js';
import { LVM_MOUNT_BASE, LVM_TAG } from '../../src/main/engine/snapshot/linux/lvm.js';
import { readMounts } from '../../src/main/engine/snapshot/linux/mounts.js';
import { SourceSnapshots, SnapshotRegistry, snapshotName } from '../../src/main/engine/snapshot/index.js';
import { lvmSkipReason, makeLvm, makeVolumeGroup, sh, type TestVolumeGroup } from './helpers.js';
import { backupWhileWriting, scratchRepository } from './proof.js';

const skip = lvmSkipReason();
// hang limits, not speed checks: in the test guest on an emulated CPU (scripts/kvm-guest.sh, TCG)
// everything takes 10-20 times longer
const slow = process.env.TIDEMARK_KVM_GUEST === 'tcg' ? 10 : 1;
const here = path.dirname(fileURLToPath(import.meta.url));

const have = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

describe.skipIf(!!skip)(`the LVM provider on real volumes${skip ? ` (skipped: ${skip})` : ''}`, () => {
  let group: TestVolumeGroup;
  let stateDir: string;
  const vols: Record<string, string> = {};
  const mountsUnder = async (dir: string) =>
    (await readMounts()).filter((m) => m.mountPoint.startsWith(`${dir}/`));
  // a test that fails half-way leaves nothing for the next one
  const sessions: SourceSnapshots[] = [];
  afterEach(async () => {
    for (const s of sessions.splice(0)) await s.release().catch(() => {});
  }, 120_000 * slow);

  beforeAll(() => {
    stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-snap-lvm-state-'));
    // pool 256 (+ 8 of metadata) + classic 100 + xfs 300 (XFS's smallest): ~230 MiB left for snapshots
    group = makeVolumeGroup(900, 256);
    vols.thin = group.volume('thin', { sizeMiB: 200, thin: true });
    vols.classic = group.volume('classic', { sizeMiB: 100 });
    if (have('mkfs.xfs')) vols.xfs = group.volume('xfs', { sizeMiB: 300, fstype: 'xfs' });
  }, 120_000 * slow);
  afterAll(() => {
    if (stateDir) fs.rmSync(stateDir, { recursive: true, force: true });
    group?.cleanup();
  }, 120_000 * slow);

  /** Takes a snapshot of `dir` with a file changed after it; returns what the snapshot shows of it. */
  async function takeAndChange(dir: string) {
    fs.writeFileSync(path.join(dir, 'a.txt'), 'as it was');
    const snaps = new SourceSnapshots({ stateDir, mode: 'always' });
    sessions.push(snaps);
    const taken = await snaps.take([dir]);
    fs.writeFileSync(path.join(dir, 'a.txt'), 'changed after the snapshot');
    const view = taken.views.find((v) => v.path === dir)!;
    return { snaps, view, seen: fs.readFileSync(path.join(view.readFrom, 'a.txt'), 'utf8') };
  }

  it(
    'a thin volume gets a thin snapshot, mounted read-only, showing the volume as it was; release removes it',
    async () => {
      const { snaps, view, seen } = await takeAndChange(vols.thin);
      expect(snaps.report.sources[0].snapshot?.kind).toBe('lvm-thin');
      expect(seen).toBe('as it was');
      expect(view.readFrom.startsWith(`${LVM_MOUNT_BASE}/`)).toBe(true);
      const [m] = (await readMounts()).filter((x) => x.mountPoint === view.readFrom);
      expect(m.options).toContain('ro');
      expect(m.fstype).toBe('ext4');
      expect(group.tagged(LVM_TAG)).toHaveLength(1);
      expect(await snaps.problems()).toEqual([]);
      await snaps.release();
      expect(group.tagged(LVM_TAG)).toEqual([]);
      expect(await mountsUnder(LVM_MOUNT_BASE)).toEqual([]);
      expect(fs.existsSync(view.readFrom)).toBe(false);
    },
    180_000 * slow,
  );

  it(
    'a classic volume gets a copy-on-write snapshot as large as the volume, so a full rewrite does not overflow it',
    async () => {
      const { snaps, seen } = await takeAndChange(vols.classic);
      expect(snaps.report.sources[0].snapshot?.kind).toBe('lvm');
      expect(seen).toBe('as it was');
      const [name] = group.tagged(LVM_TAG);
      const size = (lv: string) =>
        Number(
          sh('lvs', ['--noheadings', '--units', 'b', '--nosuffix', '-o', 'lv_size', `${group.vg}/${lv}`]),
        );
      expect(size(name)).toBeGreaterThanOrEqual(size('classic'));
      // write 70 MiB into the volume's 100 (ext4 keeps some): each block changed is copied into the snapshot
      const big = path.join(vols.classic, 'big');
      fs.writeFileSync(big, Buffer.alloc(70 * 1024 * 1024, 1));
      sh('sync', []);
      fs.rmSync(big);
      expect(await snaps.problems()).toEqual([]);
      await snaps.release();
      expect(group.tagged(LVM_TAG)).toEqual([]);
    },
    180_000 * slow,
  );

  it(
    'a classic snapshot that overflowed (too little free space) is reported after the backup, and removed',
    async () => {
      group.fill(8); // the snapshot gets the 8 MiB that are left
      try {
        const { snaps, seen } = await takeAndChange(vols.classic);
        expect(seen).toBe('as it was');
        expect(await snaps.problems()).toEqual([]);
        const big = path.join(vols.classic, 'big');
        fs.writeFileSync(big, Buffer.alloc(32 * 1024 * 1024, 2));
        sh('sync', []);
        fs.rmSync(big);
        const problems = await snaps.problems();
        expect(problems).toHaveLength(1);
        expect(problems[0]).toMatch(
          new RegExp(`LVM snapshot of ${group.vg}/classic overflowed during the backup.*${group.vg}`),
        );
        await snaps.release();
        expect(group.tagged(LVM_TAG)).toEqual([]);
        expect(await mountsUnder(LVM_MOUNT_BASE)).toEqual([]);
      } finally {
        group.unfill();
      }
    },
    180_000 * slow,
  );

  it.skipIf(!have('mkfs.xfs'))(
    `XFS: the snapshot (same filesystem UUID as the volume) is mounted nouuid${have('mkfs.xfs') ? '' : ' (skipped: mkfs.xfs is not installed: apt-get install xfsprogs)'}`,
    async () => {
      const { snaps, view, seen } = await takeAndChange(vols.xfs);
      expect(seen).toBe('as it was');
      const [m] = (await readMounts()).filter((x) => x.mountPoint === view.readFrom);
      expect(m.fstype).toBe('xfs');
      // why nouuid: mounted again without it, the kernel refuses the snapshot (the volume has its UUID)
      sh('umount', [view.readFrom]);
      expect(() => sh('mount', ['-t', 'xfs', '-o', 'ro', m.source, view.readFrom])).toThrow();
      sh('mount', ['-t', 'xfs', '-o', 'ro,nouuid', m.source, view.readFrom]);
      await snaps.release();
      expect(group.tagged(LVM_TAG)).toEqual([]);
    },
    180_000 * slow,
  );

  it(
    'a volume mounted by its /dev/dm-N name (as mount(2) or an initramfs may leave it) is found all the same',
    async () => {
      const dev = fs.statSync(vols.thin).dev;
      const dm = path.basename(fs.realpathSync(`/sys/dev/block/${dev >> 8}:${dev & 0xff}`));
      sh('umount', [vols.thin]);
      sh('mount', ['--no-canonicalize', `/dev/${dm}`, vols.thin]);
      try {
        expect((await readMounts()).find((m) => m.mountPoint === vols.thin)?.source).toBe(`/dev/${dm}`);
        const { snaps, seen } = await takeAndChange(vols.thin);
        expect(snaps.report.sources[0].snapshot?.kind).toBe('lvm-thin');
        expect(seen).toBe('as it was');
        await snaps.release();
      } finally {
        sh('umount', [vols.thin]);
        sh('mount', [sh('lvs', ['--noheadings', '-o', 'lv_dm_path', `${group.vg}/thin`]), vols.thin]);
      }
    },
    180_000 * slow,
  );

  it(
    'a snapshot whose process is gone, with no record, is found by its LVM tag, unmounted and removed at the next take',
    async () => {
      // what a process killed after lvcreate and mount leaves: the tagged volume, mounted; no record
      const gone = spawnSync('true').pid!;
      const name = snapshotName(gone, Date.now() - 60_000);
      sh('lvcreate', ['-q', '-s', '-L', '8m', '-n', name, '--addtag', LVM_TAG, `${group.vg}/classic`]);
      const mnt = path.join(LVM_MOUNT_BASE, name);
      fs.mkdirSync(mnt, { recursive: true });
      sh('mount', ['-o', 'ro', sh('lvs', ['--noheadings', '-o', 'lv_dm_path', `${group.vg}/${name}`]), mnt]);
      const snaps = new SourceSnapshots({ stateDir, mode: 'always' });
      await snaps.take([vols.thin]);
      expect(snaps.report.leftoversRemoved).toEqual([name]);
      expect(group.tagged(LVM_TAG)).toHaveLength(1); // the new one
      expect((await mountsUnder(LVM_MOUNT_BASE)).map((m) => m.mountPoint)).not.toContain(mnt);
      expect(fs.existsSync(mnt)).toBe(false);
      await snaps.release();
      expect(group.tagged(LVM_TAG)).toEqual([]);
    },
    180_000 * slow,
  );
});

for (const kind of ['thin', 'classic'] as const) {
  describe.skipIf(!!skip)(`backups from LVM ${kind} snapshots${skip ? ` (skipped: ${skip})` : ''}`, () => {
    let fsys: ReturnType<typeof makeLvm>;
    let repo: Repository;
    let scratch: string;
    let stateDir: string;
    // the tagged volumes in this test's group (another run's groups are not this test's business)
    const tagged = () =>
      sh('lvs', ['--noheadings', '-o', 'vg_name,lv_name', `@${LVM_TAG}`])
        .split('\n')
        .map((l) => l.trim().split(/\s+/))
        .filter(([vg]) => vg === fsys?.vg)
        .map(([, lv]) => lv);

    beforeAll(async () => {
      fsys = makeLvm(kind);
      ({ repo, dir: scratch } = await scratchRepository());
      stateDir = path.join(scratch, 'state');
    }, 120_000 * slow);
    afterAll(async () => {
      await repo?.close();
      if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
      fsys?.cleanup();
    }, 120_000 * slow);

    it(
      'reads the snapshot (mounted read-only), records the original paths, and releases it',
      async () => {
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
      },
      180_000 * slow,
    );

    it(
      'removes a snapshot a killed process left behind, at the next run',
      async () => {
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
      },
      180_000 * slow,
    );

    for (const work of ['sqlite', 'file'] as const)
      it(
        `a ${work === 'sqlite' ? 'SQLite database (WAL) written' : 'large file rewritten in place'} during the backup restores consistent, 3 times out of 3`,
        async () => {
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
        },
        300_000 * slow,
      );
  });
}
