/**
 * Open files and snapshots (issue 29): a writer keeps changing a SQLite database (WAL mode; each
 * transaction updates 8 rows of several pages and a checksum row) or a 64 MiB file rewritten in place
 * (4 KiB blocks, pass after pass, each in a random order) while a backup runs; the new snapshot is
 * restored and checked (SQLite: PRAGMA integrity_check and the checksum row against SUM of the rows; the
 * file: every block whole and the newest pass's blocks a prefix of its order, i.e. one instant). Each
 * workload is backed up --runs times from a filesystem snapshot and --runs times live, alternating, on
 * a btrfs filesystem on a loop device, and on LVM thin and classic volumes where the kernel has
 * device-mapper. Prints, per filesystem, workload and way, how many restored copies were torn, and the
 * backup times. Needs root.
 *
 *   npm run bench:snapshot                     # 20 runs each way
 *   npm run bench:snapshot -- --runs 40 --only sqlite
 *   npm run bench:snapshot -- --fs lvm-thin,lvm-classic    # some filesystems only (btrfs, lvm-thin, lvm-classic)
 *
 * Where the kernel has no device-mapper, the LVM part runs in a guest with Debian's kernel:
 *   scripts/kvm-guest.sh -- npm run bench:snapshot -- --fs lvm-thin,lvm-classic
 */
import '../src/main/engineHost.js';
import fs from 'node:fs';
import path from 'node:path';
import {
  btrfsSkipReason,
  lvmSkipReason,
  makeBtrfs,
  makeLvm,
  type TestFs,
} from '../tests/snapshot/helpers.js';
import { backupWhileWriting, scratchRepository, type Workload } from '../tests/snapshot/proof.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
}
const RUNS = Number(arg('runs', '20'));
const ONLY = arg('only', '');
const workloads: Workload[] = ONLY ? [ONLY as Workload] : ['sqlite', 'file'];
const FS = arg('fs', 'btrfs,lvm-thin,lvm-classic').split(',');

interface Row {
  fs: string;
  workload: Workload;
  way: 'snapshot' | 'live';
  runs: number;
  torn: number;
  ms: number[];
  example?: string;
}

async function bench(label: string, make: () => TestFs): Promise<Row[]> {
  const rows: Row[] = [];
  const fsys = make();
  const { repo, dir } = await scratchRepository();
  try {
    for (const workload of workloads) {
      const source = path.join(fsys.data, `bench-${workload}`);
      fs.mkdirSync(source);
      const r = { snapshot: { torn: 0, ms: [] as number[] }, live: { torn: 0, ms: [] as number[] } };
      const example: Partial<Record<'snapshot' | 'live', string>> = {};
      for (let i = 0; i < RUNS; i++) {
        // alternate which way goes first, so drift on the shared machine hits both alike
        for (const way of i % 2 ? (['live', 'snapshot'] as const) : (['snapshot', 'live'] as const)) {
          const t = Date.now();
          const run = await backupWhileWriting(
            repo,
            source,
            workload,
            way === 'snapshot',
            path.join(dir, 'state'),
          );
          r[way].ms.push(Date.now() - t);
          if (run.problem) {
            r[way].torn++;
            example[way] ??= run.problem;
          }
        }
        // the tally so far, a line each where the output is not a terminal (the test guest's console:
        // a run cut short by its time limit still leaves its counts)
        process.stdout.write(
          `${process.stdout.isTTY ? '\r' : ''}${label} ${workload}: ${i + 1}/${RUNS} (torn: from snapshot ${r.snapshot.torn}, live ${r.live.torn})${process.stdout.isTTY ? '' : '\n'}`,
        );
      }
      if (process.stdout.isTTY) process.stdout.write('\n');
      for (const way of ['snapshot', 'live'] as const)
        rows.push({
          fs: label,
          workload,
          way,
          runs: RUNS,
          torn: r[way].torn,
          ms: r[way].ms,
          example: example[way],
        });
      fs.rmSync(source, { recursive: true, force: true });
    }
  } finally {
    await repo.close();
    fs.rmSync(dir, { recursive: true, force: true });
    fsys.cleanup();
  }
  return rows;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const rows: Row[] = [];
const b = btrfsSkipReason();
if (!FS.includes('btrfs')) console.log('btrfs: not asked for (--fs)');
else if (b) console.log(`btrfs: skipped (${b})`);
else rows.push(...(await bench('btrfs', () => makeBtrfs(600))));
const l = lvmSkipReason();
for (const kind of ['thin', 'classic'] as const) {
  if (!FS.includes(`lvm-${kind}`)) console.log(`lvm-${kind}: not asked for (--fs)`);
  else if (l) console.log(`lvm-${kind}: skipped (${l})`);
  else rows.push(...(await bench(`lvm-${kind}`, () => makeLvm(kind, 1200))));
}
console.log(
  '\nfilesystem   workload  read from  torn/runs  backup+restore ms (median, min–max)  first torn copy',
);
for (const r of rows)
  console.log(
    `${r.fs.padEnd(12)} ${r.workload.padEnd(9)} ${r.way.padEnd(10)} ${`${r.torn}/${r.runs}`.padEnd(10)} ` +
      `${`${median(r.ms)} (${Math.min(...r.ms)}–${Math.max(...r.ms)})`.padEnd(36)} ${r.example ?? ''}`,
  );
