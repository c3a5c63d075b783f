/**
 * The verdict of a speed test: how long this job's next full backup and a full restore would take at
 * the destination's measured rates — Tidemark's own pack pattern for a backup (else the active full),
 * the sequential restore pattern for a restore (S3: PUTs and GETs of packs at the in-flight count the
 * engine uses, or the nearest measured below it) — next to what the job's last real runs achieved.
 * A full backup writes what its last full run stored per byte read (compression and deduplication);
 * with no full run yet, as much as it reads. These are the destination's share of the time: reading
 * the sources and the CPU work may take longer, which the last runs' figures show.
 */
import { RESTORE_IN_FLIGHT, S3_BACKUP_IN_FLIGHT } from './patterns.js';
import type { PatternId, PatternResult } from './types.js';

const MiB = 1024 * 1024;

/** A finished backup run of the job, as the catalog's runs table has it. */
export interface RunFigures {
  endedAt: number;
  durationMs: number;
  bytesRead: number;
  bytesStored: number;
  /** A full backup (everything read again), or the job's first. */
  full: boolean;
}

export interface RunRate extends RunFigures {
  readMibps: number;
  storedMibps: number;
}

export interface TimeEstimate {
  ms: number;
  mibps: number;
  /** The pattern (and S3 in-flight count) the rate comes from. */
  basis: PatternId;
  inFlight: number;
}

export interface SpeedEstimate {
  sourceBytes: number | null;
  /** False when the sources were too large to measure whole in time: sourceBytes is a lower bound. */
  sourceComplete: boolean;
  /** Bytes a full backup writes: sourceBytes × storedRatio. */
  storedBytes: number | null;
  /** Stored ÷ read of the last full run (null: none yet, 1 assumed). */
  storedRatio: number | null;
  backup: TimeEstimate | null;
  restore: TimeEstimate | null;
  lastFull: RunRate | null;
  lastRun: RunRate | null;
}

function rate(r: RunFigures): RunRate {
  const secs = Math.max(r.durationMs, 1) / 1000;
  return {
    ...r,
    readMibps: Math.round((r.bytesRead / MiB / secs) * 10) / 10,
    storedMibps: Math.round((r.bytesStored / MiB / secs) * 10) / 10,
  };
}

/** The result measured at the in-flight count nearest `want` (ties: the lower, the cautious one). */
function nearest(results: PatternResult[], pattern: PatternId, want: number): PatternResult | undefined {
  return results
    .filter((r) => r.pattern === pattern)
    .sort((a, b) => Math.abs(a.depth - want) - Math.abs(b.depth - want) || a.depth - b.depth)[0];
}

function pick(results: PatternResult[], write: boolean): PatternResult | undefined {
  if (write)
    return (
      results.find((r) => r.pattern === 'pack') ??
      results.find((r) => r.pattern === 'active-full') ??
      nearest(results, 'pack-put', S3_BACKUP_IN_FLIGHT)
    );
  return (
    results.find((r) => r.pattern === 'restore') ??
    nearest(results, 'pack-get', RESTORE_IN_FLIGHT) ??
    results.find((r) => r.pattern === 'small-file-restore') ??
    nearest(results, 'small-get', RESTORE_IN_FLIGHT)
  );
}

export function estimate(input: {
  results: PatternResult[];
  sourceBytes: number | null;
  sourceComplete?: boolean;
  /** The job's finished backup runs, newest first. */
  runs?: RunFigures[];
}): SpeedEstimate {
  const runs = input.runs ?? [];
  const lastFullRun = runs.find((r) => r.full && r.bytesRead > 0);
  const storedRatio = lastFullRun ? lastFullRun.bytesStored / lastFullRun.bytesRead : null;
  const storedBytes = input.sourceBytes === null ? null : Math.round(input.sourceBytes * (storedRatio ?? 1));
  const time = (r: PatternResult | undefined, write: boolean): TimeEstimate | null => {
    const mibps = r ? (write ? r.writeMibps : r.readMibps) : 0;
    if (!r || !(mibps > 0) || storedBytes === null) return null;
    return {
      ms: Math.round((storedBytes / (mibps * MiB)) * 1000),
      mibps,
      basis: r.pattern,
      inFlight: r.depth,
    };
  };
  return {
    sourceBytes: input.sourceBytes,
    sourceComplete: input.sourceComplete ?? true,
    storedBytes,
    storedRatio: storedRatio === null ? null : Math.round(storedRatio * 1000) / 1000,
    backup: time(pick(input.results, true), true),
    restore: time(pick(input.results, false), false),
    lastFull: lastFullRun ? rate(lastFullRun) : null,
    lastRun: runs[0] ? rate(runs[0]) : null,
  };
}
