/**
 * Restore tests of jobs, recorded in the catalog beside their runs:
 *   tidemark job restore-test JOB [--block-files]   test the job's newest snapshot now
 *   tidemark job restore-tests [JOB]                the history of restore tests
 * (Scheduled tests run after backups: `job add|edit --restore-test-every DAYS`.)
 */
import type { Command } from 'commander';
import { Catalog } from '../../engine/catalog/catalog.js';
import { KeyFileSecretStore } from '../../engine/catalog/secrets.js';
import { JobRunner } from '../../engine/schedule/runner.js';
import { createJobEngine } from '../../engine/schedule/engine.js';
import { describeRestoreTest } from '../../engine/schedule/restoreTests.js';
import { NotFoundError, UsageError } from '../../engine/errors.js';
import { EXIT } from '../exitCodes.js';
import type { JobCommandContext } from './jobs.js';

const fmtTime = (t: number) => new Date(t).toISOString().replace('T', ' ').slice(0, 16);

export function registerRestoreTestCommands(program: Command, ctx: JobCommandContext): void {
  const job = program.commands.find((c) => c.name() === 'job');
  if (!job) throw new Error('the job commands are registered first');
  const g = () => program.opts<{ json?: boolean }>();
  const print = (human: () => string[], json: () => unknown) =>
    ctx.io.out(g().json ? JSON.stringify(json(), null, 2) + '\n' : human().join('\n') + '\n');
  const withCatalog = async <T>(fn: (c: Catalog) => Promise<T> | T): Promise<T> => {
    const c = new Catalog(ctx.dataDir());
    try {
      return await fn(c);
    } finally {
      c.close();
    }
  };

  job
    .command('restore-test')
    .description(
      "restore a random sample of the job's newest snapshot into a temporary folder and compare it",
    )
    .argument('<job>', 'job name or id')
    .option(
      '--block-files',
      'also restore every block file (otherwise: when the monthly test of them is due)',
    )
    .action(async (ref: string, o) => {
      await withCatalog(async (c) => {
        const j = c.findJob(ref);
        if (!j) throw new NotFoundError(`job "${ref}"`);
        const secrets = ctx.secrets ?? new KeyFileSecretStore(ctx.dataDir());
        const runner = new JobRunner({ catalog: c, engine: createJobEngine({ secrets }) });
        const t = await runner.testRestore(j, {
          allBlockFiles: o.blockFiles ? true : undefined,
          signal: ctx.signal,
        });
        print(
          () => [
            describeRestoreTest(t),
            ...t.failures.slice(0, 50).map((f) => `  ${f.path}: ${f.message}`),
            ...t.skipped.map((s) => `  left out: ${s.path}: ${s.reason}`),
          ],
          () => t,
        );
        if (t.status === 'failed') ctx.setExitCode(EXIT.DAMAGED);
        else if (t.status === 'error') ctx.setExitCode(EXIT.ERROR);
      });
    });

  job
    .command('restore-tests')
    .description('the history of restore tests (of one job, or of all)')
    .argument('[job]', 'job name or id')
    .option(
      '-n, --limit <n>',
      'how many',
      (v) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new UsageError(`not a whole number: ${v}`);
        return n;
      },
      20,
    )
    .action(async (ref: string | undefined, o) => {
      await withCatalog((c) => {
        const j = ref ? c.findJob(ref) : undefined;
        if (ref && !j) throw new NotFoundError(`job "${ref}"`);
        const tests = c.restoreTests.list({ jobId: j?.id, limit: o.limit });
        print(
          () =>
            tests.length
              ? tests.map(
                  (t) =>
                    `${String(t.id).padStart(4)}  job ${t.jobId}  ${t.status.padEnd(6)} ${t.trigger.padEnd(8)} ${fmtTime(t.startedAt)}  ` +
                    `${t.snapshotId.slice(0, 8)}  ${t.files} file(s)${t.blockFiles ? `, ${t.blockFiles} block file(s)` : ''}` +
                    (t.status === 'failed'
                      ? `  ${t.failures.length} failed`
                      : t.error
                        ? `  ${t.error.message}`
                        : ''),
                )
              : [
                  'no restore tests yet: tidemark job edit JOB --restore-test-every 7, or tidemark job restore-test JOB',
                ],
          () => tests,
        );
      });
    });
}
