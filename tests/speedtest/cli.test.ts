// `tidemark test-speed`: the table (and --json) per pattern, the estimate for folders given or for a job
// next to its last run, every test kept in the catalog (--history), usage and destination errors with
// their exit codes, and Ctrl-C: exit 130 with the test file gone. Its own TIDEMARK_HOME (the catalog gets
// this branch's schema). Few CLI starts: each costs seconds on a loaded machine.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { cliEnv, runCli, startCli, until } from '../helpers/fixtures.js';
import { initRepository } from '../../src/main/engine/repo/repository.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import { CatalogSpeedTests } from '../../src/main/api/speedtests.js';

let tmp: string;
let env: NodeJS.ProcessEnv;
let dest: string;
let src: string;
const quick = ['--size', '16M', '--duration', '0.2'];

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-cli-speed-'));
  env = cliEnv({ TIDEMARK_HOME: path.join(tmp, 'home') });
  dest = path.join(tmp, 'dest');
  fs.mkdirSync(dest);
  src = path.join(tmp, 'src');
  fs.mkdirSync(src);
  fs.writeFileSync(path.join(src, 'a.bin'), crypto.randomBytes(300_000));
  fs.writeFileSync(path.join(src, 'b.txt'), 'notes\n'.repeat(1000));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('tidemark test-speed', () => {
  it('prints each pattern, estimates a backup of the folders given, and keeps the test', async () => {
    const text = await runCli(
      ['test-speed', dest, ...quick, '--pattern', 'active-full,small-file-restore', '--source', src],
      env,
    );
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^pattern\s+block\s+thr×qd\s+MiB\/s\s+IOPS\s+p50 ms\s+p95 ms\s+p99 ms$/m);
    expect(text.stdout).toMatch(/^active-full\s+512 KiB\s+1×2\s+[\d.]+\s+[\d.]+/m);
    expect(text.stdout).toMatch(/^small-file-restore\s+16 KiB\s+1×4\s+/m);
    expect(text.stdout).toMatch(
      /next full backup of those folders \(\d+ KiB\): (about [\dhms ]+|under a second) at [\d.]+ MiB\/s \(active-full\)/,
    );
    expect(text.stdout).toMatch(
      /full restore from this destination: (about [\dhms ]+|under a second) at [\d.]+ MiB\/s \(small-file-restore\)/,
    );
    expect(fs.readdirSync(dest)).toEqual([]);

    const json = await runCli(['test-speed', dest, ...quick, '--pattern', 'restore', '--json'], env);
    expect(json.code, json.stderr).toBe(0);
    expect(json.json).toMatchObject({ kind: 'folder', location: dest, fileSize: 16 * 1024 * 1024 });
    expect(json.json.results).toHaveLength(1);
    expect(json.json.results[0]).toMatchObject({ pattern: 'restore', readPercent: 100, writes: 0 });
    expect(json.json.results[0].reads).toBeGreaterThan(0);
    expect(json.json.recordId).toMatch(/^\d+$/);
  });

  it("estimates a job's next full backup next to its last run, on the job's destination", async () => {
    const repo = path.join(tmp, 'repo');
    (await initRepository(new LocalBackend(repo), 'correct horse', { kdf: { N: 1024 } })).close();
    expect((await runCli(['job', 'add', 'Docs', src, '--to', repo, '--manual'], env)).code).toBe(0);
    const run = await runCli(['job', 'run', 'Docs'], env);
    expect(run.code, run.stderr).toBe(0);
    const text = await runCli(['test-speed', '--job', 'Docs', ...quick, '--pattern', 'pack,restore'], env);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(new RegExp(`^speed test of ${repo} `));
    // the figures, as the catalog keeps them with the job
    const catalog = new Catalog(path.join(tmp, 'home'));
    const [rec] = new CatalogSpeedTests(catalog.db).listSpeedTests({ limit: 1 });
    catalog.close();
    expect(rec).toMatchObject({ location: repo, status: 'completed' });
    expect(rec.jobId).toMatch(/^\d+$/);
    const e = rec.estimate!;
    expect(e.sourceBytes).toBeGreaterThanOrEqual(300_000);
    expect(e.lastFull).toMatchObject({ full: true });
    expect(e.lastFull!.bytesRead).toBe(e.sourceBytes);
    expect(e.backup).toMatchObject({ basis: 'pack', inFlight: 1 });
    expect(e.restore).toMatchObject({ basis: 'restore' });
    expect(text.stdout).toMatch(
      /next full backup of "Docs" \([\d.]+ KiB, [\d.]+ KiB stored\): (about|under a second)/,
    );
    expect(text.stdout).toMatch(
      /last full backup: (\d+[hm] )*\d+[sm] \(.*\): read [\d.]+ MiB\/s, stored [\d.]+ MiB\/s/,
    );
  });

  it('usage and destination errors, and Ctrl-C', async () => {
    expect((await runCli(['test-speed', dest, '--pattern', 'bogus'], env)).code).toBe(2);
    const full = await runCli(['test-speed', dest, '--size', '100T'], env);
    expect(full.code).toBe(13);
    expect(full.stderr).toMatch(
      /not enough free space in .* the speed test needs 102400\.0 GiB for its test file/,
    );
    const child = startCli(['test-speed', dest, '--size', '16M', '--duration', '60'], env);
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? -1)));
    await until(
      () => fs.readdirSync(dest).some((n) => n.startsWith('.tidemark-speedtest-')),
      'the test file',
    );
    child.kill('SIGINT');
    expect(await exited, stderr).toBe(130);
    expect(fs.readdirSync(dest)).toEqual([]);
    // --history: this destination's tests, newest first (the refused one failed; the others completed)
    const history = (await runCli(['test-speed', dest, '--history', '--json'], env)).json;
    expect(history.map((h: { status: string }) => h.status)).toEqual([
      'cancelled',
      'failed',
      'completed',
      'completed',
    ]);
    expect(history[1].error.code).toBe('DESTINATION_FULL');
    expect(history[2].results.map((r: { pattern: string }) => r.pattern)).toEqual(['restore']);
  });
});
