/**
 * Repair and restore-test benchmark (issue 30): the bench dataset (bench/dataset.ts) backed up into a
 * local folder repository, then, round after round:
 *   - check --read-data (what repair's first step costs at least: every pack read and verified);
 *   - repair of the healthy repository (it reads every pack and finds nothing to do);
 *   - repair after a byte was flipped in five data packs (sound blobs copied out, the damaged ones read
 *     again from the source files): its time, what it saved, and the event-loop delay while it ran
 *     (hashing the source files happens on the calling thread, a piece at a time);
 *   - repair after every index file was deleted (the index rebuilt from the packs);
 *   - a restore test of 20 random files, and one of every block file (the database).
 * Prints each round and the median / spread. The page cache is warm (nothing is dropped).
 *
 *   npm run bench:repair                         # scale 0.5 (~560 MB) under .bench/repair, 3 rounds
 *   npm run bench:repair -- --scale 1 --rounds 5 --dir /var/tmp/tm-repair --keep
 */
import '../src/main/engineHost.js'; // the process settings of the app's engine processes (pool size, V8 tiering)
import fs from 'node:fs/promises';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { LocalBackend } from '../src/main/engine/backend/local/index.js';
import { Repository } from '../src/main/engine/repo/repository.js';
import { backup } from '../src/main/engine/backup/index.js';
import { check } from '../src/main/engine/check/index.js';
import { repair } from '../src/main/engine/repair/index.js';
import { restoreTest } from '../src/main/engine/restoretest/index.js';
import { BlobType } from '../src/main/engine/repo/blobIndex.js';
import { makeDataset } from './dataset.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
}
const SCALE = Number(arg('scale', '0.5'));
const ROUNDS = Number(arg('rounds', '3'));
const BASE = path.resolve(arg('dir', '.bench/repair'));
const KEEP = process.argv.includes('--keep');
const PW = 'bench password';

const fmt = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const open = () => Repository.open(new LocalBackend(path.join(BASE, 'repo')), PW);

/** Runs `fn` on a freshly opened repository (opening — the password's key derivation — not timed). */
async function timed<T>(
  fn: (r: Repository) => Promise<T>,
): Promise<{ ms: number; value: T; p99: number; max: number }> {
  const r = await open();
  try {
    const h = monitorEventLoopDelay({ resolution: 5 });
    h.enable();
    const t = performance.now();
    const value = await fn(r);
    const ms = performance.now() - t;
    h.disable();
    const delay = (ns: number) => Math.max(0, ns / 1e6 - 5);
    return { ms, value, p99: delay(h.percentile(99)), max: delay(h.max) };
  } finally {
    await r.close();
  }
}

async function withRepo<T>(fn: (r: Repository) => Promise<T>): Promise<T> {
  const r = await open();
  try {
    return await fn(r);
  } finally {
    await r.close();
  }
}

/** Flips a byte in the middle of `n` data packs (packs holding no tree), spread over the repository. */
async function damagePacks(n: number, round: number): Promise<void> {
  await withRepo(async (repo) => {
    await repo.loadIndex();
    const trees = repo.index.countsByPack(BlobType.Tree);
    const packs = repo.index
      .packs()
      .filter((p) => !trees.has(p))
      .sort();
    for (let i = 0; i < n; i++) {
      const p = packs[(i * 7919 + round * 104729) % packs.length];
      const file = repo.backend.localFile!('data', p)!;
      await fs.chmod(file, 0o644);
      const fh = await fs.open(file, 'r+');
      const { size } = await fh.stat();
      const b = Buffer.alloc(1);
      const at = Math.floor(size / 2);
      await fh.read(b, 0, 1, at);
      b[0] ^= 0xff;
      await fh.write(b, 0, 1, at);
      await fh.close();
    }
  });
}

async function main(): Promise<void> {
  await fs.mkdir(BASE, { recursive: true });
  const data = await makeDataset(path.join(BASE, 'data'), SCALE);
  await fs.rm(path.join(BASE, 'repo'), { recursive: true, force: true });
  const init = await Repository.init(new LocalBackend(path.join(BASE, 'repo')), PW);
  await backup(init, { paths: [data.root], blockFiles: {} });
  await init.close();
  console.log(
    `dataset: ${data.files} files, ${(data.bytes / 1e6).toFixed(0)} MB (scale ${SCALE}); repository in ${BASE}/repo`,
  );
  const rows: Record<string, number[]> = {};
  const note = (k: string, ms: number) => (rows[k] ??= []).push(ms);
  for (let round = 1; round <= ROUNDS; round++) {
    const c = await timed((r) => check(r, { readData: true }));
    if (!c.value.ok) throw new Error('the repository is not clean before the round');
    note('check --read-data', c.ms);
    note('    its event-loop delay p99 (ms)', c.p99);
    note('    its event-loop delay max (ms)', c.max);
    const healthy = await timed((r) => repair(r));
    if (!healthy.value.clean) throw new Error('repair found damage in a healthy repository');
    note('repair, healthy', healthy.ms);
    note('  its event-loop delay p99 (ms)', healthy.p99);
    note('  its event-loop delay max (ms)', healthy.max);
    await damagePacks(5, round);
    const fixed = await timed((r) => repair(r));
    const v = fixed.value;
    if (v.lostCount) throw new Error(`repair lost ${v.lostCount} item(s) with every source present`);
    note('repair, 5 damaged packs', fixed.ms);
    note(' its event-loop delay p99 (ms)', fixed.p99);
    note(' its event-loop delay max (ms)', fixed.max);
    await fs.rm(path.join(BASE, 'repo', 'index'), { recursive: true });
    const reindexed = await timed((r) => repair(r));
    if (reindexed.value.lostCount) throw new Error('repair lost something rebuilding the index');
    note('repair, every index file lost', reindexed.ms);
    note('   its event-loop delay p99 (ms)', reindexed.p99);
    note('   its event-loop delay max (ms)', reindexed.max);
    const latest = await withRepo((r) => r.loadSnapshot('latest'));
    const sample = await timed((r) => restoreTest(r, { snapshot: latest.id, files: 20 }));
    if (!sample.value.ok) throw new Error('the restore test failed');
    note('restore test, 20 files', sample.ms);
    const blocks = await timed((r) => restoreTest(r, { snapshot: latest.id, files: 0, allBlockFiles: true }));
    if (!blocks.value.ok) throw new Error('the block-file test failed');
    // (below scale 0.25 the database is under 64 MiB: not a block file)
    note(
      `restore test, ${blocks.value.blockFilesChecked} block file(s) (${(blocks.value.bytesChecked / 1e6).toFixed(0)} MB)`,
      blocks.ms,
    );
    console.log(
      `round ${round}: check ${fmt(c.ms)}; repair healthy ${fmt(healthy.ms)}, damaged ${fmt(fixed.ms)} ` +
        `(${v.packs.damaged.length} packs, ${v.blobs.salvaged} blobs copied, ${v.blobs.fromSources} from ${v.sources.length} source file(s); ` +
        `loop delay p99 ${fixed.p99.toFixed(0)} ms, max ${fixed.max.toFixed(0)} ms), index lost ${fmt(reindexed.ms)}; ` +
        `restore test 20 files ${fmt(sample.ms)} (${(sample.value.bytesChecked / 1e6).toFixed(1)} MB), block files ${fmt(blocks.ms)}`,
    );
  }
  console.log(`\n${'step'.padEnd(44)} ${'median'.padStart(9)}  min–max`);
  for (const [k, xs] of Object.entries(rows)) {
    const isMs = k.includes('(ms)');
    const f = (x: number) => (isMs ? x.toFixed(0) : fmt(x));
    console.log(`${k.padEnd(44)} ${f(median(xs)).padStart(9)}  ${f(Math.min(...xs))}–${f(Math.max(...xs))}`);
  }
  if (!KEEP) await fs.rm(path.join(BASE, 'repo'), { recursive: true, force: true });
}

await main();
