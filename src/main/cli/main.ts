/**
 * Entry point of the `tidemark` command (bin/tidemark.mjs runs it). Wires the command registrars of
 * the other parts (jobs and scheduler, the tracker daemon, browser mode) into the one program.
 */
import '../engineHost.js'; // first: libuv's pool size and V8 tiering for the engine
import { isCoreCommand, runCli, type CommandRegistrar } from './program.js';
import { EXIT } from './exitCodes.js';

const controller = new AbortController();
let interrupted = 0;
process.on('SIGINT', () => {
  interrupted++;
  if (interrupted > 1) process.exit(EXIT.CANCELLED);
  process.stderr.write('\ncancelling… (press Ctrl-C again to quit at once)\n');
  controller.abort();
});
process.on('SIGTERM', () => controller.abort());

const argv = process.argv.slice(2);
// The other parts' commands are loaded only when the command may be one of theirs (see isCoreCommand).
const registrars: CommandRegistrar[] = isCoreCommand(argv)
  ? []
  : await Promise.all([
      import('./commands/jobs.js').then((m) => m.registerJobCommands),
      import('./commands/daemon.js').then((m) => m.registerDaemonCommand),
      import('./commands/testConnection.js').then((m) => m.registerTestCommand),
      import('./commands/maintenance.js').then((m) => m.registerMaintenanceCommands),
      import('./commands/restoreTests.js').then((m) => m.registerRestoreTestCommands),
      import('./commands/alarm.js').then((m) => m.registerAlarmCommands),
      import('./commands/recover.js').then((m) => m.registerRecoverCommand),
      import('./commands/testSpeed.js').then((m) => m.registerTestSpeedCommand),
    ]);

// Benchmarks ask for the event-loop delay of the process hosting the engine (docs/architecture.md §1 rule 5).
const statsFile = process.env.TIDEMARK_BENCH_STATS;
const RESOLUTION_MS = 5;
const loopDelay = statsFile
  ? (await import('node:perf_hooks')).monitorEventLoopDelay({ resolution: RESOLUTION_MS })
  : undefined;
loopDelay?.enable();

const code = await runCli(
  argv,
  { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s), isTTY: !!process.stderr.isTTY },
  registrars,
  controller.signal,
);
process.exitCode = code;
if (statsFile && loopDelay) {
  loopDelay.disable();
  // the histogram holds the time between ticks of a RESOLUTION_MS timer; the delay is what exceeds it
  const ms = (ns: number) => Math.max(0, Math.round(ns / 1e4) / 100 - RESOLUTION_MS);
  const usage = process.resourceUsage();
  (await import('node:fs')).writeFileSync(
    statsFile,
    JSON.stringify({
      eventLoopDelayMs: {
        p50: ms(loopDelay.percentile(50)),
        p99: ms(loopDelay.percentile(99)),
        max: ms(loopDelay.max),
      },
      userCpuMs: usage.userCPUTime / 1000,
      systemCpuMs: usage.systemCPUTime / 1000,
      maxRssKiB: usage.maxRSS,
    }),
  );
}
