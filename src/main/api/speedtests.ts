/**
 * The API's destination speed tests (speedtests.* and the speedtest.progress event): runs the engine's
 * speed test (engine/speedtest) on a destination in this process — its I/O on the native engine's own
 * threads, so the process serving the UI stays responsive — reports its progress and live samples at
 * most four times a second, works out the job's estimate (its sources' size and its last runs from the
 * run store), and keeps every finished test (completed, failed or cancelled) in the speed-test store, the
 * catalog's speed_tests table in the app, for the history of that destination.
 *
 * One test per destination at a time (two would measure each other); a destination that a job is backing
 * up to right now is refused (the test and the backup would both be wrong). Closing the API cancels the
 * tests running, and waits for them to remove their test files.
 */
import type {
  Destination,
  RunSummary,
  SpeedTestEstimate,
  SpeedTestPatternResult,
  SpeedTestRecord,
  SpeedTestSample,
  SpeedTestSettings,
  SpeedTestStatus,
} from '../../shared/api.js';
import type { BackendOptions } from '../engine/backend/open.js';
import type {
  PatternResult,
  SpeedTestOptions,
  SpeedTestProgress,
  SpeedTestResult,
} from '../engine/speedtest/types.js';
import { DEFAULTS } from '../engine/speedtest/patterns.js';
import { estimate, type RunFigures, type SpeedEstimate } from '../engine/speedtest/estimate.js';
import { measureSources, type SourceSize } from '../engine/speedtest/sourceSize.js';
import { ApiUsageError, toWire } from './errors.js';
import { describeDestination } from '../../shared/destination.js';
import { placeKey } from './destination.js';
import { BoundedSeries, boundSeries, mergeSpeedSamples, SPEED_SAMPLES_MAX } from '../../shared/series.js';
import { dropOldFinished, KEPT_FINISHED } from './bounded.js';
import { SpeedTestLog, type SpeedTestRow } from '../engine/catalog/speedTests.js';
import type { DB } from '../engine/catalog/db.js';

type MaybePromise<T> = T | Promise<T>;

/** Where finished speed tests are kept (the catalog in the app; memory with a test engine). */
export interface SpeedTestStore {
  addSpeedTest(place: string, record: Omit<SpeedTestRecord, 'id'>): MaybePromise<SpeedTestRecord>;
  listSpeedTests(filter: { place?: string; jobId?: string; limit: number }): MaybePromise<SpeedTestRecord[]>;
}

export class MemorySpeedTestStore implements SpeedTestStore {
  private rows: (SpeedTestRecord & { place: string })[] = [];
  addSpeedTest(place: string, record: Omit<SpeedTestRecord, 'id'>): SpeedTestRecord {
    const row = { ...structuredClone(record), id: String(this.rows.length + 1), place };
    this.rows.push(row);
    const { place: _p, ...out } = row;
    return out;
  }
  listSpeedTests(f: { place?: string; jobId?: string; limit: number }): SpeedTestRecord[] {
    return this.rows
      .filter(
        (r) =>
          (f.place === undefined || r.place === f.place) && (f.jobId === undefined || r.jobId === f.jobId),
      )
      .reverse()
      .slice(0, f.limit)
      .map(({ place: _p, ...r }) => structuredClone(r));
  }
}

/** The engine's speed test, as the manager calls it (tests may wrap it). */
export type RunSpeedTest = (
  location: string,
  options: BackendOptions,
  opts: SpeedTestOptions,
) => Promise<SpeedTestResult>;

export interface StartRequest {
  destination: Destination;
  /** Location string and backend options (with the S3 secret) to open it with. */
  location: string;
  options: BackendOptions;
  jobId?: string;
  /** The job's sources (or a new job's), for the estimate. */
  sources?: string[];
  settings: SpeedTestSettings;
}

export interface SpeedTestDeps {
  run: RunSpeedTest;
  store: SpeedTestStore;
  /** The job's runs, newest first (the run store). */
  listRuns(jobId: string): MaybePromise<RunSummary[]>;
  emit(status: SpeedTestStatus): void;
  measure?: (paths: string[], signal: AbortSignal) => Promise<SourceSize>;
}

const MiB = 1024 * 1024;
const EMIT_MS = 250;

/** The engine's options from the API's settings. */
export function engineOptions(s: SpeedTestSettings, kind: Destination['kind']): SpeedTestOptions {
  return {
    patterns: s.patterns?.filter((p) =>
      kind === 'local'
        ? !['pack-put', 'pack-get', 'small-get'].includes(p)
        : ['pack-put', 'pack-get', 'small-get'].includes(p),
    ),
    fileSize: s.fileSizeMiB !== undefined ? s.fileSizeMiB * MiB : undefined,
    blockSize: s.blockSizeKiB !== undefined ? s.blockSizeKiB * 1024 : undefined,
    durationMs: s.durationSec !== undefined ? Math.round(s.durationSec * 1000) : undefined,
    threads: s.threads,
    queueDepth: s.queueDepth,
    inFlight: s.inFlight,
  };
}

/** The settings a test ran with, defaults filled in (what the history shows). */
export function effectiveSettings(
  s: SpeedTestSettings,
  kind: Destination['kind'],
): SpeedTestRecord['settings'] {
  const disk = [
    'active-full',
    'synthetic-full',
    'reverse-incremental',
    'restore',
    'pack',
    'small-file-restore',
  ] as const;
  const s3 = ['pack-put', 'pack-get', 'small-get'] as const;
  const all: readonly SpeedTestRecord['settings']['patterns'][number][] = kind === 'local' ? disk : s3;
  const patterns = s.patterns?.filter((p) => all.includes(p)) ?? [];
  const base = {
    patterns: patterns.length ? patterns : [...all],
    durationSec: s.durationSec ?? DEFAULTS.durationMs / 1000,
  };
  return kind === 'local'
    ? {
        ...base,
        fileSizeMiB: s.fileSizeMiB ?? DEFAULTS.fileSize / MiB,
        blockSizeKiB: s.blockSizeKiB ?? DEFAULTS.blockSize / 1024,
        threads: s.threads ?? DEFAULTS.threads,
        queueDepth: s.queueDepth ?? DEFAULTS.queueDepth,
      }
    : { ...base, inFlight: s.inFlight ?? [...DEFAULTS.inFlight] };
}

export function wireResult(r: PatternResult): SpeedTestPatternResult {
  const { trace: _t, misaligned: _m, maxInFlight: _x, ...rest } = r;
  return rest;
}

export function wireEstimate(e: SpeedEstimate): SpeedTestEstimate {
  const rate = (r: SpeedEstimate['lastFull']) =>
    r ? { ...r, endedAt: new Date(r.endedAt).toISOString() } : null;
  return { ...e, lastFull: rate(e.lastFull), lastRun: rate(e.lastRun) };
}

/** A job's finished backup runs as the estimate wants them (newest first; its first run was a full one). */
function runFigures(runs: RunSummary[]): RunFigures[] {
  const done = runs.filter(
    (r) => (r.status === 'completed' || r.status === 'completed-with-warnings') && r.endedAt && r.startedAt,
  );
  return done.map((r, i) => ({
    endedAt: Date.parse(r.endedAt!),
    durationMs: Math.max(1, Date.parse(r.endedAt!) - Date.parse(r.startedAt)),
    bytesRead: r.counters.bytesRead,
    bytesStored: r.counters.bytesStored,
    full: r.kind === 'full-backup' || i === done.length - 1,
  }));
}

/** What the history keeps of a test: everything but its live fields. */
export function recordOf(s: SpeedTestStatus): Omit<SpeedTestRecord, 'id'> {
  return {
    ...(s.jobId ? { jobId: s.jobId } : {}),
    location: s.location,
    status: s.status,
    startedAt: s.startedAt,
    ...(s.endedAt ? { endedAt: s.endedAt } : {}),
    settings: s.settings,
    results: s.results,
    ...(s.estimate ? { estimate: s.estimate } : {}),
    notes: s.notes,
    ...(s.error ? { error: s.error } : {}),
  };
}

interface Running {
  status: SpeedTestStatus;
  abort: AbortController;
  place: string;
  done: Promise<void>;
}

export class SpeedTests {
  private tests = new Map<string, Running>();

  constructor(private readonly deps: SpeedTestDeps) {}

  /** The place (destination identity) a test is running on, if any. */
  runningOn(place: string): boolean {
    return [...this.tests.values()].some((t) => t.place === place && t.status.status === 'running');
  }

  start(req: StartRequest): SpeedTestStatus {
    const place = placeKey(req.destination);
    if (this.runningOn(place))
      throw new ApiUsageError('ALREADY_RUNNING', 'a speed test of this destination is running already');
    const id = `speedtest-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
    const settings = effectiveSettings(req.settings, req.destination.kind);
    const status: SpeedTestStatus = {
      id,
      ...(req.jobId ? { jobId: req.jobId } : {}),
      location: describeDestination(req.destination),
      status: 'running',
      startedAt: new Date().toISOString(),
      settings,
      results: [],
      notes: [],
      phase: 'checking',
      patternIndex: 0,
      patternCount: 0,
      fraction: 0,
      samples: [],
    };
    // the live chart, whole and bounded (a test of many long patterns samples twice a second)
    const live = new BoundedSeries<SpeedTestSample>(SPEED_SAMPLES_MAX, mergeSpeedSamples);
    status.samples = live.points;
    const abort = new AbortController();
    let lastEmit = 0;
    const emit = (force: boolean) => {
      const now = Date.now();
      if (!force && now - lastEmit < EMIT_MS) return;
      lastEmit = now;
      this.deps.emit(structuredClone(status));
    };
    const progress = (p: SpeedTestProgress) => {
      const moved =
        p.phase !== status.phase || p.pattern !== status.pattern || p.inFlight !== status.inFlight;
      Object.assign(status, {
        phase: p.phase,
        pattern: p.pattern,
        inFlight: p.inFlight,
        patternIndex: p.patternIndex,
        patternCount: p.patternCount,
        fraction: p.fraction,
        results: p.results.map(wireResult),
      });
      if (p.sample) live.push(p.sample);
      emit(moved);
    };
    // the size of the sources, while the test runs (a new job has no run that knows it)
    const sizing = this.sourceSize(req, abort.signal);
    const done = (async () => {
      try {
        const result = await this.deps.run(req.location, req.options, {
          ...engineOptions(req.settings, req.destination.kind),
          signal: abort.signal,
          progress,
        });
        status.results = result.results.map(wireResult);
        status.samples = boundSeries(result.samples, SPEED_SAMPLES_MAX, mergeSpeedSamples);
        status.notes = result.notes;
        const { size, runs } = await sizing;
        status.estimate = wireEstimate(
          estimate({
            results: result.results,
            sourceBytes: size?.bytes ?? null,
            sourceComplete: size?.complete ?? true,
            runs,
          }),
        );
        status.status = 'completed';
      } catch (err) {
        const wire = toWire(err);
        status.status = abort.signal.aborted || wire.code === 'ABORTED' ? 'cancelled' : 'failed';
        if (status.status === 'failed') status.error = wire;
      }
      status.phase = 'done';
      status.fraction = status.status === 'completed' ? 1 : status.fraction;
      status.endedAt = new Date().toISOString();
      abort.abort(); // ends a walk of the sources still going
      try {
        await this.deps.store.addSpeedTest(place, recordOf(status));
      } catch (err) {
        status.notes.push(`the result could not be kept in the history: ${(err as Error).message}`);
      }
      emit(true);
    })();
    this.tests.set(id, { status, abort, place, done });
    dropOldFinished(this.tests, KEPT_FINISHED, (t) => t.status.status !== 'running');
    emit(true);
    return structuredClone(status);
  }

  private async sourceSize(
    req: StartRequest,
    signal: AbortSignal,
  ): Promise<{ size: SourceSize | null; runs: RunFigures[] }> {
    try {
      const all = req.jobId ? await this.deps.listRuns(req.jobId) : [];
      const runs = runFigures(all);
      // the newest run that scanned knows the sources' size
      const scanned = all.find((r) => r.counters.bytesScanned > 0 && r.status !== 'failed');
      if (scanned)
        return {
          size: {
            bytes: scanned.counters.bytesScanned,
            files: scanned.counters.filesScanned,
            complete: true,
          },
          runs,
        };
      if (!req.sources?.length) return { size: null, runs };
      const measure = this.deps.measure ?? ((p, s) => measureSources(p, { signal: s }));
      return { size: await measure(req.sources, signal), runs };
    } catch {
      return { size: null, runs: [] };
    }
  }

  get(id: string): SpeedTestStatus {
    const t = this.tests.get(id);
    if (!t) throw new ApiUsageError('NOT_FOUND', `no speed test with id ${id}`);
    return structuredClone(t.status);
  }

  cancel(id: string): void {
    const t = this.tests.get(id);
    if (!t) throw new ApiUsageError('NOT_FOUND', `no speed test with id ${id}`);
    t.abort.abort();
  }

  async history(filter: { place?: string; jobId?: string; limit?: number }): Promise<SpeedTestRecord[]> {
    return this.deps.store.listSpeedTests({ ...filter, limit: filter.limit ?? 50 });
  }

  /** Cancels the tests running and waits until they have removed their test files. */
  async close(): Promise<void> {
    for (const t of this.tests.values()) t.abort.abort();
    await Promise.allSettled([...this.tests.values()].map((t) => t.done));
  }
}

/** The store in the app: the catalog's speed_tests table (shared with the CLI's `test-speed`). */
export class CatalogSpeedTests implements SpeedTestStore {
  private readonly log: SpeedTestLog;
  constructor(db: DB) {
    this.log = new SpeedTestLog(db);
  }

  addSpeedTest(place: string, r: Omit<SpeedTestRecord, 'id'>): SpeedTestRecord {
    const row = this.log.add({
      place,
      location: r.location,
      jobId: r.jobId !== undefined && /^\d+$/.test(r.jobId) ? Number(r.jobId) : null,
      startedAt: Date.parse(r.startedAt),
      endedAt: Date.parse(r.endedAt ?? new Date().toISOString()),
      status: r.status === 'running' ? 'failed' : r.status,
      settings: r.settings,
      results: r.results,
      estimate: (r.estimate as unknown as Record<string, unknown>) ?? null,
      notes: r.notes,
      error: r.error ?? null,
    });
    return recordOfRow(row);
  }

  listSpeedTests(f: { place?: string; jobId?: string; limit: number }): SpeedTestRecord[] {
    if (f.jobId !== undefined && !/^\d+$/.test(f.jobId)) return [];
    return this.log
      .list({ place: f.place, jobId: f.jobId === undefined ? undefined : Number(f.jobId), limit: f.limit })
      .map(recordOfRow);
  }
}

export function recordOfRow(row: SpeedTestRow): SpeedTestRecord {
  return {
    id: String(row.id),
    ...(row.jobId !== null ? { jobId: String(row.jobId) } : {}),
    location: row.location,
    status: row.status,
    startedAt: new Date(row.startedAt).toISOString(),
    endedAt: new Date(row.endedAt).toISOString(),
    settings: row.settings as SpeedTestRecord['settings'],
    results: row.results as SpeedTestPatternResult[],
    ...(row.estimate ? { estimate: row.estimate as unknown as SpeedTestEstimate } : {}),
    notes: row.notes,
    ...(row.error ? { error: row.error } : {}),
  };
}
