/**
 * Loads the native addon (native/build/Release/tidemark_tracker.node) and wraps its Tracker in the
 * ChangeTracker interface. Loading never throws: when the addon is missing (build failed, other OS)
 * `loadTrackerAddon()` says why and the selection falls back.
 */
import { createRequire } from 'node:module';
import { realpathSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ChangeTracker, TrackerBatch, TrackerBackendName, TrackerState } from './types.js';
import { Listeners, isUnder } from './util.js';

interface NativeBatch extends TrackerBatch {
  flushToken: number;
  events: number;
  /** The first batch: setup (e.g. the initial inotify walk, on the reader thread) finished. */
  ready?: boolean;
}

export interface NativeTrackerOptions {
  /** Longest time events wait in the native reader before a batch is emitted (ms). */
  batchMillis?: number;
  /** Resumable backends: a position a previous run reported (TrackerBatch.position). */
  resume?: string;
}

interface NativeTrackerHandle {
  start(): void;
  stop(): void;
  flush(token: number): void;
}

export interface UsnRecord {
  majorVersion: number;
  minorVersion: number;
  fileRef: string;
  parentRef: string;
  usn: bigint;
  timestamp: bigint;
  reason: number;
  sourceInfo: number;
  securityId: number;
  attributes: number;
  isDirectory: boolean;
  name: string;
}

export interface TrackerAddon {
  Tracker: new (
    backend: string,
    roots: string[],
    onBatch: (b: NativeBatch) => void,
    batchMillis?: number,
    resume?: string,
  ) => NativeTrackerHandle;
  parseUsnRecords(
    buf: Buffer,
    hasNextUsnHeader?: boolean,
  ): { nextUsn: bigint; skipped: number; error?: string; records: UsnRecord[] };
  backends(): string[];
}

let cached: { addon?: TrackerAddon; error?: string } | undefined;

/** The directory holding native/, found from this file (src/main/tracking) or the bundle (out/main). */
function nativeDirCandidates(): string[] {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const fromEnv = process.env.TIDEMARK_NATIVE_DIR;
  return [
    ...(fromEnv ? [fromEnv] : []),
    path.resolve(here, '../../../native'),
    path.resolve(here, '../../native'),
    path.resolve(process.cwd(), 'native'),
  ];
}

export function loadTrackerAddon(): { addon?: TrackerAddon; error?: string } {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  const tried: string[] = [];
  for (const dir of nativeDirCandidates()) {
    const file = path.join(dir, 'build', 'Release', 'tidemark_tracker.node');
    if (!existsSync(file)) {
      tried.push(file);
      continue;
    }
    try {
      cached = { addon: require(file) as TrackerAddon };
      return cached;
    } catch (err) {
      cached = { error: `loading ${file} failed: ${(err as Error).message}` };
      return cached;
    }
  }
  cached = {
    error: `native change tracker not built (looked for ${tried[0] ?? 'tidemark_tracker.node'}; run "node scripts/build-native.mjs")`,
  };
  return cached;
}

/** A native backend (fanotify, inotify, usn) behind the ChangeTracker interface. */
export class NativeTracker implements ChangeTracker {
  state: TrackerState = 'idle';
  broken?: string;
  roots: string[] = [];
  /** Raw kernel events folded so far (for statistics). */
  events = 0;
  private handle?: NativeTrackerHandle;
  private readonly listeners = new Listeners<TrackerBatch>();
  private nextToken = 1;
  private readyWaiter?: { resolve: () => void; reject: (err: Error) => void };
  private readonly flushWaiters = new Map<number, () => void>();
  /** canonical root → root as given (sources may contain symlinked path components). */
  private aliases: [string, string][] = [];

  /** Resumable backends: the last position reported. */
  position?: string;
  readonly resumable: boolean;
  readonly resumedFrom?: string;

  constructor(
    readonly backend: Exclude<TrackerBackendName, 'fake' | 'none'>,
    private readonly addon: TrackerAddon,
    private readonly opts: NativeTrackerOptions = {},
  ) {
    this.resumable = backend === 'usn';
    this.resumedFrom = this.resumable ? opts.resume : undefined;
  }

  async start(roots: string[]): Promise<void> {
    if (this.handle) throw new Error('tracker already started');
    this.roots = roots.map((r) => path.resolve(r));
    // Windows: the native side reports paths with an upper-case drive letter
    const canonical = (p: string) => (/^[a-z]:/.test(p) ? p[0].toUpperCase() + p.slice(1) : p);
    this.aliases = this.roots.map((r) => {
      try {
        return [canonical(realpathSync.native(r)), r];
      } catch {
        return [canonical(r), r];
      }
    });
    const handle = new this.addon.Tracker(
      this.backend,
      this.aliases.map(([canon]) => canon),
      (b) => this.onBatch(b),
      this.opts.batchMillis ?? 50,
      this.resumedFrom ?? '',
    );
    const ready = new Promise<void>((resolve, reject) => (this.readyWaiter = { resolve, reject }));
    try {
      handle.start(); // throws with the reason (EPERM, no such folder, ...)
    } catch (err) {
      this.readyWaiter = undefined;
      throw err;
    }
    this.handle = handle;
    this.state = 'running';
    try {
      await ready; // the backend's setup runs off the JS thread; it may still fail (watch limit)
    } catch (err) {
      await this.stop();
      this.state = 'idle';
      throw err;
    }
  }

  private translate(p: string): string {
    for (const [canon, given] of this.aliases) {
      if (canon !== given && isUnder(p, canon)) return given + p.slice(canon.length);
    }
    return p;
  }

  private onBatch(b: NativeBatch): void {
    if (this.readyWaiter && (b.ready || b.broken)) {
      const w = this.readyWaiter;
      this.readyWaiter = undefined;
      if (b.ready) w.resolve();
      else {
        w.reject(new Error(b.broken));
        return;
      }
    }
    try {
      this.events += b.events;
      const batch: TrackerBatch = {
        dirtyDirs: b.dirtyDirs.map((p) => this.translate(p)),
        dirtyTrees: b.dirtyTrees.map((p) => this.translate(p)),
        ...(b.lost ? { lost: b.lost } : {}),
        ...(b.broken ? { broken: b.broken } : {}),
        ...(b.position ? { position: b.position } : {}),
      };
      if (b.position) this.position = b.position;
      if (b.broken && this.state === 'running') {
        this.state = 'broken';
        this.broken = b.broken;
      }
      if (batch.dirtyDirs.length || batch.dirtyTrees.length || batch.lost || batch.broken || batch.position)
        this.listeners.emit(batch);
    } finally {
      if (b.flushToken) {
        this.flushWaiters.get(b.flushToken)?.();
        this.flushWaiters.delete(b.flushToken);
      }
    }
  }

  async flush(): Promise<void> {
    if (!this.handle) return;
    const token = this.nextToken++;
    await new Promise<void>((resolve) => {
      this.flushWaiters.set(token, resolve);
      try {
        this.handle!.flush(token);
      } catch {
        this.flushWaiters.delete(token);
        resolve();
      }
    });
  }

  async stop(): Promise<void> {
    const h = this.handle;
    this.handle = undefined;
    if (h) h.stop();
    this.readyWaiter?.reject(new Error('the tracker was stopped while starting'));
    this.readyWaiter = undefined;
    for (const w of this.flushWaiters.values()) w();
    this.flushWaiters.clear();
    if (this.state !== 'idle') this.state = 'stopped';
  }

  onEvents(listener: (batch: TrackerBatch) => void): () => void {
    return this.listeners.add(listener);
  }
}

/** Tracks nothing: every backup is a full scan. Says why. */
export class NoTracker implements ChangeTracker {
  readonly backend = 'none' as const;
  state: TrackerState = 'unavailable';
  roots: string[] = [];
  constructor(readonly broken: string) {}
  async start(roots: string[]): Promise<void> {
    this.roots = roots.map((r) => path.resolve(r));
  }
  async stop(): Promise<void> {}
  async flush(): Promise<void> {}
  onEvents(): () => void {
    return () => {};
  }
}
