/**
 * Options, progress and results of a destination speed test (plain data: the API sends them to the UI
 * as they are and the catalog keeps them as JSON).
 */
import type { ProgressSink } from '../operations.js';

/** Patterns on a folder: the four DiskSpd simulations of the seed report, and Tidemark's own two. */
export type DiskPatternId =
  'active-full' | 'synthetic-full' | 'reverse-incremental' | 'restore' | 'pack' | 'small-file-restore';
/** Patterns on an S3 destination, each at 1, 4 and 8 requests in flight (by default). */
export type S3PatternId = 'pack-put' | 'pack-get' | 'small-get';
export type PatternId = DiskPatternId | S3PatternId;

export interface SpeedTestOptions {
  /** Which patterns (default: every one for the destination's kind). */
  patterns?: PatternId[];
  /** Size of the test file (DiskSpd's -c); a whole number of MiB, at least 16 MiB. Folders only. */
  fileSize?: number;
  /** Block size of the four DiskSpd patterns (presets 256 KiB / 512 KiB / 4 MiB: WAN / LAN / local). */
  blockSize?: number;
  /** How long each pattern runs, ms (DiskSpd's -d). */
  durationMs?: number;
  /** Threads (DiskSpd's -t) and operations in flight per thread (-o) of the four DiskSpd patterns. */
  threads?: number;
  queueDepth?: number;
  /** S3: requests in flight to measure each pattern at (default 1, 4 and 8). */
  inFlight?: number[];
  /** Bypass the caches (default true; where a filesystem refuses, the result says so). */
  unbuffered?: boolean;
  /** 'threads' / 'node': another I/O engine than the best one here (tests, comparisons). */
  engine?: 'auto' | 'threads' | 'node';
  /** Record the first N operations of each pattern in its result (tests count them). */
  trace?: number;
  signal?: AbortSignal;
  progress?: ProgressSink<SpeedTestProgress>;
  /** Free and total bytes of the folder's filesystem (default: statfs; tests inject it). */
  freeSpace?: (dir: string) => Promise<{ free: number; total: number }>;
}

export interface LatencyFigures {
  /** Microseconds; null where no operation of that kind ran. */
  p50: number | null;
  p95: number | null;
  p99: number | null;
}

export interface PatternResult {
  pattern: PatternId;
  /** What it simulates, for people. */
  label: string;
  blockSize: number;
  /** Offsets of random operations are multiples of this. */
  align: number;
  readPercent: number;
  random: boolean;
  threads: number;
  /** Operations (S3: requests for objects) in flight per thread. */
  depth: number;
  /** How long it really ran (ms; a buffered run's final flush included). */
  elapsedMs: number;
  reads: number;
  writes: number;
  bytesRead: number;
  bytesWritten: number;
  /** MiB/s of reads and writes together, and each. */
  mibps: number;
  readMibps: number;
  writeMibps: number;
  iops: number;
  latencyUs: LatencyFigures;
  readLatencyUs: LatencyFigures;
  writeLatencyUs: LatencyFigures;
  /** Folders: whether the caches were bypassed, by which engine, and why not when not. */
  direct?: boolean;
  engine?: 'aio' | 'threads' | 'node' | 's3';
  note?: string;
  /** Operations whose offset, length or memory was not aligned (0 by construction; tests check it). */
  misaligned?: number;
  maxInFlight?: number;
  /** [write ? 1 : 0, offset, length, thread] of the first operations (options.trace). */
  trace?: number[];
}

export interface SpeedTestSample {
  /** ms since the test started */
  t: number;
  pattern: PatternId;
  /** Over the last interval. */
  mibps: number;
  iops: number;
}

export type SpeedTestPhase = 'checking' | 'preparing' | 'testing' | 'cleaning' | 'done';

export interface SpeedTestProgress {
  phase: SpeedTestPhase;
  /** The pattern running, and its place among those asked for. */
  pattern?: PatternId;
  /** In-flight count of the S3 pattern running. */
  inFlight?: number;
  patternIndex: number;
  patternCount: number;
  /** 0…1 of the whole test (laying out the file included). */
  fraction: number;
  elapsedMs: number;
  /** The newest sample (at most two a second). */
  sample?: SpeedTestSample;
  /** The patterns finished so far. */
  results: PatternResult[];
}

export interface SpeedTestResult {
  kind: 'folder' | 's3';
  /** The folder tested in (the destination, or the folder it will be made in) or the S3 location. */
  location: string;
  startedAt: number;
  endedAt: number;
  fileSize?: number;
  results: PatternResult[];
  samples: SpeedTestSample[];
  /** Things a user should know about how it was measured. */
  notes: string[];
  /** Probe objects or files of earlier interrupted tests removed before this one. */
  staleRemoved: number;
}
