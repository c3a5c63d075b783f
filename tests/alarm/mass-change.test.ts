/**
 * The mass-change alarm end to end through the engine: a simulated home PC (tests/helpers/homepc.ts)
 * goes through a week of normal days (a day of work, a software update, a photo import, a clean-up,
 * re-tagged music, one after the other) and through simulated ransomware encrypting 2%, 10% and 50% of
 * its files; every normal day's backup must stay quiet and every attack's backup must be flagged. Then what a flag does: the suspect
 * snapshot is kept, forget holds every older snapshot of the host until the alarm is dismissed, and
 * after the dismissal the policy applies again. `npm run bench:alarm` runs more seeds and every attack
 * style at every fraction and prints the margins.
 */
import { describe, it, expect, beforeAll } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { forget } from '../../src/main/engine/repo/retention.js';
import { activeAlarms, dismissAlarm, listDismissals } from '../../src/main/engine/repo/holds.js';
import type { MassChangeVerdict } from '../../src/main/engine/alarm/index.js';
import { tempDir } from '../helpers/fixtures.js';
import { NORMAL_DAYS, encryptFiles, makeHomePc, normalDay, type AttackStyle } from '../helpers/homepc.js';

describe('mass-change alarm on a simulated home PC', () => {
  let work: string;
  let base: string;
  let home: string;
  let repo: Repository;
  let files: number;

  beforeAll(async () => {
    work = await tempDir('tm-alarm-');
    base = path.join(work, 'base');
    home = path.join(work, 'home');
    files = await makeHomePc(base, { size: 0.2 });
    repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
  });

  /** A fresh copy of the home folder, backed up, changed, backed up again: the second verdict. */
  const scenario = async (change: () => Promise<unknown>): Promise<MassChangeVerdict> => {
    await fs.rm(home, { recursive: true, force: true });
    execFileSync('cp', ['-a', base, home]);
    const first = await backup(repo, { paths: [home], host: 'pc' });
    await change();
    const second = await backup(repo, { paths: [home], host: 'pc', parent: first.snapshotId });
    expect(second.snapshot.massChange).toEqual(second.massChange);
    return second.massChange!;
  };

  it('stays quiet on normal days', async () => {
    // day after day on one home folder, each backup judged against the day before
    await fs.rm(home, { recursive: true, force: true });
    execFileSync('cp', ['-a', base, home]);
    let parent = (await backup(repo, { paths: [home], host: 'pc' })).snapshotId;
    const verdicts: Record<string, MassChangeVerdict> = {};
    for (const day of NORMAL_DAYS) {
      await normalDay(home, day, 1);
      const r = await backup(repo, { paths: [home], host: 'pc', parent });
      verdicts[day] = r.massChange!;
      parent = r.snapshotId;
    }
    for (const [day, v] of Object.entries(verdicts)) {
      expect(v.suspect, `${day}: ${v.reasons.join('; ')}`).toBe(false);
      expect(v.threshold).toBe(Math.max(10, Math.ceil(v.stats.filesBefore * 0.005)));
    }
    // the days did change things: the alarm saw them and found nothing that looks like encryption
    expect(verdicts['day-of-work'].stats.filesBefore).toBe(files);
    expect(verdicts['day-of-work'].stats.filesModified).toBeGreaterThan(20);
    expect(verdicts['day-of-work'].stats.filesAdded).toBeGreaterThan(100);
    expect(verdicts['software-update'].stats.rewrittenWhole).toBeGreaterThan(100);
    expect(verdicts['software-update'].stats.renamed).toBeGreaterThan(5); // libfoo.so → libfoo.so.3.3
    expect(verdicts['photo-import'].stats.filesAdded).toBeGreaterThan(500);
    expect(verdicts['clean-up'].stats.filesRemoved).toBeGreaterThan(100);
    expect(verdicts['music-retag'].stats.filesModified).toBeGreaterThan(50);
  });

  // the hardest style at 2% (files without a signature that never compressed are no evidence in place),
  // and the others at 10% and 50% (`npm run bench:alarm` runs every style at every fraction)
  const attacks: [number, AttackStyle][] = [
    [0.02, 'in-place'],
    [0.1, 'rename'],
    [0.5, 'random-name'],
  ];
  it('flags simulated encryption of 2%, 10% and 50% of the files', async () => {
    for (const [fraction, style] of attacks) {
      let encrypted = 0;
      const v = await scenario(async () => (encrypted = await encryptFiles(home, fraction, style)));
      const what = `${fraction * 100}% ${style}: ${v.suspicious} suspicious of ${encrypted} encrypted`;
      expect(v.suspect, what).toBe(true);
      expect(v.suspicious, what).toBeLessThanOrEqual(encrypted);
      expect(v.reasons[0]).toMatch(/changed the way encryption changes files/);
      expect(v.examples.length).toBeGreaterThan(0);
      for (const e of v.examples) expect(e.path.startsWith(home)).toBe(true);
      if (style === 'rename') expect(v.stats.renamedOpaque).toBeGreaterThan(0);
      if (style === 'random-name') expect(v.stats.replacedOpaque).toBeGreaterThan(0);
      if (style === 'in-place') expect(v.stats.signatureLost + v.stats.collapsed).toBe(v.suspicious);
    }
  });

  it('holds every older snapshot of the host until the alarm is dismissed', async () => {
    const r = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const src = path.join(work, 'small');
    await fs.rm(src, { recursive: true, force: true });
    await makeHomePc(src, { scale: 0.1, size: 0.2, seed: 3 });
    const older = await backup(r, { paths: [src], host: 'pc', job: 'docs' });
    await normalDay(src, 'day-of-work', 2, 0.1);
    const day = await backup(r, { paths: [src], host: 'pc', job: 'docs' });
    expect(day.massChange?.suspect).toBe(false);
    const other = await backup(r, { paths: [path.join(src, 'Music')], host: 'laptop', job: 'music' });
    await encryptFiles(src, 0.5, 'in-place', 2);
    const hit = await backup(r, { paths: [src], host: 'pc', job: 'docs' });
    expect(hit.massChange?.suspect).toBe(true);
    const after = await backup(r, { paths: [src], host: 'pc', job: 'docs' }); // the next night, all still encrypted
    expect(activeAlarms(await r.listSnapshots(), await listDismissals(r)).map((s) => s.id)).toEqual([
      hit.snapshotId,
    ]);

    // keep only the newest: the suspect snapshot and everything of its host before it stay
    const dry = await forget(r, { keepLast: 1 }, { dryRun: true });
    expect(dry.remove.map((s) => s.id).sort()).toEqual([]);
    const held = dry.keep.filter((k) => k.reasons.some((x) => /held by the mass-change alarm/.test(x)));
    expect(held.map((k) => k.snapshot.id).sort()).toEqual(
      [older.snapshotId, day.snapshotId, hit.snapshotId].sort(),
    );
    // another host's snapshots are not held (its own group keeps its newest as the policy says)
    expect(dry.keep.find((k) => k.snapshot.id === other.snapshotId)?.reasons).toEqual(['last']);
    await forget(r, { keepLast: 1 });
    expect((await r.listSnapshots()).map((s) => s.id).sort()).toEqual(
      [older.snapshotId, day.snapshotId, other.snapshotId, hit.snapshotId, after.snapshotId].sort(),
    );

    // a snapshot that raised no alarm cannot be "dismissed"; the suspect one can, once
    await expect(dismissAlarm(r, await r.loadSnapshot(day.snapshotId))).rejects.toThrow(
      /raised no mass-change alarm/,
    );
    const d = await dismissAlarm(r, await r.loadSnapshot(hit.snapshotId), { host: 'pc', note: 'it was me' });
    expect(d).toMatchObject({ snapshot: hit.snapshotId, host: 'pc', note: 'it was me' });
    await expect(dismissAlarm(r, await r.loadSnapshot(hit.snapshotId))).rejects.toThrow(/already dismissed/);
    expect(activeAlarms(await r.listSnapshots(), await listDismissals(r))).toEqual([]);
    const released = await forget(r, { keepLast: 1 });
    expect(released.remove.map((s) => s.id).sort()).toEqual(
      [older.snapshotId, day.snapshotId, hit.snapshotId].sort(),
    );
    expect((await r.listSnapshots()).map((s) => s.id).sort()).toEqual(
      [other.snapshotId, after.snapshotId].sort(),
    );
  });
});
