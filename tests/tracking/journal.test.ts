// The change journal's continuity rules and persistence, driven by the pure-TS fake tracker.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, readFileSync, writeFileSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import {
  ChangeJournal,
  JOURNAL_FILE,
  decodeJournal,
  encodeJournal,
} from '../../src/main/tracking/journal.js';
import { FakeTracker } from '../../src/main/tracking/fake.js';
import { NoTracker } from '../../src/main/tracking/native.js';
import type { JournalCursor } from '../../src/main/tracking/journal.js';

let dataDir: string;
let root: string;
let boot = 'boot-1';
const opts = () => ({ bootId: () => boot, persistDelayMs: 5 });

beforeEach(() => {
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'tm-journal-'));
  root = path.join(dataDir, 'src');
  boot = 'boot-1';
});
afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

async function started(roots = [root]) {
  const tracker = new FakeTracker();
  await tracker.start(roots);
  const journal = new ChangeJournal(dataDir, opts());
  await journal.attach(tracker);
  return { tracker, journal };
}

function hintOf(j: ChangeJournal, prev: JournalCursor | undefined, paths?: string[]) {
  const r = j.changesSince(prev as unknown as Record<string, unknown>, paths);
  if (!r.ok) throw new Error(`expected a hint, got: ${r.reason}`);
  return {
    dirs: [...r.hint.dirtyDirs].sort(),
    trees: [...(r.hint.dirtyTrees ?? [])].sort(),
    cursor: r.hint.cursor,
  };
}

function reasonOf(j: ChangeJournal, prev: unknown, paths?: string[]): string {
  const r = j.changesSince(prev as Record<string, unknown>, paths);
  if (r.ok) throw new Error('expected a fallback, got a hint');
  return r.reason;
}

describe('ChangeJournal', () => {
  it('reports the directories that changed since a cursor, and only those', async () => {
    const { tracker, journal } = await started();
    tracker.changed(`${root}/a/old.txt`);
    await journal.sync();
    const c1 = journal.cursor()!;
    tracker
      .changed(`${root}/b/x.txt`)
      .renamed(`${root}/c/f`, `${root}/d/f`, false)
      .changed(`${root}/e/newdir`, { createdDir: true });
    tracker.changed('/elsewhere/y.txt');
    await journal.sync();
    const h = hintOf(journal, c1);
    expect(h.dirs).toEqual([`${root}/b`, `${root}/c`, `${root}/d`, `${root}/e`]);
    expect(h.trees).toEqual([`${root}/e/newdir`]);
    expect(h.cursor).toMatchObject({
      generation: journal.generation,
      sequence: journal.sequence,
      bootId: 'boot-1',
    });
    // from the very start of the generation, the first change is included too
    const c0 = { ...c1, sequence: 0 };
    expect(hintOf(journal, c0).dirs).toContain(`${root}/a`);
  });

  it('keeps changes that arrived during a backup dirty after the commit', async () => {
    const { tracker, journal } = await started();
    tracker.changed(`${root}/before/f`);
    const plan = await journal.planBackup({ ...journal.cursor()!, sequence: 0 }, [root]);
    expect([...plan.changeHint!.dirtyDirs]).toEqual([`${root}/before`]);
    // the backup runs; meanwhile something else changes
    tracker.changed(`${root}/during/f`);
    await journal.sync();
    await journal.commit(plan.cursor as unknown as Record<string, unknown>);
    const next = hintOf(journal, plan.cursor);
    expect(next.dirs).toEqual([`${root}/during`]);
    // entries the only consumer no longer needs were dropped
    expect(journal.size).toBe(1);
    // an older snapshot's cursor can no longer be served
    expect(reasonOf(journal, { ...plan.cursor, sequence: 0 })).toMatch(/no longer holds/);
  });

  it('serves several consumers: entries stay until every one of them committed past them', async () => {
    const { tracker, journal } = await started();
    const c0 = journal.cursor()!;
    tracker.changed(`${root}/one/f`);
    await journal.sync();
    const c1 = journal.cursor()!;
    tracker.changed(`${root}/two/f`);
    await journal.sync();
    const c2 = journal.cursor()!;
    await journal.commit(c0 as never, 'jobB');
    await journal.commit(c2 as never, 'jobA');
    expect(hintOf(journal, c0).dirs).toEqual([`${root}/one`, `${root}/two`]);
    await journal.commit(c1 as never, 'jobB');
    expect(hintOf(journal, c1).dirs).toEqual([`${root}/two`]);
    expect(reasonOf(journal, c0)).toMatch(/no longer holds/);
  });

  it('falls back when the previous snapshot has no cursor or a malformed one', async () => {
    const { journal } = await started();
    expect(reasonOf(journal, undefined)).toMatch(/no change-journal cursor/);
    expect(reasonOf(journal, { journal: 'tidemark/1', sequence: 'x' })).toMatch(/no usable/);
  });

  it('falls back after a reboot', async () => {
    const { journal } = await started();
    const c = journal.cursor()!;
    boot = 'boot-2';
    expect(reasonOf(journal, c)).toMatch(/machine restarted/);
    expect(reasonOf(journal, { ...c, bootId: 'boot-0' })).toMatch(/machine restarted/);
  });

  it('falls back when the tracker was restarted (a new generation)', async () => {
    const { tracker, journal } = await started();
    const c = journal.cursor()!;
    await journal.attach(tracker);
    expect(journal.cursor()!.generation).not.toBe(c.generation);
    expect(reasonOf(journal, c)).toMatch(/restarted since the previous snapshot/);
  });

  it('falls back when events were lost, until a backup starts after the loss', async () => {
    const { tracker, journal } = await started();
    const c0 = journal.cursor()!;
    tracker.changed(`${root}/a/f`).lose('queue overflowed');
    await journal.sync();
    expect(reasonOf(journal, c0)).toBe('queue overflowed');
    const c1 = journal.cursor()!; // a full-scan backup started here
    await journal.commit(c1 as never);
    tracker.changed(`${root}/b/f`);
    await journal.sync();
    expect(hintOf(journal, c1).dirs).toEqual([`${root}/b`]);
  });

  it('falls back for good when the tracker broke down', async () => {
    const { tracker, journal } = await started();
    const c0 = journal.cursor()!;
    tracker.breakDown('watch limit reached');
    await journal.sync();
    expect(reasonOf(journal, c0)).toMatch(/broke down: watch limit reached/);
    expect(reasonOf(journal, journal.cursor())).toMatch(/broke down/);
  });

  it('falls back when the roots differ or a source is not tracked', async () => {
    const { journal } = await started([root, `${dataDir}/other`]);
    const c = journal.cursor()!;
    expect(reasonOf(journal, { ...c, roots: [root] })).toMatch(/tracked folders changed/);
    expect(reasonOf(journal, c, ['/not/tracked'])).toMatch(/not tracked/);
    expect(hintOf(journal, c, [`${root}/sub`]).dirs).toEqual([]);
  });

  it('limits the hint to the backup sources and widens a dirty tree above a source to the source', async () => {
    const { tracker, journal } = await started();
    const c = journal.cursor()!;
    tracker.changed(`${root}/docs/x`).changed(`${root}/music/y`).changed(`${root}/new`, { createdDir: true });
    tracker.emit({ dirtyDirs: [], dirtyTrees: [root] });
    await journal.sync();
    const h = hintOf(journal, c, [`${root}/docs`]);
    expect(h.dirs).toEqual([`${root}/docs`]);
    expect(h.trees).toEqual([`${root}/docs`]);
  });

  it('gives up when too many directories are dirty', async () => {
    const tracker = new FakeTracker();
    await tracker.start([root]);
    const journal = new ChangeJournal(dataDir, { ...opts(), maxEntries: 10 });
    await journal.attach(tracker);
    const c = journal.cursor()!;
    for (let i = 0; i < 11; i++) tracker.changed(`${root}/d${i}/f`);
    await journal.sync();
    expect(reasonOf(journal, c)).toMatch(/more than 10 folders changed/);
    expect(journal.size).toBe(0);
  });

  it('has no cursor and explains itself when no tracker could run', async () => {
    const none = new NoTracker('fanotify: Operation not permitted; inotify: watch limit');
    await none.start([root]);
    const journal = new ChangeJournal(dataDir, opts());
    await journal.attach(none);
    expect(journal.cursor()).toBeUndefined();
    expect(
      reasonOf(journal, {
        journal: 'tidemark/1',
        bootId: 'boot-1',
        generation: 'g',
        sequence: 0,
        roots: [root],
      }),
    ).toMatch(/Operation not permitted/);
  });

  it('persists durably and compactly; another process reads it while the owner runs', async () => {
    const { tracker, journal } = await started();
    const c = journal.cursor()!;
    for (let i = 0; i < 5000; i++) tracker.changed(`${root}/projects/tidemark/src/module-${i}/file.ts`);
    await journal.sync();
    const bytes = statSync(path.join(dataDir, JOURNAL_FILE)).size;
    const naive = JSON.stringify(
      [...Array(5000).keys()].map((i) => [`${root}/projects/tidemark/src/module-${i}`, 1]),
    ).length;
    expect(bytes).toBeLessThan(naive / 5);
    const reader = await ChangeJournal.open(dataDir, opts());
    expect(hintOf(reader, c).dirs).toHaveLength(5000);
    expect(reader.cursor()).toEqual(journal.cursor());
    // a reader's commit reaches the owner through the consumer file
    await reader.commit(journal.cursor() as never, 'cli');
    await journal.commit(journal.cursor() as never, 'cli');
    expect(journal.size).toBe(0);
    // once the owner stops, readers fall back
    await journal.close();
    const after = await ChangeJournal.open(dataDir, opts());
    expect(reasonOf(after, c)).toMatch(/was stopped/);
  });

  it('does not trust a journal whose writer process is gone', async () => {
    const { journal } = await started();
    const c = journal.cursor()!;
    await journal.persistNow();
    const file = path.join(dataDir, JOURNAL_FILE);
    const state = decodeJournal(readFileSync(file));
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], {
      encoding: 'utf8',
    });
    state.writer = { pid: Number(dead.stdout), startTime: null };
    writeFileSync(file, encodeJournal(state));
    const reader = await ChangeJournal.open(dataDir, opts());
    expect(reasonOf(reader, c)).toMatch(/no longer running/);
  });

  it('reports a missing or unreadable journal file as a reason, not an exception', async () => {
    const missing = await ChangeJournal.open(dataDir, opts());
    expect(
      reasonOf(missing, { journal: 'tidemark/1', bootId: 'boot-1', generation: 'g', sequence: 0, roots: [] }),
    ).toMatch(/no change tracker has run/);
    writeFileSync(path.join(dataDir, JOURNAL_FILE), 'garbage');
    const bad = await ChangeJournal.open(dataDir, opts());
    expect(
      reasonOf(bad, { journal: 'tidemark/1', bootId: 'boot-1', generation: 'g', sequence: 0, roots: [] }),
    ).toMatch(/unreadable/);
  });
});

describe('ChangeJournal with a resumable tracker (USN journal semantics)', () => {
  it('continues the same generation across a restart and a reboot when resumed from the saved position', async () => {
    const t1 = new FakeTracker({ resumable: true });
    await t1.start([root]);
    const j1 = new ChangeJournal(dataDir, opts());
    await j1.attach(t1);
    const c0 = j1.cursor()!;
    t1.changed(`${root}/before/f`);
    await j1.sync();
    await j1.close();
    expect(await ChangeJournal.resumePoint(dataDir, [`${dataDir}/other`])).toBeUndefined();
    const pos = await ChangeJournal.resumePoint(dataDir, [root]);
    expect(pos).toBe(t1.position);

    boot = 'boot-2'; // the machine restarted; the USN journal kept recording
    const t2 = new FakeTracker({ resumable: true, resumedFrom: pos });
    await t2.start([root]);
    const j2 = new ChangeJournal(dataDir, opts());
    await j2.attach(t2);
    expect(j2.generation).toBe(c0.generation);
    t2.changed(`${root}/while-closed/f`); // replayed from the journal
    await j2.sync();
    expect(hintOf(j2, c0).dirs).toEqual([`${root}/before`, `${root}/while-closed`]);
  });

  it('starts a new generation when resumed from another position, and reports a gap the tracker found', async () => {
    const t1 = new FakeTracker({ resumable: true });
    await t1.start([root]);
    const j1 = new ChangeJournal(dataDir, opts());
    await j1.attach(t1);
    const c0 = j1.cursor()!;
    await j1.sync();
    await j1.close();
    const stale = new FakeTracker({ resumable: true, resumedFrom: 'somewhere-else' });
    await stale.start([root]);
    const j2 = new ChangeJournal(dataDir, opts());
    await j2.attach(stale);
    expect(reasonOf(j2, c0)).toMatch(/restarted since the previous snapshot/);
    await j2.close();

    const t3 = new FakeTracker({
      resumable: true,
      resumedFrom: await ChangeJournal.resumePoint(dataDir, [root]),
    });
    await t3.start([root]);
    const j3 = new ChangeJournal(dataDir, opts());
    await j3.attach(t3);
    const c3 = j3.cursor()!;
    t3.lose('the USN journal of C: was re-created or wrapped since the tracker last ran');
    await j3.sync();
    expect(reasonOf(j3, c3)).toMatch(/wrapped/);
  });
});
