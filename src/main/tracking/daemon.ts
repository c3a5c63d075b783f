/**
 * The tracker as a long-running service (`tidemark daemon`, or inside the app): starts the best
 * backend on the roots, feeds the journal under dataDir, and on abort stops the tracker and records
 * that it stopped, so the next backup knows the journal cannot vouch for the time after.
 */
import type { TrackerBackendName } from './types.js';
import { ChangeJournal, type JournalOptions } from './journal.js';
import { startChangeTracker, type TrackerAttempt } from './select.js';

export interface TrackerDaemonOptions {
  dataDir: string;
  roots: string[];
  signal: AbortSignal;
  backends?: TrackerBackendName[];
  log?: (line: string) => void;
  journal?: JournalOptions;
  /** Called once the tracker runs (or was found unavailable), with the journal it feeds. */
  onReady?: (info: {
    journal: ChangeJournal;
    backend: TrackerBackendName;
    attempts: TrackerAttempt[];
  }) => void;
}

export interface TrackerDaemonResult {
  backend: TrackerBackendName;
  attempts: TrackerAttempt[];
  /** Batches recorded during the run (the journal's final sequence number). */
  batches: number;
  /** Why it stopped early, if it broke down. */
  broken?: string;
}

export async function runTrackerDaemon(opts: TrackerDaemonOptions): Promise<TrackerDaemonResult> {
  const log = opts.log ?? (() => {});
  if (opts.signal.aborted) return { backend: 'none', attempts: [], batches: 0 };
  // resumable backends (USN) continue from where the previous run stopped
  const resume = await ChangeJournal.resumePoint(opts.dataDir, opts.roots);
  const { tracker, attempts } = await startChangeTracker(opts.roots, { backends: opts.backends, resume });
  for (const a of attempts) log(`change tracker ${a.backend} unavailable: ${a.error}`);
  const journal = new ChangeJournal(opts.dataDir, opts.journal);
  await journal.attach(tracker);
  if (tracker.backend === 'none') log(`no change tracking: ${tracker.broken}; backups will scan everything`);
  else
    log(
      `tracking changes under ${opts.roots.join(', ')} with ${tracker.backend} (generation ${journal.generation})`,
    );
  opts.onReady?.({ journal, backend: tracker.backend, attempts });
  let broken: string | undefined;
  const unsubscribe = tracker.onEvents((b) => {
    if (b.lost) log(`change journal: ${b.lost}; the next backup scans everything`);
    if (b.broken && !broken) {
      broken = b.broken;
      log(`change tracker broke down: ${b.broken}; backups scan everything until it restarts`);
    }
  });
  await new Promise<void>((resolve) => {
    if (opts.signal.aborted) resolve();
    else opts.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  unsubscribe();
  await tracker.flush().catch(() => {});
  await tracker.stop();
  await journal.close('the tracker daemon stopped');
  log('change tracker stopped');
  return { backend: tracker.backend, attempts, batches: journal.sequence, ...(broken ? { broken } : {}) };
}
