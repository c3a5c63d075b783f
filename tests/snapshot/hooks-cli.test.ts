/**
 * A job's pre/post-commands and snapshot mode through the real CLI and engine: `job add --pre-command
 * --post-command --snapshot`, `job run`; the pre-command runs before the scan (what it writes is backed up)
 * with its output in the run log, the post-command after the run with the result in its environment; a
 * failing pre-command fails the run clearly (nothing is backed up, the post-command still runs); a
 * timeout stops a command; mode "always" on a filesystem without snapshots fails the run before reading;
 * the run record says how each source was read.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { registerJobCommands } from '../../src/main/cli/commands/jobs.js';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import { provider } from '../../src/main/engine/snapshot/index.js';
import { cliHome, cliInProcess } from '../helpers/cli-in-process.js';

const home = cliHome('tidemark-hooks-cli-');

const cli = (...args: string[]) => cliInProcess([registerJobCommands], args);

function lastRun(job: string) {
  const c = new Catalog(path.join(home.dir, 'home'));
  try {
    const j = c.findJob(job)!;
    const run = c.getRun(c.listRuns({ jobId: j.id, limit: 1 })[0].id);
    return { run, log: c.runLog(run.id).map((l) => l.line), problems: c.runProblems(run.id) };
  } finally {
    c.close();
  }
}

describe('pre/post-commands and snapshot mode of a job', () => {
  it('runs the pre-command before the scan and the post-command after, with the result', async () => {
    const repo = path.join(home.dir, 'repo');
    const src = path.join(home.dir, 'src');
    const envOut = path.join(home.dir, 'post-env.txt');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'a.txt'), 'a');
    expect((await cli('-r', repo, 'init')).code).toBe(0);
    const add = await cli(
      'job',
      'add',
      'hooked',
      src,
      '--to',
      repo,
      '--manual',
      '--snapshot',
      'when-possible',
      '--pre-command',
      `echo dumping; echo "dump of $TIDEMARK_JOB" > "${src}/dump.sql"; echo warn >&2`,
      '--post-command',
      `echo "status=$TIDEMARK_RUN_STATUS snapshot=$TIDEMARK_SNAPSHOT_ID run=$TIDEMARK_RUN_ID" > "${envOut}"`,
      '--hook-timeout',
      '30',
    );
    expect(add.err).toBe('');
    expect(add.code).toBe(0);
    const list = await cli('job', 'list');
    expect(list.out).toContain('snapshot: when-possible; pre: echo dumping');

    const run = await cli('job', 'run', 'hooked');
    expect(run.code).toBe(0);
    const { run: rec, log } = lastRun('hooked');
    expect(rec.status).toBe('completed');
    // the pre-command's output is in the run log, before the backup read anything
    const pre = log.indexOf('pre: dumping');
    expect(pre).toBeGreaterThan(0);
    expect(log).toContain('pre (stderr): warn');
    expect(log.findIndex((l) => l.startsWith('snapshot '))).toBeGreaterThan(pre);
    // what it wrote was backed up
    const ls = await cli('-r', repo, 'ls', 'latest', src);
    expect(ls.out).toContain('dump.sql');
    // the post-command ran after the snapshot was saved and saw the result
    expect(fs.readFileSync(envOut, 'utf8').trim()).toBe(
      `status=completed snapshot=${rec.snapshotId} run=${rec.id}`,
    );
    expect(log.findIndex((l) => l.startsWith('post-command finished'))).toBeGreaterThan(
      log.findIndex((l) => l.startsWith('snapshot ')),
    );
    // how the source was read is kept with the run (here: a snapshot where the test machine has one,
    // else read live with the reason) and printed by job run
    expect(rec.snapshots?.mode).toBe('when-possible');
    expect(rec.snapshots?.sources.map((s) => s.path)).toEqual([src]);
    const s = rec.snapshots!.sources[0];
    expect(!!s.snapshot !== !!s.reason).toBe(true);
    expect(run.out).toContain(`${src}: read `);
  }, 60_000);

  it('fails the run clearly when the pre-command fails (nothing backed up; the post-command still runs)', async () => {
    const repo = path.join(home.dir, 'repo');
    const envOut = path.join(home.dir, 'post-env-2.txt');
    expect(
      (
        await cli(
          'job',
          'edit',
          'hooked',
          '--pre-command',
          'echo cannot reach the database >&2; exit 3',
          '--post-command',
          `echo "status=$TIDEMARK_RUN_STATUS error=$TIDEMARK_ERROR" > "${envOut}"`,
        )
      ).code,
    ).toBe(0);
    const before = (await cli('-r', repo, 'snapshots', '--json')).out;
    const run = await cli('job', 'run', 'hooked');
    expect(run.code).not.toBe(0);
    const { run: rec, log } = lastRun('hooked');
    expect(rec.status).toBe('failed');
    expect(rec.error?.code).toBe('PRE_COMMAND_FAILED');
    expect(rec.error?.message).toMatch(
      /pre-command exited with status 3; its last output: cannot reach the database/,
    );
    expect(rec.error?.message).toMatch(/nothing was backed up/);
    expect(log).toContain('pre (stderr): cannot reach the database');
    expect((await cli('-r', repo, 'snapshots', '--json')).out).toBe(before);
    expect(fs.readFileSync(envOut, 'utf8')).toMatch(
      /^status=failed error=the job's pre-command exited with status 3/,
    );
  }, 60_000);

  it('stops a command that runs past its timeout', async () => {
    expect(
      (
        await cli(
          'job',
          'edit',
          'hooked',
          '--pre-command',
          'echo started; sleep 30',
          '--post-command',
          '',
          '--hook-timeout',
          '1',
        )
      ).code,
    ).toBe(0);
    const run = await cli('job', 'run', 'hooked');
    expect(run.code).not.toBe(0);
    const { run: rec, log } = lastRun('hooked');
    expect(rec.error?.code).toBe('PRE_COMMAND_FAILED');
    expect(rec.error?.message).toMatch(/did not finish within 1 s and was stopped/);
    expect(log).toContain('pre: started');
  }, 60_000);

  it('mode "always" fails the run before reading when a source has no snapshot', async () => {
    // the scratch folder's filesystem (the machine's own disk: ext4 here) has none; on a machine whose
    // disk has snapshots there is nothing to prove here (the btrfs and LVM tests cover that)
    const t = await provider()?.target(home.dir);
    if (!t || !('none' in t)) return;
    expect(
      (
        await cli(
          'job',
          'edit',
          'hooked',
          '--pre-command',
          '',
          '--snapshot',
          'always',
          '--hook-timeout',
          '30',
        )
      ).code,
    ).toBe(0);
    const run = await cli('job', 'run', 'hooked');
    expect(run.code).not.toBe(0);
    const { run: rec } = lastRun('hooked');
    expect(rec.status).toBe('failed');
    expect(rec.error?.code).toBe('SNAPSHOT_UNAVAILABLE');
    expect(rec.error?.message).toMatch(/asks for a snapshot always, and .* has none/);
    const bad = await cli('job', 'edit', 'hooked', '--snapshot', 'sometimes');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/sometimes/);
  }, 60_000);
});
