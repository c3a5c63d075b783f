/**
 * Restore tests of jobs (the engine's restoretest/ does the restoring and comparing): when a job's test
 * is due after a backup — its `restoreTest.everyDays` since the last test, and every block file once
 * BLOCK_FILES_EVERY_DAYS since the last test that restored them all — and how one is run and recorded
 * in the catalog. A test that could not be made (no room, an unreadable repository) is recorded as an
 * error and does not count as the last test, so the next backup tries again.
 */
import type { Catalog } from '../catalog/catalog.js';
import type { Job, RestoreTestRecord } from '../catalog/types.js';
import type { RestoreTestOptions, RestoreTestResult } from '../restoretest/index.js';
import { AbortedError, errorToWire } from '../errors.js';

const DAY = 86_400_000;
/** A job's tests follow its backups, which run at about the same time each day: a test made a little
 *  later yesterday still counts as a day old. */
const SLACK_MS = 3_600_000;
/** Every block file is restored at least this often (they are large: VM disks, databases). */
export const BLOCK_FILES_EVERY_DAYS = 30;
/** Files drawn when a job has no restore test settings of its own (a test on demand). */
export const DEFAULT_TEST_FILES = 20;

/** Whether a job's restore test is due after a backup now, and whether it restores every block file. */
export function restoreTestPlan(
  catalog: Catalog,
  job: Job,
  now: number,
): { due: boolean; allBlockFiles: boolean } {
  const s = job.options.restoreTest;
  if (!s) return { due: false, allBlockFiles: false };
  const last = catalog.restoreTests.last(job.id);
  const due = !last || now - last.startedAt >= Math.max(0, s.everyDays * DAY - SLACK_MS);
  return { due, allBlockFiles: due && allBlockFilesDue(catalog, job, now) };
}

/** Whether the job's last test of every block file is a month old (or there was none). */
export function allBlockFilesDue(catalog: Catalog, job: Job, now: number): boolean {
  const last = catalog.restoreTests.last(job.id, { allBlockFiles: true });
  return !last || now - last.startedAt >= BLOCK_FILES_EVERY_DAYS * DAY - SLACK_MS;
}

/** Runs a restore test of a job's snapshot and records it (never throws but when cancelled). */
export async function runRestoreTest<R>(args: {
  catalog: Catalog;
  job: Job;
  repo: R;
  test: (repo: R, opts: RestoreTestOptions) => Promise<RestoreTestResult>;
  snapshotId: string;
  runId: number | null;
  trigger: RestoreTestRecord['trigger'];
  allBlockFiles: boolean;
  now: () => number;
  signal?: AbortSignal;
  log?: (line: string) => void;
}): Promise<RestoreTestRecord> {
  const { catalog, job } = args;
  const s = job.options.restoreTest;
  const startedAt = args.now();
  const base = {
    jobId: job.id,
    runId: args.runId,
    repositoryId: job.repositoryId,
    snapshotId: args.snapshotId,
    trigger: args.trigger,
    startedAt,
    allBlockFiles: args.allBlockFiles,
  };
  let record: RestoreTestRecord;
  try {
    const r = await args.test(args.repo, {
      snapshot: args.snapshotId,
      files: s?.files ?? DEFAULT_TEST_FILES,
      allBlockFiles: args.allBlockFiles,
      tempDir: s?.tempDir,
      memory: job.options.memory,
      signal: args.signal,
    });
    record = catalog.restoreTests.add({
      ...base,
      status: r.ok ? 'passed' : 'failed',
      endedAt: args.now(),
      files: r.filesChecked,
      bytes: r.bytesChecked,
      blockFiles: r.blockFilesChecked,
      failures: r.failures,
      skipped: r.skipped,
      error: null,
    });
  } catch (err) {
    if (args.signal?.aborted || err instanceof AbortedError) throw err;
    record = catalog.restoreTests.add({
      ...base,
      status: 'error',
      endedAt: args.now(),
      files: 0,
      bytes: 0,
      blockFiles: 0,
      failures: [],
      skipped: [],
      error: errorToWire(err),
    });
  }
  args.log?.(describeRestoreTest(record));
  return record;
}

/** One line for a run log or the command line. */
export function describeRestoreTest(t: RestoreTestRecord): string {
  const what = `${t.files} file(s)${t.blockFiles ? ` (${t.blockFiles} block file(s))` : ''} of snapshot ${t.snapshotId.slice(0, 8)}`;
  if (t.status === 'error') return `restore test: could not be made: ${t.error?.message ?? 'unknown error'}`;
  if (t.status === 'failed')
    return `restore test FAILED: ${t.failures.length} problem(s) in ${what} (${t.failures[0]?.path}: ${t.failures[0]?.message})`;
  return `restore test: ${what} restored and matched their stored hashes${t.skipped.length ? `; ${t.skipped.length} left out (${t.skipped[0].reason})` : ''}`;
}
