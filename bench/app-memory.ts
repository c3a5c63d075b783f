/**
 * `npm run bench:app-memory [-- --dir DIR] [-- --scale S] [-- --runs N] [-- --keep] [-- --tsx]`
 *
 * The app's own memory in browser mode: the Node server process as `npm start` runs it
 * (bench/app-memory-server.ts bundled as out/server is, scripts/build-server.mjs; `--tsx`: the sources
 * through tsx instead; the app's wiring, real engine and catalog, glibc malloc settings of
 * bin/malloc-env.mjs) and the UI in Debian's headless Chromium (playwright-core), in these phases:
 *   idle              the Dashboard with one job, after a garbage collection in both
 *   full backup       the bench dataset (bench/dataset.ts, scale S) backed up, the Live run page open;
 *                     peaks over the run (the server's VmHWM, reset before; the renderer sampled 4×/s)
 *   after it          idle again, after a garbage collection
 *   full, low memory  the same dataset backed up by a job with "Use less memory" into a new repository
 *   after N runs      N more backups (no change) watched on the Live run page, then History (200 runs);
 *                     also halfway through them (does the process grow with runs, or settle?)
 * For each: the server's RSS / peak RSS and V8 heap (used; the highest seen), the renderer's JS heap
 * (CDP Performance.getMetrics JSHeapUsedSize) and RSS (/proc, the largest `--type=renderer` process),
 * and Chromium's whole process tree (PSS: browser, GPU, utility, zygote and renderer processes).
 *
 * Electron is estimated, not measured (no Electron runtime can be downloaded here): its main process
 * is Chromium's browser process with Node (our server, minus nothing that matters) inside, and its
 * window is a Chromium renderer. So Electron ≈ server RSS + Chromium's tree PSS (its browser, GPU,
 * utility and renderer processes); Electron's own additions (its bindings, the tray) are not counted.
 * The server process hosts the engine (worker threads included), so its peak during a backup is
 * mostly the engine's (issue 31 part A's figure); idle and after-runs figures are the app's own.
 * Nothing is asserted: figures on a shared machine are figures.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';
import { chromium, type CDPSession, type Page } from 'playwright-core';
import { makeDataset } from './dataset.js';
import type { ServerFigures } from './app-memory-server.js';
import { withMallocEnv } from '../bin/malloc-env.mjs';
import { buildServer } from '../scripts/build-server.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name: string, def?: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const base = path.resolve(opt('dir', '/var/tmp/tidemark-bench-app-memory')!);
const scale = Number(opt('scale', '1'));
const moreRuns = Number(opt('runs', '30'));
const keep = args.includes('--keep');
const withTsx = args.includes('--tsx');
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];
const MiB = 1024 * 1024;
const mib = (n: number) => (n / MiB).toFixed(1);

// ---- the server child ----------------------------------------------------------------------------

class Server {
  private next = 1;
  private waiting = new Map<
    number,
    (r: { ok: boolean; result?: unknown; error?: { message: string } }) => void
  >();
  private ops = new Map<string, (m: any) => void>();
  readonly finished = new Set<string>();
  url = '';
  pid = 0;

  constructor(readonly child: ChildProcess) {
    child.on('message', (m: any) => {
      if (m.op === 'call') {
        this.waiting.get(m.id)?.(m);
        this.waiting.delete(m.id);
      } else if (m.op === 'event') this.finished.add(m.payload.id);
      else this.ops.get(m.op)?.(m);
    });
  }

  op<T = any>(op: string): Promise<T> {
    return new Promise((resolve) => {
      this.ops.set(op, resolve);
      this.child.send({ op });
    });
  }

  async call<T = any>(method: string, a: unknown): Promise<T> {
    const id = this.next++;
    const r = await new Promise<{ ok: boolean; result?: unknown; error?: { message: string } }>((resolve) => {
      this.waiting.set(id, resolve);
      this.child.send({ op: 'call', id, method, args: a });
    });
    if (!r.ok) throw new Error(`${method}: ${r.error?.message}`);
    return r.result as T;
  }

  async stats(): Promise<ServerFigures> {
    return (await this.op<{ figures: ServerFigures }>('stats')).figures;
  }
}

async function startServerChild(home: string, staticDir: string): Promise<Server> {
  // bundled as `npm start` runs browser mode's server (scripts/build-server.mjs); --tsx: the sources through tsx
  const entry = withTsx
    ? [path.join(ROOT, 'bin/run-ts.mjs'), path.join(ROOT, 'bench/app-memory-server.ts')]
    : [
        await buildServer({
          entry: 'bench/app-memory-server.ts',
          outdir: 'out/bench-app-memory',
          name: 'server',
        }),
      ];
  const child = spawn(process.execPath, ['--expose-gc', ...entry, home, staticDir], {
    cwd: ROOT,
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: withMallocEnv(),
  });
  const s = new Server(child);
  const ready = await s.op<{ url: string; pid: number }>('ready');
  s.url = ready.url;
  s.pid = ready.pid;
  return s;
}

// ---- Chromium's processes ------------------------------------------------------------------------

interface Proc {
  pid: number;
  ppid: number;
  type: string;
}

function processTree(root: number): Proc[] {
  const all: Proc[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      // (Chromium's zygote children rewrite their command line as one string)
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').replace(/\0/g, ' ');
      const type = /--type=(\S+)/.exec(cmd)?.[1] ?? (/chrom/.test(cmd.split(' ')[0]) ? 'browser' : 'other');
      all.push({ pid: Number(d), ppid, type });
    } catch {}
  }
  const out: Proc[] = [];
  const want = new Set([root]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of all)
      if (want.has(p.ppid) && !want.has(p.pid)) {
        want.add(p.pid);
        out.push(p);
        grew = true;
      }
  }
  return out;
}

function kbField(file: string, field: string): number {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(file, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Chromium's processes under this one (not the server's): the largest renderer's RSS, the tree's PSS. */
function chromiumMemory(serverPid: number): { rendererRss: number; rendererPss: number; treePss: number } {
  const procs = processTree(process.pid).filter((p) => p.pid !== serverPid && p.type !== 'other');
  let rendererRss = 0;
  let rendererPss = 0;
  let treePss = 0;
  for (const p of procs) {
    const pss = kbField(`/proc/${p.pid}/smaps_rollup`, 'Pss');
    treePss += pss;
    if (p.type === 'renderer') {
      rendererRss = Math.max(rendererRss, kbField(`/proc/${p.pid}/status`, 'VmRSS'));
      rendererPss += pss;
    }
  }
  return { rendererRss, rendererPss, treePss };
}

/** Moves the app to another page (its router follows the address's hash), as a click would. */
async function setHash(page: Page, hash: string): Promise<void> {
  await page.evaluate((h) => {
    (globalThis as unknown as { location: { hash: string } }).location.hash = h;
  }, hash);
}

async function jsHeapUsed(cdp: CDPSession): Promise<number> {
  const { metrics } = await cdp.send('Performance.getMetrics');
  return metrics.find((m) => m.name === 'JSHeapUsedSize')?.value ?? 0;
}

// ---- phases -----------------------------------------------------------------------------------------

interface Row {
  phase: string;
  server: ServerFigures;
  rendererHeap: number;
  /** What the renderer's heap keeps: after a collection (run rows: the highest of those taken every 5 s). */
  rendererLive: number;
  rendererRss: number;
  treePss: number;
  /** A run's row: peaks over the run. */
  run?: boolean;
  note?: string;
}
const rows: Row[] = [];

async function settle(server: Server, cdp: CDPSession): Promise<void> {
  // the engine's idle worker pools close after 5 s (engine/pool/shared.ts)
  await new Promise((r) => setTimeout(r, 7000));
  await server.op('gc');
  await cdp.send('HeapProfiler.collectGarbage');
  await new Promise((r) => setTimeout(r, 500));
}

async function idleRow(phase: string, server: Server, cdp: CDPSession, note?: string): Promise<void> {
  await settle(server, cdp);
  const c = chromiumMemory(server.pid);
  rows.push({
    phase,
    server: await server.stats(),
    rendererHeap: await jsHeapUsed(cdp),
    rendererLive: await jsHeapUsed(cdp),
    rendererRss: c.rendererRss,
    treePss: c.treePss,
    note,
  });
}

/** Runs `start` and samples until the run it returns finished; the row has the peaks. */
async function runRow(
  phase: string,
  server: Server,
  cdp: CDPSession,
  start: () => Promise<string>,
): Promise<number> {
  await server.op('reset');
  const t0 = Date.now();
  const runId = await start();
  let heap = 0;
  let live = 0;
  let rss = 0;
  let pss = 0;
  let lastGc = Date.now();
  while (!server.finished.has(runId)) {
    const c = chromiumMemory(server.pid);
    heap = Math.max(heap, await jsHeapUsed(cdp));
    if (Date.now() - lastGc >= 5000) {
      await cdp.send('HeapProfiler.collectGarbage');
      live = Math.max(live, await jsHeapUsed(cdp));
      lastGc = Date.now();
    }
    rss = Math.max(rss, c.rendererRss);
    pss = Math.max(pss, c.treePss);
    await new Promise((r) => setTimeout(r, 250));
  }
  const ms = Date.now() - t0;
  const run = await server.call<{ status: string; counters: { bytesScanned: number; filesScanned: number } }>(
    'runs.get',
    { id: runId },
  );
  const figures = await server.stats();
  const phases = Object.entries(figures.byPhase)
    .map(([p, f]) => `${p} ${mib(f.rss)} (heap ${mib(f.heap)})`)
    .join(', ');
  rows.push({
    phase,
    server: figures,
    rendererHeap: heap,
    rendererLive: live,
    rendererRss: rss,
    treePss: pss,
    run: true,
    note: `${run.status}, ${run.counters.filesScanned} files, ${mib(run.counters.bytesScanned)} MiB in ${(ms / 1000).toFixed(1)} s; server RSS by phase: ${phases}`,
  });
  return ms;
}

/**
 * The CLI's peak RSS (/usr/bin/time's maximum resident set) backing up the same data into a new
 * repository: the engine's own figure, to compare the server's with. `blockFiles`: as the app's jobs do
 * (large VM disks and databases cut into fixed-size blocks, on unless a job unticks it).
 */
function cliPeak(
  dataRoot: string,
  repo: string,
  blockFiles: boolean,
  low: boolean,
): { peak: number; seconds: number } {
  fs.rmSync(repo, { recursive: true, force: true });
  const env = withMallocEnv({ ...process.env, TIDEMARK_PASSWORD: 'bench password 31b' });
  const tm = [path.join(ROOT, 'out/cli/tidemark.js'), '-r', repo];
  const init = spawnSync(process.execPath, [...tm, 'init'], { env, encoding: 'utf8' });
  if (init.status !== 0) throw new Error(`tidemark init: ${init.stderr}`);
  const r = spawnSync(
    '/usr/bin/time',
    [
      '-f',
      '%e %M',
      process.execPath,
      ...tm,
      'backup',
      dataRoot,
      ...(blockFiles ? ['--block-files'] : []),
      ...(low ? ['--memory', 'low'] : []),
    ],
    { env, encoding: 'utf8' },
  );
  fs.rmSync(repo, { recursive: true, force: true });
  if (r.status !== 0) throw new Error(`tidemark backup: ${r.stderr}`);
  const [seconds, kb] = r.stderr.trim().split('\n').pop()!.split(' ').map(Number);
  return { peak: kb * 1024, seconds };
}

async function main(): Promise<void> {
  const executablePath = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
  if (!executablePath) throw new Error('no Chromium (install Debian\'s "chromium" package)');
  fs.mkdirSync(base, { recursive: true });
  const home = path.join(base, 'home');
  fs.rmSync(home, { recursive: true, force: true });
  for (const r of ['repo', 'repo-low']) fs.rmSync(path.join(base, r), { recursive: true, force: true });
  console.log(`building the renderer; dataset (scale ${scale}) in ${base}/data …`);
  const staticDir = path.join(base, 'renderer');
  await build({
    configFile: path.join(ROOT, 'src/renderer/vite.config.ts'),
    logLevel: 'error',
    build: { outDir: staticDir, emptyOutDir: true },
  });
  const data = await makeDataset(path.join(base, 'data'), scale);
  console.log(`dataset: ${data.files} files, ${mib(data.bytes)} MiB`);
  const built = spawnSync(process.execPath, [path.join(ROOT, 'scripts/build-cli.mjs')], { stdio: 'inherit' });
  if (built.status !== 0) throw new Error('building the CLI failed');
  const cli = (
    [
      [true, false],
      [false, false],
      [true, true],
    ] as const
  ).map(([blockFiles, low]) => ({
    blockFiles,
    low,
    ...cliPeak(data.root, path.join(base, 'repo-cli'), blockFiles, low),
  }));

  const server = await startServerChild(home, staticDir);
  const browser = await chromium.launch({ executablePath, args: CHROMIUM_ARGS, headless: true });
  try {
    const page: Page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    const cdp = await page.context().newCDPSession(page);
    await cdp.send('Performance.enable');
    const job = await server.call<{ id: string }>('jobs.create', {
      name: 'Bench data',
      sources: [data.root],
      destination: { kind: 'local', path: path.join(base, 'repo') },
      schedule: { kind: 'manual' },
      password: 'bench password 31b',
    });
    await page.goto(server.url);
    await page.getByRole('heading', { name: 'Bench data' }).waitFor();
    await idleRow('idle (Dashboard, 1 job)', server, cdp);

    await runRow('full backup (Live run page)', server, cdp, async () => {
      await page.getByRole('button', { name: 'Back up now' }).click();
      await page.waitForURL(/#\/run\/./);
      return decodeURIComponent(page.url().split('/').pop()!);
    });
    await idleRow('after it (Live run page)', server, cdp);

    const low = await server.call<{ id: string }>('jobs.create', {
      name: 'Bench data, less memory',
      sources: [data.root],
      destination: { kind: 'local', path: path.join(base, 'repo-low') },
      schedule: { kind: 'manual' },
      password: 'bench password 31b',
      options: { memory: 'low' },
    });
    await runRow('full backup, "Use less memory"', server, cdp, async () => {
      const run = await server.call<{ id: string }>('jobs.runNow', { id: low.id });
      await page.goto(`${server.url}#/run/${encodeURIComponent(run.id)}`);
      return run.id;
    });

    const t0 = Date.now();
    for (let i = 0; i < moreRuns; i++) {
      // halfway too: whether the process grows with runs or settles
      if (i === Math.floor(moreRuns / 2) && i > 0) {
        await setHash(page, '#/history');
        await idleRow(`after ${i} more runs (History)`, server, cdp);
      }
      const run = await server.call<{ id: string }>('jobs.runNow', { id: job.id });
      await setHash(page, `#/run/${encodeURIComponent(run.id)}`);
      while (!server.finished.has(run.id)) await new Promise((r) => setTimeout(r, 100));
    }
    const minutes = ((Date.now() - t0) / 60_000).toFixed(1);
    await setHash(page, '#/history');
    await page.getByRole('heading', { name: 'History' }).first().waitFor();
    await idleRow(`after ${moreRuns} more runs (History)`, server, cdp, `${minutes} min of runs`);
  } finally {
    await browser.close();
    const exited = new Promise((r) => server.child.once('exit', r));
    server.child.send({ op: 'stop' });
    await exited;
    if (!keep) {
      fs.rmSync(home, { recursive: true, force: true });
      for (const r of ['repo', 'repo-low']) fs.rmSync(path.join(base, r), { recursive: true, force: true });
    }
  }

  const head = [
    'phase',
    'server RSS',
    'server peak RSS',
    'server heap (max)',
    'renderer JS heap (kept)',
    'renderer RSS',
    'Chromium PSS',
    'Electron est.',
  ];
  const lines = rows.map((r) => [
    r.phase,
    mib(r.server.rss),
    r.run ? mib(r.server.peakRss) : '—',
    `${mib(r.server.heapUsed)} (${mib(r.server.maxHeapUsed)})`,
    `${mib(r.rendererHeap)} (${mib(r.rendererLive)})`,
    mib(r.rendererRss),
    mib(r.treePss),
    mib((r.run ? r.server.peakRss : r.server.rss) + r.treePss),
  ]);
  console.log(
    `\nApp memory, MiB (browser mode; dataset ${data.files} files, ${mib(data.bytes)} MiB; scale ${scale})\n`,
  );
  console.log(`| ${head.join(' | ')} |`);
  console.log(`| ${head.map(() => '---').join(' | ')} |`);
  for (const l of lines) console.log(`| ${l.join(' | ')} |`);
  console.log('');
  for (const r of rows) if (r.note) console.log(`${r.phase}: ${r.note}`);
  console.log('\nThe CLI backing up the same data into a new repository (out/cli; peak RSS, /usr/bin/time):');
  for (const c of cli)
    console.log(
      `  tidemark backup${c.blockFiles ? ' --block-files' : ''}${c.low ? ' --memory low' : ''}${c.blockFiles ? " (as the app's jobs)" : ''}: peak ${mib(c.peak)} MiB, ${c.seconds.toFixed(1)} s`,
    );
  console.log(
    '\nRun rows: peaks over the run (server: VmHWM since the run started, its heap the highest seen; renderer: sampled 4×/s;' +
      '\n  kept: the highest after a collection, taken every 5 s).' +
      '\nIdle rows: 7 s after the last run (idle worker pools closed), after a garbage collection in both.' +
      '\nElectron est. = server RSS (its peak in run rows) + Chromium PSS (browser, GPU, utility, renderer processes).',
  );
}

await main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
