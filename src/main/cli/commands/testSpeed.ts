/**
 * `tidemark test-speed [DESTINATION] [--pattern …] [--json]`: the app's "Test speed" for scripts and
 * servers — simulates a backup's and a restore's I/O on a folder (a test file, past the caches) or an S3
 * destination (probe objects), prints MiB/s, IOPS and latency percentiles per pattern, and with --job the
 * estimated time of that job's next full backup and of a full restore next to its last runs (or with
 * --source, of a backup of those folders). Every finished test is kept in the catalog (the app shows it in
 * the destination's history; --history prints it). S3 keys come from AWS_ACCESS_KEY_ID /
 * AWS_SECRET_ACCESS_KEY, or from the secret store for a job's destination. Exit codes as for a backup:
 * 13 for a destination that is full, cannot be written or went away, 130 when cancelled.
 */
import path from 'node:path';
import type { Command } from 'commander';
import { Catalog } from '../../engine/catalog/catalog.js';
import { KeyFileSecretStore, secretKeys } from '../../engine/catalog/secrets.js';
import type { RunRecord } from '../../engine/catalog/types.js';
import { SECRET_OPTIONS } from '../../engine/schedule/engine.js';
import { isS3Location } from '../../engine/backend/s3/location.js';
import type { BackendOptions } from '../../engine/backend/open.js';
import { NotFoundError, UsageError, errorToWire } from '../../engine/errors.js';
import {
  PATTERN_IDS,
  estimate,
  measureSources,
  parseSize,
  resolveOptions,
  runSpeedTest,
  type PatternId,
  type PatternResult,
  type RunFigures,
  type SpeedEstimate,
  type SpeedTestOptions,
  type SpeedTestProgress,
  type SpeedTestResult,
} from '../../engine/speedtest/index.js';
import { CatalogSpeedTests, wireEstimate, wireResult } from '../../api/speedtests.js';
import { destinationOf, placeKeyOf } from '../../api/destination.js';
import { describeDestination } from '../../../shared/destination.js';
import type { SpeedTestRecord } from '../../../shared/api.js';
import { defaultRepoLocation } from '../program.js';
import type { JobCommandContext } from './jobs.js';

const MiB = 1024 * 1024;
const collect = (v: string, prev: string[] = []) => [...prev, ...v.split(',').map((x) => x.trim())];
const whole = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`${name} must be a whole number, at least 1: ${v}`);
  return n;
};
const fmtBytes = (n: number) =>
  n >= 1024 * MiB
    ? `${(n / 1024 / MiB).toFixed(1)} GiB`
    : n >= MiB
      ? `${(n / MiB).toFixed(1)} MiB`
      : `${Math.round(n / 1024)} KiB`;
const fmtMs = (ms: number) => {
  const s = Math.round(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  return m < 60
    ? `${m}m ${String(s % 60).padStart(2, '0')}s`
    : `${Math.floor(m / 60)}h ${String(m % 60).padStart(2, '0')}m`;
};
const lat = (us: number | null) => (us === null ? '-' : (us / 1000).toFixed(us < 1000 ? 3 : 2));
const when = (t: number) => new Date(t).toISOString().replace('T', ' ').slice(0, 16);

/** The job's finished backups as the estimate wants them (newest first; its first run read everything). */
function figuresOf(runs: RunRecord[]): RunFigures[] {
  const done = runs.filter(
    (r) => (r.status === 'completed' || r.status === 'completed-with-warnings') && r.startedAt && r.endedAt,
  );
  const n = (r: RunRecord, k: string) => Number((r.counters as Record<string, unknown>)[k] ?? 0);
  return done.map((r, i) => ({
    endedAt: r.endedAt!,
    durationMs: Math.max(1, r.endedAt! - r.startedAt!),
    bytesRead: n(r, 'bytesRead'),
    bytesStored: n(r, 'bytesStored'),
    full: r.kind === 'full' || i === done.length - 1,
  }));
}

function table(results: PatternResult[], s3: boolean): string[] {
  const head = `${'pattern'.padEnd(22)}${'block'.padStart(9)}${(s3 ? 'in flight' : 'thr×qd').padStart(10)}${'MiB/s'.padStart(10)}${'IOPS'.padStart(10)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}${'p99 ms'.padStart(9)}`;
  return [
    head,
    ...results.map(
      (r) =>
        `${(r.pattern + (r.direct === false ? '*' : '')).padEnd(22)}${fmtBytes(r.blockSize).replace('.0 ', ' ').padStart(9)}` +
        `${(s3 ? String(r.depth) : `${r.threads}×${r.depth}`).padStart(10)}${r.mibps.toFixed(1).padStart(10)}` +
        `${r.iops.toFixed(r.iops < 100 ? 1 : 0).padStart(10)}${lat(r.latencyUs.p50).padStart(9)}` +
        `${lat(r.latencyUs.p95).padStart(9)}${lat(r.latencyUs.p99).padStart(9)}`,
    ),
  ];
}

function verdict(e: SpeedEstimate, what: string): string[] {
  const out: string[] = [];
  if (e.sourceBytes === null) return out;
  const size = `${e.sourceComplete ? '' : 'at least '}${fmtBytes(e.sourceBytes)}${e.storedRatio !== null ? `, ${fmtBytes(e.storedBytes!)} stored` : ''}`;
  const at = (t: NonNullable<SpeedEstimate['backup']>) =>
    `${t.ms < 1000 ? 'under a second' : `about ${fmtMs(t.ms)}`} at ${t.mibps.toFixed(1)} MiB/s (${t.basis}${t.basis.includes('-put') || t.basis.includes('-get') ? ` ×${t.inFlight}` : ''})`;
  out.push(`next full backup of ${what} (${size}): ${e.backup ? at(e.backup) : 'no write pattern measured'}`);
  out.push(`full restore from this destination: ${e.restore ? at(e.restore) : 'no read pattern measured'}`);
  const run = (label: string, r: SpeedEstimate['lastFull']) =>
    r &&
    out.push(
      `${label}: ${fmtMs(r.durationMs)} (${when(r.endedAt)}): read ${r.readMibps.toFixed(1)} MiB/s, stored ${r.storedMibps.toFixed(1)} MiB/s`,
    );
  run('last full backup', e.lastFull);
  if (e.lastRun && e.lastRun.endedAt !== e.lastFull?.endedAt) run('last backup', e.lastRun);
  return out;
}

export function registerTestSpeedCommand(program: Command, ctx: JobCommandContext): void {
  program
    .command('test-speed')
    .description(
      "simulate a backup's and a restore's I/O on a destination (folder or s3:https://host/bucket/prefix) and report MiB/s, IOPS and latency",
    )
    .argument(
      '[destination]',
      "the destination (default: the --job's, else --repo, $TIDEMARK_REPOSITORY or ~/.tidemark/repository)",
    )
    .option(
      '--pattern <ids>',
      `patterns to run (repeatable or comma-separated; default all for the destination): ${PATTERN_IDS.join(', ')}`,
      collect,
    )
    .option('--size <size>', 'test file on a folder, like DiskSpd -c (default 1G)', parseSize)
    .option(
      '--block-size <size>',
      'block size of the DiskSpd patterns: 256K (WAN), 512K (LAN, default), 4M (local)',
      parseSize,
    )
    .option('--duration <seconds>', 'seconds per pattern (default 10)', Number)
    .option('--threads <n>', 'threads of the DiskSpd patterns (default 1)', whole('threads'))
    .option('--queue-depth <n>', 'operations in flight per thread (default 2)', whole('the queue depth'))
    .option('--in-flight <list>', 'S3: requests in flight to measure at (default 1,4,8)', (v: string) =>
      v.split(',').map((x) => whole('requests in flight')(x.trim())),
    )
    .option('--buffered', 'go through the page cache instead of bypassing it')
    .option('--job <name>', "estimate this job's next full backup and restore, next to its last runs")
    .option(
      '--source <path>',
      'estimate a full backup of this folder (repeatable)',
      (v: string, p: string[] = []) => [...p, v],
    )
    .option('--no-record', 'do not keep the result in the catalog')
    .option('--history', "print this destination's earlier tests and exit")
    .action(async (loc: string | undefined, o) => {
      const g = program.opts<{ repo?: string; json?: boolean; quiet?: boolean }>();
      const catalog = new Catalog(ctx.dataDir());
      try {
        const job = o.job ? catalog.findJob(o.job) : undefined;
        if (o.job && !job) throw new NotFoundError(`job "${o.job}"`);
        const repository = job ? catalog.getRepository(job.repositoryId) : undefined;
        const location = loc ?? repository?.location ?? g.repo ?? defaultRepoLocation();
        const options: BackendOptions = {};
        if (repository && repository.location === location) {
          Object.assign(options, repository.options);
          const secrets = ctx.secrets ?? new KeyFileSecretStore(ctx.dataDir());
          for (const k of SECRET_OPTIONS) {
            const v = await secrets.get(secretKeys.repositoryOption(repository.id, k));
            if (v !== undefined) options[k] = v;
          }
        }
        const s3 = isS3Location(location);
        const where = s3 ? location : path.resolve(location.replace(/^local:/, ''));
        const place = placeKeyOf(where, options);
        const readable = s3 ? describeDestination(destinationOf(where, options)) : where;
        const log = new CatalogSpeedTests(catalog.db);

        if (o.history) {
          const past = log.listSpeedTests({ place, limit: 50 });
          if (g.json) ctx.io.out(JSON.stringify(past, null, 2) + '\n');
          else if (!past.length) ctx.io.out(`no speed tests of ${readable} yet\n`);
          else
            for (const h of past)
              ctx.io.out(
                `${h.startedAt.replace('T', ' ').slice(0, 16)}  ${h.status.padEnd(9)}  ${h.results
                  .map((r) => `${r.pattern}${s3 ? `×${r.depth}` : ''} ${r.mibps.toFixed(1)}`)
                  .join(', ')}${h.error ? `  (${h.error.message})` : ''}\n`,
              );
          return;
        }

        const opts: SpeedTestOptions = {
          patterns: o.pattern as PatternId[] | undefined,
          fileSize: o.size,
          blockSize: o.blockSize,
          durationMs: o.duration !== undefined ? Math.round(o.duration * 1000) : undefined,
          threads: o.threads,
          queueDepth: o.queueDepth,
          inFlight: o.inFlight,
          unbuffered: !o.buffered,
          signal: ctx.signal,
        };
        const unknown = (opts.patterns ?? []).filter((p) => !PATTERN_IDS.includes(p));
        if (unknown.length)
          throw new UsageError(
            `unknown pattern ${unknown.join(', ')} (choose from ${PATTERN_IDS.join(', ')})`,
          );
        const r = resolveOptions(opts, s3 ? 's3' : 'folder'); // usage errors before anything starts
        const tty = ctx.io.isTTY && !g.quiet && !g.json;
        let last = 0;
        opts.progress = (p: SpeedTestProgress) => {
          if (!tty || Date.now() - last < 200) return;
          last = Date.now();
          const what = p.pattern
            ? ` ${p.pattern}${p.inFlight ? ` ×${p.inFlight}` : ''} (${p.patternIndex + 1}/${p.patternCount})`
            : '';
          const rate = p.sample ? ` ${p.sample.mibps.toFixed(1)} MiB/s` : '';
          ctx.io.err(`\r\x1b[K[${p.phase}]${what}${rate} ${Math.round(p.fraction * 100)}%`);
        };
        const startedAt = Date.now();
        const sizing = job
          ? Promise.resolve(null)
          : o.source?.length
            ? measureSources(
                o.source.map((s: string) => path.resolve(s)),
                { signal: ctx.signal },
              )
            : Promise.resolve(null);
        let result: SpeedTestResult | undefined;
        let failure: unknown;
        try {
          result = await runSpeedTest(where, options, opts);
        } catch (err) {
          failure = err;
        } finally {
          if (tty) ctx.io.err('\r\x1b[K');
        }
        // the estimate: a job's size from its newest scan and its runs; else the folders given
        let est: SpeedEstimate | undefined;
        if (result) {
          const runs = job ? catalog.listRuns({ jobId: job.id, limit: 1000 }) : [];
          const scanned = runs.find((x) => x.status !== 'failed' && Number(x.counters.bytesScanned ?? 0) > 0);
          const measured = await sizing;
          const sourceBytes = scanned ? Number(scanned.counters.bytesScanned) : (measured?.bytes ?? null);
          est = estimate({
            results: result.results,
            sourceBytes,
            sourceComplete: measured?.complete ?? true,
            runs: figuresOf(runs),
          });
        }
        const failed = failure !== undefined ? errorToWire(failure) : undefined;
        let recordId: string | undefined;
        if (o.record !== false) {
          const settings: SpeedTestRecord['settings'] = s3
            ? { patterns: r.patterns, durationSec: r.durationMs / 1000, inFlight: r.inFlight }
            : {
                patterns: r.patterns,
                durationSec: r.durationMs / 1000,
                fileSizeMiB: r.fileSize / MiB,
                blockSizeKiB: r.blockSize / 1024,
                threads: r.threads,
                queueDepth: r.queueDepth,
              };
          recordId = log.addSpeedTest(place, {
            ...(job ? { jobId: String(job.id) } : {}),
            location: readable,
            status: failed ? (failed.code === 'ABORTED' ? 'cancelled' : 'failed') : 'completed',
            startedAt: new Date(startedAt).toISOString(),
            endedAt: new Date().toISOString(),
            settings,
            results: (result?.results ?? []).map(wireResult),
            ...(est ? { estimate: wireEstimate(est) } : {}),
            notes: result?.notes ?? [],
            ...(failed ? { error: failed } : {}),
          }).id;
        }
        if (failure !== undefined) throw failure;
        const res = result!;
        if (g.json) {
          ctx.io.out(JSON.stringify({ ...res, estimate: est, recordId }, null, 2) + '\n');
          return;
        }
        const lines = [
          `speed test of ${readable}${res.kind === 'folder' ? ` (test file ${fmtBytes(res.fileSize!)} in ${res.location})` : ''}, ${r.durationMs / 1000} s per pattern`,
          ...table(res.results, s3),
        ];
        if (res.results.some((x) => x.direct === false)) lines.push('* through the cache (see the notes)');
        for (const n of res.notes) lines.push(`note: ${n}`);
        if (est) lines.push(...verdict(est, job ? `"${job.name}"` : 'those folders'));
        ctx.io.out(lines.join('\n') + '\n');
      } finally {
        catalog.close();
      }
    });
}
