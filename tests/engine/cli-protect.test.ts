/**
 * The command line of restore tests and repair: `verify-restore` (exit 0, or 4 naming the damaged
 * file), `repair --dry-run` (exit 4, nothing written), `repair` (exit 0 when nothing is lost, 3 when
 * something is, named), and a job's restore tests: `job add --restore-test-every 0` tests after each
 * `job run`, `job restore-test` on demand, `job restore-tests` lists both, and a damaged repository
 * fails the run with exit 4.
 */
import { describe, it, expect } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { tempDir, writeTree, randomBytes, runCli, cliEnv, listRepoFiles } from '../helpers/fixtures.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { BlobType } from '../../src/main/engine/repo/blobIndex.js';

/** Flips a byte in every pack that holds no tree (so every folder can still be read). */
async function damageDataPacks(dir: string): Promise<void> {
  const repo = await Repository.open(new LocalBackend(dir), 'correct horse');
  await repo.loadIndex();
  const treePacks = repo.index.countsByPack(BlobType.Tree);
  const packs = repo.index.packs().filter((p) => !treePacks.has(p));
  for (const p of packs) {
    const file = repo.backend.localFile!('data', p)!;
    await fs.chmod(file, 0o644);
    const b = await fs.readFile(file);
    b[10] ^= 0xff;
    await fs.writeFile(file, b);
  }
  await repo.close();
  expect(packs.length).toBeGreaterThan(0);
}

describe('tidemark verify-restore and repair', () => {
  it('verify-restore passes, then fails on damage; repair saves it from the sources, or names what is lost', async () => {
    const work = await tempDir('tm-cli-protect-');
    const repo = path.join(work, 'repo');
    const src = path.join(work, 'src');
    await writeTree(src, {
      'a.bin': randomBytes(900 * 1024, 1),
      sub: { dir: { 'b.txt': 'b\n'.repeat(1000) } },
    });
    expect((await runCli(['-r', repo, 'init'])).code).toBe(0);
    expect((await runCli(['-r', repo, 'backup', src])).code).toBe(0);

    const ok = await runCli(['-r', repo, '--json', 'verify-restore', '--files', '5']);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.json).toMatchObject({ ok: true, filesChecked: 2, failures: [] });

    await damageDataPacks(repo);
    const bad = await runCli(['-r', repo, 'verify-restore', 'latest', '-n', '5']);
    expect(bad.code).toBe(4);
    expect(bad.stdout).toContain('FAILED');
    expect(bad.stdout).toMatch(/src\/(a\.bin|sub\/b\.txt): blob [0-9a-f]+ in pack [0-9a-f]+ is damaged/);

    const before = await listRepoFiles(repo);
    const dry = await runCli(['-r', repo, '--json', 'repair', '--dry-run']);
    expect(dry.code).toBe(4);
    expect(dry.json.dryRun).toBe(true);
    expect(dry.json.packs.damaged.length).toBeGreaterThan(0);
    expect((await listRepoFiles(repo)).filter((f) => !f.startsWith('locks/'))).toEqual(
      before.filter((f) => !f.startsWith('locks/')),
    );

    const fixed = await runCli(['-r', repo, 'repair']);
    expect(fixed.code, fixed.stdout + fixed.stderr).toBe(0);
    expect(fixed.stdout).toContain('repaired, nothing lost');
    expect((await runCli(['-r', repo, 'check', '--read-data'])).code).toBe(0);

    // the same damage with the source gone: the files are lost, named, and exit code 3
    await damageDataPacks(repo);
    await fs.rename(src, `${src}-moved`);
    const lossy = await runCli(['-r', repo, '--json', 'repair']);
    expect(lossy.code).toBe(3);
    expect(lossy.json.lost.map((l: { where: string }) => l.where.slice(9))).toContain(
      path.join(src, 'a.bin'),
    );
    expect((await runCli(['-r', repo, 'check', '--read-data'])).code).toBe(0);
    await fs.rename(`${src}-moved`, src);
  });

  it("a job's restore tests: after each run, on demand, listed; a damaged repository fails the run", async () => {
    const work = await tempDir('tm-cli-jobtest-');
    const repo = path.join(work, 'repo');
    const src = path.join(work, 'src');
    const env = cliEnv({ TIDEMARK_HOME: path.join(work, 'home') });
    await writeTree(src, { 'a.bin': randomBytes(300 * 1024, 2), 'b.txt': 'bee\n' });
    expect((await runCli(['-r', repo, 'init'], env)).code).toBe(0);
    const add = await runCli(
      [
        '-r',
        repo,
        'job',
        'add',
        'docs',
        src,
        '--manual',
        '--restore-test-every',
        '0',
        '--restore-test-files',
        '3',
      ],
      env,
    );
    expect(add.code, add.stderr).toBe(0);
    const run = await runCli(['--json', 'job', 'run', 'docs'], env);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    const now = await runCli(['job', 'restore-test', 'docs'], env);
    expect(now.code, now.stderr).toBe(0);
    expect(now.stdout).toMatch(/restore test: 2 file\(s\) of snapshot [0-9a-f]{8} restored and matched/);
    const list = await runCli(['--json', 'job', 'restore-tests', 'docs'], env);
    expect(list.json.map((t: { trigger: string; status: string }) => [t.trigger, t.status])).toEqual([
      ['manual', 'passed'],
      ['schedule', 'passed'],
    ]);
    expect(list.json[1].runId).toBe(run.json.id);

    // damaged data (not trees: the next backup reads its parent's) fails the next run's restore test
    await damageDataPacks(repo);
    const failed = await runCli(['job', 'run', 'docs'], env);
    expect(failed.code, failed.stdout).toBe(4);
    expect(failed.stdout).toContain('the restore test failed');
  });
});
