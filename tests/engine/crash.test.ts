/**
 * kill -9 at many points of a backup and of a prune: every earlier snapshot still restores byte for
 * byte, check passes (reporting leftovers, which prune removes), and the next backup succeeds.
 */
import { describe, it, expect } from 'vitest';
import path from 'node:path';
import fs from 'node:fs/promises';
import {
  tempDir,
  writeTree,
  randomBytes,
  describeTree,
  expectSameTrees,
  runCli,
  startCli,
} from '../helpers/fixtures.js';

const MiB = 1024 * 1024;

function killAfter(args: string[], ms: number): Promise<number | null> {
  return new Promise((resolve) => {
    const child = startCli(args);
    const t = setTimeout(() => child.kill('SIGKILL'), ms);
    child.on('close', (code) => {
      clearTimeout(t);
      resolve(code);
    });
  });
}

describe('crash safety', () => {
  it('survives kill -9 at many points of backup and prune', async () => {
    const work = await tempDir('tm-crash-');
    const repo = path.join(work, 'repo');
    const src = path.join(work, 'src');
    const files: Record<string, Buffer | string> = {};
    for (let i = 0; i < 40; i++) files[`f${i}.bin`] = randomBytes(MiB / 2 + i * 1000, i);
    for (let i = 0; i < 200; i++) files[`small${i}.txt`] = `small file ${i}\n`.repeat(i + 1);
    await writeTree(src, { base: { dir: { 'keep.txt': 'the first snapshot' } } });
    expect((await runCli(['-r', repo, 'init'])).code).toBe(0);
    expect((await runCli(['-r', repo, 'backup', src])).code).toBe(0);
    const firstTree = await describeTree(src);
    await writeTree(path.join(src, 'more'), files);

    // throttled reads stretch the backup over ~2 s so the kills land in different phases
    const delays = [150, 400, 700, 1000, 1400, 1900, 2600];
    let completed = 0;
    for (const ms of delays) {
      const code = await killAfter(['-r', repo, 'backup', src, '--limit-read', '10', '--workers', '1'], ms);
      if (code === 0) completed++;
      const c = await runCli(['-r', repo, '--json', 'check']);
      expect(c.code, `check after a kill at ${ms} ms: ${c.stdout}${c.stderr}`).toBe(0);
      expect(c.json.ok).toBe(true);
    }
    expect(completed).toBeLessThan(delays.length); // at least some runs really were killed

    // earlier snapshots restore byte for byte
    const first = (await runCli(['-r', repo, '--json', 'snapshots'])).json[0];
    const target = path.join(work, 'restored-first');
    expect(
      (await runCli(['-r', repo, 'restore', first.id, '--target', target, '--relative-to', src])).code,
    ).toBe(0);
    expectSameTrees(firstTree, await describeTree(target));

    // the next backup succeeds
    expect((await runCli(['-r', repo, 'backup', src])).code).toBe(0);

    // prune killed at several points: forget everything but the newest, then kill prune mid-way
    await fs.rm(path.join(src, 'more'), { recursive: true });
    expect((await runCli(['-r', repo, 'backup', src])).code).toBe(0);
    expect((await runCli(['-r', repo, 'forget', '--keep-last', '1'])).code).toBe(0);
    for (const ms of [300, 600, 900]) {
      await killAfter(['-r', repo, 'prune'], ms);
      const c = await runCli(['-r', repo, '--json', 'check', '--read-data']);
      expect(c.json.ok, JSON.stringify(c.json?.problems ?? c.stderr)).toBe(true);
    }
    expect((await runCli(['-r', repo, 'prune'])).code).toBe(0);
    const after = await runCli(['-r', repo, '--json', 'check', '--read-data']);
    expect(after.json.ok).toBe(true);
    expect(after.json.unreferencedPacks).toEqual([]);
    const last = path.join(work, 'restored-last');
    expect(
      (await runCli(['-r', repo, 'restore', 'latest', '--target', last, '--relative-to', src])).code,
    ).toBe(0);
    expectSameTrees(await describeTree(src), await describeTree(last));
  }, 240_000);
});
