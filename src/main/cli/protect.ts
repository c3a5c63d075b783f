/**
 * The commands that prove and mend a repository (beside `check`):
 *   tidemark verify-restore [SNAPSHOT]   restore a random sample into a temporary folder and compare it
 *   tidemark repair                      make a damaged repository consistent, saving what can be saved
 * They are the program's own commands (no catalog needed); jobs' restore tests are in
 * commands/restoreTests.ts.
 */
import type { Command } from 'commander';
import type { Repository } from '../engine/repo/repository.js';
import { restoreTest } from '../engine/restoretest/index.js';
import { repair } from '../engine/repair/index.js';
import { UsageError } from '../engine/errors.js';
import { EXIT } from './exitCodes.js';
import { fmtBytes } from './format.js';

export interface ProtectHelpers {
  io: { out: (s: string) => void; err: (s: string) => void; isTTY: boolean };
  /** Global options (--json, --quiet). */
  g: () => { json?: boolean; quiet?: boolean };
  print: (human: () => string | string[], json: () => unknown) => void;
  withRepo: <T>(fn: (repo: Repository) => Promise<T>, readOnly?: boolean) => Promise<T>;
  signal: AbortSignal;
  setExitCode: (code: number) => void;
}

const count = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new UsageError(`not a whole number: ${v}`);
  return n;
};

export function addProtectCommands(program: Command, h: ProtectHelpers): void {
  const { io, print } = h;
  const line = (enabled: boolean) => {
    let last = 0;
    return {
      show(text: string, force = false) {
        if (!enabled || (!force && Date.now() - last < 200)) return;
        last = Date.now();
        io.err(`\r\x1b[K${text}`);
      },
      end() {
        if (enabled) io.err('\r\x1b[K');
      },
    };
  };

  program
    .command('verify-restore')
    .description(
      'restore a random sample of a snapshot into a temporary folder and compare it with the stored hashes',
    )
    .argument('[snapshot]', 'snapshot ID, prefix, or "latest"', 'latest')
    .option('-n, --files <n>', 'files drawn at random', count, 20)
    .option('--block-files', 'also restore every block file (VM disks, databases) of the snapshot')
    .option('--max-mb <n>', 'the sample stays below this many MB (block files aside)', count, 1024)
    .option('--temp-dir <dir>', 'where the temporary folder goes (default: the system temporary folder)')
    .option('--workers <n>', 'CPU workers', count)
    .action(async (ref: string, o) => {
      const bar = line(h.io.isTTY && !h.g().quiet && !h.g().json);
      const r = await h.withRepo(async (repo) => {
        const snap = await repo.loadSnapshot(ref);
        return restoreTest(repo, {
          snapshot: snap.id,
          files: o.files,
          allBlockFiles: !!o.blockFiles,
          maxSampleBytes: o.maxMb * 1e6,
          tempDir: o.tempDir,
          workers: o.workers,
          signal: h.signal,
          progress: (p) =>
            bar.show(`[${p.phase}] ${p.filesDone}/${p.filesTotal} files, ${fmtBytes(p.bytesDone)}`),
        });
      }, true);
      bar.end();
      const what = `${r.filesChecked} file(s), ${fmtBytes(r.bytesChecked)}${r.blockFilesChecked ? `, ${r.blockFilesChecked} block file(s)` : ''}`;
      print(
        () => [
          r.ok
            ? `restore test of snapshot ${r.snapshot.slice(0, 8)}: ${what} restored and matched their stored hashes in ${(r.durationMs / 1000).toFixed(1)} s`
            : `restore test of snapshot ${r.snapshot.slice(0, 8)} FAILED: ${r.failures.length} problem(s) (${what} tested)`,
          ...r.failures.slice(0, 50).map((f) => `  ${f.path}: ${f.message}`),
          ...(r.failures.length > 50 ? [`  … and ${r.failures.length - 50} more`] : []),
          ...r.skipped.map((s) => `  left out: ${s.path}: ${s.reason}`),
          ...(r.ok ? [] : ['run "tidemark check --read-data", then "tidemark repair"']),
        ],
        () => r,
      );
      if (!r.ok) h.setExitCode(EXIT.DAMAGED);
    });

  program
    .command('repair')
    .description(
      'repair a damaged repository: rebuild the index, save what survives of damaged packs and snapshots, read lost data again from the source files',
    )
    .option('--dry-run', 'only report what repair would do')
    .option('--no-sources', 'do not read lost data again from the source files')
    .option(
      '--retry-lock <seconds>',
      'wait this long for running backups to finish (default: fail at once)',
      Number,
    )
    .option('--workers <n>', 'CPU workers', count)
    .action(async (o) => {
      const bar = line(h.io.isTTY && !h.g().quiet && !h.g().json);
      const r = await h.withRepo((repo) =>
        repair(repo, {
          dryRun: !!o.dryRun,
          fromSources: o.sources !== false,
          lockWaitMs: o.retryLock !== undefined ? o.retryLock * 1000 : undefined,
          workers: o.workers,
          signal: h.signal,
          progress: (p) => bar.show(`[${p.phase}] ${p.done}/${p.total}`),
        }),
      );
      bar.end();
      const would = r.dryRun ? 'would be ' : '';
      print(
        () => {
          if (r.clean)
            return `${r.packs.read} packs read, ${r.snapshots.checked} snapshots: nothing to repair`;
          const out = [
            `${r.packs.read} packs read: ${r.packs.damaged.length} damaged, ${r.packs.missing.length} missing, ${r.packs.unindexed} not indexed; ${r.index.damaged.length} damaged index file(s)`,
            ...r.packs.damaged.map(
              (d) =>
                `  damaged pack ${d.pack.slice(0, 12)}: ${d.problem} (${d.salvaged} blob(s) ${would}saved)`,
            ),
            ...r.packs.missing.map((p) => `  missing pack ${p.slice(0, 12)}`),
            `blobs: ${r.blobs.salvaged} ${would}copied out of damaged packs, ${r.blobs.fromSources} ${r.dryRun ? 'found in' : 'read again from'} source files, ${r.blobs.lost} lost`,
            ...r.sources.map((s) => `  from ${s.path}: ${s.blobs}`),
            ...r.unreadableSources.slice(0, 20).map((s) => `  source not readable: ${s.path}: ${s.reason}`),
            `snapshots: ${r.snapshots.rebuilt.length} ${would}saved again without what is lost, ${r.snapshots.removed.length} ${would}removed, ${r.snapshots.recovered.length} ${would}recovered`,
            ...r.snapshots.rebuilt.map(
              (s) =>
                `  ${s.from.slice(0, 8)} → ${s.to ? s.to.slice(0, 8) : '(new)'}: ${s.lostFiles} file(s) and ${s.lostFolders} folder(s) lost`,
            ),
            ...r.snapshots.removed.map((s) => `  removed ${s.id.slice(0, 8)}: ${s.reason}`),
            ...r.snapshots.recovered.map(
              (s) => `  recovered ${s.id ? s.id.slice(0, 8) : '(new)'}: ${s.paths.join(', ')} (${s.time})`,
            ),
          ];
          if (r.lostCount) {
            out.push(`could not be saved (${r.lostCount}):`);
            out.push(...r.lost.slice(0, 100).map((l) => `  ${l.where} (${l.kind}): ${l.reason}`));
            if (r.lostCount > 100) out.push(`  … and ${r.lostCount - 100} more (--json lists them)`);
          }
          out.push(
            r.dryRun
              ? 'dry run: nothing was changed'
              : r.lostCount
                ? 'repaired, with losses: "tidemark check --read-data" confirms the rest is whole'
                : 'repaired, nothing lost: "tidemark check --read-data" confirms it',
          );
          return out;
        },
        () => r,
      );
      if (r.dryRun && !r.clean) h.setExitCode(EXIT.DAMAGED);
      else if (!r.dryRun && r.lostCount) h.setExitCode(EXIT.WARNINGS);
    });
}
