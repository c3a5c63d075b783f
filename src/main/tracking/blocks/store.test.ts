// The store and range logic against a simulated disk: files are block maps over a disk whose blocks carry
// version numbers, and random operations (in-place writes, allocating writes, punch-hole, zero-range,
// relocation, growth, shrinking, replacement) change both. After every backup, each block whose content
// differs from the previous backup must lie in the reported ranges. Also: every continuity rule forces a
// whole-file read. Runs anywhere (no kernel tracker needed).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync, readFileSync, readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BlockBitmap } from './bitmap.js';
import {
  windowsTouched,
  BlockChangeSession,
  computeChangedRanges,
  readStoreFile,
  writeStoreFile,
  MAX_EPOCHS,
  type BeginOptions,
} from './store.js';
import type { BlockDelta, ChangedBlockSource } from './tracker.js';
import type { FilesystemInfo } from './device.js';
import type { NativeFileMap } from './native.js';
import type { ByteRange, ExtentTuple } from './ranges.js';

const B = 4096;
const PART_START_SECTOR = 2048; // the filesystem is a partition 1 MiB into the disk
const PART_BLOCKS = PART_START_SECTOR / 8;

type Entry = { kind: 'data' | 'unwritten'; p: number } | null;
interface FakeFile {
  ino: number;
  gen: number;
  size: number;
  blocks: Entry[]; // per logical block
}

function prng(seed: number) {
  let s = seed >>> 0;
  return (n: number) => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * n);
  };
}

class World {
  readonly diskBlocks = 8192; // 32 MiB disk of 4 KiB blocks
  readonly disk: { major: number; minor: number; sectors: number; diskseq?: number } = {
    major: 7,
    minor: 99,
    sectors: 8192 * 8,
  };
  ver = new Uint32Array(8192); // content version per disk block
  counter = 1;
  written = new BlockBitmap(8192);
  seq = 0;
  sessionId = 'session-1';
  overflow = false;
  mountId = 10;
  files = new Map<string, FakeFile>();
  nextIno = 100;
  used = new Set<number>();

  tracker: ChangedBlockSource = {
    get sessionId() {
      return world.sessionId;
    },
    tracks: () => true,
    syncAndSwap: async (): Promise<BlockDelta> => {
      const bm = this.written;
      this.written = new BlockBitmap(this.diskBlocks);
      this.seq++;
      const d = {
        sessionId: this.sessionId,
        seq: this.seq,
        blockShift: 3,
        bitmap: bm,
        overflow: this.overflow,
      };
      this.overflow = false;
      return d;
    },
  };

  writeDisk(p: number): void {
    this.ver[PART_BLOCKS + p] = ++this.counter;
    this.written.set(PART_BLOCKS + p);
  }
  alloc(): number {
    for (;;) {
      const p = 1 + rand(this.diskBlocks - PART_BLOCKS - 2);
      if (!this.used.has(p)) {
        this.used.add(p);
        return p;
      }
    }
  }
  free(e: Entry): void {
    if (e) this.used.delete(e.p);
  }
  content(f: FakeFile, l: number): number {
    const e = f.blocks[l];
    return e && e.kind === 'data' ? this.ver[PART_BLOCKS + e.p] : 0;
  }
  extents(f: FakeFile): ExtentTuple[] {
    const out: ExtentTuple[] = [];
    f.blocks.forEach((e, l) => {
      if (!e) return;
      const flags = e.kind === 'unwritten' ? 0x800 : 0;
      const prev = out[out.length - 1];
      // emit single-block extents half of the time, merged the other half: the store must not care
      if (
        prev &&
        rand(2) === 0 &&
        prev[0] + prev[2] === l * B &&
        prev[1] + prev[2] === e.p * B &&
        prev[3] === flags
      )
        prev[2] += B;
      else out.push([l * B, e.p * B, B, flags]);
    });
    if (out.length) out[out.length - 1][3] |= 1;
    return out;
  }
  mapper = {
    fiemap: async (p: string): Promise<NativeFileMap> => {
      const f = this.files.get(p);
      if (!f) throw new Error(`ENOENT ${p}`);
      return {
        size: f.size,
        ino: f.ino,
        devMajor: 8,
        devMinor: 1,
        mtimeNs: 0n,
        ctimeNs: 0n,
        blockSize: B,
        fsType: 0xef53,
        generation: f.gen,
        stable: true,
        extents: this.extents(f).map(([logical, physical, length, flags]) => ({
          logical,
          physical,
          length,
          flags,
        })),
      };
    },
    fsUuid: () => 'uuid-1',
  };
  resolveFs = async (p: string): Promise<FilesystemInfo> => ({
    major: 8,
    minor: 1,
    disk: this.disk,
    partStartSector: PART_START_SECTOR,
    mountId: this.mountId,
    mountUniqueId: String(this.mountId),
    mountPoint: path.dirname(p),
    fsType: 'ext4',
    mountOptions: ['rw'],
    uuid: 'uuid-1',
  });
}

let rand: (n: number) => number;
let world: World;
let dir: string;
let names: string[];

function opts(consumer = 'job'): BeginOptions {
  return {
    dir: path.join(dir, 'store'),
    consumer,
    tracker: world.tracker,
    mapper: world.mapper,
    resolveFs: world.resolveFs,
  };
}

function newFile(name: string, blocks: number): void {
  const f: FakeFile = { ino: world.nextIno++, gen: 1, size: blocks * B, blocks: [] };
  for (let l = 0; l < blocks; l++) {
    const p = world.alloc();
    world.writeDisk(p);
    f.blocks[l] = { kind: 'data', p };
  }
  world.files.set(name, f);
  writeFileSync(name, ''); // exists on disk (for stat); content lives in the model
}

function randomOp(name: string): void {
  const f = world.files.get(name)!;
  const nb = Math.ceil(f.size / B);
  const l = rand(Math.max(1, nb));
  switch (rand(9)) {
    case 0: // in-place write
    case 1: {
      const e = f.blocks[l];
      if (l >= nb) break;
      if (e && e.kind === 'data') world.writeDisk(e.p);
      else {
        world.free(e);
        const p = world.alloc();
        world.writeDisk(p);
        f.blocks[l] = { kind: 'data', p };
      }
      break;
    }
    case 2: // punch hole
      world.free(f.blocks[l]);
      f.blocks[l] = null;
      break;
    case 3: // zero range: unwritten extent over the same block
      if (f.blocks[l]) f.blocks[l] = { kind: 'unwritten', p: f.blocks[l]!.p };
      break;
    case 4: {
      // relocation (defrag): same content, new place
      const e = f.blocks[l];
      if (!e || e.kind !== 'data') break;
      const p = world.alloc();
      world.ver[PART_BLOCKS + p] = world.ver[PART_BLOCKS + e.p];
      world.written.set(PART_BLOCKS + p);
      world.free(e);
      f.blocks[l] = { kind: 'data', p };
      break;
    }
    case 5: {
      // append (partial last block sometimes)
      const add = 1 + rand(3 * B);
      const newSize = f.size + add;
      for (let b = Math.floor(f.size / B); b * B < newSize; b++) {
        if (!f.blocks[b]) f.blocks[b] = { kind: 'data', p: world.alloc() };
        world.writeDisk(f.blocks[b]!.p);
      }
      f.size = newSize;
      break;
    }
    case 6: {
      // truncate down (maybe to a partial block), freeing what lies beyond
      const newSize = rand(f.size + 1);
      const keep = Math.ceil(newSize / B);
      for (let b = keep; b < f.blocks.length; b++) world.free(f.blocks[b]);
      f.blocks.length = Math.min(f.blocks.length, keep);
      if (newSize % B && f.blocks[keep - 1]?.kind === 'data') world.writeDisk(f.blocks[keep - 1]!.p); // tail zeroing
      f.size = newSize;
      break;
    }
    case 7: // extend with a hole
      f.size += rand(4 * B);
      break;
    case 8: // a write elsewhere on the disk (another file, metadata)
      world.writeDisk(world.alloc());
      break;
  }
}

function expectCovered(
  label: string,
  before: number[],
  beforeSize: number,
  name: string,
  ranges: ByteRange[],
): void {
  const f = world.files.get(name)!;
  const covered = (lo: number, hi: number) => ranges.some((r) => r.offset <= lo && r.offset + r.length >= hi);
  for (let l = 0; l * B < f.size; l++) {
    const lo = l * B;
    const hi = Math.min(f.size, lo + B);
    const contentChanged = lo < beforeSize && before[l] !== world.content(f, l);
    let need: [number, number] | null = null;
    if (contentChanged) need = [lo, hi];
    else if (hi > beforeSize) need = [Math.max(lo, beforeSize), hi]; // bytes past the old end
    if (need && !covered(need[0], need[1]))
      throw new Error(
        `${label}: ${path.basename(name)} bytes ${need[0]}..${need[1]} changed but not in ${JSON.stringify(ranges)}`,
      );
  }
}

beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'tidemark-cbt-unit-'));
  world = new World();
  rand = prng(Number(process.env.CBT_SEED ?? 42));
  names = ['a', 'b', 'c'].map((n) => path.join(dir, `${n}.img`));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('block change store on a simulated disk', () => {
  it('covers every changed block through random writes, holes, relocations, growth and shrinking', async () => {
    for (const n of names) newFile(n, 64);
    let s = await BlockChangeSession.begin([dir], opts());
    expect((await computeChangedRanges(names, s)).size).toBe(0);
    await s.commit();
    let incremental = 0;
    // ranges are relative to the last committed backup (a failed one leaves the parent snapshot as it was)
    const snapshot = (f: FakeFile) =>
      Array.from({ length: Math.ceil(f.size / B) }, (_, l) => world.content(f, l));
    let before = new Map(names.map((n) => [n, snapshot(world.files.get(n)!)]));
    let sizes = new Map(names.map((n) => [n, world.files.get(n)!.size]));
    for (let round = 0; round < 60; round++) {
      for (let i = 0; i < 1 + rand(12); i++) randomOp(names[rand(names.length)]);
      s = await BlockChangeSession.begin([dir], opts());
      const whole: string[] = [];
      const m = await computeChangedRanges(names, s, { onWholeFile: (f, r) => whole.push(`${f}: ${r}`) });
      expect(whole).toEqual([]);
      for (const n of names) expectCovered(`round ${round}`, before.get(n)!, sizes.get(n)!, n, m.get(n)!);
      incremental += names.filter(
        (n) => m.get(n)!.reduce((x, r) => x + r.length, 0) < world.files.get(n)!.size,
      ).length;
      // a third of the backups "fail" (no commit): the next one must still cover both intervals
      if (rand(3) > 0) {
        await s.commit();
        before = new Map(names.map((n) => [n, snapshot(world.files.get(n)!)]));
        sizes = new Map(names.map((n) => [n, world.files.get(n)!.size]));
      }
    }
    expect(incremental).toBeGreaterThan(60); // ranges are really narrower than the files
  });

  it('an untouched file has no changed ranges and a one-block write gives exactly that block', async () => {
    newFile(names[0], 16);
    newFile(names[1], 16);
    let s = await BlockChangeSession.begin([dir], opts());
    await computeChangedRanges(names, s);
    await s.commit();
    world.writeDisk(world.files.get(names[1])!.blocks[5]!.p);
    s = await BlockChangeSession.begin([dir], opts());
    const m = await computeChangedRanges(names, s);
    expect(m.get(names[0])).toEqual([]);
    expect(m.get(names[1])).toEqual([{ offset: 5 * B, length: B }]);
  });
});

describe('continuity: anything unproven means reading the whole file', () => {
  async function baseline(): Promise<void> {
    newFile(names[0], 8);
    const s = await BlockChangeSession.begin([dir], opts());
    await computeChangedRanges(names.slice(0, 1), s);
    await s.commit();
  }
  async function decision(log?: string[]): Promise<string> {
    const s = await BlockChangeSession.begin([dir], { ...opts(), log: (l) => log?.push(l) });
    const d = await s.rangesFor(names[0]);
    await s.commit();
    return 'whole' in d ? d.whole : 'ranges';
  }
  const storeFile = () =>
    path.join(
      dir,
      'store',
      readdirSync(path.join(dir, 'store')).find((n) => n.endsWith('.cbt'))!,
    );

  it('baseline then no event: ranges', async () => {
    await baseline();
    expect(await decision()).toBe('ranges');
  });
  it('the tracker restarted', async () => {
    await baseline();
    world.sessionId = 'session-2';
    world.seq = 0;
    const log: string[] = [];
    expect(await decision(log)).toMatch(/no baseline/);
    expect(log.join()).toMatch(/tracker was restarted/);
    expect(await decision()).toBe('ranges'); // and the next backup is incremental again
  });
  it('a generation was taken without reaching the store', async () => {
    await baseline();
    await world.tracker.syncAndSwap([dir], world.disk);
    const log: string[] = [];
    expect(await decision(log)).toMatch(/no baseline/);
    expect(log.join()).toMatch(/does not follow/);
  });
  it('the kernel saw a write it could not place', async () => {
    await baseline();
    world.overflow = true;
    const log: string[] = [];
    expect(await decision(log)).toMatch(/no baseline/);
    expect(log.join()).toMatch(/could not place/);
  });
  it('the store is missing', async () => {
    await baseline();
    rmSync(storeFile());
    expect(await decision()).toMatch(/no baseline/);
  });
  it('the store is corrupt', async () => {
    await baseline();
    const f = storeFile();
    writeFileSync(f, readFileSync(f, 'utf8').replace('"epochs"', '"epochz"'));
    const log: string[] = [];
    expect(await decision(log)).toMatch(/no baseline/);
    expect(log.join()).toMatch(/checksum mismatch/);
  });
  it('the machine rebooted', async () => {
    await baseline();
    const f = storeFile();
    const body = (await readStoreFile(f))!;
    body.bootId = 'another-boot';
    await writeStoreFile(f, body);
    const log: string[] = [];
    expect(await decision(log)).toMatch(/no baseline/);
    expect(log.join()).toMatch(/rebooted/);
  });
  it('the disk was replaced (a new diskseq for the same device number)', async () => {
    world.disk.diskseq = 5;
    await baseline();
    expect(await decision()).toBe('ranges');
    world.disk.diskseq = 6;
    const log: string[] = [];
    expect(await decision(log)).toMatch(/no baseline/);
    expect(log.join()).toMatch(/disk changed/);
  });
  it('the filesystem was remounted', async () => {
    await baseline();
    world.mountId++;
    expect(await decision()).toMatch(/remounted/);
  });
  it('the parent snapshot is not the one that recorded the baseline', async () => {
    newFile(names[0], 8);
    let s = await BlockChangeSession.begin([dir], opts());
    await s.rangesFor(names[0]);
    await s.commit('snap-1');
    s = await BlockChangeSession.begin([dir], { ...opts(), parentSnapshot: 'snap-0' });
    expect(await s.rangesFor(names[0])).toEqual({
      whole: expect.stringMatching(/recorded by snapshot snap-1, not by the parent snap-0/),
    });
    s = await BlockChangeSession.begin([dir], { ...opts(), parentSnapshot: 'snap-1' });
    expect(await s.rangesFor(names[0])).toEqual({ ranges: [] });
  });
  it('commit(snapshot, onlyFiles) moves only the baselines of files the backup really read', async () => {
    newFile(names[0], 4);
    newFile(names[1], 4);
    let s = await BlockChangeSession.begin([dir], opts());
    await computeChangedRanges(names.slice(0, 2), s);
    await s.commit('snap-1');
    world.writeDisk(world.files.get(names[0])!.blocks[1]!.p);
    world.writeDisk(world.files.get(names[1])!.blocks[2]!.p);
    s = await BlockChangeSession.begin([dir], opts());
    await computeChangedRanges(names.slice(0, 2), s);
    await s.commit('snap-2', [names[0]]); // names[1] was not read by this backup
    s = await BlockChangeSession.begin([dir], opts());
    const m = await computeChangedRanges(names.slice(0, 2), s);
    expect(m.get(names[0])).toEqual([]);
    expect(m.get(names[1])).toEqual([{ offset: 2 * B, length: B }]); // still relative to snap-1
  });
  it('the file was replaced by another inode', async () => {
    await baseline();
    world.files.get(names[0])!.ino = 999;
    expect(await decision()).toMatch(/new inode/);
  });
  it('the extent map has flags we cannot reason about', async () => {
    await baseline();
    const real = world.mapper.fiemap;
    world.mapper.fiemap = async (p) => {
      const m = await real(p);
      m.extents[0].flags |= 0x2000; // shared
      return m;
    };
    expect(await decision()).toMatch(/shared/);
  });
  it('the file changed while it was mapped', async () => {
    await baseline();
    const real = world.mapper.fiemap;
    world.mapper.fiemap = async (p) => ({ ...(await real(p)), stable: false });
    expect(await decision()).toMatch(/changed while/);
  });
  it('a file left out of many backups keeps an exact baseline (epochs merge, the store stays small)', async () => {
    await baseline();
    newFile(names[1], 2);
    for (let i = 0; i < MAX_EPOCHS + 5; i++) {
      world.writeDisk(world.files.get(names[1])!.blocks[0]!.p);
      const s = await BlockChangeSession.begin([dir], opts());
      await computeChangedRanges([names[1]], s);
      await s.commit();
    }
    world.writeDisk(world.files.get(names[0])!.blocks[3]!.p);
    const s = await BlockChangeSession.begin([dir], opts());
    expect(await s.rangesFor(names[0])).toEqual({ ranges: [{ offset: 3 * B, length: B }] });
    const body = (await readStoreFile(storeFile()))!;
    expect(body.epochs.length).toBeLessThanOrEqual(3);
  });
  it(`baselines from more than ${MAX_EPOCHS} distinct backups: the oldest are dropped`, async () => {
    const many = Array.from({ length: MAX_EPOCHS + 3 }, (_, i) => path.join(dir, `m${i}.img`));
    for (const f of many) newFile(f, 1);
    for (const f of many) {
      const s = await BlockChangeSession.begin([dir], opts());
      await computeChangedRanges([f], s);
      await s.commit();
    }
    const s = await BlockChangeSession.begin([dir], opts());
    expect(await s.rangesFor(many[0])).toEqual({ whole: expect.stringMatching(/no baseline/) });
    expect(await s.rangesFor(many[many.length - 1])).toEqual({ ranges: [] });
  });
});

describe('spread changes', () => {
  it('a file whose changes touch most chunk-sized windows is left to one plain read', async () => {
    newFile(names[0], 64); // 256 KiB
    newFile(names[1], 64);
    let s = await BlockChangeSession.begin([dir], opts());
    await computeChangedRanges(names.slice(0, 2), s);
    await s.commit();
    for (let l = 0; l < 64; l += 4) world.writeDisk(world.files.get(names[0])!.blocks[l]!.p); // every 16 KiB
    world.writeDisk(world.files.get(names[1])!.blocks[9]!.p);
    s = await BlockChangeSession.begin([dir], opts());
    const why: string[] = [];
    const m = await computeChangedRanges(names.slice(0, 2), s, {
      spread: { window: 16 * 1024, maxFraction: 0.5 },
      onWholeFile: (_, r) => why.push(r),
    });
    expect(m.has(names[0])).toBe(false);
    expect(why).toEqual([expect.stringMatching(/touch 100% of its 16384-byte windows/)]);
    expect(m.get(names[1])).toEqual([{ offset: 9 * B, length: B }]);
  });
  it('windowsTouched counts each window once', async () => {
    expect(
      windowsTouched(
        [
          { offset: 0, length: 1 },
          { offset: 10, length: 5 },
          { offset: 100, length: 101 },
        ],
        400,
        100,
      ),
    ).toBe(0.75);
    expect(windowsTouched([], 400, 100)).toBe(0);
  });
});

describe('BlockBitmap', () => {
  it('run-length encodes and decodes any pattern', () => {
    const r = prng(7);
    for (const blocks of [1, 7, 8, 9, 63, 64, 65, 1000, 100_003]) {
      const bm = new BlockBitmap(blocks);
      for (let i = 0; i < blocks / 10; i++) {
        const a = r(blocks);
        bm.setRange(a, Math.min(blocks - 1, a + r(40)));
      }
      const back = BlockBitmap.decode(blocks, bm.encode());
      expect(Buffer.from(back.bytes).equals(Buffer.from(bm.bytes))).toBe(true);
      const runs: [number, number][] = [];
      bm.forEachSetRun(0, blocks - 1, (a, b) => runs.push([a, b]));
      expect(runs.reduce((n, [a, b]) => n + b - a + 1, 0)).toBe(bm.count());
      for (const [a, b] of runs) for (let x = a; x <= b; x++) expect(bm.get(x)).toBe(true);
    }
    expect(BlockBitmap.decode(1 << 20, new BlockBitmap(1 << 20).encode()).isEmpty()).toBe(true);
    expect(new BlockBitmap(1 << 20).encode().length).toBeLessThan(8);
  });
  it('rejects a damaged encoding', () => {
    const bm = new BlockBitmap(100);
    bm.set(50);
    const enc = bm.encode();
    expect(() => BlockBitmap.decode(101, enc)).toThrow(/covers 100 of 101/);
    expect(() => BlockBitmap.decode(100, enc.subarray(0, enc.length - 1))).toThrow();
  });
});
