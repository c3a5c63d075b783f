/**
 * A job's pre- and post-commands: run through the system shell (sh -c, or cmd.exe /d /s /c on Windows) in
 * their own process group, with a timeout after which the whole group is killed, their output (both
 * streams, line by line) going to the run log. The pre-command runs before the scan and the snapshot (a
 * chance to quiesce an application or dump a database); a failure there fails the run before anything is
 * read. The post-command runs after the run, whatever its result, with the result in its environment.
 */
import { spawn } from 'node:child_process';
import { TidemarkError } from '../errors.js';

/** Default time a pre- or post-command may take. */
export const DEFAULT_HOOK_TIMEOUT_SEC = 600;
/** Output lines of one command kept in the run log (the rest are counted). */
const MAX_LINES = 500;

export interface HookResult {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationMs: number;
  /** The last lines it printed (for an error message). */
  tail: string[];
}

export class HookFailedError extends TidemarkError {
  constructor(
    readonly which: 'pre' | 'post',
    readonly result: HookResult,
    timeoutSec: number,
  ) {
    const why = result.timedOut
      ? `did not finish within ${timeoutSec} s and was stopped`
      : result.signal
        ? `was killed by ${result.signal}`
        : `exited with status ${result.exitCode}`;
    const said = result.tail.length ? `; its last output: ${result.tail.slice(-3).join(' / ')}` : '';
    super(
      which === 'pre' ? 'PRE_COMMAND_FAILED' : 'POST_COMMAND_FAILED',
      `the job's ${which}-command ${why}${said}${which === 'pre' ? ' — nothing was backed up' : ''}`,
    );
  }
}

export interface HookOptions {
  /** Extra environment (TIDEMARK_JOB, TIDEMARK_RUN_STATUS, …) added to Tidemark's own. */
  env: Record<string, string>;
  timeoutSec?: number;
  signal?: AbortSignal;
  /** One line per output line, already prefixed "pre: " / "post: ". */
  log: (line: string) => void;
}

/** Runs a command; resolves with how it ended (a timeout or cancel kills its process group). */
export function runHook(which: 'pre' | 'post', command: string, opts: HookOptions): Promise<HookResult> {
  const started = Date.now();
  const timeoutSec = opts.timeoutSec ?? DEFAULT_HOOK_TIMEOUT_SEC;
  const win = process.platform === 'win32';
  return new Promise((resolve, reject) => {
    let child;
    try {
      child = win
        ? spawn(process.env.ComSpec ?? 'cmd.exe', ['/d', '/s', '/c', `"${command}"`], {
            env: { ...process.env, ...opts.env },
            windowsVerbatimArguments: true,
            windowsHide: true,
            stdio: ['ignore', 'pipe', 'pipe'],
          })
        : spawn('/bin/sh', ['-c', command], {
            env: { ...process.env, ...opts.env },
            detached: true, // its own process group: a timeout stops what it started too
            stdio: ['ignore', 'pipe', 'pipe'],
          });
    } catch (err) {
      reject(err);
      return;
    }
    const tail: string[] = [];
    let lines = 0;
    const take = (stream: NodeJS.ReadableStream, label: string) => {
      let buf = '';
      const line = (l: string) => {
        const text = l.replace(/\r$/, '');
        tail.push(text);
        if (tail.length > 10) tail.shift();
        if (++lines <= MAX_LINES) opts.log(`${which}${label}: ${text}`);
      };
      stream.setEncoding?.('utf8');
      stream.on('data', (d: string) => {
        buf += d;
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          line(buf.slice(0, i));
          buf = buf.slice(i + 1);
        }
      });
      stream.on('end', () => {
        if (buf) line(buf);
        buf = '';
      });
    };
    take(child.stdout!, '');
    take(child.stderr!, ' (stderr)');
    let timedOut = false;
    const kill = () => {
      try {
        if (win) child.kill();
        else process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, timeoutSec * 1000);
    const onAbort = () => kill();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (err) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      reject(err);
    });
    child.on('close', (code, sig) => {
      clearTimeout(timer);
      opts.signal?.removeEventListener('abort', onAbort);
      if (lines > MAX_LINES) opts.log(`${which}: … ${lines - MAX_LINES} more line(s) not kept`);
      resolve({ exitCode: code, signal: sig, timedOut, durationMs: Date.now() - started, tail });
    });
  });
}
