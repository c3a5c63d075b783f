/**
 * `tidemark recover --as-of TIME`: an S3 repository with object lock (or a versioned bucket), brought
 * back to what it was at TIME — every object deleted or overwritten since (by a stolen key, or by
 * ransomware that got the keys) becomes current again from the versions the store kept
 * (backend/s3/objectLock.ts). Objects written since are left. Then, when the repository opens, the locks
 * of everything current are extended again (copies of overwritten objects are new objects).
 */
import type { Command } from 'commander';
import { openBackend } from '../../engine/backend/open.js';
import { lockingStore } from '../../engine/repo/immutability.js';
import { openRepository } from '../../engine/repo/repository.js';
import { UsageError } from '../../engine/errors.js';
import { defaultRepoLocation } from '../locations.js';
import { getPassword } from '../password.js';
import { EXIT } from '../exitCodes.js';
import type { CliContext, GlobalOptions } from '../program.js';

/** "2026-05-01T12:00", "2026-05-01", or an age: "90m", "6h", "2d". */
export function parseAsOf(text: string, now = Date.now()): number {
  const age = /^(\d+(?:\.\d+)?)\s*([mhd])$/i.exec(text.trim());
  if (age)
    return now - Number(age[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[age[2].toLowerCase() as 'm']!;
  const t = Date.parse(text);
  if (Number.isNaN(t)) throw new UsageError(`--as-of: not a time or an age (like 6h, 2d): ${text}`);
  if (t > now) throw new UsageError(`--as-of: ${text} is in the future`);
  return t;
}

export function registerRecoverCommand(program: Command, ctx: CliContext): void {
  const g = () => program.opts<GlobalOptions>();
  program
    .command('recover')
    .description(
      'S3 with object lock: bring back every object deleted or overwritten since a moment (e.g. by a stolen key)',
    )
    .requiredOption('--as-of <time>', 'the moment to go back to: a date/time, or an age like 6h or 2d')
    .option('--dry-run', 'only list what would be brought back')
    .action(async (o: { asOf: string; dryRun?: boolean }) => {
      const asOf = parseAsOf(o.asOf);
      const location = g().repo ?? defaultRepoLocation();
      const backend = await openBackend(location);
      let r;
      try {
        const store = lockingStore(backend);
        if (!store)
          throw new UsageError('recover works on S3 repositories (their bucket keeps old versions)');
        r = await store.recoverAsOf(asOf, o.dryRun);
      } finally {
        await backend.close();
      }
      let extended: number | undefined;
      if (!o.dryRun && r.undeleted.length + r.restored.length) {
        const repo = await openRepository(await openBackend(location), await getPassword(g()));
        try {
          if (repo.immutability?.objectLock) extended = await lockingStore(repo.backend)!.extendObjectLocks();
        } finally {
          await repo.close();
        }
      }
      const human = [
        `${o.dryRun ? 'would bring back' : 'brought back'} ${r.undeleted.length} deleted and ${r.restored.length} overwritten objects as of ${new Date(asOf).toISOString()}`,
        ...r.restored.map((k) => `  overwritten: ${k}`),
        ...r.lost.map((k) => `  lost (no version kept): ${k}`),
        extended !== undefined ? `locks of ${extended} objects extended` : '',
        o.dryRun ? '' : 'Run "tidemark check --read-data" to confirm the repository is whole.',
      ].filter(Boolean);
      ctx.io.out(
        g().json
          ? JSON.stringify({ asOf: new Date(asOf).toISOString(), ...r, extended }, null, 2) + '\n'
          : human.join('\n') + '\n',
      );
      if (r.lost.length) ctx.setExitCode(EXIT.DAMAGED);
    });
}
