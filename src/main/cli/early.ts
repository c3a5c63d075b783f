/**
 * What the bundled CLI's launcher (scripts/build-cli.mjs) does before it loads the CLI: for a backup or a
 * restore, it starts the worker threads the command will use, so they boot (~0.1 s of a core each) while
 * the main thread loads its modules (~0.2 s), instead of after. The engine adopts them (prestartWorkers,
 * ../engine/workers/early.ts). Only the process settings and the thread starter are loaded here: the
 * command is found without the CLI's parser, by skipping the global options (GLOBAL_VALUE_OPTIONS, kept
 * equal to program.ts's by a test). A wrong guess costs nothing but idle threads, stopped unused.
 */
import '../engineHost.js'; // V8 flags and libuv's pool size, before any thread starts
import { defaultWorkerCount, startDeferred } from '../engine/workers/early.js';

/** The global options of program.ts that take a value (as separate arguments). */
export const GLOBAL_VALUE_OPTIONS = [
  '-r',
  '--repo',
  '-p',
  '--password-file',
  '--limit-upload',
  '--limit-download',
];

/** The command of a command line (its first operand after the global options) and its --workers. */
export function commandOf(argv: string[]): { command?: string; workers?: number } {
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') {
      i++;
      break;
    }
    if (!a.startsWith('-') || a === '-') break;
    if (GLOBAL_VALUE_OPTIONS.includes(a)) i++; // its value is the next argument (not so with --repo=…)
  }
  const command = argv[i];
  let workers: number | undefined;
  for (let k = i + 1; k < argv.length && argv[k] !== '--'; k++) {
    const m = /^--workers(?:=(.*))?$/.exec(argv[k]);
    if (m) workers = Number(m[1] ?? argv[++k]);
  }
  return {
    command,
    workers: workers !== undefined && Number.isInteger(workers) && workers > 0 ? workers : undefined,
  };
}

/** Starts the worker threads (of the bundle's `workerFile`) a backup or restore of `argv` will use. */
export function startEarlyWorkers(argv: string[], workerFile: string): void {
  const { command, workers } = commandOf(argv);
  if (command === 'backup' || command === 'restore')
    startDeferred(workerFile, {}, workers ?? defaultWorkerCount());
}
