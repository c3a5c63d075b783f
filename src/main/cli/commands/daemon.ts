/**
 * `tidemark daemon [PATH…]`: runs the change tracker headless (for machines without the app), for the
 * given paths or, by default, the sources of every job in the catalog, feeding the change journal in
 * the data folder until interrupted. Backups run by the scheduler or the app then visit only what
 * changed; while the daemon is not running, the next backup falls back to a full scan and says why.
 */
import path from 'node:path';
import type { Command } from 'commander';
import { runTrackerDaemon } from '../../tracking/index.js';
import { Catalog } from '../../engine/catalog/catalog.js';
import { UsageError } from '../../engine/errors.js';
import type { CliContext } from '../program.js';

export function registerDaemonCommand(program: Command, ctx: CliContext): void {
  program
    .command('daemon')
    .description('track file changes for fast incremental backups (runs until Ctrl-C)')
    .argument('[paths...]', 'folders to track (default: the sources of all jobs)')
    .action(async (paths: string[]) => {
      let roots = paths.map((p) => path.resolve(p));
      if (!roots.length) {
        const catalog = new Catalog(ctx.dataDir());
        try {
          roots = [...new Set(catalog.listJobs().flatMap((j) => j.sources))];
        } finally {
          catalog.close();
        }
      }
      if (!roots.length)
        throw new UsageError('nothing to track: give folders or create a job first ("tidemark job add")');
      const result = await runTrackerDaemon({
        dataDir: ctx.dataDir(),
        roots,
        signal: ctx.signal,
        log: (line) => ctx.io.err(line + '\n'),
        onReady: ({ backend }) =>
          ctx.io.err(`tracking ${roots.join(', ')} with ${backend}; press Ctrl-C to stop\n`),
      });
      if (result.broken) ctx.io.err(`the tracker stopped: ${result.broken}\n`);
    });
}
