/**
 * Catalog benchmark (`npm run bench:catalog`): indexes a synthetic 1,000,000-file snapshot through the
 * same TreeSource interface a repository provides, then 99 incremental snapshots, and prints:
 * indexing speed (files/s), database size per indexed file, listing a 10,000-entry folder, name search
 * over the indexed paths, and the version history of one path across 100 snapshots.
 *
 * Shape: /big holds 10,000 files; the rest sit 20 to a folder under /dNN/mNN/lNN; names mix ~90 words,
 * numbers and 8 extensions (about 60% distinct). Each incremental snapshot changes 20 random folders
 * plus /d00/m00/l00 (whose notes.txt therefore has 100 versions). Trees are stored JSON-encoded and
 * decoded on every load, as from a repository, minus decryption and I/O.
 * Wall times on a shared machine depend on its load: CPU times are printed beside them.
 *
 * Options: --files N (default 1,000,000), --snapshots N (default 100), --dir PATH (database folder,
 * kept; default a temp folder that is removed).
 */
import '../src/main/engineHost.js'; // the process settings of the app's engine processes (pool size, V8 tiering)
import { emptySnapshotStats } from '../src/main/engine/repo/types.js';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Catalog } from '../src/main/engine/catalog/catalog.js';
import { syncRepository } from '../src/main/engine/catalog/sync.js';
import type { SnapshotEntry, Tree, TreeNode } from '../src/main/engine/repo/types.js';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}
const FILES = arg('files', 1_000_000);
const SNAPSHOTS = arg('snapshots', 100);
const keepIdx = process.argv.indexOf('--dir');

// Shape: /big (10,000 files) + /dNN/mNN/lNN leaf folders of 20 files each.
const BIG = Math.min(10_000, Math.floor(FILES / 10));
const PER_LEAF = 20;
const LEAVES = Math.ceil((FILES - BIG) / PER_LEAF);
const MIDS_PER_TOP = 40;
const LEAVES_PER_MID = 25;
const MIDS = Math.ceil(LEAVES / LEAVES_PER_MID);
const TOPS = Math.ceil(MIDS / MIDS_PER_TOP);
const CHANGED_LEAVES_PER_SNAPSHOT = 20;

const WORDS =
  'report invoice photo holiday scan letter budget notes draft summary contract receipt manual thesis chapter slides recipe taxes plan resume backup export data image video song track album cover lecture paper review minutes agenda memo proposal quote order statement payslip ticket booking itinerary map diagram chart sheet table list log config readme license index main test spec design sketch model render texture sample invoice2 archive'.split(
    ' ',
  );
const EXTS = ['pdf', 'docx', 'jpg', 'png', 'txt', 'xlsx', 'mp3', 'mov'];

function rnd(n: number): number {
  let x = n | 0;
  x = Math.imul(x ^ (x >>> 16), 0x45d9f3b);
  x = Math.imul(x ^ (x >>> 16), 0x45d9f3b);
  return (x ^ (x >>> 16)) >>> 0;
}

const leafChanges: number[][] = Array.from({ length: LEAVES }, () => []); // leaf → snapshots that changed it
for (let s = 1; s < SNAPSHOTS; s++) {
  leafChanges[0].push(s); // the "hot" folder changes in every snapshot (for the version history)
  for (let k = 0; k < CHANGED_LEAVES_PER_SNAPSHOT; k++) leafChanges[rnd(s * 7919 + k) % LEAVES].push(s);
}
const bigChanges = Array.from({ length: SNAPSHOTS }, (_, s) => s).filter((s) => s > 0 && s % 10 === 0);
function lastChange(list: number[], s: number): number {
  let v = 0;
  for (const c of list) if (c <= s && c > v) v = c;
  return v;
}
function leafVersion(leaf: number, s: number) {
  return lastChange(leafChanges[leaf], s);
}
function midVersion(mid: number, s: number) {
  let v = 0;
  for (let l = mid * LEAVES_PER_MID; l < Math.min(LEAVES, (mid + 1) * LEAVES_PER_MID); l++)
    v = Math.max(v, leafVersion(l, s));
  return v;
}
function topVersion(top: number, s: number) {
  let v = 0;
  for (let m = top * MIDS_PER_TOP; m < Math.min(MIDS, (top + 1) * MIDS_PER_TOP); m++)
    v = Math.max(v, midVersion(m, s));
  return v;
}

type DirKey = { kind: 'root' | 'big' | 'top' | 'mid' | 'leaf'; n: number; v: number; s: number };
const ids = new Map<string, DirKey>();
function treeId(k: DirKey): string {
  const id = crypto.createHash('sha256').update(`${k.kind}:${k.n}:${k.v}`).digest('hex');
  ids.set(id, k);
  return id;
}
const MTIME = '1735689600000000000';
function fileNode(name: string, size: number, ver: number): TreeNode {
  const c = crypto.createHash('sha1').update(`${name}:${ver}`).digest('hex');
  return {
    name,
    type: 'file',
    mode: 0o644,
    mtimeNs: String(BigInt(MTIME) + BigInt(ver) * 1_000_000_000n),
    size,
    content: [c + c.slice(0, 24)],
  };
}
function dirNode(name: string, subtree: string): TreeNode {
  return { name, type: 'dir', mode: 0o755, mtimeNs: MTIME, subtree };
}
const pad = (n: number, w = 2) => String(n).padStart(w, '0');

function buildTree(k: DirKey): Tree {
  const s = k.s;
  switch (k.kind) {
    case 'root': {
      const nodes = [dirNode('big', treeId({ kind: 'big', n: 0, v: lastChange(bigChanges, s), s }))];
      for (let t = 0; t < TOPS; t++)
        nodes.push(dirNode(`d${pad(t)}`, treeId({ kind: 'top', n: t, v: topVersion(t, s), s })));
      return { nodes };
    }
    case 'big': {
      const nodes: TreeNode[] = [];
      for (let i = 0; i < BIG; i++)
        nodes.push(fileNode(`entry_${pad(i, 5)}.dat`, 1000 + (rnd(i) % 100000), i === 0 ? k.v : 0));
      return { nodes };
    }
    case 'top': {
      const nodes: TreeNode[] = [];
      for (let m = k.n * MIDS_PER_TOP; m < Math.min(MIDS, (k.n + 1) * MIDS_PER_TOP); m++)
        nodes.push(
          dirNode(`m${pad(m % MIDS_PER_TOP)}`, treeId({ kind: 'mid', n: m, v: midVersion(m, s), s })),
        );
      return { nodes };
    }
    case 'mid': {
      const nodes: TreeNode[] = [];
      for (let l = k.n * LEAVES_PER_MID; l < Math.min(LEAVES, (k.n + 1) * LEAVES_PER_MID); l++)
        nodes.push(
          dirNode(`l${pad(l % LEAVES_PER_MID)}`, treeId({ kind: 'leaf', n: l, v: leafVersion(l, s), s })),
        );
      return { nodes };
    }
    case 'leaf': {
      const nodes: TreeNode[] = [];
      for (let i = 0; i < PER_LEAF; i++) {
        const h = rnd(k.n * PER_LEAF + i);
        const name =
          i === 0
            ? 'notes.txt'
            : `${WORDS[h % WORDS.length]}_${(h >>> 8) % 2000}.${EXTS[(h >>> 4) % EXTS.length]}`;
        nodes.push(fileNode(name, 500 + (h % 5_000_000), i === 0 ? k.v : 0));
      }
      // keep names unique within the folder
      const seen = new Set<string>();
      return { nodes: nodes.filter((n) => (seen.has(n.name) ? false : (seen.add(n.name), true))) };
    }
  }
}

const source = {
  snapshots: [] as SnapshotEntry[],
  async listSnapshots() {
    return this.snapshots;
  },
  /** Encoded trees (JSON, as a repository stores them before encryption). */
  cache: new Map<string, Buffer>(),
  async loadTree(id: string): Promise<Tree> {
    const cached = this.cache.get(id);
    if (cached) return JSON.parse(cached.toString('utf8')) as Tree;
    const k = ids.get(id);
    if (!k) throw new Error('unknown tree');
    return buildTree(k);
  },
};
function addSnapshot(s: number) {
  source.snapshots.push({
    id: crypto.createHash('sha256').update(`snap${s}`).digest('hex'),
    version: 1,
    time: new Date(Date.UTC(2025, 0, 1) + s * 86_400_000).toISOString(),
    host: 'bench',
    paths: ['/'],
    tags: [],
    tree: treeId({ kind: 'root', n: 0, v: s, s }),
    stats: emptySnapshotStats(),
    skipped: [],
  });
}

/** Best wall time of `reps` runs, and the mean CPU time (which a busy machine inflates less). */
function timeIt<T>(fn: () => T, reps = 5): { ms: number; cpuMs: number; result: T; label: string } {
  let best = Infinity;
  let result!: T;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < reps; i++) {
    const t0 = process.hrtime.bigint();
    result = fn();
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6);
  }
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000 / reps;
  return { ms: best, cpuMs, result, label: `${best.toFixed(2)} ms (CPU ${cpuMs.toFixed(2)} ms)` };
}

const dir =
  keepIdx >= 0
    ? process.argv[keepIdx + 1]
    : fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-bench-catalog-'));
fs.rmSync(path.join(dir, 'catalog.sqlite'), { force: true });
const catalog = new Catalog(dir);
const repo = catalog.addRepository({ name: 'bench', location: '/bench', options: {} });
const fmt = (n: number) => n.toLocaleString('en-US', { maximumFractionDigits: 1 });

console.log(
  `catalog bench: ${fmt(FILES)} files in ${fmt(LEAVES + MIDS + TOPS + 2)} folders, ${SNAPSHOTS} snapshots`,
);
addSnapshot(0);
// Generate and encode the first snapshot's trees up front, so the timing below measures the catalog
// plus decoding each tree (JSON.parse), as loading from a repository would, minus decryption and I/O.
(function prebuild(id: string) {
  const t = buildTree(ids.get(id)!);
  source.cache.set(id, Buffer.from(JSON.stringify(t)));
  for (const n of t.nodes) if (n.subtree) prebuild(n.subtree);
})(source.snapshots[0].tree);
let t0 = performance.now();
const cpu0 = process.cpuUsage();
const first = await syncRepository(catalog, repo.id, source);
let secs = (performance.now() - t0) / 1000;
const cpu = process.cpuUsage(cpu0);
const cpuSecs = (cpu.user + cpu.system) / 1e6;
const size1 = catalog.sizeBytes();
const distinctNames = catalog.db.prepare('SELECT count(*) FROM names').pluck().get() as number;
console.log(
  `index first snapshot: ${fmt(first.index.newEntries)} entries in ${secs.toFixed(2)} s = ${fmt(first.index.newEntries / secs)} entries/s` +
    `  [target >= 100,000/s]; CPU ${cpuSecs.toFixed(2)} s = ${fmt(first.index.newEntries / cpuSecs)} entries per CPU-second; load average ${os.loadavg()[0].toFixed(1)}`,
);
console.log(
  `database size: ${fmt(size1 / 1e6)} MB = ${fmt(size1 / first.index.newEntries)} bytes per indexed entry (${fmt(distinctNames)} distinct names)` +
    `  [target < 250]`,
);

source.cache.clear();
t0 = performance.now();
for (let s = 1; s < SNAPSHOTS; s++) addSnapshot(s);
const rest = await syncRepository(catalog, repo.id, source);
secs = (performance.now() - t0) / 1000;
const size100 = catalog.sizeBytes();
console.log(
  `index ${SNAPSHOTS - 1} incremental snapshots: ${secs.toFixed(2)} s (${fmt((secs * 1000) / (SNAPSHOTS - 1))} ms each; ` +
    `${fmt(rest.index.newEntries)} new entry rows, ${fmt(rest.index.reusedDirVersions)} folders reused), ` +
    `database ${fmt(size100 / 1e6)} MB for ${fmt(FILES * SNAPSHOTS)} indexed paths`,
);

const snaps = catalog.listSnapshots(repo.id);
const latest = snaps[snaps.length - 1];
const list = timeIt(() => catalog.files.list(latest.id, '/big')!);
console.log(`list a folder of ${fmt(list.result.length)} entries: ${list.label}  [target < 50 ms]`);
for (const q of ['invoice_17', 'thesis_1999.pdf', 'report', 'budget_1*.xlsx']) {
  const r = timeIt(() => catalog.files.search(q, { limit: 500 }));
  console.log(
    `search "${q}" over ${fmt(FILES * SNAPSHOTS)} indexed paths: ${r.label}, ${fmt(r.result.length)} paths` +
      ` (${fmt(r.result.reduce((a, h) => a + h.snapshots.length, 0))} path-snapshot pairs)  [target < 200 ms]`,
  );
}
const hist = timeIt(() => catalog.files.history('/d00/m00/l00/notes.txt'));
console.log(
  `version history of one path across ${snaps.length} snapshots: ${hist.label}, ${hist.result.length} entries, ` +
    `${hist.result.filter((h) => h.changed).length} distinct versions  [target < 20 ms]`,
);
catalog.close();
if (keepIdx < 0) fs.rmSync(dir, { recursive: true, force: true });
