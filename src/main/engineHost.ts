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
 *   PC CPU taken from the backup itself: bench:cbt's incremental spent ~250 ms of compile time (`node
 *   --trace-opt`) against ~380 ms of work. With 16× the budget only what runs long is compiled:
 *   `npm run bench:cbt` incremental 279–321 → 220–266 ms (three runs each, alternating; the whole-file
 *   read and the first backup unchanged within noise), CLI full backup of the bench dataset 4.71–4.98 →
 *   4.67–4.71 s and restore 2.11–2.21 → 2.12–2.14 s. Set at run time (v8.setFlagsFromString), before
 *   the engine starts its worker threads, which share the process's V8 flags.
 */
import v8 from 'node:v8';

process.env.UV_THREADPOOL_SIZE ??= '16';
v8.setFlagsFromString('--interrupt-budget=1048576');
export {};
