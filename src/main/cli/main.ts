/**
 * Entry point of the `tidemark` command (bin/tidemark.mjs runs it). Wires the command registrars of
 * the other parts (jobs and scheduler, the tracker daemon, browser mode) into the one program.
 */
import { runCli, type CommandRegistrar } from './program.js';
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

const registrars: CommandRegistrar[] = [];
for (const [file, name] of [
  ['./commands/jobs.js', 'registerJobCommands'],
  ['./commands/daemon.js', 'registerDaemonCommand'],
  ['./commands/serve.js', 'registerServeCommand'],
]) {
  try {
    const r = (await import(/* @vite-ignore */ file))[name];
    if (typeof r === 'function') registrars.push(r);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err;
  }
}

const code = await runCli(
  process.argv.slice(2),
  { out: (s) => process.stdout.write(s), err: (s) => process.stderr.write(s), isTTY: !!process.stderr.isTTY },
  registrars,
  controller.signal,
);
process.exitCode = code;
