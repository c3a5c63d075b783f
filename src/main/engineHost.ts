/**
 * Process-wide settings for a process that hosts the engine, imported first by each such entry point:
 * the Electron main process (src/main/index.ts), the CLI (src/main/cli/main.ts), the browser-mode
 * server (src/main/api/serve.ts), and the benchmarks that run the engine in their own process.
 *
 * - libuv sizes its thread pool (which runs the engine's file reads) when the pool is first used, from
 *   UV_THREADPOOL_SIZE. The default of 4 caps the reads in flight; block-level incrementals read
 *   scattered blocks and need a deeper queue. (The CLI launchers and browser mode also set it in their
 *   environment, with glibc's malloc settings: bin/malloc-env.mjs.)
 * - V8 optimizes a function once it has run for an "interrupt budget" of bytecode; the default (66 KB)
 *   has a backup's many briefly hot functions compiled by TurboFan on V8's helper threads, on a two-core
 *   PC CPU taken from the backup itself: a block file's incremental spent about two thirds as long
 *   compiling (`node --trace-opt`) as working. With 16× the budget only what runs long is compiled: the
 *   incremental of `npm run bench:cbt` is a fifth faster, full backups and restores are unchanged within
 *   noise. Set at run time (v8.setFlagsFromString), before
 *   the engine starts its worker threads, which share the process's V8 flags.
 */
import v8 from 'node:v8';

process.env.UV_THREADPOOL_SIZE ??= '16';
v8.setFlagsFromString('--interrupt-budget=1048576');
export {};
