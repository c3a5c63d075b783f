/**
 * `npm run bench [-- --scale N] [-- --small-files N] [-- --dir DIR] [-- --no-restic] [-- --restore-in-place]
 *   [-- --repeat N] [-- --memory low]`
 * TIDEMARK_MEMTRACE=1 adds where the engine's memory went at each step's peak (src/main/engine/pool/memtrace.ts).
 * Full backup, no-change backup and full restore of a deterministic dataset with Tidemark and, when
 * installed, restic on the same data in the same run. Prints wall seconds, MB/s, files/s, CPU %, peak
 * RSS, bytes read from the source, repository size, and (Tidemark) the event-loop delay of the process
 * hosting the engine. The page cache is dropped before each step when running as root.
 *
 * Each tool restores into a freshly made ext4 filesystem (a loop device over an image file under --dir,
 * when running as root with mkfs.ext4): this machine's root filesystem is ext4 without a journal, where
 * creating a file walks past every inode freed in the last 1–6 minutes one by one (ext4's
 * recently_deleted check), so a restore into it ran 10–40% slower or faster depending on how many files
 * the tests or an earlier run had just deleted. `--restore-in-place` restores under --dir instead.
 */
import fs from 'node:fs/promises';
import fss from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import crypto from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { makeDataset } from './dataset.js';
import { MALLOC_ENV, withMallocEnv } from '../bin/malloc-env.mjs';

/** Milliseconds of event-loop delay, to two decimals (the histogram's values are floats). */
const delay = (ms: number | undefined) => (ms === undefined ? '?' : ms.toFixed(2));
const args = process.argv.slice(2);
const opt = (name: string, def?: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const scale = Number(opt('scale', '1'));
const smallFiles = opt('small-files') ? Number(opt('small-files')) : undefined;
const base = path.resolve(opt('dir', '/var/tmp/tidemark-bench')!);
const withRestic = !args.includes('--no-restic') && spawnSync('restic', ['version']).status === 0;
const workers = opt('workers');
const restoreInPlace = args.includes('--restore-in-place');
/** Rounds: each measures every step of both tools again (a fresh repository each), the two tools'
 *  runs of a step back to back; the summary gives the medians of the rounds' ratios. */
const repeat = Math.max(1, Math.floor(Number(opt('repeat', '1'))) || 1);
const root = path.resolve(import.meta.dirname, '..');

function dropCaches(): boolean {
  try {
    spawnSync('sync');
    fss.writeFileSync('/proc/sys/vm/drop_caches', '3');
    return true;
  } catch {
    return false;
  }
}

interface Measure {
  wall: number;
  cpuPct: number;
  peakRssMiB: number;
  stdout: string;
  stats?: { eventLoopDelayMs: { p50: number; p99: number; max: number } };
  /** Where the engine's memory went at its peak (TIDEMARK_MEMTRACE=1; src/main/engine/pool/memtrace.ts). */
  memtrace?: string;
}

async function timed(cmd: string, cmdArgs: string[], env: NodeJS.ProcessEnv): Promise<Measure> {
  const timeFile = path.join(os.tmpdir(), `tm-bench-time-${process.pid}`);
  const statsFile = path.join(os.tmpdir(), `tm-bench-stats-${process.pid}`);
  await fs.rm(statsFile, { force: true });
  const child = spawn('/usr/bin/time', ['-f', '%e %U %S %M', '-o', timeFile, cmd, ...cmdArgs], {
    env: { ...env, TIDEMARK_BENCH_STATS: statsFile },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const code = await new Promise<number>((r) => child.on('close', (c) => r(c ?? -1)));
  if (code !== 0) throw new Error(`${cmd} ${cmdArgs.join(' ')} failed (${code}): ${stderr.slice(-2000)}`);
  const timing = await fs.readFile(timeFile, 'utf8');
  await fs.rm(timeFile, { force: true });
  const [wall, user, sys, rss] = timing.trim().split('\n').pop()!.split(' ').map(Number);
  let stats;
  try {
    stats = JSON.parse(await fs.readFile(statsFile, 'utf8'));
  } catch {}
  await fs.rm(statsFile, { force: true });
  const memtrace = stderr.slice(stderr.indexOf('memtrace: ')).trim();
  return {
    wall,
    cpuPct: ((user + sys) / wall) * 100,
    peakRssMiB: rss / 1024,
    stdout,
    stats,
    ...(stderr.includes('memtrace: ') && { memtrace }),
  };
}

async function dirBytes(d: string): Promise<number> {
  let total = 0;
  const walk = async (p: string) => {
    for (const e of await fs.readdir(p, { withFileTypes: true })) {
      const q = path.join(p, e.name);
      if (e.isDirectory()) await walk(q);
      else if (e.isFile()) total += (await fs.stat(q)).size;
    }
  };
  await walk(d);
  return total;
}

async function hashTree(d: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (p: string) => {
    for (const e of await fs.readdir(p, { withFileTypes: true })) {
      const q = path.join(p, e.name);
      if (e.isDirectory()) await walk(q);
      else if (e.isFile() && e.name !== '.complete')
        out.set(
          path.relative(d, q),
          crypto
            .createHash('sha256')
            .update(await fs.readFile(q))
            .digest('hex'),
        );
    }
  };
  await walk(d);
  return out;
}

function same(a: Map<string, string>, b: Map<string, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, v] of a) if (b.get(k) !== v) return false;
  return true;
}

interface RestoreTarget {
  dir: string;
  how: string;
  cleanup: () => Promise<void>;
}

/** Where a tool restores: a fresh ext4 filesystem (see the header), or a folder under --dir. */
async function restoreTarget(name: string, files: number, bytes: number): Promise<RestoreTarget> {
  const inPlace = async (): Promise<RestoreTarget> => {
    const dir = path.join(base, name);
    await fs.rm(dir, { recursive: true, force: true });
    return { dir, how: `a folder under ${base}`, cleanup: async () => {} };
  };
  if (
    restoreInPlace ||
    process.getuid?.() !== 0 ||
    spawnSync('sh', ['-c', 'command -v mkfs.ext4 losetup']).status
  )
    return inPlace();
  const fsDir = path.join(base, `${name}-fs`);
  const image = path.join(fsDir, 'disk.img');
  const mnt = path.join(fsDir, 'mnt');
  const sh = (cmd: string, a: string[]) => {
    const r = spawnSync(cmd, a, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`${cmd} ${a.join(' ')}: ${r.stderr}`);
    return r.stdout.trim();
  };
  const detach = () => {
    spawnSync('umount', [mnt]);
    const loops = spawnSync('losetup', ['-j', image], { encoding: 'utf8' }).stdout;
    for (const l of loops.split('\n')) if (l.includes(':')) spawnSync('losetup', ['-d', l.split(':')[0]]);
  };
  if (fss.existsSync(fsDir)) detach(); // left by an interrupted run
  await fs.rm(fsDir, { recursive: true, force: true });
  await fs.mkdir(mnt, { recursive: true });
  const sizeMiB = Math.ceil((bytes * 1.5) / 2 ** 20) + files / 64 + 1024;
  sh('truncate', ['-s', `${Math.ceil(sizeMiB)}M`, image]);
  const dev = sh('losetup', ['-f', '--show', '--direct-io=on', image]);
  try {
    sh('mkfs.ext4', [
      '-q',
      '-F',
      '-N',
      String(files * 2 + 65536),
      '-E',
      'lazy_itable_init=0,lazy_journal_init=0',
      dev,
    ]);
    sh('mount', [dev, mnt]);
  } catch (err) {
    spawnSync('losetup', ['-d', dev]);
    console.log(`restore target: could not make a fresh filesystem (${(err as Error).message.trim()})`);
    return inPlace();
  }
  return {
    dir: path.join(mnt, 'out'),
    how: `a fresh ext4 filesystem (${dev}, direct I/O to an image under ${base})`,
    cleanup: async () => {
      detach();
      await fs.rm(fsDir, { recursive: true, force: true });
    },
  };
}

interface Row {
  round: number;
  tool: string;
  step: string;
  m: Measure;
  mbps: number;
  filesPerSec: number;
  bytesRead?: number;
  repoBytes?: number;
  note?: string;
}

async function main() {
  await fs.mkdir(base, { recursive: true });
  console.log(
    `dataset: generating/reusing under ${base}/data (scale ${scale}${smallFiles ? `, ${smallFiles} small files` : ''}) …`,
  );
  const t0 = Date.now();
  const data = await makeDataset(path.join(base, 'data'), scale, smallFiles);
  console.log(
    `dataset: ${data.files} files, ${(data.bytes / 1e6).toFixed(0)} MB (ready in ${((Date.now() - t0) / 1000).toFixed(1)} s)`,
  );
  const dropped = dropCaches();
  console.log(
    `page cache: ${dropped ? 'dropped before each step (root)' : 'NOT dropped (not permitted): figures are warm-cache'}`,
  );
  console.log(
    `machine: ${os.cpus().length} cores, ${os.cpus()[0]?.model}; node ${process.version}; restic: ${withRestic ? spawnSync('restic', ['version']).stdout.toString().trim() : 'not installed'}`,
  );
  const memory = opt('memory');
  const expected = await hashTree(data.root);
  const rows: Row[] = [];
  const mb = (n: number) => n / 1e6;

  // the malloc settings every launcher gives the engine (bin/malloc-env.mjs), set here directly so the
  // measured process is the engine itself, not a launcher waiting for it
  const env = withMallocEnv(
    { ...process.env, TIDEMARK_PASSWORD: 'bench', UV_THREADPOOL_SIZE: '16' },
    { lowMemory: memory === 'low' },
  );
  console.log(
    `engine environment (as the CLI launchers set it, bin/malloc-env.mjs): ${Object.keys(MALLOC_ENV)
      .filter((k) => env[k] !== undefined)
      .map((k) => `${k}=${env[k]}`)
      .join(' ')}`,
  );
  // the bundled CLI, as installed apps run it (no TypeScript loader in the measurement)
  spawnSync(process.execPath, [path.join(root, 'scripts/build-cli.mjs')], { stdio: 'inherit' });
  const tmRepo = path.join(base, 'tm-repo');
  const tm = (a: string[]) => [path.join(root, 'out/cli/tidemark.js'), '-r', tmRepo, '--json', ...a];
  const wargs = [...(workers ? ['--workers', workers] : []), ...(memory ? ['--memory', memory] : [])];
  const renv = {
    ...process.env,
    RESTIC_PASSWORD: 'bench',
    RESTIC_CACHE_DIR: path.join(base, 'restic-cache'),
  };
  const rRepo = path.join(base, 'restic-repo');
  const backupRow = (
    round: number,
    tool: string,
    step: string,
    m: Measure,
    bytesRead: number | undefined,
    repoBytes: number,
  ): Row => ({
    round,
    tool,
    step,
    m,
    mbps: mb(data.bytes) / m.wall,
    filesPerSec: data.files / m.wall,
    bytesRead,
    repoBytes,
  });

  /** A full restore into a fresh target, timed (page cache dropped), its bytes checked against the source. */
  const measureRestore = async (
    round: number,
    tool: string,
    cmd: string,
    cmdArgs: (dir: string) => string[],
    e: NodeJS.ProcessEnv,
  ) => {
    const out = await restoreTarget(`${tool}-restore`, data.files, data.bytes);
    if (tool === 'tidemark' && round === 1) console.log(`restore targets: ${out.how}`);
    dropCaches();
    const m = await timed(cmd, cmdArgs(out.dir), e);
    // both tools restore the full original path under the target
    const ok = same(expected, await hashTree(path.join(out.dir, data.root)));
    await out.cleanup();
    rows.push({
      round,
      tool,
      step: 'full restore',
      m,
      mbps: mb(data.bytes) / m.wall,
      filesPerSec: data.files / m.wall,
      note: ok ? 'restored bytes verified equal' : 'RESTORED BYTES DIFFER',
    });
  };

  // The two tools as steps: a fresh repository, one backup, the restore of the latest snapshot.
  interface Tool {
    init: () => Promise<void>;
    backup: (round: number, step: string) => Promise<void>;
    restore: (round: number) => Promise<void>;
  }
  const tidemark: Tool = {
    init: async () => {
      await fs.rm(tmRepo, { recursive: true, force: true });
      spawnSync(process.execPath, tm(['init']), { env });
    },
    backup: async (round, step) => {
      dropCaches();
      const m = await timed(process.execPath, tm(['backup', data.root, ...wargs]), env);
      const j = JSON.parse(m.stdout);
      rows.push(backupRow(round, 'tidemark', step, m, j.snapshot.stats.bytesRead, await dirBytes(tmRepo)));
    },
    restore: (round) =>
      measureRestore(
        round,
        'tidemark',
        process.execPath,
        (dir) => tm(['restore', 'latest', '--target', dir, ...wargs]),
        env,
      ),
  };
  const restic: Tool = {
    init: async () => {
      await fs.rm(rRepo, { recursive: true, force: true });
      await fs.rm(renv.RESTIC_CACHE_DIR, { recursive: true, force: true });
      spawnSync('restic', ['-r', rRepo, 'init'], { env: renv });
    },
    backup: async (round, step) => {
      dropCaches();
      const m = await timed('restic', ['-r', rRepo, 'backup', '--json', data.root], renv);
      const summary = m.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .find((x) => x.message_type === 'summary');
      rows.push(backupRow(round, 'restic', step, m, summary?.total_bytes_processed, await dirBytes(rRepo)));
    },
    restore: (round) =>
      measureRestore(
        round,
        'restic',
        'restic',
        (dir) => ['-r', rRepo, 'restore', 'latest', '--target', dir],
        renv,
      ),
  };
  const tools = withRestic ? [tidemark, restic] : [tidemark];
  const BACKUP_STEPS = ['full backup', 'no-change backup'];
  const STEPS = [...BACKUP_STEPS, 'full restore'];
  for (let round = 1; round <= repeat; round++) {
    for (const t of tools) await t.init();
    // Each step is run by both tools back to back, which one first alternating from round to round: a
    // ratio compares runs seconds apart (on a shared machine the load drifts over minutes), and neither
    // tool always runs right after the other's step.
    const order = round % 2 ? tools : [...tools].reverse();
    for (const step of BACKUP_STEPS) for (const t of order) await t.backup(round, step);
    for (const t of order) await t.restore(round);
  }
  // shown by round, tool and step, whatever order they ran in
  const TOOLS = ['tidemark', 'restic'];
  rows.sort(
    (a, b) =>
      a.round - b.round ||
      TOOLS.indexOf(a.tool) - TOOLS.indexOf(b.tool) ||
      STEPS.indexOf(a.step) - STEPS.indexOf(b.step),
  );

  // ---- report ----
  const pad = (s: string, n: number) => s.padStart(n);
  const rounds = repeat > 1;
  console.log(
    '\n' +
      (rounds ? 'round ' : '') +
      ['tool', 'step', 'wall s', 'MB/s', 'files/s', 'CPU %', 'peak RSS MiB', 'read MB', 'repo MB']
        .map((h, i) => (i < 2 ? h.padEnd(i ? 17 : 9) : pad(h, 12)))
        .join(''),
  );
  for (const r of rows) {
    console.log(
      (rounds ? String(r.round).padEnd(6) : '') +
        r.tool.padEnd(9) +
        r.step.padEnd(17) +
        pad(r.m.wall.toFixed(2), 12) +
        pad(r.mbps.toFixed(0), 12) +
        pad(r.filesPerSec.toFixed(0), 12) +
        pad(r.m.cpuPct.toFixed(0), 12) +
        pad(r.m.peakRssMiB.toFixed(0), 12) +
        pad(r.bytesRead === undefined ? '' : (r.bytesRead / 1e6).toFixed(0), 12) +
        pad(r.repoBytes === undefined ? '' : (r.repoBytes / 1e6).toFixed(0), 12) +
        (r.note ? `  ${r.note}` : ''),
    );
  }
  for (const r of rows)
    if (r.m.memtrace)
      console.log(`\n${r.tool} ${r.step}${rounds ? `, round ${r.round}` : ''}:\n${r.m.memtrace}`);
  const row = (round: number, tool: string, step: string) =>
    rows.find((r) => r.round === round && r.tool === tool && r.step === step)!;
  const all = Array.from({ length: repeat }, (_, i) => i + 1);
  const listed = (xs: number[], digits: number) =>
    rounds ? ` (rounds: ${xs.map((x) => x.toFixed(digits)).join(', ')})` : '';
  console.log('');
  for (const round of all) {
    const full = row(round, 'tidemark', 'full backup');
    console.log(
      `event-loop delay during the full backup (engine process)${rounds ? `, round ${round}` : ''}: p50 ${delay(full.m.stats?.eventLoopDelayMs.p50)} ms, p99 ${delay(full.m.stats?.eventLoopDelayMs.p99)} ms, max ${delay(full.m.stats?.eventLoopDelayMs.max)} ms`,
    );
  }
  if (withRestic) {
    for (const step of STEPS) {
      const ratios = all.map(
        (round) => row(round, 'restic', step).m.wall / row(round, 'tidemark', step).m.wall,
      );
      console.log(
        `${step}: tidemark is ${median(ratios).toFixed(2)}x as fast as restic${rounds ? ' (median of the rounds)' : ''}${listed(ratios, 2)}`,
      );
    }
    const sizes = all.map(
      (round) =>
        (row(round, 'tidemark', 'full backup').repoBytes ?? 0) /
        (row(round, 'restic', 'full backup').repoBytes ?? 1),
    );
    console.log(`repository size: tidemark/restic = ${median(sizes).toFixed(3)}${listed(sizes, 3)}`);
  }
}

/** The middle value (the mean of the middle two for an even count). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

await main();
