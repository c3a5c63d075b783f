/**
 * `tidemark alarm list|dismiss`: the mass-change alarms of a repository (engine/alarm, repo/holds.ts).
 * A backup whose changes looked like mass encryption is kept and marked suspect; until its alarm is
 * dismissed, forget keeps it and every older snapshot of its host. `list` shows the alarms (with --all
 * the dismissed ones too) and how many snapshots each holds; `dismiss` records that the changes were
 * the user's own, after which retention applies again. `tidemark backup` exits with 5 when it raised one.
 */
import type { Command } from 'commander';
import { activeAlarms, dismissAlarm, heldSnapshots, listDismissals } from '../../engine/repo/holds.js';
import type { MassChangeVerdict, SnapshotEntry } from '../../engine/repo/types.js';
import type { CliContext, GlobalOptions } from '../program.js';

/** The lines `backup` and `alarm list` print for a suspect verdict. */
export function describeAlarm(v: MassChangeVerdict): string[] {
  return [
    `  MASS-CHANGE ALARM: this backup's changes look like files being encrypted (ransomware?)`,
    ...v.reasons.map((r) => `    - ${r}`),
    ...v.examples.map((e) => `    e.g. ${e.path}: ${e.what}`),
    '    The snapshot is kept, and so is every older one of this computer, until the alarm is dismissed',
    '    ("tidemark alarm dismiss ID" when the changes were yours). Restore from an older snapshot if not.',
  ];
}

export function registerAlarmCommands(program: Command, ctx: CliContext): void {
  const g = () => program.opts<GlobalOptions>();
  const out = (human: string[], json: unknown) =>
    ctx.io.out(g().json ? JSON.stringify(json, null, 2) + '\n' : human.join('\n') + '\n');
  const a = program
    .command('alarm')
    .description('mass-change (ransomware) alarms: list them, or dismiss one when the changes were yours');

  a.command('list')
    .description('list the alarms nobody dismissed (and the snapshots each holds from deletion)')
    .option('--all', 'also list dismissed alarms')
    .action(async (o: { all?: boolean }) => {
      const repo = await ctx.openRepo(g(), true);
      try {
        // a damaged snapshot cannot be judged; the others' alarms still can (check and repair report it)
        const snapshots = await repo.listSnapshots({
          damaged: (id, err) =>
            ctx.io.err(`warning: snapshot ${id.slice(0, 8)} is damaged: ${err.message}\n`),
        });
        const dismissals = await listDismissals(repo);
        const active = new Set(activeAlarms(snapshots, dismissals).map((s) => s.id));
        const held = heldSnapshots(snapshots, dismissals);
        const shown = snapshots.filter((s) => s.massChange?.suspect && (o.all || active.has(s.id)));
        const holds = (s: SnapshotEntry) => [...held.values()].filter((x) => x.id === s.id).length;
        out(
          shown.length
            ? shown.flatMap((s) => {
                const d = dismissals.find((x) => x.snapshot === s.id);
                return [
                  `${s.id.slice(0, 8)}  ${s.time.replace('T', ' ').slice(0, 19)}  ${s.host}  ${s.paths.join(', ')}`,
                  d
                    ? `  dismissed ${d.dismissedAt.replace('T', ' ').slice(0, 19)} on ${d.host}${d.note ? `: ${d.note}` : ''}`
                    : `  holds ${holds(s)} snapshot(s) from deletion`,
                  ...describeAlarm(s.massChange!),
                ];
              })
            : ['no mass-change alarms'],
          shown.map((s) => ({
            snapshot: s.id,
            time: s.time,
            host: s.host,
            paths: s.paths,
            job: s.job,
            active: active.has(s.id),
            holds: holds(s),
            dismissal: dismissals.find((x) => x.snapshot === s.id) ?? null,
            verdict: s.massChange,
          })),
        );
      } finally {
        await repo.close();
      }
    });

  a.command('dismiss')
    .description('dismiss the alarm of a snapshot: its changes were yours (retention applies again)')
    .argument('<snapshot>', 'the suspect snapshot (ID or prefix)')
    .option('--note <text>', 'why (kept with the dismissal)')
    .action(async (ref: string, o: { note?: string }) => {
      const repo = await ctx.openRepo(g());
      try {
        const d = await dismissAlarm(repo, await repo.loadSnapshot(ref), { note: o.note });
        out([`dismissed the alarm of snapshot ${d.snapshot.slice(0, 8)}: retention applies to it again`], d);
      } finally {
        await repo.close();
      }
    });
}
