/** The --keep-… options (forget, job add/edit) and the retention policy they describe. */
import type { Command } from 'commander';
import type { RetentionPolicy } from '../engine/operations.js';
import { UsageError } from '../engine/errors.js';

const collect = (v: string, prev: string[] = []) => [...prev, v];
const count = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < -1) throw new UsageError(`not a whole number: ${v}`);
  return n;
};

const RULES: [flag: string, option: string, key: keyof RetentionPolicy, help: string][] = [
  ['--keep-last <n>', 'keepLast', 'keepLast', 'keep the N newest snapshots'],
  ['--keep-hourly <n>', 'keepHourly', 'keepHourly', 'keep the newest snapshot of each of the last N hours'],
  ['--keep-daily <n>', 'keepDaily', 'keepDaily', 'keep the newest snapshot of each of the last N days'],
  ['--keep-weekly <n>', 'keepWeekly', 'keepWeekly', 'keep the newest snapshot of each of the last N weeks'],
  [
    '--keep-monthly <n>',
    'keepMonthly',
    'keepMonthly',
    'keep the newest snapshot of each of the last N months',
  ],
  ['--keep-yearly <n>', 'keepYearly', 'keepYearly', 'keep the newest snapshot of each of the last N years'],
];

export function addRetentionOptions(cmd: Command): Command {
  for (const [flag, , , help] of RULES) cmd.option(flag, help, count);
  return cmd.option('--keep-tag <tag>', 'always keep snapshots with this tag (repeatable)', collect);
}

/** True when any --keep-… option was given. */
export function retentionGiven(o: Record<string, unknown>): boolean {
  return RULES.some(([, opt]) => o[opt] !== undefined) || o.keepTag !== undefined;
}

/** The retention policy the --keep-… options describe (they replace the whole policy). */
export function retentionFrom(o: Record<string, unknown>): RetentionPolicy {
  const r: RetentionPolicy = {};
  for (const [, opt, key] of RULES) if (o[opt] !== undefined) (r as Record<string, unknown>)[key] = o[opt];
  if (Array.isArray(o.keepTag) && o.keepTag.length) r.keepTags = o.keepTag as string[];
  return r;
}
