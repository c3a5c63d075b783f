/** The job, scheduler-free and catalog commands through the real CLI program (in process). */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { registerJobCommands } from '../../src/main/cli/commands/jobs.js';
import { until } from '../helpers/fixtures.js';
import { cliHome, cliInProcess } from '../helpers/cli-in-process.js';

const tmp = cliHome('tidemark-jobs-cli-');

async function cli(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  return cliWith(undefined, ...args);
}

const cliWith = (signal: AbortSignal | undefined, ...args: string[]) =>
  cliInProcess([registerJobCommands], args, signal);

describe('tidemark job / catalog commands', () => {
  it('adds, lists, edits, runs and removes a job; the catalog answers searches and rebuilds', async () => {
    const repo = path.join(tmp.dir, 'repo');
    const src = path.join(tmp.dir, 'src');
    fs.mkdirSync(path.join(src, 'docs'), { recursive: true });
    fs.writeFileSync(path.join(src, 'docs', 'Budget 2025.xlsx'), 'numbers');
    expect((await cli('-r', repo, 'init')).code).toBe(0);

    const add = await cli(
      'job',
      'add',
      'docs',
      src,
      '--to',
      repo,
      '--daily',
      '02:30',
      '--tz',
      'Europe/Berlin',
      '--keep-last',
      '3',
    );
    expect(add.err).toBe('');
    expect(add.code).toBe(0);
    expect(add.out).toMatch(/job 1 "docs": daily at 02:30, keep last 3 → /);

    const edit = await cli(
      'job',
      'edit',
      'docs',
      '--weekly',
      'mon,fri@21:00',
      '--keep-daily',
      '7',
      '--verify',
    );
    expect(edit.code).toBe(0);
    expect(edit.out).toContain('weekly on Mon, Fri at 21:00, keep daily 7');

    const list = await cli('--json', 'job', 'list');
    const jobs = JSON.parse(list.out);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({
      name: 'docs',
      sources: [src],
      schedule: { kind: 'weekly', days: [1, 5], time: '21:00' },
      retention: { keepDaily: 7 },
      options: { verifyAfterBackup: true },
      lastRun: null,
    });
    expect(jobs[0].nextRun).toBeGreaterThan(Date.now());

    const run = await cli('job', 'run', 'docs');
    expect(run.err).toBe('');
    expect(run.out).toMatch(/run \d+ of "docs": completed, snapshot [0-9a-f]{8}/);
    expect(run.code).toBe(0);

    const preview = await cli('job', 'retention', 'docs');
    expect(preview.code).toBe(0);
    expect(preview.out).toMatch(/^keep daily 7\nkeep {4}[0-9a-f]{8} .*\(daily\)$/m);
    expect(preview.out).not.toMatch(/^remove/m);

    const search = await cli('--json', 'catalog', 'search', 'budget');
    expect(JSON.parse(search.out).map((h: any) => h.name)).toEqual(['Budget 2025.xlsx']);

    // the password is in the key file, not in the catalog
    const home = path.join(tmp.dir, 'home');
    expect(fs.readFileSync(path.join(home, 'catalog.sqlite')).includes(Buffer.from('cli-secret-pw'))).toBe(
      false,
    );
    expect(fs.readFileSync(path.join(home, 'secrets.json'), 'utf8')).toContain('cli-secret-pw');

    // delete the catalog database: jobs are gone with it, but the snapshots come back from the repository
    for (const f of fs.readdirSync(home)) if (f.startsWith('catalog.sqlite')) fs.rmSync(path.join(home, f));
    expect((await cli('job', 'add', 'docs2', src, '--to', repo, '--manual')).code).toBe(0);
    const rebuild = await cli('catalog', 'rebuild');
    expect(rebuild.code).toBe(0);
    expect(rebuild.out).toContain('1 snapshot(s) indexed');
    expect(JSON.parse((await cli('--json', 'catalog', 'search', 'budget')).out)).toHaveLength(1);

    const runs = await cli('--json', 'job', 'runs');
    expect(JSON.parse(runs.out)).toEqual([]);
    const rm = await cli('job', 'remove', 'docs2', '--forget-repository');
    expect(rm.out).toContain('removed job "docs2" and its repository');
    expect(JSON.parse((await cli('--json', 'job', 'list')).out)).toEqual([]);
  });

  it('rejects bad schedules with a usage error', async () => {
    const r = await cli(
      'job',
      'add',
      'bad',
      tmp.dir,
      '--to',
      path.join(tmp.dir, 'nowhere'),
      '--daily',
      '25:99',
    );
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/invalid time/);
  });

  it('runs the scheduler headless until interrupted, catching up a missed run', async () => {
    const repo = path.join(tmp.dir, 'repo-sched');
    const src = path.join(tmp.dir, 'src-sched');
    fs.mkdirSync(src, { recursive: true });
    fs.writeFileSync(path.join(src, 'a.txt'), 'a');
    expect((await cli('-r', repo, 'init')).code).toBe(0);
    // daily, two hours ago (so the last fire time is well outside the grace period)
    const at = new Date(Date.now() - 2 * 3_600_000).toISOString().slice(11, 16);
    expect((await cli('job', 'add', 'nightly', src, '--to', repo, '--daily', at, '--tz', 'UTC')).code).toBe(
      0,
    );
    // pretend the scheduler last looked three days ago (the machine was off since)
    const { Catalog } = await import('../../src/main/engine/catalog/catalog.js');
    const c = new Catalog(path.join(tmp.dir, 'home'));
    const job = c.findJob('nightly')!;
    c.setJobCheckedAt(job.id, Date.now() - 3 * 86_400_000 + 60_000);
    c.close();
    const ac = new AbortController();
    const done = cliWith(ac.signal, 'scheduler');
    // wait until the catch-up run has finished, then stop the scheduler
    const completed = () => {
      const c2 = new Catalog(path.join(tmp.dir, 'home'));
      const runs = c2.listRuns({ jobId: job.id });
      c2.close();
      return runs.some((r) => r.status === 'completed');
    };
    await until(completed, 'the catch-up run to complete', 100_000).catch((err) => {
      ac.abort(); // stop the scheduler, so the failure is reported and nothing keeps running
      throw err;
    });
    ac.abort();
    const r = await done;
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/missed "nightly" at .* \(3×\), catching up now/);
    expect(r.out).toMatch(/started "nightly" \(run \d+, catch-up\)/);
    expect(r.out).toMatch(/finished "nightly": completed/);
    expect(r.out).toContain('stopping');
  });
});
