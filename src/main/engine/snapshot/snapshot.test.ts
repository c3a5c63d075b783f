import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SourceSnapshots, SnapshotRegistry, parseSnapshotName, snapshotName } from './index.js';
import type { Exec, SnapshotProvider, SnapshotRecord, SnapshotTarget } from './types.js';
import { parseMountInfo, mountOf, mountsInside } from './linux/mounts.js';
import { createLvm, lvmLeftovers, lvmProblem, lvmTarget, parseLvs, removeLvm } from './linux/lvm.js';
import { MacSnapshots, parseMacMounts, parseSnapshotDate } from './macos/index.js';
import { WindowsSnapshots, volumeOf, type VssAddon } from './windows/index.js';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-snapshot-unit-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A provider whose volumes are the first path component; snapshots are folders under `dir/snaps`. */
function fakeProvider(opts: { none?: Record<string, string>; failCreate?: string } = {}) {
  const calls: string[] = [];
  const existing = new Set<string>();
  const p: SnapshotProvider = {
    platform: 'test',
    async target(x) {
      const vol = '/' + x.split('/')[1];
      if (opts.none?.[vol]) return { none: opts.none[vol] };
      return {
        kind: 'btrfs',
        key: vol,
        volume: vol,
        describe: `volume ${vol}`,
        data: {},
      } satisfies SnapshotTarget;
    },
    async create(t, r) {
      calls.push(`create ${t.volume}`);
      existing.add(r.name);
      if (opts.failCreate === t.volume) throw new Error('no space left for the snapshot');
      return { root: `/snaps/${r.name}`, dev: { snapshot: 99, original: 1 }, hidden: [`${t.volume}/.snaps`] };
    },
    async remove(r) {
      calls.push(`remove ${r.name}`);
      existing.delete(r.name);
    },
    async nestedMounts(x) {
      return x === '/data' ? ['/data/vm'] : [];
    },
  };
  return { p, calls, existing };
}

// fs.realpath of the made-up paths: the orchestrator resolves symlinks in sources
const realpath = fs.promises.realpath;
beforeEach(() => {
  (fs.promises as { realpath: unknown }).realpath = async (x: string) => x;
});
afterEach(() => {
  (fs.promises as { realpath: unknown }).realpath = realpath;
});

describe('SourceSnapshots', () => {
  it('takes one snapshot per volume, maps each source into it, and releases them', async () => {
    const { p, calls } = fakeProvider();
    const lines: string[] = [];
    const s = new SourceSnapshots({
      stateDir: dir,
      mode: 'when-possible',
      provider: p,
      log: (l) => lines.push(l),
    });
    const t = await s.take(['/data/docs', '/data/mail', '/home/ann']);
    expect(calls.filter((c) => c.startsWith('create'))).toEqual(['create /data', 'create /home']);
    const names = s.report.sources.map((r) => r.snapshot!.name);
    expect(new Set(names).size).toBe(2);
    expect(t.views).toEqual([
      { path: '/data/docs', readFrom: `/snaps/${names[0]}/docs`, dev: { snapshot: 99, original: 1 } },
      { path: '/data/mail', readFrom: `/snaps/${names[0]}/mail`, dev: { snapshot: 99, original: 1 } },
      { path: '/home/ann', readFrom: `/snaps/${names[2]}/ann`, dev: { snapshot: 99, original: 1 } },
    ]);
    expect(t.hidden).toEqual([]); // /data/.snaps is not inside a source
    expect((await new SnapshotRegistry(dir).list()).length).toBe(2); // recorded while they exist
    await s.release();
    expect(calls.filter((c) => c.startsWith('remove'))).toHaveLength(2);
    expect(await new SnapshotRegistry(dir).list()).toEqual([]);
    expect(lines.filter((l) => l.startsWith('snapshot: released'))).toHaveLength(2);
  });

  it('says why a source is read live, and gives a nested filesystem its own view', async () => {
    const { p } = fakeProvider({ none: { '/data': '' } });
    const s = new SourceSnapshots({
      stateDir: dir,
      mode: 'when-possible',
      provider: {
        ...p,
        target: async (x) => (x.startsWith('/data/vm') ? { none: 'tmpfs has no snapshots' } : p.target(x)),
      },
    });
    const t = await s.take(['/data']);
    expect(s.report.sources).toEqual([
      {
        path: '/data',
        snapshot: { kind: 'btrfs', name: expect.stringMatching(/^tidemark-/), volume: '/data' },
      },
      { path: '/data/vm', reason: 'tmpfs has no snapshots', nested: true },
    ]);
    expect(t.views[1]).toEqual({ path: '/data/vm', readFrom: '/data/vm' });
    expect(t.hidden).toEqual(['/data/.snaps']);
    await s.release();
  });

  it('mode "always" fails before making anything when a path has no snapshot', async () => {
    const { p, calls } = fakeProvider({ none: { '/home': 'ext4 on /dev/sda2 is not on LVM or btrfs' } });
    const s = new SourceSnapshots({ stateDir: dir, mode: 'always', provider: p });
    await expect(s.take(['/data/docs', '/home/ann'])).rejects.toMatchObject({
      code: 'SNAPSHOT_UNAVAILABLE',
      message: expect.stringContaining('/home/ann has none (ext4 on /dev/sda2 is not on LVM or btrfs)'),
    });
    expect(calls.filter((c) => c.startsWith('create'))).toEqual([]);
  });

  it('a snapshot that fails to be made is undone: read live ("when possible") or the run fails ("always")', async () => {
    const { p, calls, existing } = fakeProvider({ failCreate: '/home' });
    const s = new SourceSnapshots({ stateDir: dir, mode: 'when-possible', provider: p });
    const t = await s.take(['/home/ann']);
    expect(t.views).toEqual([]);
    expect(s.report.sources[0].reason).toMatch(/the snapshot failed: no space left/);
    expect(existing.size).toBe(0);
    expect(calls).toContain(
      `remove ${[...calls]
        .reverse()
        .find((c) => c.startsWith('remove'))!
        .slice(7)}`,
    );
    expect(await new SnapshotRegistry(dir).list()).toEqual([]);
    const a = new SourceSnapshots({ stateDir: dir, mode: 'always', provider: p });
    await expect(a.take(['/home/ann'])).rejects.toMatchObject({ code: 'SNAPSHOT_UNAVAILABLE' });
    expect(existing.size).toBe(0);
  });

  it('mode "never" takes nothing and says so', async () => {
    const { p, calls } = fakeProvider();
    const s = new SourceSnapshots({ stateDir: dir, mode: 'never', provider: p });
    const t = await s.take(['/data/docs']);
    expect(t.views).toEqual([]);
    expect(s.report.sources).toEqual([{ path: '/data/docs', reason: 'snapshots are off for this job' }]);
    expect(calls.filter((c) => c.startsWith('create'))).toEqual([]);
  });

  it('removes the recorded snapshots of a process that is gone, and keeps those of live ones', async () => {
    const { p, calls } = fakeProvider();
    const reg = new SnapshotRegistry(dir);
    // a process ID that is not running: the parent of an exited child is this process, the child is gone
    const dead = 2 ** 22 + 12345;
    const old: SnapshotRecord = {
      name: snapshotName(dead, 1000),
      kind: 'btrfs',
      volume: '/data',
      pid: dead,
      createdAt: 1000,
      data: {},
    };
    const live: SnapshotRecord = {
      ...old,
      name: snapshotName(process.ppid),
      pid: process.ppid,
      createdAt: Date.now(),
    };
    await reg.add(old);
    await reg.add(live);
    const s = new SourceSnapshots({ stateDir: dir, mode: 'when-possible', provider: p });
    await s.take(['/data/docs']);
    expect(s.report.leftoversRemoved).toEqual([old.name]);
    expect(calls[0]).toBe(`remove ${old.name}`);
    expect((await reg.list()).map((r) => r.name)).toContain(live.name);
    await s.release();
  });

  it('names snapshots recognisably', () => {
    const n = snapshotName(4242, 1_700_000_000_000);
    expect(n).toMatch(/^tidemark-4242-[0-9a-z]+-[0-9a-f]{4}$/);
    expect(parseSnapshotName(n)).toEqual({ pid: 4242, createdAt: 1_700_000_000_000 });
    expect(parseSnapshotName('home-2024')).toBeUndefined();
  });
});

describe('Linux: mountinfo', () => {
  const info = [
    '22 1 254:0 / / rw,relatime - ext4 /dev/vda rw',
    '30 22 0:41 /@home /home rw,relatime - btrfs /dev/sda2 rw,subvol=/@home',
    '31 30 0:50 / /home/ann/my\\040disk ro,relatime - vfat /dev/sdb1 ro',
    '32 22 253:3 / /run/tidemark-snapshots/tidemark-1-a-b ro - ext4 /dev/mapper/vg-tidemark--1 ro',
  ].join('\n');
  const mounts = parseMountInfo(info);
  it('finds the filesystem of a path and the ones mounted inside a folder', () => {
    expect(mounts[2].mountPoint).toBe('/home/ann/my disk');
    expect(mountOf(mounts, '/home/ann/x')?.fstype).toBe('btrfs');
    expect(mountOf(mounts, '/home/ann/my disk/y')?.options).toContain('ro');
    expect(mountOf(mounts, '/etc')?.source).toBe('/dev/vda');
    expect(mountsInside(mounts, '/home')).toEqual(['/home/ann/my disk']);
    expect(mountsInside(mounts, '/', ['/run/tidemark-snapshots'])).toEqual(['/home', '/home/ann/my disk']);
  });
});

describe('Linux: LVM commands', () => {
  const lvsLine = (o: Record<string, string>) =>
    '  ' +
    Object.entries(o)
      .map(([k, v]) => `LVM2_${k}='${v}'`)
      .join(' ');
  const origin = {
    VG_NAME: 'vg0',
    LV_NAME: 'home',
    SEGTYPE: 'linear',
    LV_ATTR: '-wi-ao----',
    LV_SIZE: String(10 * 2 ** 30),
    VG_FREE: String(4 * 2 ** 30),
    VG_EXTENT_SIZE: String(4 * 2 ** 20),
    LV_DM_PATH: '/dev/mapper/vg0-home',
    LV_TAGS: '',
  };
  function fakeExec(lvs: Record<string, string>[][]): { exec: Exec; calls: string[] } {
    const calls: string[] = [];
    let n = 0;
    const exec: Exec = async (cmd, args) => {
      calls.push([cmd, ...args].join(' '));
      if (cmd === 'lvs') return { stdout: (lvs[n++] ?? []).map(lvsLine).join('\n'), stderr: '' };
      return { stdout: '', stderr: '' };
    };
    return { exec, calls };
  }

  it('parses lvs output', () => {
    const [lv] = parseLvs(lvsLine({ ...origin, LV_TAGS: 'a,tidemark-snapshot' }));
    expect(lv).toMatchObject({
      vg: 'vg0',
      lv: 'home',
      sizeBytes: 10 * 2 ** 30,
      tags: ['a', 'tidemark-snapshot'],
    });
  });

  it('a classic volume gets a snapshot as large as the free space allows (the origin, when it fits)', async () => {
    const { exec } = fakeExec([[origin]]);
    const t = await lvmTarget(exec, '/dev/mapper/vg0-home', '/home', 'ext4');
    expect(t).toMatchObject({
      kind: 'lvm',
      key: 'lvm:vg0/home',
      volume: '/home',
      data: { vg: 'vg0', lv: 'home', sizeBytes: String(4 * 2 ** 30) },
    });
    const roomy = fakeExec([[{ ...origin, VG_FREE: String(20 * 2 ** 30) }]]);
    const t2 = (await lvmTarget(roomy.exec, '/dev/x', '/home', 'ext4')) as SnapshotTarget;
    expect(Number(t2.data.sizeBytes)).toBeGreaterThanOrEqual(10 * 2 ** 30);
    const full = fakeExec([[{ ...origin, VG_FREE: '0' }]]);
    expect(await lvmTarget(full.exec, '/dev/x', '/home', 'ext4')).toEqual({
      none: expect.stringContaining('volume group vg0 has no free space for a snapshot of home'),
    });
  });

  it('a thin volume gets a thin snapshot, activated, tagged, mounted read-only; removal undoes it all', async () => {
    const thin = { ...origin, SEGTYPE: 'thin', VG_FREE: '0', LV_ATTR: 'Vwi-aotz--' };
    const { exec, calls } = fakeExec([[thin]]);
    const t = (await lvmTarget(exec, '/dev/mapper/vg0-home', '/home', 'xfs')) as SnapshotTarget;
    expect(t.kind).toBe('lvm-thin');
    const record: SnapshotRecord = {
      name: 'tidemark-1-abc-0f0f',
      kind: 'lvm-thin',
      volume: '/home',
      pid: 1,
      createdAt: 1,
      data: { ...t.data },
    };
    const made = fakeExec([
      [{ ...thin, LV_NAME: record.name, LV_DM_PATH: '/dev/mapper/vg0-tidemark--1--abc--0f0f' }],
    ]);
    // the mount point is a real folder here (the fake mount leaves it empty), the volume this test's folder
    const base = path.join(dir, 'mnt');
    const snap = await createLvm(made.exec, { ...t, volume: dir }, record, base);
    expect(made.calls[0]).toBe(
      'lvcreate -q -s -kn -n tidemark-1-abc-0f0f --addtag tidemark-snapshot vg0/home',
    );
    expect(made.calls).toContain(
      `mount -t xfs -o ro,nouuid /dev/mapper/vg0-tidemark--1--abc--0f0f ${base}/${record.name}`,
    );
    expect(snap).toMatchObject({ root: `${base}/${record.name}`, hidden: [base] });
    expect(record.data).toMatchObject({ vg: 'vg0', origin: 'home', mountPoint: `${base}/${record.name}` });
    const rm = fakeExec([[{ ...thin, LV_NAME: record.name }]]);
    await removeLvm(rm.exec, record);
    expect(rm.calls).toContain(`lvremove -q -f vg0/${record.name}`);
    expect(fs.existsSync(`${base}/${record.name}`)).toBe(false);
    expect(calls).toHaveLength(1); // lvmTarget asked lvs once
  });

  it('finds tagged snapshots of dead processes, and reports an overflowed classic snapshot', async () => {
    const dead = 2 ** 22 + 999;
    const { exec } = fakeExec([
      [
        { ...origin, LV_NAME: snapshotName(dead, 1000), LV_TAGS: 'tidemark-snapshot' },
        { ...origin, LV_NAME: snapshotName(process.pid), LV_TAGS: 'tidemark-snapshot' },
      ],
    ]);
    const found = await lvmLeftovers(exec);
    expect(found.map((r) => r.pid)).toEqual([dead]);
    const bad = fakeExec([[{ ...origin, LV_ATTR: 'swi-I-s---' }]]);
    const rec: SnapshotRecord = {
      name: 'tidemark-1-a-0000',
      kind: 'lvm',
      volume: '/home',
      pid: 1,
      createdAt: 1,
      data: { vg: 'vg0', origin: 'home' },
    };
    expect(await lvmProblem(bad.exec, rec)).toMatch(/overflowed during the backup/);
    const good = fakeExec([[{ ...origin, LV_ATTR: 'swi-a-s---' }]]);
    expect(await lvmProblem(good.exec, rec)).toBeUndefined();
  });
});

describe('macOS: APFS (untested on a Mac: the commands it would run)', () => {
  it('parses mount and tmutil output, and refuses HFS+', async () => {
    const mounts =
      '/dev/disk3s1s1 on / (apfs, sealed, local, read-only, journaled)\n/dev/disk3s5 on /System/Volumes/Data (apfs, local, journaled, nobrowse)\n/dev/disk4s2 on /Volumes/Old (hfs, local, journaled)';
    expect(parseMacMounts(mounts)[1]).toEqual({
      device: '/dev/disk3s5',
      mountPoint: '/System/Volumes/Data',
      fstype: 'apfs',
    });
    expect(parseSnapshotDate('Created local snapshot with date: 2024-05-01-101112')).toBe(
      '2024-05-01-101112',
    );
    const calls: string[] = [];
    const exec: Exec = async (cmd, args) => {
      calls.push([cmd, ...args].join(' '));
      return {
        stdout: cmd === 'mount' ? mounts : 'Created local snapshot with date: 2024-05-01-101112',
        stderr: '',
      };
    };
    const mac = new MacSnapshots(exec, dir);
    expect(await mac.target('/Volumes/Old/x')).toEqual({
      none: '/Volumes/Old is hfs, not APFS: no snapshots',
    });
    const t = (await mac.target('/System/Volumes/Data/Users')) as SnapshotTarget;
    expect(t).toMatchObject({ kind: 'apfs', volume: '/System/Volumes/Data' });
    const rec: SnapshotRecord = {
      name: 'tidemark-1-a-0000',
      kind: 'apfs',
      volume: t.volume,
      pid: 1,
      createdAt: 1,
      data: {},
    };
    const made = await mac.create({ ...t, volume: dir }, rec);
    expect(made.root).toBe(path.join(dir, rec.name));
    expect(calls).toContain(`tmutil localsnapshot ${dir}`);
    expect(calls).toContain(
      `mount_apfs -o rdonly,nobrowse -s com.apple.TimeMachine.2024-05-01-101112.local ${dir} ${path.join(dir, rec.name)}`,
    );
    await mac.remove(rec);
    expect(calls).toContain('tmutil deletelocalsnapshots 2024-05-01-101112');
  });
});

describe('Windows: VSS provider (untested on Windows: with a fake addon)', () => {
  it('takes the volume of a path, reads through the shadow copy device, releases the session', async () => {
    const events: string[] = [];
    const addon: VssAddon = {
      VssSession: class {
        async create(volumes: string[]) {
          events.push(`create ${volumes.join(',')}`);
          return {
            setId: '{set}',
            shadows: [
              {
                volume: 'C:\\',
                snapshotId: '{s1}',
                device: '\\\\?\\GLOBALROOT\\Device\\HarddiskVolumeShadowCopy3',
              },
            ],
          };
        }
        async release() {
          events.push('release');
        }
      },
      async vssDeleteSnapshots(ids) {
        events.push(`delete ${ids.join(',')}`);
        return { deleted: ids, notFound: [], errors: [] };
      },
      vssShadowPath: (device, vol, p) => `${device}\\${p.slice(vol.length)}`,
    };
    expect(volumeOf('c:\\Users\\ann')).toBe('C:\\');
    expect(volumeOf('\\\\nas\\share\\x')).toEqual({ none: expect.stringContaining('network share') });
    const w = new WindowsSnapshots(addon);
    const t = (await w.target('C:\\Users\\ann')) as SnapshotTarget;
    expect(t).toMatchObject({ kind: 'vss', volume: 'C:\\', key: 'vss:C:\\' });
    const rec: SnapshotRecord = {
      name: 'tidemark-1-a-0000',
      kind: 'vss',
      volume: 'C:\\',
      pid: 1,
      createdAt: 1,
      data: {},
    };
    const made = await w.create(t, rec);
    expect(made.root).toBe('\\\\?\\GLOBALROOT\\Device\\HarddiskVolumeShadowCopy3\\');
    expect(rec.data).toMatchObject({ snapshotId: '{s1}', setId: '{set}' });
    await w.remove(rec);
    // a leftover of another process is deleted by its ID
    await w.remove({ ...rec, name: 'tidemark-2-b-0000' });
    expect(events).toEqual(['create C:\\', 'release', 'delete {s1}']);
    expect(await new WindowsSnapshots(undefined).target('C:\\x')).toEqual({
      none: expect.stringContaining('not built'),
    });
  });
});
