/**
 * The job option "Use less memory" on the command line: `job add --memory low` keeps it in the catalog,
 * `job list` shows it, `job run` hands it to the engine's backup (wrapped here to record its options,
 * then run as it is), `job edit --memory normal` takes it away, and a wrong value is a usage error.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import type { BackupOptions } from '../../src/main/engine/operations.js';

const seen = vi.hoisted(() => [] as (string | undefined)[]);
vi.mock('../../src/main/engine/backup/index.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../src/main/engine/backup/index.js')>();
  return {
    ...real,
    backup: (repo: Parameters<typeof real.backup>[0], o: BackupOptions) => {
      seen.push(o.memory);
      return real.backup(repo, o);
    },
  };
});

const { registerJobCommands } = await import('../../src/main/cli/commands/jobs.js');
const { Catalog } = await import('../../src/main/engine/catalog/catalog.js');
import { cliHome, cliInProcess } from '../helpers/cli-in-process.js';

const home = cliHome('tidemark-memory-cli-issue-31b-');

const cli = (...args: string[]) => cliInProcess([registerJobCommands], args);

function memoryOf(job: string): string | undefined {
  const c = new Catalog(path.join(home.dir, 'home'));
  try {
    return c.findJob(job)!.options.memory;
  } finally {
    c.close();
  }
}

describe('job add/edit --memory', () => {
  it('keeps the option, runs with it, and takes it away', async () => {
    const repo = path.join(home.dir, 'repo');
    const src = path.join(home.dir, 'src');
    fs.mkdirSync(src);
    fs.writeFileSync(path.join(src, 'a.txt'), 'a');
    expect((await cli('-r', repo, 'init')).code).toBe(0);
    const add = await cli('job', 'add', 'old-pc', src, '--to', repo, '--manual', '--memory', 'low');
    expect(add.code, add.err).toBe(0);
    expect(memoryOf('old-pc')).toBe('low');
    expect((await cli('job', 'list')).out).toContain('memory: low');

    const run = await cli('job', 'run', 'old-pc');
    expect(run.code, run.err).toBe(0);
    expect(seen).toEqual(['low']);

    expect((await cli('job', 'edit', 'old-pc', '--memory', 'normal')).code).toBe(0);
    expect(memoryOf('old-pc')).toBeUndefined();
    expect((await cli('job', 'list')).out).not.toContain('memory: low');
    expect((await cli('job', 'run', 'old-pc')).code).toBe(0);
    expect(seen).toEqual(['low', undefined]);

    const bad = await cli('job', 'edit', 'old-pc', '--memory', 'tiny');
    expect(bad.code).toBe(2);
    expect(bad.err).toMatch(/tiny/);
    expect(memoryOf('old-pc')).toBeUndefined();
  });
});
