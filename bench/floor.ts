/**
 * `npm run bench:floor [-- --restic-seconds S]`: the CPU a full backup of the bench dataset cannot do
 * without, stage by stage, measured on one core with the data already in memory (no I/O, no threads,
 * no messages): FastCDC cut points, the keyed BLAKE3 IDs of every chunk, zstd at the default level of
 * the unique chunks (kept raw when it saves < 3%, as the engine does), AES-256-GCM of what is stored, and
 * the read() system calls that bring 1.1 GB in from the page cache. The sum over two cores is the fastest
 * full backup any pipeline could reach on this machine at this compression level; the bench's target
 * ("3× restic") is compared with it. Levels 1 and 3 are shown too (src/shared/compression.ts: why 2).
 */
import '../src/main/engineHost.js'; // the process settings of the app's engine processes (pool size, V8 tiering)
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import crypto from 'node:crypto';
import { makeDataset } from './dataset.js';
import { DEFAULT_CHUNKER, FastCDC, gearTable, nativeChunker } from '../src/main/engine/chunk/index.js';
import { blobId, seal } from '../src/main/engine/crypto/index.js';
import { DEFAULT_LEVEL, maybeCompressTransient } from '../src/main/engine/compress/index.js';

const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const dir = path.resolve(arg('dir') ?? '/var/tmp/tidemark-bench');
const resticSeconds = arg('restic-seconds') ? Number(arg('restic-seconds')) : undefined;
const data = await makeDataset(path.join(dir, 'data'), 1);

const files: string[] = [];
const walk = (d: string) => {
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.isFile() && e.name !== '.complete') files.push(p);
  }
};
walk(data.root);
files.sort();

const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const stage: Record<string, number> = {};
const timeIt = <T>(name: string, f: () => T): T => {
  const t = cpu();
  const r = f();
  stage[name] = (stage[name] ?? 0) + cpu() - t;
  return r;
};

// 1. read(): every file once, in 4 MiB reads, from the page cache (warmed by a first pass)
const buf = Buffer.allocUnsafe(4 << 20);
const readAll = (keep: boolean) => {
  const out: Buffer[] = [];
  for (const f of files) {
    const fd = fs.openSync(f, 'r');
    const parts: Buffer[] = [];
    for (;;) {
      const n = fs.readSync(fd, buf, 0, buf.length, null);
      if (n <= 0) break;
      if (keep) parts.push(Buffer.from(buf.subarray(0, n)));
    }
    fs.closeSync(fd);
    if (keep) out.push(parts.length === 1 ? parts[0] : Buffer.concat(parts));
  }
  return out;
};
const contents = readAll(true);
timeIt('open + read() of every file (page cache)', () => readAll(false));

// 2. chunk, 3. hash, then per unique chunk 4. compress and 5. seal
const cdc = new FastCDC(DEFAULT_CHUNKER, gearTable('floor'));
const idKey = crypto.randomBytes(32);
const encKey = crypto.randomBytes(32);
const chunks: Buffer[] = [];
timeIt(`FastCDC cut points (${nativeChunker ? 'native' : 'JavaScript'})`, () => {
  for (const c of contents) {
    let pos = 0;
    while (pos < c.length) {
      const n = cdc.nextCut(c, pos, c.length, true);
      chunks.push(c.subarray(pos, pos + n));
      pos += n;
    }
  }
});
const unique = new Map<string, Buffer>();
timeIt('keyed BLAKE3 IDs of every chunk', () => {
  for (const c of chunks) unique.set(blobId(idKey, c).toString('hex'), c);
});
let stored = 0;
const bytes = contents.reduce((a, c) => a + c.length, 0);
const uniqueBytes = [...unique.values()].reduce((a, c) => a + c.length, 0);
const sealedSizes: number[] = [];
timeIt(`zstd level ${DEFAULT_LEVEL} (default) of the unique chunks`, () => {
  for (const c of unique.values()) {
    const r = maybeCompressTransient(c, DEFAULT_LEVEL);
    stored += r.data.length;
    sealedSizes.push(r.data.length);
  }
});
/** CPU seconds and stored bytes of the unique chunks at another level. */
const atLevel = (level: number) => {
  let bytesStored = 0;
  const t = cpu();
  for (const c of unique.values()) bytesStored += maybeCompressTransient(c, level).data.length;
  return { seconds: cpu() - t, stored: bytesStored };
};
const others = [1, 2, 3].filter((l) => l !== DEFAULT_LEVEL).map((l) => ({ level: l, ...atLevel(l) }));
const scratch = Buffer.alloc(Math.max(...sealedSizes));
timeIt('AES-256-GCM of what is stored', () => {
  for (const n of sealedSizes) seal(encKey, scratch.subarray(0, n));
});

const total = Object.values(stage).reduce((a, b) => a + b, 0);
const cores = os.cpus().length;
const mb = (n: number) => (n / 1e6).toFixed(0);
console.log(
  `bench:floor — ${files.length} files, ${mb(bytes)} MB (${mb(uniqueBytes)} MB in ${unique.size} unique chunks), one core, data in memory`,
);
for (const [k, v] of Object.entries(stage)) console.log(`  ${k.padEnd(48)} ${v.toFixed(2)} CPU-s`);
console.log(
  `  ${'sum'.padEnd(48)} ${total.toFixed(2)} CPU-s (stored ${mb(stored)} MB at level ${DEFAULT_LEVEL})`,
);
for (const o of others)
  console.log(
    `  zstd level ${o.level} instead: ${o.seconds.toFixed(2)} CPU-s, stores ${mb(o.stored)} MB (${((100 * o.stored) / stored - 100).toFixed(1)}% against level ${DEFAULT_LEVEL})`,
  );
console.log(
  `fastest full backup on ${cores} cores at level ${DEFAULT_LEVEL}, with perfect parallelism and nothing else: ${(total / cores).toFixed(2)} s`,
);
if (resticSeconds)
  console.log(
    `restic's full backup: ${resticSeconds} s → 3× faster is ${(resticSeconds / 3).toFixed(2)} s, ${(resticSeconds / 3 / (total / cores)).toFixed(2)}× the floor above`,
  );
