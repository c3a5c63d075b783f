/**
 * `tidemark maintenance show|claim`: who maintains (prunes on schedule) a repository shared by several
 * PCs (repo/maintenance.ts). `show` prints the owner, its interval, its last prune and the last
 * takeover; `claim` makes this host the owner when nobody is, when the owner has been idle for twice
 * its interval, or — with --force — at once. Manual `tidemark prune` works from any host regardless.
 */
import os from 'node:os';
import type { Command } from 'commander';
import {
  claimMaintenance,
  fmtDuration,
  readMaintenance,
  takeoverAfterMs,
  type MaintenanceRecord,
} from '../../engine/repo/maintenance.js';
import { storeClock } from '../../engine/repo/lock.js';
import { UsageError } from '../../engine/errors.js';
import { EXIT } from '../exitCodes.js';
import type { CliContext, GlobalOptions } from '../program.js';

const DAY = 86_400_000;

function describe(r: MaintenanceRecord): string[] {
  const next = r.lastPruneAt
    ? new Date(Date.parse(r.lastPruneAt) + r.intervalMs).toISOString()
    : 'at its next run';
  const idleSince = Date.parse(r.lastPruneAt ?? r.claimedAt);
  return [
    `maintenance owner: ${r.owner} (since ${r.claimedAt})`,
    `  prunes every ${fmtDuration(r.intervalMs)}; last prune: ${r.lastPruneAt ?? 'not yet'}; next: ${next}`,
    `  another host takes over if ${r.owner} has not pruned by ${new Date(idleSince + takeoverAfterMs(r)).toISOString()}`,
    ...(r.takeover
      ? [`  last takeover: from ${r.takeover.from} at ${r.takeover.at}: ${r.takeover.reason}`]
      : []),
    `  record generation ${r.generation} (${r.event}, written ${r.writtenAt})`,
  ];
}

export function registerMaintenanceCommands(program: Command, ctx: CliContext): void {
  const g = () => program.opts<GlobalOptions>();
  const out = (human: string[], json: unknown) =>
    ctx.io.out(g().json ? JSON.stringify(json, null, 2) + '\n' : human.join('\n') + '\n');
  const m = program
    .command('maintenance')
    .description('which host prunes a repository shared by several PCs on schedule (the maintenance owner)');

  m.command('show')
    .description('show the maintenance owner, its interval, last prune and last takeover')
    .action(async () => {
      const repo = await ctx.openRepo(g(), true);
      try {
        const state = await readMaintenance(repo.backend, repo.key);
        const clock = await storeClock(repo.backend);
        if (!state) {
          out(['nobody maintains this repository yet: the first scheduled backup with pruning claims it'], {
            owner: null,
            storeClockOffsetMs: clock.offsetMs,
          });
          return;
        }
        out(describe(state.record), {
          ...state.record,
          takeoverAfter: new Date(
            Date.parse(state.record.lastPruneAt ?? state.record.claimedAt) + takeoverAfterMs(state.record),
          ).toISOString(),
          storeClockOffsetMs: clock.offsetMs,
        });
      } finally {
        await repo.close();
      }
    });

  m.command('claim')
    .description(
      'make this host the maintenance owner (when nobody is, or the owner is gone; --force: at once)',
    )
    .option('--host <name>', 'the host name to record (default: this computer)')
    .option(
      '--interval-days <days>',
      'prune every this many days (default: the current interval, or 7)',
      Number,
    )
    .option('--force', 'take over even from an owner that still prunes')
    .action(async (o: { host?: string; intervalDays?: number; force?: boolean }) => {
      if (o.intervalDays !== undefined && !(o.intervalDays >= 0))
        throw new UsageError(`--interval-days must be 0 or more, not ${o.intervalDays}`);
      const host = o.host ?? os.hostname();
      const repo = await ctx.openRepo(g());
      try {
        const cur = await readMaintenance(repo.backend, repo.key);
        const intervalMs =
          o.intervalDays !== undefined ? o.intervalDays * DAY : (cur?.record.intervalMs ?? 7 * DAY);
        const r = await claimMaintenance(repo.backend, repo.key, { host, intervalMs, force: o.force });
        const head = r.owner
          ? r.changed
            ? r.record.takeover && r.record.event === 'takeover'
              ? `${host} now maintains the repository (took over from ${r.record.takeover.from}: ${r.record.takeover.reason})`
              : `${host} now maintains the repository`
            : `${host} already maintains the repository`
          : `not claimed: ${r.reason ?? `${r.record.owner} maintains the repository`}; use --force to take over now`;
        out([head, ...describe(r.record)], {
          claimed: r.owner,
          changed: r.changed,
          record: r.record,
          reason: r.reason,
        });
        if (!r.owner) ctx.setExitCode(EXIT.LOCKED);
      } finally {
        await repo.close();
      }
    });
}
