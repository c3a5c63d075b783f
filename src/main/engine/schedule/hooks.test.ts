import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import { HookFailedError, runHook } from './hooks.js';

const posix = process.platform !== 'win32';

describe.skipIf(!posix || process.platform !== 'linux')('pre/post-commands', () => {
  it('logs both output streams line by line and reports the exit status; gets its environment', async () => {
    const lines: string[] = [];
    const r = await runHook(
      'post',
      'echo "one $TIDEMARK_RUN_STATUS"; printf "two\\nthree"; echo oops >&2; exit 4',
      {
        env: { TIDEMARK_RUN_STATUS: 'completed' },
        log: (l) => lines.push(l),
      },
    );
    expect(r.exitCode).toBe(4);
    expect(r.timedOut).toBe(false);
    expect(lines).toEqual(
      expect.arrayContaining(['post: one completed', 'post: two', 'post: three', 'post (stderr): oops']),
    );
    const e = new HookFailedError('post', r, 600);
    expect(e.code).toBe('POST_COMMAND_FAILED');
    expect(e.message).toMatch(/post-command exited with status 4; its last output: .*oops/);
  });

  it('kills the whole process group at the timeout (a child it started too)', async () => {
    const lines: string[] = [];
    const r = await runHook('pre', 'sleep 30 & echo $!; wait', {
      env: {},
      timeoutSec: 1,
      log: (l) => lines.push(l),
    });
    expect(r.timedOut).toBe(true);
    const pid = Number(lines[0].replace('pre: ', ''));
    await new Promise((res) => setTimeout(res, 100));
    // the background sleep is gone as well (or a zombie waiting for a parent that does not reap)
    const state = fs.existsSync(`/proc/${pid}/stat`)
      ? fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0]
      : 'gone';
    expect(['gone', 'Z', 'X']).toContain(state);
    expect(new HookFailedError('pre', r, 1).message).toMatch(
      /did not finish within 1 s and was stopped.*nothing was backed up/,
    );
  });

  it('is stopped by the run being cancelled', async () => {
    const ac = new AbortController();
    const p = runHook('pre', 'sleep 30', { env: {}, signal: ac.signal, log: () => {} });
    setTimeout(() => ac.abort(), 50);
    const r = await p;
    expect(r.signal).toBe('SIGKILL');
  });
});
