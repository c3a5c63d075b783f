/**
 * What the bundled CLI's launcher (scripts/build-cli.mjs) does before it loads the CLI: for a backup or a
 * restore, it starts the worker threads the command will use, so they boot (~0.1 s of a core each) while
 * the main thread loads its modules (~0.2 s), instead of after. The engine adopts them (prestartWorkers,
 * ../engine/pool/early.ts). Only the process settings and the thread starter are loaded here: the
 * command is found without the CLI's parser, by skipping the global options (GLOBAL_VALUE_OPTIONS, kept
 * equal to program.ts's by a test). A wrong guess costs nothing but idle threads, stopped unused.
 */
import '../engineHost.js'; // V8 flags and libuv's pool size, before any thread starts
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { startDeferred } from '../engine/pool/early.js';
import { workersFor } from '../engine/pool/memory.js';
import type { MemoryMode } from '../engine/operations.js';
import { deriveKeyAhead, derivingAhead, type KdfParams } from '../engine/crypto/kdf.js';
import { passwordOfFile } from './password.js';
import { defaultRepoLocation } from './locations.js';

/** The global options of program.ts that take a value (as separate arguments). */
export const GLOBAL_VALUE_OPTIONS = [
  '-r',
  '--repo',
  '-p',
  '--password-file',
  '--limit-upload',
  '--limit-download',
  '--maintenance-password-file',
];

/** The command of a command line (its first operand after the global options), its --workers and --memory. */
export function commandOf(argv: string[]): { command?: string; workers?: number; memory?: MemoryMode } {
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
  let memory: string | undefined;
  for (let k = i + 1; k < argv.length && argv[k] !== '--'; k++) {
    const m = /^--workers(?:=(.*))?$/.exec(argv[k]);
    if (m) workers = Number(m[1] ?? argv[++k]);
    const mem = /^--memory(?:=(.*))?$/.exec(argv[k]);
    if (mem) memory = mem[1] ?? argv[++k];
  }
  return {
    command,
    workers: workers !== undefined && Number.isInteger(workers) && workers > 0 ? workers : undefined,
    ...(memory === 'low' && { memory }),
  };
}

/** Starts the worker threads (of the bundle's `workerFile`) a backup or restore of `argv` will use. */
export function startEarlyWorkers(argv: string[], workerFile: string): void {
  const { command, workers, memory } = commandOf(argv);
  if (command !== 'backup' && command !== 'restore') return;
  const start = () => startDeferred(workerFile, {}, workersFor(memory, workers));
  if (memory !== 'low') return start();
  // 'low': after the key derivation started ahead (scrypt's 32 MiB and the threads' boot would add up
  // in the peak), else when the pool makes them, once the repository is open (../engine/pool/threads.ts)
  void derivingAhead()?.then(start);
}

/** The value of a global option (before the command) named `names`: `-r X`, `--repo X` or `--repo=X`. */
export function globalOptionValue(argv: string[], names: string[]): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--' || !a.startsWith('-') || a === '-') break;
    const eq = a.indexOf('=');
    if (a.startsWith('--') && eq > 0 && names.includes(a.slice(0, eq))) value = a.slice(eq + 1);
    else if (GLOBAL_VALUE_OPTIONS.includes(a)) {
      if (names.includes(a)) value = argv[i + 1];
      i++;
    }
  }
  return value;
}

/**
 * For a backup or restore of a repository in a folder, with its password in a file or the environment
 * (where password.ts's getPassword finds it, in the same order): starts deriving the key of the
 * repository's first key file (crypto/kdf.ts), which the CLI then takes instead of deriving it after it
 * has loaded. Returns whether it did. Anything it cannot read (an object store, no key files, a prompt to
 * come) is left to the CLI, which reports it.
 */
export function startEarlyKeyDerivation(argv: string[], env: NodeJS.ProcessEnv = process.env): boolean {
  const { command } = commandOf(argv);
  if (command !== 'backup' && command !== 'restore') return false;
  try {
    const location = globalOptionValue(argv, ['-r', '--repo']) ?? defaultRepoLocation(env);
    if (/^s3:/i.test(location)) return false;
    const passwordFile = globalOptionValue(argv, ['-p', '--password-file']) ?? env.TIDEMARK_PASSWORD_FILE;
    // only a regular file is read twice: a pipe (/dev/stdin, a shell's <(…)) is the CLI's to read
    if (passwordFile !== undefined && !statSync(passwordFile).isFile()) return false;
    const password =
      passwordFile !== undefined ? passwordOfFile(readFileSync(passwordFile, 'utf8')) : env.TIDEMARK_PASSWORD;
    if (password === undefined) return false;
    const keys = path.join(location, 'keys');
    // the first key file the repository lists (backend/local lists a folder's files in its order)
    const first = readdirSync(keys, { withFileTypes: true }).find(
      (e) => e.isFile() && !e.name.startsWith('.'),
    );
    if (!first) return false;
    const params = (JSON.parse(readFileSync(path.join(keys, first.name), 'utf8')) as { params?: KdfParams })
      .params;
    if (!params || typeof params.salt !== 'string') return false;
    deriveKeyAhead(password, params);
    return true;
  } catch {
    return false;
  }
}
