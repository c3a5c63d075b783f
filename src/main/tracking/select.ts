/**
 * The one place a tracker backend is chosen (docs/architecture.md §1 rule 6): fanotify when privileged,
 * recursive inotify otherwise on Linux, the USN journal on Windows, else none (full scans, which
 * are always correct). Each failed attempt is reported so the run log can say why.
 */
import type { ChangeTracker, TrackerBackendName } from './types.js';
import { NativeTracker, NoTracker, loadTrackerAddon } from './native.js';

export interface TrackerAttempt {
  backend: TrackerBackendName;
  error: string;
}

export interface StartTrackerOptions {
  /** Backends to try, in order (default: the platform's order). */
  backends?: TrackerBackendName[];
  /** Longest time events wait in the native reader before a batch is emitted. */
  batchMillis?: number;
  /** For resumable backends (USN): where the previous run stopped (ChangeJournal.resumePoint). */
  resume?: string;
}

export function defaultBackendOrder(platform: NodeJS.Platform = process.platform): TrackerBackendName[] {
  if (platform === 'linux') return ['fanotify', 'inotify'];
  if (platform === 'win32') return ['usn'];
  return []; // macOS (FSEvents) is not implemented: full scans
}

/** Starts the first backend that works on `roots`; a NoTracker (with the reasons) when none does. */
export async function startChangeTracker(
  roots: string[],
  opts: StartTrackerOptions = {},
): Promise<{ tracker: ChangeTracker; attempts: TrackerAttempt[] }> {
  const attempts: TrackerAttempt[] = [];
  const order = opts.backends ?? defaultBackendOrder();
  const { addon, error } = loadTrackerAddon();
  for (const backend of order) {
    if (backend === 'none' || backend === 'fake') continue;
    if (!addon) {
      attempts.push({ backend, error: error ?? 'native addon unavailable' });
      continue;
    }
    if (!addon.backends().includes(backend)) {
      attempts.push({ backend, error: `not compiled for ${process.platform}` });
      continue;
    }
    const tracker = new NativeTracker(backend, addon, { batchMillis: opts.batchMillis, resume: opts.resume });
    try {
      await tracker.start(roots);
      return { tracker, attempts };
    } catch (err) {
      attempts.push({ backend, error: (err as Error).message });
    }
  }
  const reason = attempts.length
    ? `no change tracker could start (${attempts.map((a) => `${a.backend}: ${a.error}`).join('; ')})`
    : `no change tracker for ${process.platform}`;
  const none = new NoTracker(reason);
  await none.start(roots);
  return { tracker: none, attempts };
}
