/**
 * The CLI's side of a shared repository: `backup --json` reports the run's repository requests
 * (and `--verbose` the failed ones), `maintenance show|claim` name the owner, refuse to take over
 * from a live owner without --force, and record a forced takeover.
 */
import { describe, it, expect } from 'vitest';
import os from 'node:os';
import path from 'node:path';
import { tempDir, writeTree, randomBytes, runCli, listRepoFiles } from '../helpers/fixtures.js';

describe('tidemark CLI: requests and maintenance', () => {
  it('backup --json reports request totals; maintenance show/claim name one owner', async () => {
    const work = await tempDir('tm-cli-maint-');
    const repo = path.join(work, 'repo');
    const src = path.join(work, 'src');
    await writeTree(src, { 'a.bin': randomBytes(200_000, 3), 'b.txt': 'hello' });
    expect((await runCli(['-r', repo, 'init'])).code).toBe(0);

    const b = await runCli(['-r', repo, '--json', 'backup', src, '--verbose']);
    expect(b.code).toBe(0);
    const rq = b.json.requests;
    expect(rq.requests).toBe(Object.values(rq.byOp as Record<string, number>).reduce((a, n) => a + n, 0));
    expect(rq.byOp.save).toBeGreaterThan(0);
    expect(rq.bytesUp).toBeGreaterThan(0);
    expect(rq.failed).toBe(rq.failures.length); // --verbose includes the failed requests themselves
    expect(Math.abs(b.json.storeClockOffsetMs)).toBe(0); // a folder is judged by our own clock
    const human = await runCli(['-r', repo, 'backup', src]);
    expect(human.stdout).toMatch(/repository: \d+ requests \(\d+ failed, \d+ retried\), .* up, .* down/);

    const none = await runCli(['-r', repo, 'maintenance', 'show']);
    expect(none.code).toBe(0);
    expect(none.stdout).toMatch(/nobody maintains this repository yet/);

    const c1 = await runCli([
      '-r',
      repo,
      '--json',
      'maintenance',
      'claim',
      '--host',
      'pc1',
      '--interval-days',
      '3',
    ]);
    expect(c1.code).toBe(0);
    expect(c1.json).toMatchObject({ claimed: true, changed: true, record: { owner: 'pc1', event: 'claim' } });
    const c2 = await runCli(['-r', repo, 'maintenance', 'claim', '--host', 'pc2']);
    expect(c2.code).toBe(11); // refused: pc1 maintains it and is not idle
    expect(c2.stdout).toMatch(/not claimed: pc1 maintains this repository .*use --force/);
    const c3 = await runCli(['-r', repo, 'maintenance', 'claim', '--host', 'pc2', '--force']);
    expect(c3.code).toBe(0);
    expect(c3.stdout).toMatch(
      /pc2 now maintains the repository \(took over from pc1: claimed on pc2 by the user\)/,
    );
    const shown = await runCli(['-r', repo, '--json', 'maintenance', 'show']);
    expect(shown.json).toMatchObject({
      owner: 'pc2',
      intervalMs: 3 * 86_400_000,
      generation: 2,
      takeover: { from: 'pc1' },
    });
    const text = await runCli(['-r', repo, 'maintenance', 'show']);
    expect(text.stdout).toMatch(/maintenance owner: pc2 .*\n {2}prunes every 3 days; last prune: not yet/);
    // a manual prune from any host works; it counts as the owner's prune only on the owner
    expect((await runCli(['-r', repo, 'prune'])).code).toBe(0);
    expect((await runCli(['-r', repo, '--json', 'maintenance', 'show'])).json.lastPruneAt).toBeNull();
    // records live encrypted in the repository's maintenance folder
    const files = (await listRepoFiles(repo)).map((f) => f.replace(/:\d+$/, ''));
    expect(files.filter((f) => f.startsWith('maintenance/'))).toEqual([
      'maintenance/000000000001',
      'maintenance/000000000002',
    ]);
    expect((await runCli(['-r', repo, 'maintenance', 'claim', '--force'])).code).toBe(0); // this computer
    expect((await runCli(['-r', repo, 'prune'])).code).toBe(0);
    const mine = (await runCli(['-r', repo, '--json', 'maintenance', 'show'])).json;
    expect(mine).toMatchObject({ owner: os.hostname(), event: 'prune', generation: 4 });
    expect(mine.lastPruneAt).not.toBeNull();
  });
});
