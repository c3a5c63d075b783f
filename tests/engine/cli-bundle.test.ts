/**
 * The bundled CLI (scripts/build-cli.mjs → out/cli: what `npm run bench` and installs run, where the other
 * tests run the TypeScript through tsx): its worker threads are found from wherever the bundler put the
 * pool's code (a chunk below out/cli), a backup and a restore through it are byte-exact, and the commands
 * of the other parts (jobs, maintenance: loaded only when the command may be theirs) still work.
 */
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { buildProgram, isCoreCommand } from '../../src/main/cli/program.js';
import { GLOBAL_VALUE_OPTIONS, commandOf } from '../../src/main/cli/early.js';
import {
  cliEnv,
  describeTree,
  expectSameTrees,
  randomBytes,
  tempDir,
  writeTree,
} from '../helpers/fixtures.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

describe('the command line', () => {
  it('knows its own commands from the other parts’ before loading them', () => {
    expect(isCoreCommand(['backup', '/x'])).toBe(true);
    expect(isCoreCommand(['-r', '/repo', '--json', 'restore', 'latest', '--target', '/t'])).toBe(true);
    // a global option's value is not the command
    expect(isCoreCommand(['-r', 'backup', 'job', 'list'])).toBe(false);
    expect(isCoreCommand(['--repo=/r', 'snapshots'])).toBe(true);
    for (const other of [
      ['job', 'list'],
      ['maintenance', 'show'],
      ['daemon'],
      ['help'],
      [],
      ['--help'],
      ['nope'],
    ])
      expect(isCoreCommand(other)).toBe(false);
  });
});

describe('the launcher’s early worker threads', () => {
  it('are for a backup or restore, found without the parser, as many as --workers says', () => {
    expect(commandOf(['backup', '/x'])).toEqual({ command: 'backup', workers: undefined });
    expect(commandOf(['-r', '/repo', '--json', 'restore', 'latest', '--workers', '3'])).toEqual({
      command: 'restore',
      workers: 3,
    });
    expect(commandOf(['--repo=/r', '-q', 'backup', '--workers=5', '/x'])).toEqual({
      command: 'backup',
      workers: 5,
    });
    // a global option's value is not the command; nor is an operand after the command's own "--"
    expect(commandOf(['-r', 'backup', 'job', 'list']).command).toBe('job');
    expect(commandOf(['-p', 'pw.txt', '--limit-upload', '5', 'snapshots']).command).toBe('snapshots');
    expect(commandOf(['backup', '--', '--workers', '2']).workers).toBeUndefined();
    expect(commandOf(['backup', '--workers', 'many']).workers).toBeUndefined();
    expect(commandOf(['--help']).command).toBeUndefined();
  });

  it('know every global option that takes a value', () => {
    const { program } = buildProgram({ out: () => {}, err: () => {}, isTTY: false });
    const taking = program.options
      .filter((o) => o.required || o.optional)
      .flatMap((o) => [o.short, o.long].filter((f): f is string => !!f));
    expect([...GLOBAL_VALUE_OPTIONS].sort()).toEqual(taking.sort());
  });
});

describe('the bundled CLI', () => {
  it('backs up and restores with its worker threads, and runs the other parts’ commands', async () => {
    const build = spawnSync(process.execPath, [path.join(ROOT, 'scripts/build-cli.mjs')], {
      encoding: 'utf8',
    });
    expect(build.status, build.stderr).toBe(0);
    const work = await tempDir('tm-bundle-');
    const src = path.join(work, 'src');
    await writeTree(src, {
      'big.bin': randomBytes(3 * 1024 * 1024 + 5, 3), // several chunks
      'text.txt': 'a line of text\n'.repeat(10_000),
      small: { dir: { 'a.txt': 'a', 'b.bin': randomBytes(5000, 4) } },
    });
    const repo = path.join(work, 'repo');
    const env = cliEnv({ TIDEMARK_HOME: path.join(work, 'home') });
    const cli = (...args: string[]) =>
      spawnSync(process.execPath, [path.join(ROOT, 'out/cli/tidemark.js'), '-r', repo, ...args], {
        env,
        encoding: 'utf8',
      });
    for (const args of [
      ['init'],
      ['backup', src],
      ['restore', 'latest', '--target', path.join(work, 'out')],
    ]) {
      const r = cli(...args);
      expect(r.status, `${args[0]}: ${r.stderr}`).toBe(0);
    }
    expectSameTrees(await describeTree(src), await describeTree(path.join(work, 'out', src)));
    const jobs = cli('--json', 'job', 'list');
    expect(jobs.status, jobs.stderr).toBe(0);
    expect(JSON.parse(jobs.stdout)).toEqual([]);
  });
});
