// runTrackerDaemon: the tracker as a service feeding the on-disk journal, read by another "process"
// (a read-only ChangeJournal), and the fallback after it stops.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { runTrackerDaemon } from '../../src/main/tracking/daemon.js';
import { ChangeJournal } from '../../src/main/tracking/journal.js';
import { nativeSkipReason, scratchDir } from './helpers.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

const skip = nativeSkipReason('inotify');
describe.skipIf(!!skip)(`runTrackerDaemon${skip ? ` (skipped: ${skip})` : ''}`, () => {
  it('tracks the roots into the journal file until aborted, then records that it stopped', async () => {
    const base = scratchDir('daemon');
    dirs.push(base);
    const root = path.join(base, 'src');
    const dataDir = path.join(base, 'data');
    fs.mkdirSync(path.join(root, 'docs'), { recursive: true });
    const ac = new AbortController();
    const lines: string[] = [];
    let owner: ChangeJournal | undefined;
    const done = runTrackerDaemon({
      dataDir,
      roots: [root],
      signal: ac.signal,
      log: (l) => lines.push(l),
      onReady: ({ journal }) => (owner = journal),
    });
    await expect.poll(() => owner).toBeDefined();
    const startCursor = owner!.cursor();
    expect(startCursor).toBeDefined();

    fs.writeFileSync(path.join(root, 'docs', 'a.txt'), 'a');
    await owner!.sync();
    // another process (the CLI doing a backup) reads the journal file
    const reader = await ChangeJournal.open(dataDir);
    const r = reader.changesSince(startCursor as never, [root]);
    expect(r.ok && [...r.hint.dirtyDirs]).toEqual([path.join(root, 'docs')]);

    ac.abort();
    const result = await done;
    expect(['fanotify', 'inotify']).toContain(result.backend);
    expect(result.batches).toBeGreaterThanOrEqual(1);
    expect(lines.join('\n')).toMatch(/tracking changes under .* with (fanotify|inotify)/);
    expect(lines.join('\n')).toMatch(/change tracker stopped/);

    const after = await ChangeJournal.open(dataDir);
    const r2 = after.changesSince(startCursor as never, [root]);
    expect(r2.ok).toBe(false);
    expect(!r2.ok && r2.reason).toMatch(/stopped/);
  });

  it('runs without a tracker when none can start, and says so', async () => {
    const base = scratchDir('daemon');
    dirs.push(base);
    const ac = new AbortController();
    const lines: string[] = [];
    const done = runTrackerDaemon({
      dataDir: path.join(base, 'data'),
      roots: [path.join(base, 'missing')],
      signal: ac.signal,
      log: (l) => lines.push(l),
    });
    await expect.poll(() => lines.some((l) => /no change tracking/.test(l))).toBe(true);
    ac.abort();
    expect((await done).backend).toBe('none');
    const j = await ChangeJournal.open(path.join(base, 'data'));
    expect(j.cursor()).toBeUndefined();
  });
});
