/**
 * The memory modes (BackupOptions.memory / RestoreOptions.memory, `--memory low|normal`): the budgets a
 * mode chooses reach the engine (worker count, worker and pool buffers, packs in memory), and a backup and
 * restore in 'low' mode round-trip the files exactly, through the engine and through the CLI. What the
 * modes cost in memory and time is measured by `npm run bench -- --memory low` (docs/performance.md), not
 * asserted here.
 */
import { describe, it, expect, beforeAll } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { memoryProfile, sharedPools, defaultWorkerCount } from '../../src/main/engine/pool/index.js';
import { commandOf } from '../../src/main/cli/early.js';
import {
  tempDir,
  writeTree,
  randomBytes,
  describeTree,
  expectSameTrees,
  runCli,
} from '../helpers/fixtures.js';

describe('memory profiles', () => {
  it("'low' has one worker and smaller budgets than 'normal' (the default); a worker count given wins", () => {
    const normal = memoryProfile(undefined);
    expect(memoryProfile('normal')).toEqual(normal);
    expect(normal.workers).toBe(defaultWorkerCount());
    const low = memoryProfile('low');
    expect(low.workers).toBe(1);
    expect(low.tasksPerWorker).toBeLessThan(normal.tasksPerWorker);
    expect(low.packBuffers).toBe(1);
    expect(normal.packBuffers).toBeUndefined();
    expect(low.sealBudget).toBeLessThan(normal.sealBudget);
    expect(low.smallFilesWaiting).toBeLessThan(normal.smallFilesWaiting);
    expect(low.scratchBytes).toBeLessThan(normal.scratchBytes);
    expect(low.restoreLoops).toBeLessThan(normal.restoreLoops);
    expect(memoryProfile('low', 3).workers).toBe(3);
  });

  it('the launcher starts as many early workers as the mode will use', () => {
    expect(commandOf(['-r', '/r', 'backup', '--memory', 'low', '/x'])).toEqual({
      command: 'backup',
      workers: undefined,
      memory: 'low',
    });
    expect(commandOf(['restore', 'latest', '--memory=low']).memory).toBe('low');
    expect(commandOf(['restore', 'latest', '--memory', 'normal']).memory).toBeUndefined();
  });
});

describe("a backup and restore in 'low' memory mode", () => {
  let work: string;
  let src: string;
  let repo: Repository;

  beforeAll(async () => {
    work = await tempDir('tm-memlow-');
    src = path.join(work, 'src');
    await writeTree(src, {
      // large files (several chunks, more than one pack of the low mode's one pack in memory) and small ones
      'a.bin': randomBytes(9 * 1024 * 1024 + 5, 1),
      'b.bin': randomBytes(7 * 1024 * 1024, 2),
      'log.txt': 'compressible line of text\n'.repeat(100_000),
      small: {
        dir: Object.fromEntries(
          Array.from({ length: 300 }, (_, i) => [`f${i}.txt`, `file ${i}\n`.repeat(i)]),
        ),
      },
      docs: { dir: { 'empty.txt': '', 'note.md': '# note\n' } },
    });
    // small packs: the backup writes several while the next waits (Repository.packBuffers)
    repo = await Repository.init(new LocalBackend(path.join(work, 'repo')), 'pw', {
      kdf: { N: 1024 },
      packSize: 2 * 1024 * 1024,
    });
  });

  it('uses one worker, the low budgets, and restores every file exactly', async () => {
    const b = await backup(repo, { paths: [src], memory: 'low' });
    expect(b.status).toBe('completed');
    expect(repo.packBuffers).toBe(1);
    const low = memoryProfile('low');
    expect(sharedPools()).toContainEqual({
      size: 1,
      scratchBytes: low.scratchBytes,
      sealedBytes: low.scratchBytes,
    });
    const target = path.join(work, 'out');
    const r = await restore(repo, { snapshot: b.snapshotId, target, relativeTo: src, memory: 'low' });
    expect(r.errors).toEqual([]);
    expect(r.filesRestored).toBe(b.snapshot.stats.files);
    expectSameTrees(await describeTree(src), await describeTree(target));
    // a normal backup of the same repository goes back to as many packs as the backend writes, and one more
    await fs.writeFile(path.join(src, 'new.txt'), 'new');
    await backup(repo, { paths: [src] });
    expect(repo.packBuffers).toBeUndefined();
  });

  it('through the CLI: --memory low backs up and restores; an unknown mode is refused', async () => {
    const cliRepo = path.join(work, 'cli-repo');
    expect((await runCli(['-r', cliRepo, 'init'])).code).toBe(0);
    const b = await runCli(['-r', cliRepo, '--json', 'backup', src, '--memory', 'low']);
    expect(b.code).toBe(0);
    const target = path.join(work, 'cli-out');
    const r = await runCli([
      '-r',
      cliRepo,
      '--json',
      'restore',
      'latest',
      '--target',
      target,
      '--relative-to',
      src,
      '--memory',
      'low',
    ]);
    expect(r.code).toBe(0);
    expectSameTrees(await describeTree(src), await describeTree(target));
    const bad = await runCli(['-r', cliRepo, 'backup', src, '--memory', 'tiny']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/tiny.*(normal|low)|Allowed choices/i);
  });
});
