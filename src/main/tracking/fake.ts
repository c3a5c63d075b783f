/**
 * A pure-TypeScript tracker for tests: the test says what changed, the fake reports it like a real
 * backend would (coalesced, filtered to the roots).
 */
import path from 'node:path';
import type { ChangeTracker, TrackerBatch, TrackerState } from './types.js';
import { Listeners, isUnder } from './util.js';

export class FakeTracker implements ChangeTracker {
  readonly backend = 'fake' as const;
  state: TrackerState = 'idle';
  broken?: string;
  roots: string[] = [];
  private readonly listeners = new Listeners<TrackerBatch>();
  private pending: TrackerBatch = { dirtyDirs: [], dirtyTrees: [] };
  /** When set, start() rejects with this message (to test backend selection). */
  failStart?: string;
  /** Pretend to be a resumable tracker (like the USN journal) started from `resumedFrom`. */
  readonly resumable: boolean;
  readonly resumedFrom?: string;
  position?: string;

  constructor(opts: { resumable?: boolean; resumedFrom?: string } = {}) {
    this.resumable = !!opts.resumable;
    this.resumedFrom = opts.resumedFrom;
  }

  async start(roots: string[]): Promise<void> {
    if (this.failStart) throw new Error(this.failStart);
    this.roots = roots.map((r) => path.resolve(r));
    this.state = 'running';
  }

  async stop(): Promise<void> {
    if (this.state === 'running' || this.state === 'broken') this.state = 'stopped';
  }

  async flush(): Promise<void> {
    const b = this.pending;
    this.pending = { dirtyDirs: [], dirtyTrees: [] };
    if (this.resumable) {
      this.position = `pos-${Date.now()}-${Math.random().toString(36).slice(2)}`;
      b.position = this.position;
    }
    if (b.dirtyDirs.length || b.dirtyTrees.length || b.lost || b.broken || b.position) this.listeners.emit(b);
  }

  onEvents(listener: (batch: TrackerBatch) => void): () => void {
    return this.listeners.add(listener);
  }

  private inRoots(p: string): boolean {
    return this.roots.some((r) => isUnder(p, r));
  }

  /** An entry changed (created, deleted, modified, chmod...): its parent directory is dirty. */
  changed(entry: string, opts: { createdDir?: boolean } = {}): this {
    const dir = path.dirname(entry);
    if (this.inRoots(dir)) this.pending.dirtyDirs.push(dir);
    if (opts.createdDir && this.inRoots(entry)) this.pending.dirtyTrees.push(entry);
    return this;
  }

  renamed(from: string, to: string, isDir: boolean): this {
    this.changed(from);
    return this.changed(to, { createdDir: isDir });
  }

  lose(reason: string): this {
    this.pending.lost = reason;
    return this;
  }

  breakDown(reason: string): this {
    this.pending.broken = reason;
    this.state = 'broken';
    this.broken = reason;
    return this;
  }

  /** Emits a raw batch as is. */
  emit(batch: TrackerBatch): void {
    this.listeners.emit(batch);
  }
}
