/**
 * The TypeScript face of a change tracker: something that, once started on a set of source roots,
 * reports batches of directories whose listing changed. Backends: native fanotify / inotify (Linux),
 * the NTFS USN journal (Windows, native), a pure-TS fake for tests, and "none" (always full scans).
 */

/** One coalesced batch of changes, already filtered to the tracked roots. */
export interface TrackerBatch {
  /** Directories in which an entry was created, deleted, renamed, or changed content or metadata. */
  dirtyDirs: string[];
  /** Directories whose whole subtree must be rescanned (created or moved in). */
  dirtyTrees: string[];
  /** Events were lost (queue overflow) or a change could not be located (hard links): recoverable by a full scan. */
  lost?: string;
  /** The tracker stopped tracking (watch limit, root removed, read error): nothing after this is seen. */
  broken?: string;
  /** Resumable trackers (USN journal): the position every change before which is in this or an earlier batch. */
  position?: string;
}

export type TrackerBackendName = 'fanotify' | 'inotify' | 'usn' | 'fake' | 'none';

export type TrackerState = 'idle' | 'running' | 'broken' | 'stopped' | 'unavailable';

export interface ChangeTracker {
  readonly backend: TrackerBackendName;
  readonly state: TrackerState;
  /** Why the tracker is broken or unavailable. */
  readonly broken?: string;
  /** The roots being tracked, as given to start(). */
  readonly roots: readonly string[];
  /**
   * True for trackers whose kernel journal outlives the process (the NTFS USN journal): started from
   * a saved position they report what happened while the app was not running, so the journal keeps
   * its generation across restarts and reboots.
   */
  readonly resumable?: boolean;
  /** The position this tracker was started from (resumable trackers), if any. */
  readonly resumedFrom?: string;
  /** Starts tracking; rejects when this backend cannot run here (privilege, platform, watch limit). */
  start(roots: string[]): Promise<void>;
  stop(): Promise<void>;
  /** Resolves once every change that happened before the call has been delivered to listeners. */
  flush(): Promise<void>;
  /** Subscribes to batches (and to the broken transition); returns an unsubscribe function. */
  onEvents(listener: (batch: TrackerBatch) => void): () => void;
}
