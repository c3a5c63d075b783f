/**
 * Request log around any backend: one record per operation (what, how many bytes, how long, how it
 * ended) handed to a sink — the run history stores them — plus running totals for the run summary
 * ("412 requests, 3 retried, 1.2 GiB up"). It never changes results or errors; a throwing sink is ignored.
 * RequestLogCollector turns one run's records into what its history keeps (totals in full, failures
 * and the last requests capped, so a run row stays small).
 */
import type { Backend, ObjectInfo, ObjectType, ObjectWriter, SaveOptions } from '../types.js';
import { ForwardingBackend, forwardingWriter } from '../forwarding.js';
import { errorToWire } from '../../errors.js';

export type LoggedOperation = 'save' | 'load' | 'stat' | 'remove' | 'list' | 'exists' | 'init';

export interface RequestRecord {
  op: LoggedOperation;
  type?: ObjectType;
  name?: string;
  /** Bytes sent (save) or received (load); objects seen for list. */
  bytes: number;
  /** Start time (ms since the epoch) and duration (ms). */
  at: number;
  ms: number;
  ok: boolean;
  error?: { name: string; code: string; message: string };
}

export interface RequestTotals {
  requests: number;
  failed: number;
  bytesUp: number;
  bytesDown: number;
  byOp: Record<LoggedOperation, number>;
}

/** Every request is logged, so `localFile` (reads past the log) is not offered; `saveParts` is, logged. */
export class RequestLogBackend extends ForwardingBackend {
  readonly totals: RequestTotals = {
    requests: 0,
    failed: 0,
    bytesUp: 0,
    bytesDown: 0,
    byOp: { save: 0, load: 0, stat: 0, remove: 0, list: 0, exists: 0, init: 0 },
  };

  /** Present when the store can write an object from consecutive parts (a pack as its blobs, without
   *  joining them first): forwarded so the log does not cost that, and logged as one save. */
  declare readonly saveParts?: Backend['saveParts'];
  /** Present when the store writes objects as they are made (a folder's packs): each one is logged as
   *  one save when it is committed (from its opening, with all its bytes), or as a failed one. */
  declare readonly openWriter?: Backend['openWriter'];

  constructor(
    inner: Backend,
    private readonly sink: (record: RequestRecord) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {
    super(inner);
    if (inner.saveParts) {
      const saveParts = inner.saveParts.bind(inner);
      (this as { saveParts?: Backend['saveParts'] }).saveParts = (type, name, parts, options) =>
        this.logged(
          'save',
          type,
          name,
          () => parts.reduce((n, p) => n + p.length, 0),
          () => saveParts(type, name, parts, options),
        );
    }
    if (inner.openWriter) {
      const open = inner.openWriter.bind(inner);
      (this as { openWriter?: Backend['openWriter'] }).openWriter = (type, options) =>
        this.loggedWriter(type, open(type, options));
    }
  }

  private loggedWriter(type: ObjectType, inner: ObjectWriter): ObjectWriter {
    const at = this.now();
    let ended = false;
    const end = (name: string | undefined, err?: unknown) => {
      if (ended) return;
      ended = true;
      const ms = this.now() - at;
      if (err === undefined) this.record({ op: 'save', type, name, bytes: inner.size, at, ms, ok: true });
      else this.record({ op: 'save', type, name, bytes: 0, at, ms, ok: false, error: errorToWire(err) });
    };
    const failed = <T>(p: Promise<T>, name?: string): Promise<T> =>
      p.catch((err: unknown) => {
        end(name, err);
        throw err;
      });
    return forwardingWriter(inner, {
      write: (data) => {
        const r = inner.write(data);
        return r && failed(r);
      },
      flush: () => failed(inner.flush()),
      commit: (name) => failed(inner.commit(name), name).then(() => end(name)),
    });
  }

  private record(r: RequestRecord): void {
    this.totals.requests++;
    this.totals.byOp[r.op]++;
    if (!r.ok) this.totals.failed++;
    else if (r.op === 'save') this.totals.bytesUp += r.bytes;
    else if (r.op === 'load') this.totals.bytesDown += r.bytes;
    try {
      this.sink(r);
    } catch {
      // The log must never break a backup.
    }
  }

  private async logged<T>(
    op: LoggedOperation,
    type: ObjectType | undefined,
    name: string | undefined,
    bytes: (v: T) => number,
    fn: () => Promise<T>,
  ): Promise<T> {
    const at = this.now();
    try {
      const v = await fn();
      this.record({ op, type, name, bytes: bytes(v), at, ms: this.now() - at, ok: true });
      return v;
    } catch (err) {
      this.record({ op, type, name, bytes: 0, at, ms: this.now() - at, ok: false, error: errorToWire(err) });
      throw err;
    }
  }

  override save(type: ObjectType, name: string, data: Uint8Array, options?: SaveOptions): Promise<void> {
    return this.logged(
      'save',
      type,
      name,
      () => data.length,
      () => this.inner.save(type, name, data, options),
    );
  }
  override load(type: ObjectType, name: string, offset?: number, length?: number): Promise<Buffer> {
    return this.logged(
      'load',
      type,
      name,
      (b) => b.length,
      () => this.inner.load(type, name, offset, length),
    );
  }
  override stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    return this.logged(
      'stat',
      type,
      name,
      () => 0,
      () => this.inner.stat(type, name),
    );
  }
  override remove(type: ObjectType, name: string): Promise<void> {
    return this.logged(
      'remove',
      type,
      name,
      () => 0,
      () => this.inner.remove(type, name),
    );
  }
  override async *list(type: ObjectType): AsyncIterable<ObjectInfo> {
    const at = this.now();
    let count = 0;
    try {
      for await (const o of this.inner.list(type)) {
        count++;
        yield o;
      }
      this.record({ op: 'list', type, bytes: count, at, ms: this.now() - at, ok: true });
    } catch (err) {
      this.record({
        op: 'list',
        type,
        bytes: count,
        at,
        ms: this.now() - at,
        ok: false,
        error: errorToWire(err),
      });
      throw err;
    }
  }
  override exists(): Promise<boolean> {
    return this.logged(
      'exists',
      undefined,
      undefined,
      () => 0,
      () => this.inner.exists(),
    );
  }
  override init(): Promise<void> {
    return this.logged(
      'init',
      undefined,
      undefined,
      () => 0,
      () => this.inner.init(),
    );
  }
}

/** A failed request as the run history keeps it; `retried` when a later attempt of the same request followed. */
export interface FailedRequest extends RequestRecord {
  retried?: boolean;
}

/** What a run's history keeps of its requests: totals in full, records capped so a run row stays small. */
export interface RequestLogSummary {
  requests: number;
  failed: number;
  /** Failed attempts that were tried again (by the retry wrapper). */
  retried: number;
  bytesUp: number;
  bytesDown: number;
  byOp: Record<LoggedOperation, number>;
  /** Total time spent in requests (ms; overlapping requests add up). */
  totalMs: number;
  /** The slowest requests (at most `slowestCap`), slowest first. */
  slowest: RequestRecord[];
  /** Failed requests in order (at most `failureCap`; the first ones are kept). */
  failures: FailedRequest[];
  /** Failures beyond the cap (counted, not kept). */
  failuresDropped: number;
  /** The last requests (at most `recentCap`), oldest first. */
  recent: RequestRecord[];
}

/**
 * Collects one run's request records into a RequestLogSummary: hand `record` to openBackend's
 * `requestLog` option (or a RequestLogBackend) and call `summary()` at the end of the run.
 */
export class RequestLogCollector {
  private readonly totals: Omit<RequestLogSummary, 'slowest' | 'failures' | 'recent' | 'failuresDropped'> = {
    requests: 0,
    failed: 0,
    retried: 0,
    bytesUp: 0,
    bytesDown: 0,
    byOp: { save: 0, load: 0, stat: 0, remove: 0, list: 0, exists: 0, init: 0 },
    totalMs: 0,
  };
  private readonly failures: FailedRequest[] = [];
  private failuresDropped = 0;
  private slowest: RequestRecord[] = [];
  private readonly recent: RequestRecord[] = [];
  /** The latest failure per request (op + object), to mark it retried when it is attempted again. */
  private readonly lastFailure = new Map<string, FailedRequest | true>();

  constructor(private readonly caps: { failureCap?: number; recentCap?: number; slowestCap?: number } = {}) {}

  readonly record = (r: RequestRecord): void => {
    const t = this.totals;
    t.requests++;
    t.byOp[r.op]++;
    t.totalMs += r.ms;
    if (!r.ok) t.failed++;
    else if (r.op === 'save') t.bytesUp += r.bytes;
    else if (r.op === 'load') t.bytesDown += r.bytes;
    const key = `${r.op} ${r.type ?? ''}/${r.name ?? ''}`;
    const prev = this.lastFailure.get(key);
    if (prev !== undefined) {
      t.retried++;
      if (prev !== true) prev.retried = true;
      this.lastFailure.delete(key);
    }
    if (!r.ok) {
      if (this.failures.length < (this.caps.failureCap ?? 200)) {
        const f: FailedRequest = { ...r };
        this.failures.push(f);
        this.lastFailure.set(key, f);
      } else {
        this.failuresDropped++;
        this.lastFailure.set(key, true);
      }
    }
    this.recent.push(r);
    if (this.recent.length > (this.caps.recentCap ?? 200)) this.recent.shift();
    const slowCap = this.caps.slowestCap ?? 5;
    if (this.slowest.length < slowCap || r.ms > this.slowest[this.slowest.length - 1].ms) {
      this.slowest.push(r);
      this.slowest.sort((a, b) => b.ms - a.ms);
      if (this.slowest.length > slowCap) this.slowest.length = slowCap;
    }
  };

  summary(): RequestLogSummary {
    return {
      ...this.totals,
      byOp: { ...this.totals.byOp },
      slowest: [...this.slowest],
      failures: this.failures.map((f) => ({ ...f })),
      failuresDropped: this.failuresDropped,
      recent: [...this.recent],
    };
  }
}

/** "412 requests (3 failed, 3 retried), 1.2 MiB up, 40.0 KiB down" for logs and the CLI. */
export function describeRequests(
  s: Pick<RequestLogSummary, 'requests' | 'failed' | 'retried' | 'bytesUp' | 'bytesDown'>,
): string {
  const mib = (n: number) =>
    n >= 1 << 30
      ? `${(n / (1 << 30)).toFixed(1)} GiB`
      : n >= 1 << 20
        ? `${(n / (1 << 20)).toFixed(1)} MiB`
        : n >= 1024
          ? `${(n / 1024).toFixed(1)} KiB`
          : `${n} B`;
  return `${s.requests} requests (${s.failed} failed, ${s.retried} retried), ${mib(s.bytesUp)} up, ${mib(s.bytesDown)} down`;
}
