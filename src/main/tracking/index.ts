/**
 * Change tracking (docs/architecture.md §3, level 2): a native tracker (fanotify / inotify on Linux, the USN
 * journal on Windows) reports which directories changed; the change journal keeps them, durably, with
 * a cursor that proves the tracker ran without gaps since a snapshot. A backup with a valid journal
 * visits only dirty directories; anything the journal cannot prove becomes a full scan, with the
 * reason in the run log.
 *
 * Guarantees: never silently wrong — a restart, reboot, queue overflow, watch limit, hard-link change
 * it cannot place, or missing cursor turns into `{ ok: false, reason }`. Not here: the scan itself
 * (engine/scan, engine/backup), block-level tracking (blocks/). macOS has no backend yet (full scans).
 */
export type { ChangeTracker, TrackerBatch, TrackerBackendName, TrackerState } from './types.js';
export { FakeTracker } from './fake.js';
export { NativeTracker, NoTracker, loadTrackerAddon } from './native.js';
export {
  startChangeTracker,
  defaultBackendOrder,
  type TrackerAttempt,
  type StartTrackerOptions,
} from './select.js';
export {
  ChangeJournal,
  currentBootId,
  isJournalCursor,
  type JournalCursor,
  type ChangesSince,
  type JournalOptions,
} from './journal.js';
export { runTrackerDaemon, type TrackerDaemonOptions, type TrackerDaemonResult } from './daemon.js';
export { TrackerService, journalBackup, type TrackerServiceOptions } from './service.js';
