/**
 * Incremental backup benchmark (issue 4): a tree of >= 200,000 files, backed up once, then
 *   1. a no-change incremental driven by the change journal vs one driven by a full scan;
 *   2. after changing 1% of the files (every file in 1% of the folders), the same two;
 *   3. after changing another 1% of the files, scattered at random over the whole tree;
 * printing wall time, lstat/readdir calls (counted by the engine), bytes read, and the full scan's
 * entries per second. The tracker is the best one available (fanotify as root, else inotify).
 *
 *   npm run bench:incr                       # 200,000 files under .bench/incr
 *   npm run bench:incr -- --files 50000 --dir /some/where --keep
 */
import '../src/main/engineHost.js'; // the process settings of the app's engine processes (pool size, V8 tiering)
import fs from 'node:fs';
import path from 'node:path';
import { MemoryBackend } from '../src/main/engine/backend/memory/index.js';
import { initRepository } from '../src/main/engine/repo/repository.js';
import { backup, type BackupRunResult } from '../src/main/engine/backup/index.js';
import type { ChangeHint } from '../src/main/engine/operations.js';
import { ChangeJournal, type JournalCursor } from '../src/main/tracking/journal.js';
import { startChangeTracker } from '../src/main/tracking/select.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
}
const FILES = Number(arg('files', '200000'));
const PER_DIR = 100;
const BASE = path.resolve(arg('dir', '.bench/incr'));
const KEEP = process.argv.includes('--keep');
const root = path.join(BASE, 'tree');

/** folder layout: top/NNN/sub/MMM with PER_DIR files each (two levels, ~sqrt fan-out). */
function dirsOf(files: number): string[] {
  const leaves = Math.ceil(files / PER_DIR);
  const fan = Math.ceil(Math.sqrt(leaves));
  return Array.from({ length: leaves }, (_, i) =>
    path.join(
      root,
      `t${String(Math.floor(i / fan)).padStart(3, '0')}`,
      `d${String(i % fan).padStart(3, '0')}`,
    ),
  );
}

function buildTree(): string[] {
  const marker = path.join(BASE, `tree-${FILES}.done`);
  const dirs = dirsOf(FILES);
  if (fs.existsSync(marker)) return dirs;
  fs.rmSync(root, { recursive: true, force: true });
  let n = 0;
  for (const d of dirs) {
    fs.mkdirSync(d, { recursive: true });
    for (let i = 0; i < PER_DIR && n < FILES; i++, n++)
      fs.writeFileSync(path.join(d, `f${i}.txt`), `file ${n} ${'x'.repeat(n % 200)}\n`);
  }
  fs.writeFileSync(marker, String(FILES));
  return dirs;
}

const fmtMs = (ms: number) => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(0)} ms`);
const fmtN = (n: number) => n.toLocaleString('en-US');

interface Row {
  label: string;
  ms: number;
  planMs?: number;
  r: BackupRunResult;
}

function table(rows: Row[]): void {
  const head = ['run', 'wall', 'plan', 'lstat', 'readdir', 'files read', 'bytes read', 'mode'];
  const lines = rows.map((x) => [
    x.label,
    fmtMs(x.ms),
    x.planMs === undefined ? '-' : fmtMs(x.planMs),
    fmtN(x.r.counters.stat),
    fmtN(x.r.counters.readdir),
    fmtN(x.r.snapshot.stats.filesRead),
    fmtN(x.r.snapshot.stats.bytesRead),
    x.r.snapshot.scanMode?.mode ?? '',
  ]);
  const w = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const fmt = (l: string[]) => l.map((c, i) => (i === 0 ? c.padEnd(w[i]) : c.padStart(w[i]))).join('  ');
  console.log(fmt(head));
  for (const l of lines) console.log(fmt(l));
}

async function main(): Promise<void> {
  fs.mkdirSync(BASE, { recursive: true });
  let t = performance.now();
  const dirs = buildTree();
  console.log(
    `tree: ${fmtN(FILES)} files in ${fmtN(dirs.length)} folders under ${root} (${fmtMs(performance.now() - t)} to prepare)`,
  );

  const { tracker, attempts } = await startChangeTracker([root]);
  for (const a of attempts) console.log(`tracker ${a.backend} unavailable: ${a.error}`);
  if (tracker.backend === 'none') throw new Error(`no change tracker can run here: ${tracker.broken}`);
  const dataDir = path.join(BASE, 'data');
  const journal = new ChangeJournal(dataDir);
  await journal.attach(tracker);
  console.log(`tracker: ${tracker.backend}`);

  const repo = await initRepository(new MemoryBackend(), 'bench', { kdf: { N: 1024 }, compressionLevel: 1 });
  const opts = { paths: [root], host: 'bench' };
  const rows: Row[] = [];
  try {
    // the baseline: a first full backup, consistent with the cursor taken at its start
    await journal.sync();
    const c0 = journal.cursor() as JournalCursor;
    t = performance.now();
    const base = await backup(repo, { ...opts, fullScanReason: 'first backup' });
    const baseMs = performance.now() - t;
    await journal.commit(c0 as never);
    console.log(
      `initial backup: ${fmtMs(baseMs)}, ${fmtN(base.snapshot.stats.files)} files, ${fmtN(base.snapshot.stats.bytesRead)} bytes read`,
    );

    let parentId = base.snapshotId;
    let since: JournalCursor = c0;
    const viaJournal = async (label: string): Promise<Row> => {
      const t0 = performance.now();
      await journal.sync();
      const plan = journal.changesSince(since as never, [root]);
      if (!plan.ok) throw new Error(`journal cannot vouch: ${plan.reason}`);
      const planMs = performance.now() - t0;
      const r = await backup(repo, { ...opts, parent: parentId, changeHint: plan.hint as ChangeHint });
      return { label, ms: performance.now() - t0, planMs, r };
    };
    const viaScan = async (label: string): Promise<Row> => {
      const t0 = performance.now();
      const r = await backup(repo, { ...opts, parent: parentId, fullScanReason: 'benchmark' });
      return { label, ms: performance.now() - t0, r };
    };

    // warm the cache once, then measure
    await viaScan('warm-up');
    rows.push(await viaJournal('no change, journal'));
    rows.push(await viaScan('no change, full scan'));

    // change 1% of the files: every file in 1% of the folders (appends: new content, new mtime)
    const changedDirs = dirs.filter((_, i) => i % 100 === 37);
    let changed = 0;
    for (const d of changedDirs) {
      for (const f of fs.readdirSync(d)) {
        fs.appendFileSync(path.join(d, f), 'changed\n');
        changed++;
      }
    }
    const entriesInChanged = changedDirs.reduce((n, d) => n + fs.readdirSync(d).length, 0);
    const j1 = await viaJournal('1% changed, journal');
    const f1 = await viaScan('1% changed, full scan');
    rows.push(j1, f1);

    // another 1%, scattered: from the clustered run's snapshot and cursor
    await journal.commit(j1.r.snapshot.journalCursor);
    since = j1.r.snapshot.journalCursor as unknown as JournalCursor;
    parentId = j1.r.snapshotId;
    const all = dirs.flatMap((d) => fs.readdirSync(d).map((f) => path.join(d, f)));
    const scattered = new Set<string>();
    for (let i = 0; scattered.size < changed; i++) scattered.add(all[(i * 7919 + 13) % all.length]);
    for (const f of scattered) fs.appendFileSync(f, 'scattered\n');
    const scatteredDirs = new Set([...scattered].map((f) => path.dirname(f)));
    const entriesInScattered = [...scatteredDirs].reduce((n, d) => n + fs.readdirSync(d).length, 0);
    const j2 = await viaJournal('1% scattered, journal');
    const f2 = await viaScan('1% scattered, full scan');
    rows.push(j2, f2);

    console.log(
      `\nclustered: changed ${fmtN(changed)} files (${((100 * changed) / FILES).toFixed(2)}%) in ${changedDirs.length} folders holding ${fmtN(entriesInChanged)} entries`,
    );
    console.log(
      `scattered: changed ${fmtN(scattered.size)} files in ${fmtN(scatteredDirs.size)} folders holding ${fmtN(entriesInScattered)} entries\n`,
    );
    table(rows);
    const [nj, nf] = [rows[0], rows[1]];
    const entries = nf.r.snapshot.stats.files + nf.r.snapshot.stats.dirs;
    console.log(`
no-change journal / full scan: ${fmtMs(nj.ms)} / ${fmtMs(nf.ms)} = ${((100 * nj.ms) / nf.ms).toFixed(1)}%  (targets: < 5% and < 0.5 s)
1% journal lstat calls: ${fmtN(j1.r.counters.stat)} for ${fmtN(entriesInChanged)} entries in changed folders = ${(j1.r.counters.stat / entriesInChanged).toFixed(2)}x  (target: <= 2x)
1% scattered journal lstat calls: ${fmtN(j2.r.counters.stat)} for ${fmtN(entriesInScattered)} entries in changed folders = ${(j2.r.counters.stat / entriesInScattered).toFixed(2)}x
full scan speed (no change, warm cache): ${fmtN(Math.round(entries / (nf.ms / 1000)))} entries/s  (target: >= 100,000/s)
same trees: no change ${nj.r.snapshot.tree === nf.r.snapshot.tree ? 'yes' : 'NO'}, 1% changed ${j1.r.snapshot.tree === f1.r.snapshot.tree ? 'yes' : 'NO'}, scattered ${j2.r.snapshot.tree === f2.r.snapshot.tree ? 'yes' : 'NO'}`);
  } finally {
    await tracker.stop();
    await journal.close();
    await repo.close();
    if (!KEEP) fs.rmSync(path.join(BASE, 'data'), { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
