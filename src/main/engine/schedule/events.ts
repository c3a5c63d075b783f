/**
 * Typed events of job runs, which the app forwards to the UI and turns into notifications.
 */
import { EventEmitter } from 'node:events';
import type { BackupProgress } from '../operations.js';
import type { RestoreTestRecord, RunSample, RunStatus, RunTrigger } from '../catalog/types.js';

export interface RunEvents {
  'run-queued': { jobId: number; runId: number; trigger: RunTrigger; full: boolean };
  'run-started': { jobId: number; runId: number; trigger: RunTrigger; full: boolean; at: number };
  'run-progress': { jobId: number; runId: number; progress: BackupProgress; sample?: RunSample };
  /** A phase after the backup itself: indexing, retention, prune, verify, restore test. */
  'run-phase': {
    jobId: number;
    runId: number;
    phase: 'indexing' | 'retention' | 'prune' | 'verify' | 'restore-test';
  };
  /** A restore test ended (after a backup: runId set; on demand: null), whatever its verdict. */
  'restore-test': { jobId: number; runId: number | null; test: RestoreTestRecord };
  'run-finished': {
    jobId: number;
    runId: number;
    status: Extract<RunStatus, 'completed' | 'completed-with-warnings' | 'cancelled'>;
    snapshotId: string | null;
    warnings: number;
    at: number;
  };
  'run-failed': {
    jobId: number;
    runId: number;
    error: { name: string; code: string; message: string };
    at: number;
  };
  /** A scheduled time passed while Tidemark was not running (or the machine slept). */
  'run-missed': {
    jobId: number;
    runId: number;
    scheduledFor: number;
    missedCount: number;
    willCatchUp: boolean;
  };
  /** A scheduled time came while the job was still running or queued: it is not started twice. */
  'run-skipped': { jobId: number; scheduledFor: number; reason: string };
}

export class TypedEmitter<E extends { [K in keyof E]: unknown }> {
  private readonly ee = new EventEmitter();

  constructor() {
    this.ee.setMaxListeners(100);
  }

  on<K extends keyof E & string>(event: K, fn: (payload: E[K]) => void): () => void {
    this.ee.on(event, fn);
    return () => this.ee.off(event, fn);
  }

  once<K extends keyof E & string>(event: K, fn: (payload: E[K]) => void): void {
    this.ee.once(event, fn);
  }

  off<K extends keyof E & string>(event: K, fn: (payload: E[K]) => void): void {
    this.ee.off(event, fn);
  }

  emit<K extends keyof E & string>(event: K, payload: E[K]): void {
    // A listener that throws must not break a run.
    for (const fn of this.ee.listeners(event)) {
      try {
        (fn as (p: E[K]) => void)(payload);
      } catch {}
    }
  }
}

export type RunEventEmitter = TypedEmitter<RunEvents>;
export const createRunEvents = (): RunEventEmitter => new TypedEmitter<RunEvents>();
