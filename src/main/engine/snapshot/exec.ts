/**
 * Running the platform's snapshot tools (btrfs, lvcreate, mount, tmutil): no shell, a timeout, English
 * messages, and an error that names the command and says what it printed.
 */
import { execFile } from 'node:child_process';
import { SnapshotError } from './errors.js';
import type { Exec } from './types.js';

export const systemExec: Exec = (cmd, args, opts = {}) =>
  new Promise((resolve, reject) => {
    const child = execFile(
      cmd,
      args,
      {
        timeout: opts.timeoutMs ?? 120_000,
        maxBuffer: 16 * 1024 * 1024,
        // LVM warns about every inherited descriptor (Node's own pipes) on stderr
        env: { ...process.env, LC_ALL: 'C', LVM_SUPPRESS_FD_WARNINGS: '1' },
      },
      (err, stdout, stderr) => {
        if (!err) return resolve({ stdout, stderr });
        const e = err as NodeJS.ErrnoException & { killed?: boolean };
        const said = (stderr || stdout || '').trim().split('\n').slice(-3).join(' / ');
        const why =
          e.code === 'ENOENT'
            ? `${cmd} is not installed`
            : e.killed
              ? `${cmd} did not finish in ${Math.round((opts.timeoutMs ?? 120_000) / 1000)} s`
              : `${[cmd, ...args].join(' ')} failed${said ? `: ${said}` : ` (${e.message})`}`;
        reject(new SnapshotError(why, { cause: err, notInstalled: e.code === 'ENOENT' }));
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
