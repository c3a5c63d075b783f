/**
 * `npm run bench:speed [-- --dir DIR] [-- --size 1G] [-- --duration S] [-- --rounds N] [-- --block 512K]
 *                      [-- --threads T] [-- --queue-depth D] [-- --patterns a,b] [-- --engine threads]
 *                      [-- --nice N]`
 *
 * The speed test's patterns run by Tidemark's I/O engine and by fio (Debian's `fio`) on the same test
 * file in the same folder, each pattern by both tools back to back (which one first alternating by
 * round), and both tools' MiB/s and IOPS printed side by side with their ratio; then the median of each
 * over the rounds, and the ratios' spread. fio gets the equivalent job: the same block size, offset
 * alignment (--blockalign), read share (--rwmixread), threads (--numjobs, sequential ones each on its
 * share of the file: --offset_increment), operations in flight (--iodepth) and engine (libaio with
 * O_DIRECT, or with --engine threads: psync with threads × depth jobs), for the same time. Nothing is
 * asserted: figures on a shared machine are figures. The folder should be on the disk to measure (the
 * default, /var/tmp, is on this machine's virtio disk); the test file is removed at the end.
 *
 * `npm run bench:speed -- --s3 [--endpoint URL --bucket B] [--duration S]`: the S3 patterns instead (PUT
 * and GET of pack-sized objects, small ranged GETs, at 1, 4 and 8 in flight), by default against the
 * loopback Ceph radosgw of scripts/radosgw.sh (acquire/release); fio has no S3 engine to compare with.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { CreateBucketCommand } from '@aws-sdk/client-s3';
import { S3Backend } from '../src/main/engine/backend/s3/index.js';
import { runS3SpeedTest } from '../src/main/engine/speedtest/s3.js';
import { layOutTestFile, patternParams, patternResult } from '../src/main/engine/speedtest/folder.js';
import { startIoRun, type IoParams } from '../src/main/engine/speedtest/ioRun.js';
import { DISK_PATTERNS, parseSize, type DiskPattern } from '../src/main/engine/speedtest/patterns.js';

const args = process.argv.slice(2);
const opt = (name: string, def?: string) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : def;
};
const MiB = 1024 * 1024;
const base = path.resolve(opt('dir', `/var/tmp/tidemark-bench-speed-${process.pid}`)!);
const fileSize = parseSize(opt('size', '1G')!);
const durationMs = Number(opt('duration', '5')) * 1000;
const rounds = Number(opt('rounds', '3'));
const blockSize = parseSize(opt('block', '512K')!);
const threads = Number(opt('threads', '1'));
const queueDepth = Number(opt('queue-depth', '2'));
const engine = opt('engine', 'auto') as 'auto' | 'threads';
const wanted = opt('patterns')?.split(',');
/** A scheduling priority for both tools (e.g. -5: less of the noise other processes' CPU use makes). */
const niceness = opt('nice') === undefined ? undefined : Number(opt('nice'));
const patterns = DISK_PATTERNS.filter((p) => !wanted || wanted.includes(p.id));

interface Figures {
  mibps: number;
  iops: number;
  p50us: number | null;
  p99us: number | null;
}

async function tidemark(p: DiskPattern, file: string, seed: number): Promise<Figures & { engine: string }> {
  const params = patternParams(
    file,
    fileSize,
    p,
    { blockSize, threads, queueDepth, durationMs },
    { engine, seed },
  );
  const final = await startIoRun(params).done;
  if (final.errno !== undefined) throw new Error(`Tidemark's ${p.id} failed: errno ${final.errno}`);
  const r = patternResult(p, params, final, false);
  return {
    mibps: r.mibps,
    iops: r.iops,
    p50us: r.latencyUs.p50,
    p99us: r.latencyUs.p99,
    engine: final.engine!,
  };
}

function fioArgs(p: DiskPattern, params: IoParams, file: string): string[] {
  const rw = p.random
    ? p.readPercent === 100
      ? 'randread'
      : p.readPercent === 0
        ? 'randwrite'
        : 'randrw'
    : p.readPercent === 100
      ? 'read'
      : p.readPercent === 0
        ? 'write'
        : 'rw';
  const region = Math.floor(fileSize / params.threads / params.blockSize) * params.blockSize;
  const threadsEngine = engine === 'threads';
  return [
    `--name=${p.id}`,
    `--filename=${file}`,
    '--allow_file_create=0',
    `--direct=1`,
    `--ioengine=${threadsEngine ? 'psync' : 'libaio'}`,
    `--iodepth=${threadsEngine ? 1 : params.depth}`,
    `--numjobs=${threadsEngine ? params.threads * params.depth : params.threads}`,
    `--bs=${params.blockSize}`,
    `--rw=${rw}`,
    ...(p.readPercent > 0 && p.readPercent < 100 ? [`--rwmixread=${p.readPercent}`] : []),
    ...(p.random
      ? [`--blockalign=${params.align}`, `--size=${fileSize}`, '--norandommap', '--randrepeat=0']
      : threadsEngine
        ? [`--size=${fileSize}`]
        : [`--size=${region}`, `--offset_increment=${region}`]),
    // a write's buffer is random bytes set once, as Tidemark's are (fio would rework it before each write)
    '--scramble_buffers=0',
    '--time_based',
    `--runtime=${durationMs}ms`,
    '--group_reporting',
    '--lat_percentiles=1',
    '--clat_percentiles=0',
    '--output-format=json',
  ];
}

function fio(p: DiskPattern, file: string): Figures {
  const params = patternParams(file, fileSize, p, { blockSize, threads, queueDepth, durationMs });
  const res =
    niceness === undefined
      ? spawnSync('fio', fioArgs(p, params, file), { encoding: 'utf8' })
      : spawnSync('nice', ['-n', String(niceness), 'fio', ...fioArgs(p, params, file)], { encoding: 'utf8' });
  if (res.status !== 0) throw new Error(`fio failed: ${res.stderr || res.error}`);
  const job = JSON.parse(res.stdout.slice(res.stdout.indexOf('{'))).jobs[0];
  const bw = job.read.bw_bytes + job.write.bw_bytes;
  const iops = job.read.iops + job.write.iops;
  // latency percentiles of all operations: the larger share's (fio reports them per direction)
  const main = job.read.total_ios >= job.write.total_ios ? job.read : job.write;
  const pct = main.lat_ns?.percentile ?? {};
  const us = (k: string) => (pct[k] === undefined ? null : Math.round(pct[k] / 10) / 100);
  return { mibps: bw / MiB, iops, p50us: us('50.000000'), p99us: us('99.000000') };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const f1 = (n: number) => n.toFixed(1);

async function main(): Promise<void> {
  if (spawnSync('fio', ['--version']).status !== 0) {
    console.error('bench:speed needs fio (apt-get install fio)');
    process.exit(2);
  }
  fs.mkdirSync(base, { recursive: true });
  const file = path.join(base, 'testfile.dat');
  // the engine's threads inherit this thread's priority (Linux: a per-thread nice value)
  if (niceness !== undefined) os.setPriority(niceness);
  console.log(
    `bench:speed: ${file}, ${fileSize / MiB} MiB, ${durationMs / 1000} s per pattern per tool, ${rounds} round(s), ` +
      `block ${blockSize / 1024} KiB, ${threads} thread(s) × ${queueDepth} in flight (DiskSpd patterns), engine ${engine}`,
  );
  try {
    const laid = await layOutTestFile(file, fileSize);
    console.log(
      `laid out in ${(laid.elapsedNs / 1e9).toFixed(1)} s (direct I/O: ${laid.direct}, engine ${laid.engine})`,
    );
    const all = new Map<string, { tm: Figures[]; fio: Figures[] }>();
    for (let round = 0; round < rounds; round++) {
      console.log(`\nround ${round + 1}${round % 2 ? ' (fio first)' : ' (Tidemark first)'}`);
      console.log(
        'pattern               block  thr×qd  Tidemark MiB/s   fio MiB/s  ratio   Tidemark IOPS  fio IOPS  ratio  p50 µs tm/fio   p99 µs tm/fio',
      );
      for (const p of patterns) {
        let tm: Figures & { engine?: string };
        let fo: Figures;
        if (round % 2) {
          fo = fio(p, file);
          tm = await tidemark(p, file, round + 1);
        } else {
          tm = await tidemark(p, file, round + 1);
          fo = fio(p, file);
        }
        const e = all.get(p.id) ?? { tm: [], fio: [] };
        e.tm.push(tm);
        e.fio.push(fo);
        all.set(p.id, e);
        const params = patternParams(file, fileSize, p, { blockSize, threads, queueDepth, durationMs });
        console.log(
          `${p.id.padEnd(21)} ${`${params.blockSize / 1024}K`.padStart(6)} ${`${params.threads}×${params.depth}`.padStart(6)}` +
            `  ${f1(tm.mibps).padStart(14)} ${f1(fo.mibps).padStart(11)} ${(tm.mibps / fo.mibps).toFixed(3).padStart(6)}` +
            `  ${f1(tm.iops).padStart(14)} ${f1(fo.iops).padStart(9)} ${(tm.iops / fo.iops).toFixed(3).padStart(6)}` +
            `  ${`${tm.p50us}/${fo.p50us}`.padStart(14)}  ${`${tm.p99us}/${fo.p99us}`.padStart(14)}`,
        );
      }
    }
    console.log(
      `\nover ${rounds} round(s): medians of each tool (ratio = Tidemark / fio); pairs: the median of the rounds' ` +
        'ratios (the two tools ran back to back) and their geometric mean with its 95% interval (± two standard ' +
        "errors of the logs: how far the machine's noise leaves the answer open); spread: lowest–highest round ratio",
    );
    console.log(
      'pattern               Tidemark MiB/s   fio MiB/s  ratio   pairs  geomean [95%]          spread       Tidemark IOPS  fio IOPS  ratio',
    );
    for (const p of patterns) {
      const e = all.get(p.id)!;
      const tmM = median(e.tm.map((x) => x.mibps));
      const foM = median(e.fio.map((x) => x.mibps));
      const tmI = median(e.tm.map((x) => x.iops));
      const foI = median(e.fio.map((x) => x.iops));
      const ratios = e.tm.map((x, i) => x.mibps / e.fio[i].mibps);
      const logs = ratios.map(Math.log);
      const mean = logs.reduce((a, b) => a + b, 0) / logs.length;
      const se =
        logs.length > 1
          ? Math.sqrt(logs.reduce((a, b) => a + (b - mean) ** 2, 0) / (logs.length - 1) / logs.length)
          : 0;
      const geo = `${Math.exp(mean).toFixed(3)} [${Math.exp(mean - 2 * se).toFixed(2)}, ${Math.exp(mean + 2 * se).toFixed(2)}]`;
      console.log(
        `${p.id.padEnd(21)} ${f1(tmM).padStart(14)} ${f1(foM).padStart(11)} ${(tmM / foM).toFixed(3).padStart(6)} ` +
          `${median(ratios).toFixed(3).padStart(7)}  ${geo.padEnd(21)}  ` +
          `${`${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)}`.padEnd(11)}  ${f1(tmI).padStart(14)} ${f1(foI).padStart(9)} ${(tmI / foI).toFixed(3).padStart(6)}`,
      );
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}

/** The S3 patterns against radosgw (or --endpoint with AWS_* keys), printed as a table. */
async function s3Bench(): Promise<void> {
  const root = path.resolve(import.meta.dirname, '..');
  const script = path.join(root, 'scripts/radosgw.sh');
  let endpoint = opt('endpoint');
  let accessKeyId = process.env.AWS_ACCESS_KEY_ID ?? '';
  let secretAccessKey = process.env.AWS_SECRET_ACCESS_KEY ?? '';
  const usingRadosgw = !endpoint;
  if (usingRadosgw) {
    console.log('using the local radosgw (scripts/radosgw.sh acquire)…');
    const r = spawnSync('bash', [script, 'acquire', String(process.pid)], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (r.status !== 0)
      throw new Error('radosgw did not start; give --endpoint and AWS_* keys for another store');
    const env = Object.fromEntries(
      fs
        .readFileSync('/tmp/tidemark-radosgw/env', 'utf8')
        .split('\n')
        .filter((l) => l.includes('='))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
    );
    [endpoint, accessKeyId, secretAccessKey] = [
      env.TIDEMARK_RGW_ENDPOINT,
      env.TIDEMARK_RGW_ACCESS_KEY,
      env.TIDEMARK_RGW_SECRET_KEY,
    ];
  }
  const bucket = opt('bucket', 'tidemark-bench')!;
  try {
    const b = new S3Backend({ endpoint, bucket, prefix: '', accessKeyId, secretAccessKey });
    await b.sdk.send(new CreateBucketCommand({ Bucket: bucket })).catch(() => {});
    await b.close();
    const res = await runS3SpeedTest(
      `s3:${endpoint}/${bucket}/speed-${process.pid}`,
      { accessKeyId, secretAccessKey },
      {
        durationMs,
      },
    );
    console.log(
      `bench:speed --s3: ${endpoint}/${bucket}, ${durationMs / 1000} s per pattern and in-flight count`,
    );
    console.log('pattern      in flight     MiB/s   requests/s   p50 ms   p95 ms   p99 ms');
    const ms = (us: number | null) => (us === null ? '-' : (us / 1000).toFixed(1));
    for (const r of res.results)
      console.log(
        `${r.pattern.padEnd(12)} ${String(r.depth).padStart(9)} ${f1(r.mibps).padStart(9)} ${f1(r.iops).padStart(12)}` +
          ` ${ms(r.latencyUs.p50).padStart(8)} ${ms(r.latencyUs.p95).padStart(8)} ${ms(r.latencyUs.p99).padStart(8)}`,
      );
    for (const n of res.notes) console.log(`note: ${n}`);
  } finally {
    if (usingRadosgw) spawnSync('bash', [script, 'release', String(process.pid)], { stdio: 'ignore' });
  }
}

if (args.includes('--s3')) await s3Bench();
else await main();
