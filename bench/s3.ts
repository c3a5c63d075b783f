/**
 * `npm run bench:s3 [-- --size MiB] [-- --connections 1,4,8] [-- --dir DIR] [-- --endpoint URL --bucket B]`
 *
 * Full backup and full restore throughput of one dataset into a local folder and into an S3 store
 * (by default the loopback Ceph radosgw from scripts/radosgw.sh, shared through its acquire/release)
 * with 1, 4 and 8 requests in flight, plus the S3 backend alone. Every restore is compared byte for byte.
 * Prints a table; nothing is asserted (timings on a shared machine are figures, not tests).
 *
 * The dataset is mostly incompressible (random) data in a few hundred files, so the figures show the
 * storage path rather than compression. The page cache is dropped before each step when run as root.
 */
import '../src/main/engineHost.js'; // the process settings of the app's engine processes (pool size, V8 tiering)
import fs from 'node:fs/promises';
import fss from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { initRepository, type Repository } from '../src/main/engine/repo/repository.js';
import { backup } from '../src/main/engine/backup/index.js';
import { restore } from '../src/main/engine/restore/index.js';
import { openBackend } from '../src/main/engine/backend/open.js';
import { LocalBackend } from '../src/main/engine/backend/local/index.js';
import { RequestLogBackend } from '../src/main/engine/backend/requestlog/index.js';
import type { Backend } from '../src/main/engine/backend/types.js';
import { OBJECT_TYPES } from '../src/main/engine/backend/types.js';

const args = process.argv.slice(2);
const opt = (name: string, def?: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const sizeMiB = Number(opt('size', '256'));
const connections = opt('connections', '1,4,8')!.split(',').map(Number);
const base = path.resolve(opt('dir', '/var/tmp/tidemark-bench-s3')!);
const root = path.resolve(import.meta.dirname, '..');
const radosgwScript = path.join(root, 'scripts/radosgw.sh');

function dropCaches(): void {
  try {
    spawnSync('sync');
    fss.writeFileSync('/proc/sys/vm/drop_caches', '3');
  } catch {
    // not root: figures include the page cache
  }
}

async function makeDataset(dir: string): Promise<{ bytes: number; files: number }> {
  await fs.rm(dir, { recursive: true, force: true });
  let bytes = 0;
  let files = 0;
  let seed = crypto.createHash('sha256').update('tidemark s3 bench').digest();
  const next = (n: number) => {
    const out = Buffer.alloc(n);
    for (let off = 0; off < n; off += 32) {
      seed = crypto.createHash('sha256').update(seed).digest();
      seed.copy(out, off);
    }
    return out;
  };
  // 85% in 4 MiB files, the rest in 64 KiB files.
  const big = Math.floor((sizeMiB * 0.85) / 4);
  const small = Math.floor((sizeMiB * 0.15 * 1024) / 64);
  for (let i = 0; i < big; i++) {
    const p = path.join(dir, 'big', String(i % 8), `file-${i}.bin`);
    await fs.mkdir(path.dirname(p), { recursive: true });
    const data = crypto.randomBytes(4 * 1024 * 1024);
    await fs.writeFile(p, data);
    bytes += data.length;
    files++;
  }
  for (let i = 0; i < small; i++) {
    const p = path.join(dir, 'small', String(i % 32), `doc-${i}.dat`);
    await fs.mkdir(path.dirname(p), { recursive: true });
    const data = next(64 * 1024);
    await fs.writeFile(p, data);
    bytes += data.length;
    files++;
  }
  return { bytes, files };
}

async function treeHash(dir: string): Promise<string> {
  const h = crypto.createHash('sha256');
  const walk = async (d: string, rel: string) => {
    const entries = (await fs.readdir(d, { withFileTypes: true })).sort((a, b) =>
      a.name.localeCompare(b.name),
    );
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p, `${rel}/${e.name}`);
      else h.update(`${rel}/${e.name}\0`).update(await fs.readFile(p));
    }
  };
  await walk(dir, '');
  return h.digest('hex');
}

interface Row {
  target: string;
  inFlight: string;
  backupS: number;
  backupMBs: number;
  restoreS: number;
  restoreMBs: number;
  requests: number;
  stored: number;
}

async function emptyBackend(b: Backend): Promise<void> {
  for (const t of OBJECT_TYPES) {
    const names: string[] = [];
    for await (const o of b.list(t)) names.push(o.name);
    for (let i = 0; i < names.length; i += 16)
      await Promise.all(names.slice(i, i + 16).map((n) => b.remove(t, n)));
  }
}

async function runOne(
  target: string,
  inFlight: string,
  store: Backend,
  src: string,
  srcBytes: number,
  srcHash: string,
): Promise<Row> {
  const logged = new RequestLogBackend(store);
  const repo: Repository = await initRepository(logged, 'bench password', { kdf: { N: 1024 } });
  dropCaches();
  let t = performance.now();
  const result = await backup(repo, { paths: [src], host: 'bench' });
  const backupS = (performance.now() - t) / 1000;
  const dest = path.join(base, `restore-${target}-${inFlight}`);
  await fs.rm(dest, { recursive: true, force: true });
  dropCaches();
  t = performance.now();
  await restore(repo, { snapshot: result.snapshotId, target: dest, relativeTo: src });
  const restoreS = (performance.now() - t) / 1000;
  if ((await treeHash(dest)) !== srcHash)
    throw new Error(`${target}/${inFlight}: the restored tree differs from the source`);
  let stored = 0;
  for await (const o of store.list('data')) stored += o.size;
  await repo.close();
  await fs.rm(dest, { recursive: true, force: true });
  return {
    target,
    inFlight,
    backupS,
    backupMBs: srcBytes / 1e6 / backupS,
    restoreS,
    restoreMBs: srcBytes / 1e6 / restoreS,
    requests: logged.totals.requests,
    stored,
  };
}

interface RawRow {
  inFlight: number;
  putMBs: number;
  getMBs: number;
  rangedGetsPerS: number;
}

/**
 * The S3 backend alone (no engine): `objects` × 4 MiB PUTs and GETs with n requests in flight, then
 * 1000 ranged 16 KiB GETs (what restore does for single blobs). Shows what the store path can do
 * before the engine's own limits (it keeps at most 4 pack uploads going) come into play.
 */
async function rawBackend(
  location: string,
  keys: { accessKeyId?: string; secretAccessKey?: string },
  n: number,
): Promise<RawRow> {
  const store = await openBackend(location, { ...keys, connections: n });
  const objects = Math.max(8, Math.floor(sizeMiB / 4));
  const body = crypto.randomBytes(4 * 1024 * 1024);
  const names = Array.from({ length: objects }, () => crypto.randomBytes(32).toString('hex'));
  const pool = async (items: number, fn: (i: number) => Promise<void>) => {
    let next = 0;
    await Promise.all(
      Array.from({ length: n }, async () => {
        while (next < items) await fn(next++);
      }),
    );
  };
  try {
    await store.init();
    let t = performance.now();
    await pool(objects, (i) => store.save('data', names[i], body));
    const putMBs = (objects * body.length) / 1e6 / ((performance.now() - t) / 1000);
    t = performance.now();
    await pool(objects, async (i) => {
      const got = await store.load('data', names[i]);
      if (got.length !== body.length) throw new Error('short read');
    });
    const getMBs = (objects * body.length) / 1e6 / ((performance.now() - t) / 1000);
    t = performance.now();
    await pool(1000, async (i) => {
      const off = (i * 7919 * 16) % (body.length - 16384);
      const got = await store.load('data', names[i % objects], off, 16384);
      if (Buffer.compare(got, body.subarray(off, off + 16384)) !== 0) throw new Error('ranged read differs');
    });
    const rangedGetsPerS = 1000 / ((performance.now() - t) / 1000);
    return { inFlight: n, putMBs, getMBs, rangedGetsPerS };
  } finally {
    await emptyBackend(store).catch(() => {});
    await store.close();
  }
}

async function main(): Promise<void> {
  await fs.mkdir(base, { recursive: true });
  const src = path.join(base, 'src');
  console.log(`dataset: ${sizeMiB} MiB (random data) in ${src}`);
  const { bytes, files } = await makeDataset(src);
  const srcHash = await treeHash(src);

  let endpoint = opt('endpoint');
  let accessKeyId = process.env.AWS_ACCESS_KEY_ID;
  let secretAccessKey = process.env.AWS_SECRET_ACCESS_KEY;
  let usingRadosgw = false;
  if (!endpoint) {
    // acquire: start it when needed and register as a user, so a test run finishing meanwhile leaves it up.
    console.log('using the local radosgw (scripts/radosgw.sh acquire)…');
    const r = spawnSync('bash', [radosgwScript, 'acquire', String(process.pid)], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (r.status !== 0)
      throw new Error('radosgw did not start; give --endpoint and AWS_* keys for another store');
    usingRadosgw = true;
    const env = Object.fromEntries(
      fss
        .readFileSync('/tmp/tidemark-radosgw/env', 'utf8')
        .split('\n')
        .filter((l) => l.includes('='))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    endpoint = env.TIDEMARK_RGW_ENDPOINT;
    accessKeyId = env.TIDEMARK_RGW_ACCESS_KEY;
    secretAccessKey = env.TIDEMARK_RGW_SECRET_KEY;
  }
  const bucket = opt('bucket', 'tidemark-bench')!;

  const rows: Row[] = [];
  const raw: RawRow[] = [];
  try {
    for (const n of connections) {
      raw.push(
        await rawBackend(
          `s3:${endpoint}/${bucket}/raw-${n}-${crypto.randomBytes(4).toString('hex')}`,
          { accessKeyId, secretAccessKey },
          n,
        ),
      );
      console.log(`raw S3 backend with ${n} in flight done`);
    }
    const localDir = path.join(base, 'repo-local');
    await fs.rm(localDir, { recursive: true, force: true });
    rows.push(await runOne('local', '-', new LocalBackend(localDir), src, bytes, srcHash));
    console.log(`local folder done`);
    await fs.rm(localDir, { recursive: true, force: true });
    for (const n of connections) {
      const location = `s3:${endpoint}/${bucket}/bench-${n}-${crypto.randomBytes(4).toString('hex')}`;
      const store = await openBackend(location, { accessKeyId, secretAccessKey, connections: n });
      try {
        rows.push(await runOne('s3', String(n), store, src, bytes, srcHash));
        console.log(`s3 with ${n} in flight done`);
      } finally {
        await emptyBackend(store).catch(() => {});
        await store.close();
      }
    }
  } finally {
    if (usingRadosgw) spawnSync('bash', [radosgwScript, 'release', String(process.pid)], { stdio: 'ignore' });
  }

  const mb = (n: number) => (n / 1e6).toFixed(1);
  console.log(
    `\nTidemark backup/restore throughput, ${mb(bytes)} MB in ${files} files, S3 endpoint ${endpoint}`,
  );
  console.log('target  in-flight  backup s  backup MB/s  restore s  restore MB/s  requests  stored MB');
  for (const r of rows)
    console.log(
      `${r.target.padEnd(6)}  ${r.inFlight.padStart(9)}  ${r.backupS.toFixed(1).padStart(8)}  ${r.backupMBs.toFixed(1).padStart(11)}  ${r.restoreS.toFixed(1).padStart(9)}  ${r.restoreMBs.toFixed(1).padStart(12)}  ${String(r.requests).padStart(8)}  ${mb(r.stored).padStart(9)}`,
    );
  console.log(`\nS3 backend alone (no engine): 4 MiB objects, then 1000 ranged 16 KiB reads`);
  console.log('in-flight  PUT MB/s  GET MB/s  ranged GETs/s');
  for (const r of raw)
    console.log(
      `${String(r.inFlight).padStart(9)}  ${r.putMBs.toFixed(1).padStart(8)}  ${r.getMBs.toFixed(1).padStart(8)}  ${r.rangedGetsPerS.toFixed(0).padStart(13)}`,
    );
  console.log(
    '\n"in-flight" is the S3 backend\'s request limit; the engine itself keeps up to 4 pack uploads going.',
  );
}

await main();
