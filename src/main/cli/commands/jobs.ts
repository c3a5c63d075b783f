/**
 * Job, scheduler and catalog commands:
 *   tidemark job add|list|edit|remove|run|runs|retention
 *   tidemark scheduler            run the scheduler headless until interrupted
 *   tidemark catalog rebuild|ls|search|versions
 * Jobs and the catalog live in the data folder (ctx.dataDir()); repository passwords go to the key
 * file there (a SecretStore), never into the catalog database.
 */
import { listAlarms } from '../../engine/catalog/alarms.js';
import path from 'node:path';
import type { Command } from 'commander';
import { Option } from 'commander';
import { Catalog } from '../../engine/catalog/catalog.js';
import { KeyFileSecretStore, secretKeys, type SecretStore } from '../../engine/catalog/secrets.js';
import { rebuildRepository } from '../../engine/catalog/sync.js';
import type {
  Job,
  JobSpec,
  RepositoryRecord,
  RestoreTestSettings,
  RunRecord,
  Schedule,
} from '../../engine/catalog/types.js';
import { DEFAULT_TEST_FILES, describeRestoreTest } from '../../engine/schedule/restoreTests.js';
import { JobRunner } from '../../engine/schedule/runner.js';
import { createJobSystem } from '../../engine/schedule/system.js';
import { TrackerService, journalBackup } from '../../tracking/service.js';
import { createRunEvents } from '../../engine/schedule/events.js';
import { describeSchedule, nextFireTime, validateSchedule } from '../../engine/schedule/schedules.js';
import { describePolicy } from '../../engine/repo/retentionPolicy.js';
import {
  createJobEngine,
  openCatalogRepository,
  splitSecretOptions,
  storeRepositorySecrets,
  deleteRepositorySecrets,
} from '../../engine/schedule/engine.js';
import { openBackend } from '../../engine/backend/open.js';
import { isS3Location } from '../../engine/backend/s3/location.js';
import { openRepository } from '../../engine/repo/repository.js';
import { UsageError, NotFoundError } from '../../engine/errors.js';

import { getPassword } from '../password.js';
import { addRetentionOptions, retentionFrom, retentionGiven } from '../retention.js';
import { defaultRepoLocation } from '../program.js';
import { EXIT, exitCodeFor } from '../exitCodes.js';
import { describeRequests } from '../../engine/backend/requestlog/index.js';
import { SNAPSHOT_MODES, snapshotRecordDir, type SnapshotMode } from '../../engine/snapshot/index.js';

/** What these commands need from the CLI (src/main/cli/program.ts's CliContext provides it). */
export interface JobCommandContext {
  io: { out: (text: string) => void; err: (text: string) => void; isTTY: boolean };
  /** The data folder holding the catalog and the key file. */
  dataDir(): string;
  signal: AbortSignal;
  setExitCode(code: number): void;
  /** Where secrets go (default: the 0600 key file in the data folder). */
  secrets?: SecretStore;
}

interface Globals {
  repo?: string;
  passwordFile?: string;
  json?: boolean;
  quiet?: boolean;
}

const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
const collect = (v: string, prev: string[] = []) => [...prev, v];
const count = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < -1) throw new UsageError(`not a whole number: ${v}`);
  return n;
};
const fmtTime = (t: number | null) =>
  t === null ? '-' : new Date(t).toISOString().replace('T', ' ').slice(0, 16);

function addScheduleOptions(cmd: Command): Command {
  cmd
    .option('--daily <times>', 'run every day at these times, e.g. 02:30 or 08:00,20:00')
    .option('--weekly <spec>', 'run on these days at a time, e.g. mon,thu@21:00')
    .option('--hourly [minute]', 'run every hour (at this minute, default 0)')
    .option('--every-hours <n>', 'run every N hours (0:00, N:00, …)', count)
    .option('--cron <expr>', 'run on a cron expression (repeatable)', collect)
    .option('--manual', 'only run when asked (no schedule)')
    .option('--tz <zone>', 'time zone of the schedule (default: this computer)');
  addRetentionOptions(cmd);
  return cmd
    .option('-e, --exclude <pattern>', 'exclude names or paths matching a glob (repeatable)', collect)
    .option('--compression <level>', 'zstd level, 0 = off', count)
    .option('--verify', 'check each new snapshot after the backup')
    .option('--no-verify', 'do not check after the backup')
    .option('--verify-data', 'when verifying, read back all data (slower)')
    .option(
      '--full-every-days <n>',
      're-read everything when the last full backup is older than N days (0 = never)',
      count,
    )
    .option('--catch-up', 'run a missed backup once after sleep or shutdown (the default)')
    .option('--no-catch-up', 'do not run a missed backup after sleep or shutdown')
    .option('--prune-every-days <n>', 'reclaim space in the repository at most every N days', Number)
    .option(
      '--restore-test-every <days>',
      'after backups, restore a random sample into a temporary folder and compare it, every N days (0: each backup)',
      count,
    )
    .option('--restore-test-files <n>', 'files each restore test draws (default 20)', count)
    .option('--restore-test-dir <dir>', 'where restore tests make their temporary folder')
    .option('--restore-test-off', 'no restore tests after backups')
    .addOption(new Option('--disable', "pause the job's schedule"))
    .option('--enable', "resume the job's schedule")
    .addOption(
      new Option(
        '--snapshot <mode>',
        'read the sources from a filesystem snapshot (btrfs, LVM, VSS, APFS): when-possible (default), always (fail without one), never',
      ).choices([...SNAPSHOT_MODES]),
    )
    .option(
      '--pre-command <cmd>',
      'run this shell command before the scan (a failure fails the run; "" removes it)',
    )
    .option(
      '--post-command <cmd>',
      'run this shell command after the run, with TIDEMARK_RUN_STATUS, TIDEMARK_SNAPSHOT_ID, TIDEMARK_ERROR set ("" removes it)',
    )
    .option('--hook-timeout <seconds>', 'how long a pre- or post-command may take (default 600)', count)
    .addOption(
      new Option(
        '--memory <mode>',
        'low: use less memory (older PCs; one worker, fewer buffers: slower backups and restores); normal: the default',
      ).choices(['low', 'normal']),
    );
}

/** The snapshot and pre/post-command options given on the command line, over `cur`. */
function hookOptionsFrom(o: any, cur: JobSpec['options'] = {}): JobSpec['options'] {
  const out = { ...cur };
  if (o.snapshot !== undefined) out.snapshot = o.snapshot as SnapshotMode;
  for (const k of ['preCommand', 'postCommand'] as const)
    if (o[k] !== undefined) out[k] = String(o[k]).trim() || undefined;
  if (o.hookTimeout !== undefined) {
    if (o.hookTimeout < 1) throw new UsageError('--hook-timeout takes a number of seconds, at least 1');
    out.hookTimeoutSec = o.hookTimeout;
  }
  if (o.memory === 'low') out.memory = 'low';
  else if (o.memory === 'normal') delete out.memory;
  return out;
}

/** The job's restore test settings from --restore-test-… options (undefined: none given). */
function restoreTestFrom(o: any, cur?: RestoreTestSettings): RestoreTestSettings | undefined {
  if (o.restoreTestEvery === undefined && o.restoreTestFiles === undefined && o.restoreTestDir === undefined)
    return undefined;
  return {
    everyDays: o.restoreTestEvery ?? cur?.everyDays ?? 7,
    files: o.restoreTestFiles ?? cur?.files ?? DEFAULT_TEST_FILES,
    ...(o.restoreTestDir
      ? { tempDir: path.resolve(o.restoreTestDir) }
      : cur?.tempDir
        ? { tempDir: cur.tempDir }
        : {}),
  };
}

function scheduleFrom(o: any): Schedule | undefined {
  const tz = o.tz ? { timeZone: o.tz as string } : {};
  const given = ['daily', 'weekly', 'hourly', 'everyHours', 'cron', 'manual'].filter(
    (k) => o[k] !== undefined,
  );
  if (given.length > 1)
    throw new UsageError(
      'give one schedule (--daily, --weekly, --hourly, --every-hours, --cron or --manual)',
    );
  let s: Schedule | undefined;
  if (o.manual) s = { kind: 'manual' };
  else if (o.daily)
    s = {
      kind: 'daily',
      times: String(o.daily)
        .split(',')
        .map((t) => t.trim()),
      ...tz,
    };
  else if (o.weekly) {
    const m = /^([a-z,]+)@(\d{1,2}:\d{2})$/i.exec(String(o.weekly).trim());
    if (!m) throw new UsageError('--weekly takes days@time, e.g. mon,thu@21:00');
    const days = m[1].split(',').map((d) => {
      const i = DAYS.indexOf(d.toLowerCase().slice(0, 3));
      if (i < 0) throw new UsageError(`unknown day "${d}"`);
      return i;
    });
    s = { kind: 'weekly', days, time: m[2], ...tz };
  } else if (o.hourly !== undefined)
    s = { kind: 'hourly', minute: o.hourly === true ? 0 : count(o.hourly), ...tz };
  else if (o.everyHours !== undefined) s = { kind: 'every-hours', hours: o.everyHours, ...tz };
  else if (o.cron) s = { kind: 'cron', expressions: o.cron, ...tz };
  if (s) validateSchedule(s);
  return s;
}

const keepGiven = retentionGiven;

/** Folder locations as absolute paths (so "./backup" and "/home/me/backup" are one repository). */
function normalizeLocation(location: string): string {
  if (isS3Location(location)) return location;
  if (location.startsWith('local:')) return path.resolve(location.slice('local:'.length));
  return /^[a-z][a-z0-9+.-]+:/i.test(location) && !/^[a-z]:[\\/]/i.test(location)
    ? location
    : path.resolve(location);
}

function runExitCode(run: RunRecord): number {
  switch (run.status) {
    case 'completed':
      return EXIT.OK;
    case 'completed-with-warnings':
      return EXIT.WARNINGS;
    case 'cancelled':
      return EXIT.CANCELLED;
    default:
      return run.error?.code === 'VERIFY_FAILED' || run.error?.code === 'RESTORE_TEST_FAILED'
        ? EXIT.DAMAGED
        : exitCodeFor({ code: run.error?.code });
  }
}

export function registerJobCommands(program: Command, ctx: JobCommandContext): void {
  const io = ctx.io;
  const g = () => program.opts<Globals>();
  const print = (human: () => string | string[], json: () => unknown) => {
    if (g().json) io.out(JSON.stringify(json(), null, 2) + '\n');
    else {
      const h = human();
      const text = Array.isArray(h) ? h.join('\n') : h;
      if (text) io.out(text + '\n');
    }
  };
  const secrets = () => ctx.secrets ?? new KeyFileSecretStore(ctx.dataDir());
  const withCatalog = async <T>(fn: (c: Catalog) => Promise<T> | T): Promise<T> => {
    const c = new Catalog(ctx.dataDir());
    try {
      return await fn(c);
    } finally {
      c.close();
    }
  };
  const findJob = (c: Catalog, ref: string): Job => {
    const j = c.findJob(ref);
    if (!j) throw new NotFoundError(`job "${ref}"`);
    return j;
  };

  /** The catalog record for a repository location, registering it (and its password) if new. */
  const ensureRepository = async (c: Catalog, location: string, o: any): Promise<RepositoryRecord> => {
    const existing = c.findRepository(location);
    const store = secrets();
    if (existing && (await store.get(secretKeys.repositoryPassword(existing.id))) !== undefined)
      return existing;
    const password = await getPassword(g());
    // Object-store keys given in the environment are remembered for scheduled runs: the key ID with
    // the repository, the secret key in the SecretStore.
    const env = process.env;
    const { plain, secret } = splitSecretOptions(
      isS3Location(location) && env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY
        ? {
            accessKeyId: env.AWS_ACCESS_KEY_ID,
            secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
            ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
          }
        : {},
    );
    // Prove the password opens the repository before storing anything.
    const repo = await openRepository(await openBackend(location, { ...plain, ...secret, env }), password);
    await repo.close();
    const rec =
      existing ??
      c.addRepository({
        name: o.repoName ?? location,
        location,
        options: plain,
        pruneEveryDays: o.pruneEveryDays,
      });
    await storeRepositorySecrets(store, rec.id, { password, options: secret });
    return rec;
  };

  const job = program
    .command('job')
    .description('backup jobs: what to back up, where, when, and for how long');

  addScheduleOptions(
    job
      .command('add')
      .description('create a job (the repository must exist: see "tidemark init")')
      .argument('<name>', 'a name for the job')
      .argument('<sources...>', 'folders and files to back up')
      .option('--to <location>', 'repository location (default: --repo or the default repository)')
      .option('--repo-name <name>', 'a name for the repository, when it is new to the catalog'),
  ).action(async (name: string, sources: string[], o) => {
    await withCatalog(async (c) => {
      const location = normalizeLocation(o.to ?? g().repo ?? defaultRepoLocation());
      const schedule = scheduleFrom(o) ?? { kind: 'daily', times: ['21:00'] };
      const repo = await ensureRepository(c, location, o);
      if (o.pruneEveryDays !== undefined) c.updateRepository(repo.id, { pruneEveryDays: o.pruneEveryDays });
      const spec: JobSpec = {
        name,
        repositoryId: repo.id,
        sources: sources.map((s) => path.resolve(s)),
        excludes: o.exclude ?? [],
        schedule,
        // Without --keep-… options: a week of dailies, a month of weeklies, a year of monthlies, 3 yearlies.
        retention: keepGiven(o)
          ? retentionFrom(o)
          : { keepDaily: 7, keepWeekly: 4, keepMonthly: 12, keepYearly: 3 },
        compressionLevel: o.compression ?? 3,
        options: hookOptionsFrom(o, {
          verifyAfterBackup: !!o.verify,
          verifyReadData: !!o.verifyData,
          fullEveryDays: o.fullEveryDays,
          catchUp: o.catchUp,
          ...(restoreTestFrom(o) && !o.restoreTestOff ? { restoreTest: restoreTestFrom(o) } : {}),
        }),
        enabled: !o.disable,
      };
      const j = c.addJob(spec);
      print(
        () =>
          `job ${j.id} "${j.name}": ${describeSchedule(j.schedule)}, ${describePolicy(j.retention)} → ${repo.location}`,
        () => j,
      );
    });
  });

  job
    .command('list')
    .description('list jobs with their last and next run')
    .action(async () => {
      await withCatalog((c) => {
        const rows = c.listJobs().map((j) => {
          const last = c.listRuns({ jobId: j.id, limit: 1 })[0];
          return {
            job: j,
            repository: c.getRepository(j.repositoryId),
            alarms: listAlarms(c, { repositoryId: j.repositoryId }).filter((a) => a.job === j.key),
            last,
            next: j.enabled ? nextFireTime(j.schedule, Math.max(Date.now(), j.schedCheckedAt ?? 0)) : null,
          };
        });
        print(
          () =>
            rows.length
              ? rows.map(
                  (r) =>
                    `${String(r.job.id).padStart(3)}  ${r.job.name}${r.job.enabled ? '' : ' (paused)'}\n` +
                    `     ${r.job.sources.join(', ')} → ${r.repository.location}\n` +
                    `     ${describeSchedule(r.job.schedule)}; ${describePolicy(r.job.retention)}\n` +
                    `     snapshot: ${r.job.options.snapshot ?? 'when-possible'}` +
                    `${r.job.options.preCommand ? `; pre: ${r.job.options.preCommand}` : ''}` +
                    `${r.job.options.postCommand ? `; post: ${r.job.options.postCommand}` : ''}` +
                    `${r.job.options.memory === 'low' ? '; memory: low' : ''}\n` +
                    `     last: ${r.last ? `${r.last.status} ${fmtTime(r.last.startedAt ?? r.last.endedAt)}` : 'never'}; next: ${fmtTime(r.next)}` +
                    r.alarms
                      .map(
                        (a) =>
                          `\n     MASS-CHANGE ALARM: snapshot ${a.snapId.slice(0, 8)} of ${fmtTime(a.time)}: ${a.verdict.reasons[0] ?? ''} (tidemark alarm dismiss ${a.snapId.slice(0, 8)} -r …)`,
                      )
                      .join(''),
                )
              : 'no jobs yet: tidemark job add NAME FOLDER… --to REPOSITORY',
          () =>
            rows.map((r) => ({
              ...r.job,
              repository: r.repository,
              lastRun: r.last ?? null,
              alarms: r.alarms,
              nextRun: r.next,
            })),
        );
      });
    });

  addScheduleOptions(
    job
      .command('edit')
      .description('change a job')
      .argument('<job>', 'job name or id')
      .option('--name <name>', 'rename the job')
      .option('--sources <paths...>', 'replace the sources')
      .option('--clear-excludes', 'drop all exclusions before adding --exclude ones'),
  ).action(async (ref: string, o) => {
    await withCatalog(async (c) => {
      const cur = findJob(c, ref);
      const patch: Partial<JobSpec> = {};
      if (o.name) patch.name = o.name;
      if (o.sources) patch.sources = o.sources;
      if (o.exclude || o.clearExcludes)
        patch.excludes = [...(o.clearExcludes ? [] : cur.excludes), ...(o.exclude ?? [])];
      const s = scheduleFrom(o);
      if (s) patch.schedule = s;
      if (keepGiven(o)) patch.retention = retentionFrom(o);
      if (o.compression !== undefined) patch.compressionLevel = o.compression;
      const options = hookOptionsFrom(o, cur.options);
      if (o.verify !== undefined) options.verifyAfterBackup = o.verify;
      if (o.verifyData) options.verifyReadData = true;
      if (o.fullEveryDays !== undefined) options.fullEveryDays = o.fullEveryDays;
      if (o.catchUp !== undefined) options.catchUp = o.catchUp;
      const rt = restoreTestFrom(o, cur.options.restoreTest);
      if (o.restoreTestOff) delete options.restoreTest;
      else if (rt) options.restoreTest = rt;
      patch.options = options;
      if (o.disable) patch.enabled = false;
      if (o.enable) patch.enabled = true;
      if (o.pruneEveryDays !== undefined)
        c.updateRepository(cur.repositoryId, { pruneEveryDays: o.pruneEveryDays });
      const j = c.updateJob(cur.id, patch);
      print(
        () => `job ${j.id} "${j.name}": ${describeSchedule(j.schedule)}, ${describePolicy(j.retention)}`,
        () => j,
      );
    });
  });

  job
    .command('remove')
    .description('delete a job (its snapshots stay in the repository)')
    .argument('<job>', 'job name or id')
    .option('--forget-repository', 'also forget the repository and its password when no other job uses it')
    .action(async (ref: string, o) => {
      await withCatalog(async (c) => {
        const j = findJob(c, ref);
        c.removeJob(j.id);
        let forgotRepo = false;
        if (o.forgetRepository && !c.listJobs().some((x) => x.repositoryId === j.repositoryId)) {
          c.removeRepository(j.repositoryId);
          await deleteRepositorySecrets(secrets(), j.repositoryId);
          forgotRepo = true;
        }
        print(
          () => `removed job "${j.name}"${forgotRepo ? ' and its repository from the catalog' : ''}`,
          () => ({ removed: j.id, repositoryForgotten: forgotRepo }),
        );
      });
    });

  job
    .command('run')
    .description('run a job now')
    .argument('<job>', 'job name or id')
    .option('--full', 're-read every file (ignore change tracking and the previous snapshot)')
    .action(async (ref: string, o) => {
      await withCatalog(async (c) => {
        const j = findJob(c, ref);
        const events = createRunEvents();
        const live = io.isTTY && !g().quiet && !g().json;
        events.on('run-progress', ({ progress: p }) => {
          if (live)
            io.err(
              `\r\x1b[K[${p.phase}] ${p.filesDone}/${p.filesScanned} files, ${(p.bytesRead / 1e6).toFixed(1)} MB read`,
            );
        });
        events.on('run-phase', ({ phase }) => {
          if (live) io.err(`\r\x1b[K[${phase}]`);
        });
        const runner = new JobRunner({
          catalog: c,
          engine: createJobEngine({ secrets: secrets() }),
          events,
          snapshotDir: snapshotRecordDir(ctx.dataDir()),
        });
        const run = await runner.run(j, { full: !!o.full, trigger: 'manual', signal: ctx.signal });
        if (live) io.err('\r\x1b[K');
        const problems = c.runProblems(run.id);
        print(
          () => [
            `run ${run.id} of "${j.name}": ${run.status}${run.snapshotId ? `, snapshot ${run.snapshotId.slice(0, 8)}` : ''}` +
              (run.kind === 'full' ? ' (full)' : ''),
            ...(run.error ? [`  error: ${run.error.message}`] : []),
            ...(run.snapshots?.sources ?? []).map((s) =>
              s.snapshot
                ? `  ${s.path}: read from snapshot ${s.snapshot.name} (${s.snapshot.kind})`
                : `  ${s.path}: read live (${s.reason})`,
            ),
            ...(run.requests ? [`  repository: ${describeRequests(run.requests)}`] : []),
            ...problems
              .slice(0, 50)
              .map((p) => `  ${p.severity}: ${p.path ? p.path + ': ' : ''}${p.message}`),
            ...(problems.length > 50 ? [`  … and ${problems.length - 50} more`] : []),
          ],
          () => ({ ...run, problems }),
        );
        ctx.setExitCode(runExitCode(run));
      });
    });

  job
    .command('runs')
    .description('the run history of a job (or of all jobs)')
    .argument('[job]', 'job name or id')
    .option('-n, --limit <n>', 'how many runs', count, 20)
    .option('--log <run>', 'print the log, problems and samples of one run', count)
    .action(async (ref: string | undefined, o) => {
      await withCatalog((c) => {
        if (o.log !== undefined) {
          const run = c.getRun(o.log);
          const log = c.runLog(run.id);
          const problems = c.runProblems(run.id);
          const samples = c.runSamples(run.id);
          print(
            () => [
              `run ${run.id}: ${run.status}`,
              ...log.map((l) => `${fmtTime(l.t)}  ${l.line}`),
              ...problems.map((p) => `${p.severity}: ${p.path ? p.path + ': ' : ''}${p.message}`),
              `${samples.length} throughput samples`,
            ],
            () => ({ run, log, problems, samples }),
          );
          return;
        }
        const runs = c.listRuns({ jobId: ref ? findJob(c, ref).id : undefined, limit: o.limit });
        print(
          () =>
            runs.map(
              (r) =>
                `${String(r.id).padStart(5)}  job ${r.jobId}  ${r.status.padEnd(24)} ${r.kind.padEnd(6)} ${r.trigger.padEnd(8)} ` +
                `${fmtTime(r.startedAt ?? r.scheduledFor)}${r.snapshotId ? '  ' + r.snapshotId.slice(0, 8) : ''}` +
                `${r.error ? '  ' + r.error.message : ''}`,
            ),
          () => runs,
        );
      });
    });

  job
    .command('retention')
    .description("preview which snapshots the job's retention policy would remove now (nothing is deleted)")
    .argument('<job>', 'job name or id')
    .action(async (ref: string) => {
      await withCatalog(async (c) => {
        const j = findJob(c, ref);
        const runner = new JobRunner({ catalog: c, engine: createJobEngine({ secrets: secrets() }) });
        const d = await runner.previewRetention(j);
        print(
          () => [
            describePolicy(j.retention),
            ...d.keep.map(
              (k) => `keep    ${k.snapshot.id.slice(0, 8)} ${k.snapshot.time}  (${k.reasons.join(', ')})`,
            ),
            ...d.remove.map((s) => `remove  ${s.id.slice(0, 8)} ${s.time}`),
          ],
          () => d,
        );
      });
    });

  program
    .command('scheduler')
    .description('run the job scheduler in the foreground (headless); Ctrl-C stops it')
    .option('--concurrency <n>', 'jobs for different repositories running at once', count, 1)
    .action(async (o) => {
      // The change tracker runs in this process for the sources of all jobs, so backups visit only
      // what changed (docs/architecture.md §3); a job added or edited meanwhile is picked up at its next run.
      const line = (s: string) => io.out(`${new Date().toISOString()} ${s}\n`);
      const tracker = new TrackerService({ dataDir: ctx.dataDir(), log: line });
      const store = secrets();
      const system = createJobSystem({
        dataDir: ctx.dataDir(),
        secrets: store,
        concurrency: o.concurrency,
        engine: createJobEngine({
          secrets: store,
          backup: async (repo, opts) => {
            await tracker.setRoots(system.catalog.listJobs().flatMap((j) => j.sources));
            return journalBackup(
              await tracker.journal(),
              repo,
              opts,
              opts.job ?? 'default',
              undefined,
              tracker.blockLevel(),
            );
          },
        }),
      });
      await tracker.setRoots(system.catalog.listJobs().flatMap((j) => j.sources));
      const retrack = setInterval(
        () => void tracker.setRoots(system.catalog.listJobs().flatMap((j) => j.sources)).catch(() => {}),
        30_000,
      );
      retrack.unref();
      const { catalog: c, events, scheduler } = system;
      const name = (id: number) => c.findJob(id)?.name ?? `job ${id}`;
      events.on('run-started', (e) =>
        line(`started "${name(e.jobId)}" (run ${e.runId}, ${e.trigger}${e.full ? ', full' : ''})`),
      );
      events.on('run-finished', (e) =>
        line(`finished "${name(e.jobId)}": ${e.status}${e.snapshotId ? ' ' + e.snapshotId.slice(0, 8) : ''}`),
      );
      events.on('run-failed', (e) => line(`FAILED "${name(e.jobId)}": ${e.error.message}`));
      events.on('run-missed', (e) =>
        line(
          `missed "${name(e.jobId)}" at ${new Date(e.scheduledFor).toISOString()} (${e.missedCount}×)${e.willCatchUp ? ', catching up now' : ''}`,
        ),
      );
      events.on('run-skipped', (e) => line(`skipped "${name(e.jobId)}": ${e.reason}`));
      events.on('restore-test', (e) => line(`"${name(e.jobId)}": ${describeRestoreTest(e.test)}`));
      scheduler.start();
      for (const j of c.listJobs())
        line(`"${j.name}": ${describeSchedule(j.schedule)}, next ${fmtTime(scheduler.nextRun(j))}`);
      await new Promise<void>((resolve) => {
        if (ctx.signal.aborted) resolve();
        ctx.signal.addEventListener('abort', () => resolve(), { once: true });
      });
      line('stopping: cancelling running jobs');
      clearInterval(retrack);
      await system.close();
      await tracker.stop();
    });

  const cat = program
    .command('catalog')
    .description('the local catalog of snapshots and files (a cache of the repositories)');

  cat
    .command('rebuild')
    .description('recreate the snapshot cache and file index from the repositories')
    .option('--repository <name>', 'only this repository (name, location or id)')
    .action(async (o) => {
      await withCatalog(async (c) => {
        const repos = o.repository ? [c.findRepository(o.repository)] : c.listRepositories();
        if (repos.some((r) => !r)) throw new NotFoundError(`repository "${o.repository}"`);
        const out: { repository: string; snapshots: number; entries: number }[] = [];
        for (const rec of repos as RepositoryRecord[]) {
          const repo = await openCatalogRepository(secrets(), rec);
          try {
            const res = await rebuildRepository(c, rec.id, repo, { signal: ctx.signal });
            out.push({ repository: rec.location, snapshots: res.indexed, entries: res.index.newEntries });
          } finally {
            await repo.close();
          }
        }
        print(
          () => out.map((r) => `${r.repository}: ${r.snapshots} snapshot(s) indexed, ${r.entries} entries`),
          () => out,
        );
      });
    });

  cat
    .command('search')
    .description('find files by name across all indexed snapshots')
    .argument('<text>', 'part of a file name (case-insensitive)')
    .option('-n, --limit <n>', 'at most this many paths', count, 100)
    .action(async (text: string, o) => {
      await withCatalog((c) => {
        const hits = c.files.search(text, { limit: o.limit });
        print(
          () =>
            hits.map(
              (h) =>
                `${h.path}${h.type === 'dir' ? '/' : ''}  (${h.snapshots.length} snapshot${h.snapshots.length > 1 ? 's' : ''}, latest ${c.snapshotById(h.snapshots[0])?.snapId.slice(0, 8)})`,
            ),
          () => hits.map((h) => ({ ...h, snapshots: h.snapshots.map((id) => c.snapshotById(id)?.snapId) })),
        );
      });
    });

  cat
    .command('ls')
    .description('list a folder of a snapshot from the catalog')
    .argument('<snapshot>', 'snapshot ID or prefix')
    .argument('[path]', 'folder', '/')
    .action(async (ref: string, p: string) => {
      await withCatalog((c) => {
        const row = c
          .listRepositories()
          .map((r) => c.getSnapshot(r.id, ref))
          .find((s) => s);
        if (!row) throw new NotFoundError(`snapshot ${ref} in the catalog`);
        const list = c.files.list(row.id, p);
        if (!list) throw new NotFoundError(`folder ${p} in snapshot ${ref}`);
        print(
          () =>
            list.map(
              (e) =>
                `${e.type === 'dir' ? 'd' : '-'} ${String(e.size ?? '').padStart(12)} ${fmtTime(e.mtime)} ${e.name}`,
            ),
          () => list,
        );
      });
    });

  cat
    .command('versions')
    .description('every indexed version of one path')
    .argument('<path>', 'full path as backed up')
    .action(async (p: string) => {
      await withCatalog((c) => {
        const v = c.files.history(p);
        print(
          () =>
            v.map(
              (e) =>
                `${e.snapId.slice(0, 8)} ${fmtTime(e.time)} ${String(e.size ?? '').padStart(12)} ${e.changed ? 'changed' : ''}`,
            ),
          () => v,
        );
      });
    });
}
