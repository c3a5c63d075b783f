// The open-files proof shared by the btrfs and LVM tests and bench/snapshot.ts: a writer keeps changing a
// SQLite database (WAL) or a large file in place while a backup runs (from a filesystem snapshot, or
// live), the snapshot is restored, and the checker says whether the copy is one instant or torn.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { SourceSnapshots, type SnapshotReport } from '../../src/main/engine/snapshot/index.js';
import { checkFile, checkSqlite } from './fixtures/torn.mjs';

const TORN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'torn.mjs');

export type Workload = 'sqlite' | 'file';

/** Starts a writer on `dir` and resolves once its data exists. */
export async function startWriter(kind: Workload, dir: string): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [TORN, kind, path.join(dir, kind === 'sqlite' ? 'mail.db' : 'disk.img')],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) =>
      reject(new Error(`the ${kind} writer exited (${code}) before it was ready`)),
    );
    child.stdout!.once('data', () => resolve());
  });
  child.removeAllListeners('exit');
  return child;
}

export async function stopWriter(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const closed = new Promise((r) => child.once('close', r));
  child.kill('SIGTERM');
  await closed;
}

export interface ProofRun {
  /** undefined: the restored copy is consistent; else what is wrong with it. */
  problem: string | undefined;
  report?: SnapshotReport;
  warnings: string[];
}

/**
 * One backup of `source` while a writer changes it (with a snapshot: mode 'always'; without: read live),
 * then a restore of the new snapshot into a scratch folder and the check of the copy.
 */
export async function backupWhileWriting(
  repo: Repository,
  source: string,
  kind: Workload,
  useSnapshot: boolean,
  stateDir: string,
): Promise<ProofRun> {
  const writer = await startWriter(kind, source);
  const snaps = new SourceSnapshots({ stateDir, mode: 'always' });
  let result;
  try {
    // let it write for a moment before the backup starts
    await new Promise((r) => setTimeout(r, 200));
    result = await backup(repo, {
      paths: [source],
      host: 'proof',
      workers: 2,
      ...(useSnapshot ? { prepareSourceViews: () => snaps.take([source]) } : {}),
    });
  } finally {
    await snaps.release().catch(() => {});
    await stopWriter(writer);
  }
  const target = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-snap-restore-'));
  try {
    await restore(repo, { snapshot: result.snapshotId, target, relativeTo: source });
    const file = path.join(target, kind === 'sqlite' ? 'mail.db' : 'disk.img');
    return {
      problem: kind === 'sqlite' ? checkSqlite(file) : checkFile(file),
      report: useSnapshot ? snaps.report : undefined,
      warnings: result.skipped.map((s) => `${s.path}: ${s.reason}`),
    };
  } finally {
    fs.rmSync(target, { recursive: true, force: true });
  }
}

export async function scratchRepository(): Promise<{ repo: Repository; dir: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-snap-repo-'));
  const repo = await Repository.init(new LocalBackend(path.join(dir, 'repo')), 'pw', { kdf: { N: 1024 } });
  return { repo, dir };
}
