/**
 * The mass-change alarm through the CLI (in process, with the job and alarm commands): a job's run that
 * backs up encrypted files ends with a warning, its retention holds the older snapshot, `job list`
 * shows the alarm from the catalog, `alarm list` names it and what it holds, `alarm dismiss` releases
 * it (the next run's retention removes what the policy says), and a plain `backup` that raises an
 * alarm exits with 5.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { registerJobCommands } from '../../src/main/cli/commands/jobs.js';
import { registerAlarmCommands } from '../../src/main/cli/commands/alarm.js';
import { encryptFiles, makeHomePc } from '../helpers/homepc.js';
import { cliHome, cliInProcess } from '../helpers/cli-in-process.js';

const home = cliHome('tm-alarm-cli-', 'alarm-cli-pw');

const cli = (...args: string[]) => cliInProcess([registerJobCommands, registerAlarmCommands], args);

describe('tidemark alarm', () => {
  it('a suspect run holds the older snapshots until the alarm is dismissed', async () => {
    const repo = path.join(home.dir, 'repo');
    const src = path.join(home.dir, 'pc');
    await makeHomePc(src, { scale: 0.1, size: 0.2, seed: 5 });
    expect((await cli('-r', repo, 'init')).code).toBe(0);
    expect((await cli('job', 'add', 'home', src, '--to', repo, '--manual', '--keep-last', '1')).code).toBe(0);
    const first = await cli('job', 'run', 'home');
    expect(first.out).toMatch(/completed, snapshot/);

    await encryptFiles(src, 0.5, 'rename', 9);
    const hit = await cli('job', 'run', 'home');
    expect(hit.out).toMatch(/completed-with-warnings/);
    const snaps = JSON.parse((await cli('-r', repo, '--json', 'snapshots')).out);
    expect(snaps).toHaveLength(2); // keep-last 1, yet the snapshot before the alarm is held
    const suspect = snaps[1];
    expect(suspect.massChange.suspect).toBe(true);
    expect((await cli('-r', repo, 'snapshots')).out).toContain(`${suspect.id.slice(0, 8)}`);
    expect((await cli('-r', repo, 'snapshots')).out).toMatch(/\(mass-change alarm\)/);

    const jobs = JSON.parse((await cli('--json', 'job', 'list')).out);
    expect(jobs[0].alarms.map((a: any) => a.snapId)).toEqual([suspect.id]);
    expect((await cli('job', 'list')).out).toMatch(/MASS-CHANGE ALARM: snapshot [0-9a-f]{8}/);
    const log = await cli('job', 'runs', '--log', '2');
    expect(log.out).toMatch(/warning: mass-change alarm: /);
    expect(log.out).toMatch(/retention: kept 2, removed 0 snapshot\(s\) \(1 held by a mass-change alarm\)/);

    const list = JSON.parse((await cli('-r', repo, '--json', 'alarm', 'list')).out);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ snapshot: suspect.id, active: true, holds: 2, dismissal: null });
    const human = (await cli('-r', repo, 'alarm', 'list')).out;
    expect(human).toMatch(/holds 2 snapshot\(s\) from deletion/);
    expect(human).toMatch(/replaced by unreadable copies under a new extension/);
    expect(human).toMatch(/e\.g\. .*\.locked: replaces /);

    const dismiss = await cli('-r', repo, 'alarm', 'dismiss', suspect.id.slice(0, 8), '--note', 'test');
    expect(dismiss.code).toBe(0);
    expect((await cli('-r', repo, 'alarm', 'dismiss', suspect.id.slice(0, 8))).code).toBe(2); // once
    expect((await cli('-r', repo, 'alarm', 'list')).out).toBe('no mass-change alarms\n');
    const all = JSON.parse((await cli('-r', repo, '--json', 'alarm', 'list', '--all')).out);
    expect(all[0].dismissal).toMatchObject({ snapshot: suspect.id, note: 'test' });

    // the next run's retention applies the policy again, and the catalog knows the alarm was dismissed
    expect((await cli('job', 'run', 'home')).code).toBe(0);
    expect(JSON.parse((await cli('-r', repo, '--json', 'snapshots')).out)).toHaveLength(1);
    expect(JSON.parse((await cli('--json', 'job', 'list')).out)[0].alarms).toEqual([]);

    // a plain backup that raises an alarm says so and exits with 5
    await encryptFiles(src, 0.5, 'in-place', 10);
    const b = await cli('-r', repo, 'backup', src);
    expect(b.out).toMatch(/MASS-CHANGE ALARM/);
    expect(b.code).toBe(5);
  });
});
