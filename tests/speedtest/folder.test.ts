// The speed test on a folder, for real: every pattern runs briefly on a temporary folder and the ops the
// engine issued are counted from its own trace and counters — the read/write mix, sequential or random
// offsets, 4 KiB alignment, block sizes, the queue depth reached — with each engine (Linux AIO with
// O_DIRECT, threads, the JavaScript fallback). Then the safety rules: no room, a disk that fills up, a
// destination that vanishes, cancel, and what an interrupted test left behind (never a repository file).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runFolderSpeedTest } from '../../src/main/engine/speedtest/folder.js';
import { DISK_PATTERNS } from '../../src/main/engine/speedtest/patterns.js';
import { nativeIoTest } from '../../src/main/engine/speedtest/ioRun.js';
import type { PatternResult, SpeedTestProgress } from '../../src/main/engine/speedtest/types.js';
import { probeName } from '../../src/main/engine/speedtest/probes.js';

const MiB = 1024 * 1024;
const KiB = 1024;
const FILE = 32 * MiB;
const native = nativeIoTest();
const linux = process.platform === 'linux';
const root = process.getuid?.() === 0;

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-speedtest-'));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function fresh(name: string): string {
  const d = path.join(tmp, name);
  fs.mkdirSync(d, { recursive: true });
  return d;
}

interface Op {
  write: boolean;
  offset: number;
  length: number;
  thread: number;
}
function opsOf(r: PatternResult): Op[] {
  const t = r.trace ?? [];
  const out: Op[] = [];
  for (let i = 0; i + 3 < t.length; i += 4)
    out.push({ write: t[i] === 1, offset: t[i + 1], length: t[i + 2], thread: t[i + 3] });
  return out;
}

/** Checks what a pattern issued against what it is meant to issue. */
function checkPattern(r: PatternResult, fileSize: number, expectDepth: boolean): void {
  const def = DISK_PATTERNS.find((p) => p.id === r.pattern)!;
  const ops = opsOf(r);
  const total = r.reads + r.writes;
  expect(total, r.pattern).toBeGreaterThan(0);
  expect(ops.length, r.pattern).toBeGreaterThan(0);
  // bytes are whole blocks; nothing misaligned (offset, length or memory)
  expect(r.bytesRead, r.pattern).toBe(r.reads * r.blockSize);
  expect(r.bytesWritten, r.pattern).toBe(r.writes * r.blockSize);
  expect(r.misaligned, r.pattern).toBe(0);
  for (const op of ops) {
    expect(op.offset % 4096, r.pattern).toBe(0);
    expect(op.length, r.pattern).toBe(r.blockSize);
    expect(op.offset + op.length, r.pattern).toBeLessThanOrEqual(fileSize);
  }
  // the mix: pure patterns are pure; mixed ones near their share (binomial: 5 standard deviations)
  if (def.readPercent === 0) expect(r.reads, r.pattern).toBe(0);
  else if (def.readPercent === 100) expect(r.writes, r.pattern).toBe(0);
  else {
    const p = def.readPercent / 100;
    const sd = Math.sqrt((p * (1 - p)) / total);
    expect(Math.abs(r.reads / total - p), `${r.pattern} read share`).toBeLessThan(5 * sd + 0.01);
    const tracedReads = ops.filter((o) => !o.write).length / ops.length;
    expect(Math.abs(tracedReads - p), `${r.pattern} traced read share`).toBeLessThan(
      5 * Math.sqrt((p * (1 - p)) / ops.length) + 0.01,
    );
  }
  // sequential: each thread walks its share of the file block after block; random: scattered offsets
  const byThread = new Map<number, Op[]>();
  for (const op of ops) byThread.set(op.thread, [...(byThread.get(op.thread) ?? []), op]);
  expect(byThread.size, r.pattern).toBe(r.threads);
  const region = Math.floor(fileSize / r.threads / r.blockSize) * r.blockSize;
  for (const [t, list] of byThread) {
    if (!def.random) {
      if (r.depth === 1 || r.engine === 'aio')
        list.forEach((op, k) =>
          expect(op.offset, `${r.pattern} thread ${t} op ${k}`).toBe(
            t * region + ((k * r.blockSize) % region),
          ),
        );
      else {
        // several threads share one worker's cursor: its offsets are its region's blocks, each once
        const offsets = list.map((o) => o.offset).sort((a, b) => a - b);
        offsets.forEach((o) => expect(o >= t * region && o < (t + 1) * region).toBe(true));
      }
    } else if (list.length > 8) {
      const steps = list.slice(1).filter((op, k) => op.offset === list[k].offset + r.blockSize).length;
      expect(steps / (list.length - 1), `${r.pattern} sequential steps`).toBeLessThan(0.2);
      expect(new Set(list.map((o) => o.offset)).size, r.pattern).toBeGreaterThan(list.length / 2);
    }
  }
  expect(r.maxInFlight, r.pattern).toBeLessThanOrEqual(r.depth);
  if (expectDepth) expect(r.maxInFlight, r.pattern).toBe(r.depth);
  expect(r.mibps, r.pattern).toBeGreaterThan(0);
  expect(r.iops, r.pattern).toBeGreaterThan(0);
  expect(r.latencyUs.p50, r.pattern).toBeGreaterThan(0);
  expect(r.latencyUs.p99!, r.pattern).toBeGreaterThanOrEqual(r.latencyUs.p95!);
  expect(r.latencyUs.p95!, r.pattern).toBeGreaterThanOrEqual(r.latencyUs.p50!);
}

describe('every pattern issues the I/O it stands for', () => {
  it.skipIf(!native || !linux)(
    'native engine, Linux AIO with O_DIRECT: 2 threads × 4 in flight',
    async () => {
      const dir = fresh('aio');
      const phases = new Set<string>();
      const res = await runFolderSpeedTest(dir, {
        fileSize: FILE,
        blockSize: 64 * KiB,
        durationMs: 300,
        threads: 2,
        queueDepth: 4,
        trace: 400,
        progress: (p) => phases.add(p.phase),
      });
      expect(res.results.map((r) => r.pattern)).toEqual(DISK_PATTERNS.map((p) => p.id));
      for (const r of res.results) {
        expect(r.direct, r.pattern).toBe(true);
        expect(r.engine, r.pattern).toBe('aio');
        checkPattern(r, FILE, true);
      }
      const byId = Object.fromEntries(res.results.map((r) => [r.pattern, r]));
      // the DiskSpd patterns take the test's block, threads and depth; Tidemark's take the engine's own
      expect(byId['active-full']).toMatchObject({
        blockSize: 64 * KiB,
        threads: 2,
        depth: 4,
        readPercent: 0,
      });
      expect(byId['synthetic-full']).toMatchObject({ readPercent: 50, random: true, align: 4096 });
      expect(byId['reverse-incremental']).toMatchObject({ readPercent: 33, random: true });
      expect(byId.pack).toMatchObject({ blockSize: 16 * MiB, threads: 1, depth: 1 });
      expect(byId['small-file-restore']).toMatchObject({ blockSize: 16 * KiB, threads: 1, depth: 4 });
      expect([...phases]).toEqual(['checking', 'preparing', 'testing', 'cleaning', 'done']);
      expect(res.samples.length).toBeGreaterThan(0);
      expect(fs.readdirSync(dir)).toEqual([]); // the test file is gone
    },
  );

  it.skipIf(!native)('native engine, threads (one synchronous operation each)', async () => {
    const dir = fresh('threads');
    const res = await runFolderSpeedTest(dir, {
      fileSize: FILE,
      blockSize: 128 * KiB,
      durationMs: 250,
      threads: 2,
      queueDepth: 2,
      trace: 300,
      engine: 'threads',
      patterns: ['active-full', 'synthetic-full', 'reverse-incremental', 'restore'],
    });
    for (const r of res.results) {
      expect(r.engine).toBe('threads');
      checkPattern(r, FILE, false);
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('the JavaScript fallback (no native engine) issues the same patterns', async () => {
    const dir = fresh('node');
    const res = await runFolderSpeedTest(dir, {
      fileSize: FILE,
      blockSize: 64 * KiB,
      durationMs: 250,
      threads: 1,
      queueDepth: 3,
      trace: 300,
      engine: 'node',
      patterns: ['active-full', 'synthetic-full', 'small-file-restore'],
    });
    for (const r of res.results) {
      expect(r.engine).toBe('node');
      expect(r.direct).toBe(linux);
      checkPattern(r, FILE, false);
    }
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});

/** Every file under `dir` with its size and modification time (what "untouched" means). */
function treeOf(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        const st = fs.statSync(p);
        out[path.relative(dir, p)] =
          `${st.size}:${st.mtimeMs}:${fs.readFileSync(p).toString('base64').slice(0, 64)}`;
      }
    }
  };
  walk(dir);
  return out;
}

function deadPid(): number {
  for (let pid = 4_000_000; ; pid++) {
    try {
      process.kill(pid, 0);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ESRCH') return pid;
    }
  }
}

describe('safety', () => {
  it('refuses a folder without room for the test file and a margin, and writes nothing', async () => {
    const dir = fresh('noroom');
    // the real free space of the temporary folder's filesystem cannot hold 1 TiB and a margin
    await expect(
      runFolderSpeedTest(dir, { fileSize: 1024 * 1024 * MiB, patterns: ['restore'] }),
    ).rejects.toMatchObject({
      code: 'DESTINATION_FULL',
      message: expect.stringMatching(/not enough free space in .*noroom.*1024\.0 GiB for its test file/),
    });
    // and an injected small free space: the margin counts
    await expect(
      runFolderSpeedTest(dir, {
        fileSize: FILE,
        patterns: ['restore'],
        freeSpace: async () => ({ free: FILE + 100 * MiB, total: 1024 * MiB }),
      }),
    ).rejects.toMatchObject({ code: 'DESTINATION_FULL', message: expect.stringMatching(/256 MiB to spare/) });
    expect(fs.readdirSync(dir)).toEqual([]);
  });

  it('cancel stops the run and the test file is gone', async () => {
    const dir = fresh('cancel');
    const ac = new AbortController();
    let sawFile = false;
    const seen: SpeedTestProgress[] = [];
    const p = runFolderSpeedTest(dir, {
      fileSize: FILE,
      durationMs: 60_000,
      patterns: ['synthetic-full', 'restore'],
      signal: ac.signal,
      progress: (x) => {
        seen.push(x);
        if (x.phase === 'testing' && !ac.signal.aborted) {
          sawFile = fs.readdirSync(dir).some((n) => n.startsWith('.tidemark-speedtest-'));
          ac.abort();
        }
      },
    });
    await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
    expect(sawFile).toBe(true);
    expect(fs.readdirSync(dir)).toEqual([]);
    // the cancelled pattern produced no result and the next one never started
    expect(seen.some((x) => x.pattern === 'restore')).toBe(false);
    expect(seen.at(-1)!.results).toEqual([]);
  });

  it('a destination that vanishes mid-test is a clear DestinationGoneError', async () => {
    const dir = fresh('vanish');
    let removed = false;
    await expect(
      runFolderSpeedTest(dir, {
        fileSize: FILE,
        durationMs: 60_000,
        patterns: ['reverse-incremental'],
        progress: (x) => {
          if (x.phase === 'testing' && !removed) {
            removed = true;
            fs.rmSync(dir, { recursive: true, force: true });
          }
        },
      }),
    ).rejects.toMatchObject({
      name: 'DestinationGoneError',
      code: 'DESTINATION_GONE',
      message: expect.stringMatching(/vanish.*stopped answering.*unplugged, the share unmounted/),
    });
    expect(removed).toBe(true);
  });

  it('a destination that is a file, or a folder not made yet', async () => {
    const file = path.join(fresh('isfile'), 'f');
    fs.writeFileSync(file, 'x');
    await expect(runFolderSpeedTest(file, { fileSize: FILE, patterns: ['restore'] })).rejects.toMatchObject({
      code: 'DESTINATION_UNWRITABLE',
      message: expect.stringMatching(/is a file, not a folder/),
    });
    const parent = fresh('notyet');
    const res = await runFolderSpeedTest(path.join(parent, 'a', 'b'), {
      fileSize: FILE,
      durationMs: 150,
      patterns: ['restore'],
    });
    expect(res.location).toBe(parent);
    expect(res.notes.join('\n')).toMatch(/does not exist yet: tested in .*notyet, where it will be made/);
    expect(fs.readdirSync(parent)).toEqual([]);
  });

  it('removes what an interrupted test left, never a repository file or a live test of another computer', async () => {
    const dir = fresh('stale');
    const { initRepository } = await import('../../src/main/engine/repo/repository.js');
    const { LocalBackend } = await import('../../src/main/engine/backend/local/index.js');
    const repo = await initRepository(new LocalBackend(dir), 'pw-123', { kdf: { N: 1024 } });
    await repo.saveBlob(0, Buffer.from('some data'));
    await repo.flush();
    await repo.close();
    const before = treeOf(dir);
    expect(Object.keys(before).some((k) => k.startsWith('data'))).toBe(true);
    const stale = `.tidemark-speedtest-${probeName(Date.now() + 3_600_000, os.hostname(), deadPid())}.tmp`;
    const expired = `.tidemark-speedtest-${probeName(Date.now() - 1000, 'other-pc', 1)}.tmp`;
    const live = `.tidemark-speedtest-${probeName(Date.now() + 3_600_000, 'other-pc', 1)}.tmp`;
    for (const n of [stale, expired, live]) fs.writeFileSync(path.join(dir, n), 'left behind');
    const res = await runFolderSpeedTest(dir, {
      fileSize: FILE,
      durationMs: 150,
      patterns: ['synthetic-full'],
    });
    expect(res.staleRemoved).toBe(2);
    expect(fs.existsSync(path.join(dir, stale))).toBe(false);
    expect(fs.existsSync(path.join(dir, expired))).toBe(false);
    expect(fs.existsSync(path.join(dir, live))).toBe(true);
    fs.rmSync(path.join(dir, live));
    expect(treeOf(dir)).toEqual(before);
  });

  describe.skipIf(!linux || !root)('on filesystems of its own (root)', () => {
    const mounts: string[] = [];
    afterAll(() => {
      for (const m of mounts) {
        try {
          execFileSync('umount', [m]);
        } catch {}
      }
    });
    const mount = (type: string, opts: string, name: string) => {
      const m = fresh(name);
      execFileSync('mount', ['-t', type, '-o', opts, type, m]);
      mounts.push(m);
      return m;
    };

    it('a filesystem that refuses O_DIRECT (ramfs) is measured through the page cache, and says so', async () => {
      const m = mount('ramfs', 'size=64m', 'ramfs-issue28');
      const res = await runFolderSpeedTest(m, {
        fileSize: 16 * MiB,
        blockSize: 64 * KiB,
        durationMs: 150,
        trace: 100,
        patterns: ['active-full', 'synthetic-full'],
      });
      for (const r of res.results) {
        expect(r.direct).toBe(false);
        expect(r.note).toMatch(/refused O_DIRECT/);
        checkPattern(r, 16 * MiB, false);
      }
      expect(res.notes.join('\n')).toMatch(/refused O_DIRECT .*page cache/);
      expect(fs.readdirSync(m)).toEqual([]);
    });

    it('a disk that fills up during the test is a DestinationFullError, and the test file is removed', async () => {
      const m = mount('tmpfs', 'size=20m', 'full-issue28');
      await expect(
        runFolderSpeedTest(m, {
          fileSize: FILE,
          patterns: ['active-full'],
          // as if something else had taken the space after the check
          freeSpace: async () => ({ free: 10 * 1024 * MiB, total: 20 * 1024 * MiB }),
        }),
      ).rejects.toMatchObject({
        name: 'DestinationFullError',
        code: 'DESTINATION_FULL',
        message: expect.stringMatching(/full-issue28 filled up \(ENOSPC/),
      });
      expect(fs.readdirSync(m)).toEqual([]);
    });
  });
});
