// Continuity against the real kernel: a tracker restart, a remount and a generation taken behind the store's
// back all force whole-file reads; a filesystem in a partition is mapped through the partition's offset on
// its disk (the block layer reports whole-disk sectors); writes through the raw device are seen too.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { cbtAvailability, hasAddpart, makeLoopExt4, type LoopFs } from './helpers.js';
import { BlockTracker, ensureBpfFs } from '../../src/main/tracking/blocks/tracker.js';
import {
  BlockChangeSession,
  computeChangedRanges,
  type FileMapper,
} from '../../src/main/tracking/blocks/store.js';
import { loadCbtNative } from '../../src/main/tracking/blocks/native.js';
import { resolveFilesystem } from '../../src/main/tracking/blocks/device.js';

const avail = cbtAvailability();
const MiB = 1 << 20;

function pwrite(f: string, off: number, buf: Buffer): void {
  const fd = fs.openSync(f, 'r+');
  fs.writeSync(fd, buf, 0, buf.length, off);
  fs.closeSync(fd);
}

async function startTracker(p: string): Promise<BlockTracker> {
  const t = await BlockTracker.start([p]);
  if (!t.ok) throw new Error(t.reason);
  return t.tracker;
}

describe.skipIf(!avail.ok)('block tracking continuity (real kernel)', () => {
  let loop: LoopFs;
  let mapper: FileMapper;
  beforeAll(() => {
    loop = makeLoopExt4(64);
    const load = loadCbtNative();
    if (!load.ok) throw new Error(load.reason);
    mapper = load.native;
  });
  afterAll(() => loop?.cleanup());

  async function backup(tracker: BlockTracker, file: string, logs: string[] = []) {
    const s = await BlockChangeSession.begin([loop.mnt], {
      dir: path.join(loop.dir, 'store'),
      consumer: 'job',
      tracker,
      mapper,
      log: (l) => logs.push(l),
    });
    const d = await s.rangesFor(file);
    await s.commit();
    return d;
  }

  it('a tracker restart, a remount and a stolen generation each force a whole read once', async () => {
    const f = path.join(loop.mnt, 'f.bin');
    fs.writeFileSync(f, randomBytes(4 * MiB));
    let tracker = await startTracker(loop.mnt);
    try {
      expect(await backup(tracker, f)).toEqual({ whole: expect.stringMatching(/no baseline/) });
      pwrite(f, MiB, Buffer.alloc(10, 1));
      expect(await backup(tracker, f)).toEqual({ ranges: [{ offset: MiB, length: 4096 }] });

      // the tracker restarts: whatever happened while it was down is unknown
      tracker.stop();
      pwrite(f, 2 * MiB, Buffer.alloc(10, 2));
      tracker = await startTracker(loop.mnt);
      const logs: string[] = [];
      expect(await backup(tracker, f, logs)).toEqual({ whole: expect.stringMatching(/no baseline/) });
      expect(logs.join('\n')).toMatch(/tracker was restarted/);
      expect(await backup(tracker, f)).toEqual({ ranges: [] });

      // remount: a new mount instance (the tracker keeps running, the disk is the same)
      loop.remount();
      expect(await backup(tracker, f)).toEqual({ whole: expect.stringMatching(/remounted/) });
      pwrite(f, 3 * MiB, Buffer.alloc(10, 3));
      expect(await backup(tracker, f)).toEqual({ ranges: [{ offset: 3 * MiB, length: 4096 }] });

      // the medium is swapped under the same device number (a loop image re-attached, a USB disk replugged)
      loop.reattach();
      const logs3: string[] = [];
      expect(await backup(tracker, f, logs3)).toEqual({ whole: expect.stringMatching(/no baseline/) });
      expect(logs3.join('\n')).toMatch(/disk changed/);
      expect(await backup(tracker, f)).toEqual({ ranges: [] });

      // a generation taken without the store (another program, a bug): the gap is detected
      const fsInfo = await resolveFilesystem(loop.mnt);
      await tracker.syncAndSwap([loop.mnt], fsInfo.disk);
      const logs2: string[] = [];
      expect(await backup(tracker, f, logs2)).toEqual({ whole: expect.stringMatching(/no baseline/) });
      expect(logs2.join('\n')).toMatch(/does not follow/);
    } finally {
      tracker.stop();
    }
  });

  it('writes through the raw block device are seen', async () => {
    const f = path.join(loop.mnt, 'raw.bin');
    fs.writeFileSync(f, randomBytes(MiB));
    const tracker = await startTracker(loop.mnt);
    try {
      await backup(tracker, f);
      const map = await mapper.fiemap(f);
      // write the file's 3rd block directly on the loop device (as a disk tool or a VM would)
      const fd = fs.openSync(loop.fsDev, 'r+');
      fs.writeSync(fd, Buffer.alloc(4096, 0xaa), 0, 4096, map.extents[0].physical + 2 * 4096);
      fs.fsyncSync(fd);
      fs.closeSync(fd);
      expect(await backup(tracker, f)).toEqual({ ranges: [{ offset: 8192, length: 4096 }] });
    } finally {
      tracker.stop();
    }
  });
});

const repoRoot = path.resolve(import.meta.dirname, '../..');
const asNobody = (args: string[]) =>
  spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--inh-caps=-all', ...args], {
    encoding: 'utf8',
    cwd: repoRoot,
  });
// needs setpriv, and a checkout the unprivileged user can read (not the case under /root, for one)
const hasSetpriv =
  spawnSync('sh', ['-c', 'command -v setpriv'], { stdio: 'ignore' }).status === 0 &&
  asNobody(['test', '-r', path.join(repoRoot, 'node_modules/tsx/package.json')]).status === 0;
describe.skipIf(!avail.ok || !hasSetpriv)('an unprivileged process', () => {
  it('gets a clear "unavailable" reason instead of a crash', () => {
    const r = spawnSync(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        '--inh-caps=-all',
        'env',
        'HOME=/tmp',
        process.execPath,
        'bin/run-ts.mjs',
        'tests/cbt/fixtures/unprivileged.ts',
        '/',
      ],
      { encoding: 'utf8', cwd: path.resolve(import.meta.dirname, '../..') },
    );
    expect(r.status, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out).toEqual({
      ok: false,
      reason: expect.stringMatching(/^unavailable: .*not permitted.*needs root, or CAP_BPF and CAP_PERFMON/),
    });
  });
});

describe.skipIf(!avail.ok || !hasAddpart())('block tracking of a filesystem in a partition', () => {
  let loop: LoopFs;
  beforeAll(() => {
    loop = makeLoopExt4(96, { partition: { startSector: 32768 + 8 * 3 } }); // 16 MiB + 12 KiB: not 64 KiB aligned
  });
  afterAll(() => loop?.cleanup());

  it('tracks the whole disk and maps file extents through the partition offset', async () => {
    const load = loadCbtNative();
    if (!load.ok) throw new Error(load.reason);
    const info = await resolveFilesystem(loop.mnt);
    expect(info.partStartSector).toBe(32768 + 24);
    expect(`/dev/${path.basename(loop.loopDev)}`).toBe(loop.loopDev);
    const diskDev = fs.readFileSync(`/sys/class/block/${path.basename(loop.loopDev)}/dev`, 'utf8').trim();
    expect(`${info.disk.major}:${info.disk.minor}`).toBe(diskDev);
    expect(`${info.major}:${info.minor}`).not.toBe(diskDev);

    const t = await BlockTracker.start([loop.mnt]);
    if (!t.ok) throw new Error(t.reason);
    const tracker = t.tracker;
    try {
      const f = path.join(loop.mnt, 'p.bin');
      fs.writeFileSync(f, randomBytes(8 * MiB));
      const opts = { dir: path.join(loop.dir, 'store'), consumer: 'job', tracker, mapper: load.native };
      let s = await BlockChangeSession.begin([loop.mnt], opts);
      await computeChangedRanges([f], s);
      await s.commit();
      const before = fs.readFileSync(f);
      const offsets = [0, 5 * 4096, MiB + 100, 7 * MiB + 4095];
      for (const o of offsets) pwrite(f, o, Buffer.alloc(2, 0x5a));
      s = await BlockChangeSession.begin([loop.mnt], opts);
      const ranges = (await computeChangedRanges([f], s)).get(f)!;
      await s.commit();
      const after = fs.readFileSync(f);
      const expected = [
        ...new Set(offsets.flatMap((o) => [Math.floor(o / 4096), Math.floor((o + 1) / 4096)])),
      ]
        .sort((a, b) => a - b)
        .map((b) => ({ offset: b * 4096, length: 4096 }));
      // merge adjacent blocks like the store does
      const merged: { offset: number; length: number }[] = [];
      for (const r of expected) {
        const p = merged[merged.length - 1];
        if (p && p.offset + p.length === r.offset) p.length += r.length;
        else merged.push({ ...r });
      }
      expect(ranges).toEqual(merged);
      for (let i = 0; i < after.length; i++)
        if (after[i] !== before[i])
          expect(ranges.some((r) => r.offset <= i && i < r.offset + r.length)).toBe(true);
    } finally {
      tracker.stop();
    }
  });
});

const bpffs = avail.ok ? ensureBpfFs() : 'no eBPF';
if (avail.ok && bpffs) console.warn(`pinned-tracker tests skipped: ${bpffs}`);
describe.skipIf(!avail.ok || bpffs !== null)('a pinned tracker', () => {
  let loop: LoopFs;
  beforeAll(() => {
    loop = makeLoopExt4(64);
  });
  afterAll(() => loop?.cleanup());

  it('keeps tracking while no process holds it, and a later start resumes the same session', async () => {
    const load = loadCbtNative();
    if (!load.ok) throw new Error(load.reason);
    const pin = `test-${process.pid}-${Date.now()}`;
    const f = path.join(loop.mnt, 'pinned.bin');
    fs.writeFileSync(f, randomBytes(4 * MiB));
    const opts = (tracker: BlockTracker) => ({
      dir: path.join(loop.dir, 'store'),
      consumer: 'job',
      tracker,
      mapper: load.native,
    });
    const start = async () => {
      const t = await BlockTracker.start([loop.mnt], { pin });
      if (!t.ok) throw new Error(t.reason);
      return t.tracker;
    };
    let tracker = await start();
    expect(tracker.resumed).toBe(false);
    const session = tracker.sessionId;
    let s = await BlockChangeSession.begin([loop.mnt], opts(tracker));
    await s.rangesFor(f);
    await s.commit('snap-1');
    tracker.stop(); // the app exits; the kernel part stays
    expect(fs.existsSync(`/sys/fs/bpf/tidemark-${pin}/bitmap`)).toBe(true);

    pwrite(f, 2 * MiB + 5, Buffer.alloc(100, 7)); // written while no process is tracking

    tracker = await start(); // the app starts again
    try {
      expect(tracker.resumed).toBe(true);
      expect(tracker.sessionId).toBe(session);
      const other = await start(); // a second process adopting it too shares the same generations
      expect(other.sessionId).toBe(session);
      other.stop();
      s = await BlockChangeSession.begin([loop.mnt], { ...opts(tracker), parentSnapshot: 'snap-1' });
      expect(await s.rangesFor(f)).toEqual({ ranges: [{ offset: 2 * MiB, length: 4096 }] });
      await s.commit('snap-2');
    } finally {
      tracker.stop({ unpin: true });
    }
    expect(fs.existsSync(`/sys/fs/bpf/tidemark-${pin}`)).toBe(false);
    tracker = await start(); // after an unpin, a new session: continuity is not claimed
    try {
      expect(tracker.resumed).toBe(false);
      expect(tracker.sessionId).not.toBe(session);
      const logs: string[] = [];
      s = await BlockChangeSession.begin([loop.mnt], { ...opts(tracker), log: (l) => logs.push(l) });
      expect(await s.rangesFor(f)).toEqual({ whole: expect.stringMatching(/no baseline/) });
      expect(logs.join('\n')).toMatch(/tracker was restarted/);
    } finally {
      tracker.stop({ unpin: true });
    }
  });

  it('a start with other disks or block size replaces the pinned tracker, and its old holders are told', async () => {
    const pin = `test3-${process.pid}-${Date.now()}`;
    const a = await BlockTracker.start([loop.mnt], { pin });
    if (!a.ok) throw new Error(a.reason);
    const b = await BlockTracker.start([loop.mnt], { pin, blockBytes: 8192 });
    if (!b.ok) throw new Error(b.reason);
    try {
      expect(b.tracker.resumed).toBe(false);
      expect(b.tracker.sessionId).not.toBe(a.tracker.sessionId);
      const disk = a.tracker.disks[0];
      await expect(a.tracker.syncAndSwap([loop.mnt], disk)).rejects.toThrow(/stopped by another process/);
      expect((await b.tracker.syncAndSwap([loop.mnt], disk)).blockShift).toBe(4);
    } finally {
      a.tracker.stop();
      b.tracker.stop({ unpin: true });
    }
  });

  it('a process still holding a tracker another one unpinned gets an error, so files are read whole', async () => {
    const load = loadCbtNative();
    if (!load.ok) throw new Error(load.reason);
    const pin = `test2-${process.pid}-${Date.now()}`;
    const a = await BlockTracker.start([loop.mnt], { pin });
    const b = await BlockTracker.start([loop.mnt], { pin });
    if (!a.ok || !b.ok) throw new Error('start failed');
    a.tracker.stop({ unpin: true });
    const f = path.join(loop.mnt, 'pinned.bin');
    const logs: string[] = [];
    const s = await BlockChangeSession.begin([loop.mnt], {
      dir: path.join(loop.dir, 'store2'),
      consumer: 'job',
      tracker: b.tracker,
      mapper: load.native,
      log: (l) => logs.push(l),
    });
    expect(logs.join('\n')).toMatch(/stopped by another process/);
    expect(await s.rangesFor(f)).toEqual({ whole: expect.stringMatching(/not swapped/) });
    b.tracker.stop();
  });
});
