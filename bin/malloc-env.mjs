// glibc's malloc settings (and libuv's pool size, and V8's heap sizing) for processes hosting the engine
// (CLI, browser-mode server, benchmarks, the Electron app started by `npm start`).
// The pipeline's worker threads allocate and free multi-MiB buffers (read blocks, chunks, packs) in
// their own malloc arenas. With glibc's default *dynamic* mmap threshold, the first freed large
// buffer raises the threshold, later ones come from the arenas, and freed arena memory is rarely
// returned to the OS: peak RSS climbs by well over 100 MB. A fixed threshold keeps large buffers in
// mmap (returned on free). glibc reads these variables only at process start (mallopt() at run time
// from an addon did not have the same effect), so a launcher re-executes itself once with them set.
import { spawn } from 'node:child_process';

/** V8's heap settings, each added to NODE_OPTIONS unless the user's own NODE_OPTIONS sets it. */
const HEAP_FLAGS = [
  ['--max-old-space-size', '2000'],
  ['--max-semi-space-size', '2'],
];
const HEAP_FLAG = HEAP_FLAGS.map(([f, v]) => `${f}=${v}`).join(' ');
const hasFlag = (opts, flag) => new RegExp(`${flag}[= ]`).test(opts ?? '');
const hasHeapFlag = (opts) => HEAP_FLAGS.every(([f]) => hasFlag(opts, f));
/** NODE_OPTIONS with every heap flag the user did not set added (`lowMemory`: semi-spaces of 1 MiB). */
const withHeapFlags = (opts, lowMemory = false) =>
  [
    opts,
    ...HEAP_FLAGS.filter(([f]) => !hasFlag(opts, f)).map(
      ([f, v]) => `${f}=${lowMemory && f === '--max-semi-space-size' ? '1' : v}`,
    ),
  ]
    .filter(Boolean)
    .join(' ');

/** The environment the engine's process should start with (glibc ignores it elsewhere: harmless). */
export const MALLOC_ENV = {
  MALLOC_MMAP_THRESHOLD_: '131072',
  // Mapped buffers (and the heap) are marked for transparent huge pages where the kernel gives them on
  // request (THP "madvise", the default of most distributions; glibc 2.35+, older ones ignore it): a
  // fresh multi-MiB buffer then costs a fault per 2 MiB instead of one per 4 KiB. A page fault is the
  // price of every fresh page (the mapped buffers above are fresh each time), and in a VM it costs
  // ~20 µs (scrypt's 32 MiB alone, the key before anything else, spent most of its time faulting). A
  // full backup and a restore fault about a third less and run a few percent faster, for a little more
  // peak RSS (docs/performance.md).
  GLIBC_TUNABLES: 'glibc.malloc.hugetlb=1',
  // Not malloc, but also read once at start: libuv's thread pool runs the engine's file reads. Its
  // default of 4 threads caps how many reads are in flight, and incrementals that read the scattered
  // changed blocks of a VM disk or database need a deeper queue (the engine keeps up to 32 in flight).
  UV_THREADPOOL_SIZE: '16',
  // Not malloc either: V8 lets the heap grow to a multiple of what its last full collection left live
  // before it collects again, up to 4x when its limit is 2 GiB or more (the default with 8 GiB of RAM and
  // up), scaled down to 1.3-2x for smaller limits. A restore of a million files holds a few tens of MB
  // live; at 4x its heap (and peak RSS) grew far past that, at ~2x it stays near twice the live set, for
  // more full collections (mostly concurrent) and no measurable loss of speed (docs/performance.md).
  // The limit is what 8 GiB machines get anyway; a user's own --max-old-space-size in NODE_OPTIONS wins.
  // And the main thread's young generation: V8 lets each semi-space grow to 16 MiB (48 MiB of young
  // generation committed, mostly dead objects between scavenges); at 2 MiB it holds a few MiB
  // (docs/performance.md, "Where the memory goes").
  NODE_OPTIONS: HEAP_FLAG,
};

/** Marks the re-executed child: it never re-executes again (guards against loops). */
const MARK = 'TIDEMARK_MALLOC_ENV';

/** Whether a command line asks for the low memory mode (`--memory low`, `--memory=low`). */
export const lowMemoryArgs = (argv) =>
  argv.some((a, i) => a === '--memory=low' || (a === '--memory' && argv[i + 1] === 'low'));

/**
 * The current environment plus MALLOC_ENV (values already set by the user win). With `lowMemory` (a
 * command run with `--memory low`) buffers are not put in huge pages (a huge page is resident whole
 * however little of it is used: ~4-6 MiB of a low-memory backup's or restore's peak, for the faults
 * it saves) and the main thread's semi-spaces are 1 MiB (~2-4 MiB less, for more scavenges)
 * (docs/performance.md).
 */
export function withMallocEnv(env = process.env, { lowMemory = false } = {}) {
  const nodeOptions = withHeapFlags(env.NODE_OPTIONS, lowMemory);
  const base = { ...MALLOC_ENV };
  if (lowMemory) delete base.GLIBC_TUNABLES;
  return { ...base, ...env, NODE_OPTIONS: nodeOptions, [MARK]: '1' };
}

function needed(env = process.env) {
  if (process.platform !== 'linux' || env[MARK] || env.TIDEMARK_NO_REEXEC) return false;
  // a debugger attached to this process would not see the child (and both would want its port)
  if (process.execArgv.some((a) => a.startsWith('--inspect'))) return false;
  const low = lowMemoryArgs(process.argv);
  return Object.keys(MALLOC_ENV).some((k) =>
    k === 'NODE_OPTIONS' ? !hasHeapFlag(env[k]) : env[k] === undefined && !(low && k === 'GLIBC_TUNABLES'),
  );
}

/**
 * Call first thing in a launcher. Returns false when this process already has the environment (go on
 * running). Otherwise starts this same command again with it, forwards signals and the exit status,
 * and returns true (the caller must do nothing else). If this launcher dies abruptly (kill -9), the
 * child kills itself too, so killing the launcher still stops the work.
 */
export function reexecWithMallocEnv() {
  if (!needed()) {
    if (process.env[MARK] && process.channel) {
      // started by a launcher below: die with it, without letting the channel keep the process alive
      process.channel.unref();
      process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));
    }
    return false;
  }
  const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    env: withMallocEnv(process.env, { lowMemory: lowMemoryArgs(process.argv) }),
  });
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];
  // Ctrl-C at a terminal reaches the child directly (same process group): forwarding it would count as
  // a second Ctrl-C. A SIGINT sent to this process alone (no terminal) is forwarded.
  const forward = (sig) => {
    if (sig !== 'SIGINT' || !process.stdin.isTTY) child.kill(sig);
  };
  for (const sig of signals) process.on(sig, forward);
  child.on('error', (err) => {
    console.error(`tidemark: cannot start ${process.execPath}: ${err.message}`);
    process.exit(1);
  });
  child.on('exit', (code, signal) => {
    for (const sig of signals) process.off(sig, forward);
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
  return true;
}
