/**
 * The `tidemark` command line: the same engine and contract as the app, for scripts, servers and
 * tests. Every command prints text for people or, with --json, one JSON document; exit codes are in
 * exitCodes.ts. Long commands show a progress line on a terminal and stop cleanly on Ctrl-C.
 */
import os from 'node:os';
import path from 'node:path';
import { Command, Option, CommanderError } from 'commander';
import { prestartWorkers } from '../engine/pool/index.js';
import { MEMORY_MODES, workersFor } from '../engine/pool/memory.js';
import { Repository, initRepository, openRepository } from '../engine/repo/repository.js';
import { openBackend } from '../engine/backend/open.js';
import { RequestLogCollector, describeRequests } from '../engine/backend/requestlog/index.js';
import { clockSkewWarning, storeClock } from '../engine/repo/lock.js';
import { readMaintenance, recordPrune } from '../engine/repo/maintenance.js';
import type { Backend } from '../engine/backend/types.js';
import type { MasterKey } from '../engine/crypto/index.js';
import { backup } from '../engine/backup/index.js';
import { restore } from '../engine/restore/index.js';
import { check } from '../engine/check/index.js';
import { forget, prune } from '../engine/repo/retention.js';
import { diff, find, lookup, walk } from '../engine/repo/browse.js';
import { errorToWire, UsageError, TidemarkError } from '../engine/errors.js';
import type { BackupProgress, OverwritePolicy, RestoreProgress } from '../engine/operations.js';
import type { SnapshotEntry, TreeNode } from '../engine/repo/types.js';
import { EXIT, exitCodeFor } from './exitCodes.js';
import { describeAlarm } from './commands/alarm.js';
import { getMaintenancePassword, getNewPassword, getPassword, givenMaintenancePassword } from './password.js';
import { addRetentionOptions, retentionFrom, retentionGiven } from './retention.js';
import { addProtectCommands } from './protect.js';

export interface CliIO {
  out: (text: string) => void;
  err: (text: string) => void;
  isTTY: boolean;
}

/** Hooks for commands that other parts of the app register (jobs, scheduler, daemon, serve). */
export type CommandRegistrar = (program: Command, ctx: CliContext) => void;

export interface CliContext {
  io: CliIO;
  /** Resolves --repo / TIDEMARK_REPOSITORY / the default, and opens it with the password. */
  openRepo(opts: GlobalOptions, readOnly?: boolean): Promise<Repository>;
  dataDir(): string;
  signal: AbortSignal;
  setExitCode(code: number): void;
}

export interface GlobalOptions {
  repo?: string;
  passwordFile?: string;
  json?: boolean;
  quiet?: boolean;
  limitUpload?: number;
  limitDownload?: number;
  maintenancePasswordFile?: string;
}

import { defaultRepoLocation, tidemarkHome } from './locations.js';
import { fmtBytes } from './format.js';
export { defaultRepoLocation, tidemarkHome };

const short = (id: string) => id.slice(0, 8);
const int = (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < -1) throw new UsageError(`not a whole number: ${v}`);
  return n;
};
const collect = (v: string, prev: string[] = []) => [...prev, v];

/** `--memory low|normal` of backup and restore (engine/pool/memory.ts). */
const memoryOption = () =>
  new Option('--memory <mode>', 'memory use: "low" for old PCs (one worker, fewer buffers: slower)').choices(
    MEMORY_MODES,
  );

function progressLine(io: CliIO, enabled: boolean) {
  let last = 0;
  return {
    backup(p: BackupProgress) {
      if (!enabled || (Date.now() - last < 200 && p.phase !== 'done')) return;
      last = Date.now();
      const pct =
        p.scanComplete && p.bytesScanned ? ` ${((100 * p.bytesDone) / p.bytesScanned).toFixed(0)}%` : '';
      const rate = p.elapsedMs ? fmtBytes((p.bytesRead / p.elapsedMs) * 1000) + '/s' : '';
      const file = p.currentFile ? ` ${p.currentFile.slice(-40)}` : '';
      io.err(
        `\r\x1b[K[${p.phase}]${pct} ${p.filesDone}/${p.filesScanned} files, ${fmtBytes(p.bytesDone)} of ${fmtBytes(p.bytesScanned)}, read ${fmtBytes(p.bytesRead)} ${rate}, new ${fmtBytes(p.bytesNew)}${file}`,
      );
    },
    restore(p: RestoreProgress) {
      if (!enabled || (Date.now() - last < 200 && p.phase !== 'done')) return;
      last = Date.now();
      const pct = p.bytesTotal ? ` ${((100 * p.bytesDone) / p.bytesTotal).toFixed(0)}%` : '';
      io.err(
        `\r\x1b[K[${p.phase}]${pct} ${p.filesDone}/${p.filesTotal} files, ${fmtBytes(p.bytesDone)} of ${fmtBytes(p.bytesTotal)}`,
      );
    },
    end() {
      if (enabled) io.err('\r\x1b[K');
    },
  };
}

function describeNode(n: TreeNode, p: string): string {
  const t = n.type === 'dir' ? 'd' : n.type === 'symlink' ? 'l' : '-';
  const mode = (n.mode & 0o777).toString(8).padStart(3, '0');
  const mtime = new Date(Number(BigInt(n.mtimeNs) / 1000000n)).toISOString().replace('T', ' ').slice(0, 19);
  const size = n.type === 'file' ? String(n.size ?? 0) : n.type === 'dir' ? '' : '';
  return `${t}${mode} ${String(n.uid ?? '').padStart(5)} ${size.padStart(12)} ${mtime} ${p}${n.type === 'symlink' ? ' -> ' + n.linkTarget : ''}`;
}

export function buildProgram(
  io: CliIO,
  registrars: CommandRegistrar[] = [],
  signal: AbortSignal = new AbortController().signal,
): { program: Command; exitCode: () => number } {
  let exitCode: number = EXIT.OK;
  const program = new Command('tidemark');
  program
    .description('Tidemark backup: deduplicated, compressed, encrypted snapshots of your files')
    .option(
      '-r, --repo <location>',
      'repository location (folder or s3:…); default $TIDEMARK_REPOSITORY or ~/.tidemark/repository',
    )
    .option(
      '-p, --password-file <file>',
      'read the repository password from a file (or set TIDEMARK_PASSWORD / TIDEMARK_PASSWORD_FILE)',
    )
    .option('--json', 'print machine-readable JSON')
    .option('-q, --quiet', 'no progress output')
    .option('--limit-upload <MBps>', 'limit writing to the repository to this many MB/s', Number)
    .option('--limit-download <MBps>', 'limit reading from the repository to this many MB/s', Number)
    .option(
      '--maintenance-password-file <file>',
      'an append-only repository: its maintenance password, to prune, forget or change keys (or TIDEMARK_MAINTENANCE_PASSWORD)',
    )
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out(s), writeErr: (s) => io.err(s) })
    .showHelpAfterError();

  const g = (): GlobalOptions => program.opts<GlobalOptions>();
  const print = (human: () => string | string[], json: () => unknown) => {
    if (g().json) io.out(JSON.stringify(json(), null, 2) + '\n');
    else {
      const h = human();
      const text = Array.isArray(h) ? h.join('\n') : h;
      if (text) io.out(text + '\n');
    }
  };
  /** A damaged snapshot file left out of a listing: said on stderr, with the way out. */
  const warnDamaged = (id: string, err: Error) =>
    io.err(
      `warning: snapshot ${short(id)} is damaged and not listed: ${err.message} (tidemark repair mends it)\n`,
    );
  const location = () => g().repo ?? defaultRepoLocation();
  const openRepo = async (opts: GlobalOptions = g(), readOnly = false, requests?: RequestLogCollector) => {
    const backend = await openBackend(opts.repo ?? location(), {
      readOnly,
      requestLog: requests?.record,
      uploadBytesPerSec: opts.limitUpload ? opts.limitUpload * 1e6 : undefined,
      downloadBytesPerSec: opts.limitDownload ? opts.limitDownload * 1e6 : undefined,
    });
    const repo = await openRepository(backend, await getPassword(opts));
    // an append-only repository lets deletes through only with its maintenance password (when given)
    const maintenance = repo.immutability?.appendOnly ? await givenMaintenancePassword(opts) : undefined;
    if (maintenance !== undefined)
      await repo.unlockMaintenance(maintenance).catch(async (err) => {
        await repo.close();
        throw err;
      });
    return repo;
  };
  /** Before deleting from an append-only repository: the maintenance password, asked on a terminal
   *  when it was not given. */
  const maintain = async (repo: Repository, what: string) => {
    if (!repo.immutability?.appendOnly) return;
    try {
      repo.assertMayDelete(what);
    } catch (err) {
      if (!process.stdin.isTTY) throw err;
      await repo.unlockMaintenance(await getMaintenancePassword(g()));
    }
  };
  /** Runs `fn` on the opened repository; commands that only read open it read-only (a bug or a crafted
   *  repository can then never make them write). */
  const withRepo = async <T>(
    fn: (repo: Repository) => Promise<T>,
    readOnly = false,
    requests?: RequestLogCollector,
  ): Promise<T> => {
    const repo = await openRepo(g(), readOnly, requests);
    try {
      return await fn(repo);
    } finally {
      await repo.close();
    }
  };
  const ctx: CliContext = { io, openRepo, dataDir: tidemarkHome, signal, setExitCode: (c) => (exitCode = c) };

  program
    .command('init')
    .description('create a new repository')
    .addOption(
      new Option(
        '--object-lock <mode>',
        'S3: lock every backup object against deletion (the bucket is made with object lock)',
      ).choices(['governance', 'compliance']),
    )
    .option(
      '--lock-days <days>',
      'with --object-lock: how long each object stays locked (default 30)',
      Number,
    )
    .option(
      '--append-only',
      'backups never delete or rewrite anything; prune, forget and key changes need a maintenance password',
    )
    .action(
      async (o: { objectLock?: 'governance' | 'compliance'; lockDays?: number; appendOnly?: boolean }) => {
        if (o.lockDays !== undefined && !o.objectLock)
          throw new UsageError('--lock-days goes with --object-lock');
        const backend = await openBackend(location());
        const password = await getPassword(g(), 'a password for the new repository');
        const repo = await initRepository(backend, password, {
          ...kdfFromEnv(),
          ...(o.objectLock ? { objectLock: { mode: o.objectLock, days: o.lockDays ?? 30 } } : {}),
          ...(o.appendOnly
            ? { appendOnly: { maintenancePassword: await getMaintenancePassword(g(), true) } }
            : {}),
        });
        const im = repo.immutability;
        print(
          () =>
            [
              `created repository ${repo.config.id.slice(0, 10)} at ${backend.location}`,
              im?.objectLock
                ? `Object lock (${im.objectLock.mode}): every backup object stays locked for ${im.objectLock.days} days (a job's longer retention lengthens it).`
                : '',
              im?.appendOnly
                ? 'Append-only: backups never delete or rewrite anything; prune, forget and key changes need the maintenance password (keep it off this computer).'
                : '',
              'Keep the password safe: without it the backups cannot be read.',
            ]
              .filter(Boolean)
              .join('\n'),
          () => ({ id: repo.config.id, location: backend.location, immutability: im ?? null }),
        );
        await repo.close();
      },
    );

  program
    .command('backup')
    .description('back up files and folders into a new snapshot')
    .argument('<paths...>', 'files and folders to back up')
    .option('-e, --exclude <pattern>', 'exclude names or paths matching a glob (repeatable)', collect, [])
    .option('--exclude-file <file>', 'read exclude patterns from a file, one per line')
    .option('-t, --tag <tag>', 'tag the snapshot (repeatable)', collect, [])
    .option('--host <name>', 'host name to record (default: this computer)')
    .option('--job <name>', 'job name to record')
    .option('--parent <snapshot>', 'compare with this snapshot instead of the latest one')
    .option('--force-full', 're-read every file (ignore the previous snapshot and change tracking)')
    .option('--workers <n>', 'CPU workers (default: number of cores)', int)
    .addOption(memoryOption())
    .option('--compression <level>', 'zstd level, 0 = off (default: the repository setting)', int)
    .option('--limit-read <MBps>', 'limit reading from the source to this many MB/s', Number)
    .option('--low-priority', 'run with low CPU and disk priority')
    .option('--retry-lock <seconds>', 'wait this long for a running prune to finish (default 600)', Number)
    .option(
      '--block-files',
      'back up VM disks, databases and mail stores (64 MiB+) in fixed-size blocks (as the app does)',
    )
    .option(
      '--block-file <glob>',
      'the same for large files matching this name pattern (repeatable)',
      collect,
      [],
    )
    .option('-v, --verbose', 'also print every failed repository request (with --json: include them)')
    .action(async (paths: string[], o) => {
      prestartWorkers(workersFor(o.memory, o.workers), o.memory); // they boot while the repository opens
      const excludes: string[] = [...o.exclude];
      if (o.excludeFile)
        excludes.push(
          ...(await import('node:fs/promises').then((f) => f.readFile(o.excludeFile, 'utf8')))
            .split('\n')
            .filter((l) => l.trim() && !l.startsWith('#')),
        );
      const bar = progressLine(io, io.isTTY && !g().quiet && !g().json);
      const requestLog = new RequestLogCollector();
      let skew: { offsetMs: number; warning?: string } = { offsetMs: 0 };
      const result = await withRepo(
        async (repo) => {
          const offsetMs = (await storeClock(repo.backend).catch(() => ({ offsetMs: 0 }))).offsetMs;
          skew = { offsetMs, warning: clockSkewWarning(offsetMs, repo.backend.location) };
          return backup(repo, {
            paths,
            excludes,
            tags: o.tag,
            host: o.host,
            job: o.job,
            parent: o.parent,
            forceFull: o.forceFull,
            workers: o.workers,
            memory: o.memory,
            compressionLevel: o.compression,
            readLimitBytesPerSec: o.limitRead ? o.limitRead * 1e6 : undefined,
            lowPriority: o.lowPriority,
            lockWaitMs: o.retryLock !== undefined ? o.retryLock * 1000 : undefined,
            blockFiles: o.blockFile.length ? { patterns: o.blockFile } : o.blockFiles ? {} : undefined,
            signal,
            progress: (p) => bar.backup(p),
          });
        },
        false,
        requestLog,
      );
      bar.end();
      const s = result.snapshot.stats;
      const rq = requestLog.summary();
      if (skew.warning) io.err(`warning: ${skew.warning}\n`);
      print(
        () => [
          `snapshot ${short(result.snapshotId)} saved (${result.status})`,
          `  files: ${s.files} (${s.filesRead} read, ${s.filesUnchanged} unchanged), folders: ${s.dirs}, size ${fmtBytes(s.totalBytes)}`,
          `  read ${fmtBytes(s.bytesRead)}, new data ${fmtBytes(s.newBytes)}, added to repository ${fmtBytes(s.storedBytes)} in ${(s.durationMs / 1000).toFixed(1)} s`,
          ...result.skipped.map((k) => `  warning: ${k.path}: ${k.reason}`),
          ...(result.massChange?.suspect ? describeAlarm(result.massChange) : []),
          `  repository: ${describeRequests(rq)}`,
          ...(o.verbose
            ? rq.failures.map(
                (f) =>
                  `  failed request: ${new Date(f.at).toISOString()} ${f.op} ${f.type ?? ''}${f.name ? `/${f.name}` : ''}: ${f.error?.message ?? ''}${f.retried ? ' (retried)' : ''}`,
              )
            : []),
        ],
        () => ({
          id: result.snapshotId,
          status: result.status,
          snapshot: result.snapshot,
          skipped: result.skipped,
          requests: {
            requests: rq.requests,
            failed: rq.failed,
            retried: rq.retried,
            bytesUp: rq.bytesUp,
            bytesDown: rq.bytesDown,
            byOp: rq.byOp,
            totalMs: rq.totalMs,
            ...(o.verbose ? { failures: rq.failures, failuresDropped: rq.failuresDropped } : {}),
          },
          storeClockOffsetMs: skew.offsetMs,
          ...(skew.warning ? { warnings: [skew.warning] } : {}),
        }),
      );
      if (result.status === 'completed-with-warnings') exitCode = EXIT.WARNINGS;
      if (result.massChange?.suspect) exitCode = EXIT.ALARM;
    });

  program
    .command('snapshots')
    .description('list snapshots')
    .option('--host <name>', 'only this host')
    .option('--tag <tag>', 'only snapshots with this tag')
    .action(async (o) => {
      let list = await withRepo((repo) => repo.listSnapshots({ damaged: warnDamaged }), true);
      if (o.host) list = list.filter((s) => s.host === o.host);
      if (o.tag) list = list.filter((s) => s.tags.includes(o.tag));
      print(
        () => [
          'ID        Time                 Host             Size        Files  Paths',
          ...list.map(
            (s) =>
              `${short(s.id)}  ${s.time.replace('T', ' ').slice(0, 19)}  ${s.host.padEnd(15).slice(0, 15)}  ${fmtBytes(s.stats.totalBytes).padStart(10)}  ${String(s.stats.files).padStart(6)}  ${s.paths.join(', ')}${s.tags.length ? ' [' + s.tags.join(',') + ']' : ''}${s.massChange?.suspect ? '  (mass-change alarm)' : ''}`,
          ),
          `${list.length} snapshots`,
        ],
        () => list,
      );
    });

  program
    .command('ls')
    .description('list the files of a snapshot (below PATH, recursively)')
    .argument('<snapshot>', 'snapshot ID, prefix, or "latest"')
    .argument('[path]', 'folder or file inside the snapshot', '/')
    .option('--no-recursive', 'list only the folder itself')
    .action(async (ref: string, p: string, o) => {
      const rows: { path: string; node: TreeNode }[] = [];
      await withRepo(async (repo) => {
        const snap = await repo.loadSnapshot(ref);
        const target = path.posix.resolve('/', p);
        const { node, treeId } = await lookup(repo, snap, target);
        if (node && node.type !== 'dir') rows.push({ path: target, node });
        else if (treeId) {
          if (o.recursive) for await (const e of walk(repo, treeId, target)) rows.push(e);
          else
            for (const n of (await repo.loadTree(treeId)).nodes)
              rows.push({ path: path.posix.join(target, n.name), node: n });
        }
      }, true);
      print(
        () => rows.map((r) => describeNode(r.node, r.path)),
        () =>
          rows.map((r) => ({
            path: r.path,
            type: r.node.type,
            size: r.node.size,
            mode: r.node.mode,
            mtimeNs: r.node.mtimeNs,
            uid: r.node.uid,
            gid: r.node.gid,
            linkTarget: r.node.linkTarget,
          })),
      );
    });

  program
    .command('find')
    .description('find files by name (glob) across all snapshots')
    .argument('<pattern>', 'glob on names, or on paths when it contains "/"')
    .option('--host <name>', 'only snapshots of this host')
    .action(async (pattern: string, o) => {
      const rows: { snapshot: SnapshotEntry; path: string; node: TreeNode }[] = [];
      await withRepo(async (repo) => {
        let snaps = await repo.listSnapshots({ damaged: warnDamaged });
        if (o.host) snaps = snaps.filter((s) => s.host === o.host);
        for await (const { snapshot, entry } of find(repo, snaps, pattern))
          rows.push({ snapshot, path: entry.path, node: entry.node });
      }, true);
      print(
        () => [
          ...rows.map(
            (r) =>
              `${short(r.snapshot.id)} ${r.snapshot.time.slice(0, 19).replace('T', ' ')} ${describeNode(r.node, r.path)}`,
          ),
          `${rows.length} matches`,
        ],
        () =>
          rows.map((r) => ({
            snapshot: r.snapshot.id,
            time: r.snapshot.time,
            path: r.path,
            type: r.node.type,
            size: r.node.size,
            mtimeNs: r.node.mtimeNs,
          })),
      );
    });

  program
    .command('diff')
    .description('show what changed between two snapshots')
    .argument('<snapshot1>')
    .argument('<snapshot2>')
    .action(async (a: string, b: string) => {
      const rows: { kind: string; path: string; type: string }[] = [];
      await withRepo(async (repo) => {
        const sa = await repo.loadSnapshot(a);
        const sb = await repo.loadSnapshot(b);
        for await (const d of diff(repo, sa.tree, sb.tree)) rows.push(d);
      }, true);
      const sign = { added: '+', removed: '-', modified: 'M', metadata: 'U' } as Record<string, string>;
      print(
        () => [
          ...rows.map((r) => `${sign[r.kind]} ${r.path}${r.type === 'dir' ? '/' : ''}`),
          `${rows.filter((r) => r.kind === 'added').length} added, ${rows.filter((r) => r.kind === 'removed').length} removed, ${rows.filter((r) => r.kind === 'modified').length} modified, ${rows.filter((r) => r.kind === 'metadata').length} metadata only`,
        ],
        () => rows,
      );
    });

  program
    .command('restore')
    .description('restore a snapshot (or parts of it) into a folder')
    .argument('<snapshot>', 'snapshot ID, prefix, or "latest"')
    .requiredOption('--target <dir>', 'folder to restore into ("/" restores in place)')
    .option('-i, --include <path>', 'restore only this path of the snapshot (repeatable)', collect, [])
    .option('--relative-to <path>', 'strip this folder of the snapshot from restored paths')
    .addOption(
      new Option('--overwrite <policy>', 'what to do with existing files')
        .choices(['overwrite', 'skip', 'keep-both', 'if-newer'])
        .default('overwrite'),
    )
    .option('--workers <n>', 'CPU workers', int)
    .addOption(memoryOption())
    .action(async (ref: string, o) => {
      prestartWorkers(workersFor(o.memory, o.workers), o.memory); // they boot while the repository opens
      const bar = progressLine(io, io.isTTY && !g().quiet && !g().json);
      const r = await withRepo(async (repo) => {
        const snap = await repo.loadSnapshot(ref);
        return restore(repo, {
          snapshot: snap.id,
          target: o.target,
          include: o.include,
          relativeTo: o.relativeTo,
          overwrite: o.overwrite as OverwritePolicy,
          workers: o.workers,
          memory: o.memory,
          signal,
          progress: (p) => bar.restore(p),
        });
      }, true);
      bar.end();
      print(
        () => [
          `restored ${r.filesRestored} files (${fmtBytes(r.bytesRestored)}) to ${o.target}${r.skipped ? `, skipped ${r.skipped} existing` : ''}`,
          ...r.errors.map((e) => `  error: ${e.path}: ${e.message}`),
        ],
        () => r,
      );
      if (r.errors.length) exitCode = EXIT.WARNINGS;
    });

  program
    .command('check')
    .description('verify the repository (with --read-data: every byte)')
    .option('--read-data', 'read and verify all data')
    .action(async (o) => {
      const report = await withRepo((repo) => check(repo, { readData: o.readData, signal }), true);
      print(
        () =>
          [
            `${report.snapshots} snapshots, ${report.packs} packs, ${report.blobs} blobs checked${o.readData ? ' (all data read)' : ''}`,
            ...report.problems.map(
              (p) =>
                `  ${p.kind}: ${p.message}${p.affects.length ? '\n    affects: ' + p.affects.slice(0, 20).join('\n             ') + (p.affects.length > 20 ? `\n             … and ${p.affects.length - 20} more` : '') : ''}`,
            ),
            report.unreferencedPacks.length
              ? `  ${report.unreferencedPacks.length} unreferenced packs (left by an interrupted run; "tidemark prune" removes them)`
              : '',
            report.ok ? 'no errors found' : `${report.problems.length} problems found`,
          ].filter(Boolean),
        () => report,
      );
      if (!report.ok) exitCode = EXIT.DAMAGED;
    });

  addRetentionOptions(
    program
      .command('forget')
      .description('remove snapshots by a retention policy (then run prune to free space)'),
  )
    .option('--host <name>', 'only snapshots of this host')
    .option('--dry-run', 'only show what would be removed')
    .option('--prune', 'prune afterwards')
    .action(async (o) => {
      if (!retentionGiven(o)) throw new UsageError('give at least one --keep-… option');
      const policy = retentionFrom(o);
      const { decision, pruned } = await withRepo(async (repo) => {
        if (!o.dryRun) await maintain(repo, 'forget');
        const decision = await forget(repo, policy, { dryRun: o.dryRun, host: o.host });
        const pruned = o.prune && !o.dryRun ? await prune(repo, { signal }) : undefined;
        return { decision, pruned };
      });
      print(
        () =>
          [
            ...decision.keep.map(
              (k) =>
                `keep   ${short(k.snapshot.id)} ${k.snapshot.time.slice(0, 19).replace('T', ' ')} (${k.reasons.join(', ')})`,
            ),
            ...decision.remove.map(
              (s) =>
                `${o.dryRun ? 'would remove' : 'remove'} ${short(s.id)} ${s.time.slice(0, 19).replace('T', ' ')}`,
            ),
            `${decision.keep.length} kept, ${decision.remove.length} ${o.dryRun ? 'would be removed' : 'removed'}`,
            pruned
              ? `pruned: ${pruned.packsRemoved} packs removed, ${pruned.packsRewritten} rewritten, ${fmtBytes(pruned.bytesFreed)} freed`
              : '',
          ].filter(Boolean),
        () => ({
          keep: decision.keep.map((k) => ({ id: k.snapshot.id, time: k.snapshot.time, reasons: k.reasons })),
          remove: decision.remove.map((s) => ({ id: s.id, time: s.time })),
          dryRun: !!o.dryRun,
          prune: pruned,
        }),
      );
    });

  program
    .command('prune')
    .description('remove data that no snapshot needs')
    .option('--dry-run', 'only show what would be removed')
    .option(
      '--retry-lock <seconds>',
      'wait this long for running backups to finish (default: fail at once)',
      Number,
    )
    .action(async (o) => {
      const r = await withRepo(async (repo) => {
        if (!o.dryRun) await maintain(repo, 'prune');
        const result = await prune(repo, {
          dryRun: o.dryRun,
          signal,
          lockWaitMs: o.retryLock !== undefined ? o.retryLock * 1000 : undefined,
        });
        // a manual prune by the maintenance owner counts as its prune (others' prunes change nothing)
        if (!o.dryRun) await recordOwnPrune(repo.backend, repo.key, os.hostname()).catch(() => {});
        return result;
      });
      const lock = r.objectLock;
      print(
        () =>
          [
            `${o.dryRun ? 'would remove' : 'removed'} ${r.packsRemoved} packs (${r.packsRewritten} rewritten), ${r.blobsRemoved} unused blobs, ${fmtBytes(r.bytesFreed)} freed`,
            lock
              ? `object lock: ${lock.extended} objects' locks extended; ${lock.purged} old versions deleted (${fmtBytes(lock.bytesPurged)}), ${lock.locked} still locked (${fmtBytes(lock.bytesLocked)}, deletable after ${lock.lockedUntil ?? '–'}: a later prune frees them)`
              : '',
          ].filter(Boolean),
        () => r,
      );
    });

  const key = program.command('key').description('manage the passwords that open the repository');
  key
    .command('list')
    .description('list keys')
    .action(async () => {
      const { keys, current } = await withRepo(async (repo) => ({
        keys: await repo.listKeys(),
        current: repo.keyId,
      }));
      print(
        () =>
          keys.map(
            (k) =>
              `${k.id === current ? '*' : ' '} ${short(k.id)} ${k.created.slice(0, 19).replace('T', ' ')} ${k.username}@${k.host}`,
          ),
        () => keys.map((k) => ({ ...k, current: k.id === current })),
      );
    });
  key
    .command('add')
    .description('add another password')
    .option('--new-password-file <file>', 'read the new password from a file (or TIDEMARK_NEW_PASSWORD)')
    .action(async (o) => {
      const id = await withRepo(async (repo) => repo.addKey(await getNewPassword(o), kdfFromEnv().kdf));
      print(
        () => `added key ${short(id)}`,
        () => ({ id }),
      );
    });
  key
    .command('remove')
    .description('remove a password (not the one in use)')
    .argument('<id>', 'key ID or prefix')
    .action(async (id: string) => {
      await withRepo(async (repo) => {
        await maintain(repo, 'removing a key');
        await repo.removeKey(id);
      });
      print(
        () => `removed key ${id}`,
        () => ({ removed: id }),
      );
    });
  key
    .command('passwd')
    .description('change the password in use')
    .option('--new-password-file <file>', 'read the new password from a file (or TIDEMARK_NEW_PASSWORD)')
    .action(async (o) => {
      const id = await withRepo(async (repo) => {
        await maintain(repo, 'changing the password (its old key is removed)');
        return repo.changePassword(await getNewPassword(o), kdfFromEnv().kdf);
      });
      print(
        () => `password changed (key ${short(id)})`,
        () => ({ id }),
      );
    });

  addProtectCommands(program, { io, g, print, withRepo, signal, setExitCode: (c) => (exitCode = c) });

  for (const r of registrars) r(program, ctx);
  return { program, exitCode: () => exitCode };
}

/** Records a prune in the repository's maintenance record when `host` is its owner. */
async function recordOwnPrune(backend: Backend, key: MasterKey, host: string): Promise<void> {
  const cur = (await readMaintenance(backend, key))?.record;
  if (cur?.owner === host) await recordPrune(backend, key, { host, intervalMs: cur.intervalMs });
}

/** Test hook: TIDEMARK_TEST_KDF_N lowers scrypt cost for test repositories (never for real use). */
function kdfFromEnv(): { kdf?: { N: number } } {
  const n = Number(process.env.TIDEMARK_TEST_KDF_N);
  return n ? { kdf: { N: n } } : {};
}

/**
 * Whether `argv` runs one of this program's own commands (backup, restore, …), which need none of the
 * registrars' parts (the catalog's SQLite, the scheduler, the change tracker; ~55 ms of a CLI start here).
 * Asked of the program itself, so the global options are parsed as they will be (`-r backup job list`
 * is the job command). No command, help, or anything else: false (everything is loaded).
 */
export function isCoreCommand(argv: string[]): boolean {
  const io: CliIO = { out: () => {}, err: () => {}, isTTY: false };
  const { program } = buildProgram(io);
  let operands: string[];
  try {
    ({ operands } = program.parseOptions(argv));
  } catch {
    return false;
  }
  const name = operands[0];
  return !!name && name !== 'help' && program.commands.some((c) => c.name() === name);
}

export async function runCli(
  argv: string[],
  io: CliIO,
  registrars: CommandRegistrar[] = [],
  signal?: AbortSignal,
): Promise<number> {
  const { program, exitCode } = buildProgram(io, registrars, signal);
  const json = argv.includes('--json');
  try {
    await program.parseAsync(argv, { from: 'user' });
    return exitCode();
  } catch (err) {
    if (err instanceof CommanderError) {
      if (
        err.code === 'commander.helpDisplayed' ||
        err.code === 'commander.version' ||
        err.code === 'commander.help'
      )
        return EXIT.OK;
      return EXIT.USAGE;
    }
    const wire = errorToWire(err);
    if (json) io.out(JSON.stringify({ error: wire }, null, 2) + '\n');
    else io.err(`tidemark: ${wire.message}${err instanceof TidemarkError ? '' : ` (${wire.code})`}\n`);
    if (process.env.TIDEMARK_DEBUG && err instanceof Error) io.err(err.stack + '\n');
    return exitCodeFor(err);
  }
}
