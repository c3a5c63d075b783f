/**
 * The mass-change alarm on a simulated home PC (tests/helpers/homepc.ts): how many normal days it calls
 * an attack (goal 0), and which simulated encryptions of 2%, 10% and 50% of the files it misses (goal
 * none), for every attack style. Each scenario starts from the same home folder: it is copied, backed up,
 * changed, and backed up again; the second backup's verdict is what counts.
 *
 *   npm run bench:alarm                 # ~1,750 files, 3 seeds of every normal day and every attack
 *   npm run bench:alarm -- --scale 4 --seeds 5 --dir /var/tmp/tm-alarm --keep
 */
import '../src/main/engineHost.js';
import fs from 'node:fs/promises';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { MemoryBackend } from '../src/main/engine/backend/memory/index.js';
import { initRepository } from '../src/main/engine/repo/repository.js';
import { backup } from '../src/main/engine/backup/index.js';
import type { MassChangeVerdict } from '../src/main/engine/alarm/index.js';
import { ATTACK_STYLES, NORMAL_DAYS, encryptFiles, makeHomePc, normalDay } from '../tests/helpers/homepc.js';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : dflt;
}
const SCALE = Number(arg('scale', '1'));
const SEEDS = Number(arg('seeds', '3'));
const FRACTIONS = arg('fractions', '0.02,0.1,0.5').split(',').map(Number);
const BASE = path.resolve(arg('dir', '.bench/alarm'));
const KEEP = process.argv.includes('--keep');

interface Row {
  scenario: string;
  kind: 'normal' | 'attack';
  v: MassChangeVerdict;
  encrypted?: number;
  ms: number;
}

async function main(): Promise<void> {
  const base = path.join(BASE, 'base');
  const run = path.join(BASE, 'home');
  await fs.rm(BASE, { recursive: true, force: true });
  const files = await makeHomePc(base, { scale: SCALE });
  console.log(`home folder: ${files} files (scale ${SCALE}) at ${base}`);
  const repo = await initRepository(new MemoryBackend(), 'bench', { kdf: { N: 1024 } });
  const rows: Row[] = [];
  const scenario = async (name: string, kind: Row['kind'], change: () => Promise<number | undefined>) => {
    await fs.rm(run, { recursive: true, force: true });
    execFileSync('cp', ['-a', base, run]);
    const first = await backup(repo, { paths: [run], host: 'bench' });
    const encrypted = await change();
    const t = performance.now();
    const second = await backup(repo, { paths: [run], host: 'bench', parent: first.snapshotId });
    const ms = performance.now() - t;
    const v = second.massChange!;
    rows.push({ scenario: name, kind, v, encrypted, ms });
    const s = v.stats;
    console.log(
      `${kind.padEnd(6)} ${name.padEnd(28)} ${v.suspect ? 'ALARM' : 'quiet'}  suspicious ${String(v.suspicious).padStart(5)} / ${v.threshold}` +
        `  (sig ${s.signatureLost}, collapsed ${s.collapsed}, renamed ${s.renamedOpaque}/${s.renamed}, replaced ${s.replacedOpaque})` +
        `  mod ${s.filesModified} (whole ${s.rewrittenWhole}) add ${s.filesAdded} rem ${s.filesRemoved}` +
        `  new data ${s.newBytes ? Math.round((100 * s.newStored) / s.newBytes) : 0}% stored${encrypted !== undefined ? `  encrypted ${encrypted}` : ''}  ${(ms / 1000).toFixed(2)} s`,
    );
  };
  for (let seed = 1; seed <= SEEDS; seed++)
    for (const day of NORMAL_DAYS)
      await scenario(`${day} #${seed}`, 'normal', async () => {
        await normalDay(run, day, seed, SCALE);
        return undefined;
      });
  for (let seed = 1; seed <= SEEDS; seed++)
    for (const fraction of FRACTIONS)
      for (const style of ATTACK_STYLES)
        await scenario(`encrypt ${fraction * 100}% ${style} #${seed}`, 'attack', () =>
          encryptFiles(run, fraction, style, seed),
        );
  await repo.close();
  const normal = rows.filter((r) => r.kind === 'normal');
  const attacks = rows.filter((r) => r.kind === 'attack');
  const falseAlarms = normal.filter((r) => r.v.suspect);
  const missed = attacks.filter((r) => !r.v.suspect);
  const margin = Math.max(...normal.map((r) => r.v.suspicious / r.v.threshold));
  const weakest = Math.min(...attacks.map((r) => r.v.suspicious / r.v.threshold));
  console.log('');
  console.log(
    `false alarms on normal days: ${falseAlarms.length} of ${normal.length}${falseAlarms.length ? ': ' + falseAlarms.map((r) => r.scenario).join(', ') : ''}`,
  );
  console.log(
    `attacks detected: ${attacks.length - missed.length} of ${attacks.length}${missed.length ? '; missed: ' + missed.map((r) => r.scenario).join(', ') : ''}`,
  );
  console.log(
    `highest normal day: ${(100 * margin).toFixed(0)}% of the threshold; weakest attack: ${(100 * weakest).toFixed(0)}% of it`,
  );
  if (!KEEP) await fs.rm(BASE, { recursive: true, force: true });
}

await main();
