/**
 * Retry wrapper around any backend (kopia-style storage wrapper).
 *
 * Repeats an operation that failed for a passing reason — throttling (503 SlowDown, 429), a 5xx, a
 * dropped or timed-out connection, a short read — with exponential backoff and full jitter, so many
 * clients hitting one store spread out instead of retrying in lockstep.
 *
 * What it guarantees:
 * - Never retries an answer: NotFoundError, ObjectExistsError, wrong keys, access denied, a full or
 *   read-only destination and unknown errors go straight to the caller (retrying would hide bugs or
 *   lock accounts).
 * - A ranged load that comes back short is checked against the object's size; unless the range simply
 *   ran past the end, it counts as a truncated read and is tried again. Whole-object loads are checked
 *   the same way when `verifyWholeLoads` is on (one extra stat per load).
 * - A conditional save whose earlier attempt may have landed (the connection dropped after the store
 *   wrote it) is not reported as "already exists" when the stored bytes are exactly ours.
 * - A listing that fails half way is restarted, and names already handed out are not repeated.
 * - `attemptTimeoutMs` abandons an attempt that hangs and starts another.
 *
 * What it does not do: change what a backend returns, or retry forever (`maxAttempts`, default 8).
 */
import type { Backend, ObjectInfo, ObjectType, SaveOptions } from '../types.js';
import { ForwardingBackend } from '../forwarding.js';
import { AbortedError, ObjectExistsError, TidemarkError } from '../../errors.js';
import { TransientStoreError, TruncatedReadError } from '../s3/errors.js';

export type RetriedOperation = 'save' | 'load' | 'stat' | 'remove' | 'list' | 'exists' | 'init';

export interface RetryEvent {
  op: RetriedOperation;
  type?: ObjectType;
  name?: string;
  /** The attempt that failed (1-based). */
  attempt: number;
  delayMs: number;
  error: unknown;
}

export interface RetryOptions {
  /** Attempts per operation, including the first (default 8). */
  maxAttempts?: number;
  /** First backoff ceiling in ms (default 200); doubles per attempt up to `maxDelayMs` (default 20 s). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Give up on an attempt that has not finished after this long and try again (default: no limit). */
  attemptTimeoutMs?: number;
  /** Stat after every whole-object load to prove its length (default false; ranged loads are always checked). */
  verifyWholeLoads?: boolean;
  /** Told about every retry (for the run log). */
  onRetry?: (event: RetryEvent) => void;
  signal?: AbortSignal;
  /** Injectable for tests. */
  random?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'ERR_STREAM_PREMATURE_CLOSE',
]);

/** Whether an error is worth another try. Backends mark such errors with `transient: true`. */
export function isTransientError(err: unknown): boolean {
  if (!err || typeof err !== 'object') return false;
  const e = err as {
    transient?: unknown;
    code?: unknown;
    name?: unknown;
    $metadata?: { httpStatusCode?: number };
  };
  if (e.transient === true) return true;
  if (err instanceof TidemarkError) return false;
  if (typeof e.code === 'string' && NETWORK_CODES.has(e.code)) return true;
  if (e.name === 'TimeoutError' || e.name === 'SlowDown') return true;
  const status = e.$metadata?.httpStatusCode;
  return status !== undefined && (status >= 500 || status === 429);
}

class AttemptTimeoutError extends TransientStoreError {
  constructor(what: string, ms: number) {
    super(`${what}: no answer within ${ms} ms`, { code: 'ATTEMPT_TIMEOUT' });
  }
}

function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new AbortedError());
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(new AbortedError());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Its saves and loads are retried, so neither `saveParts` nor `localFile` is offered. */
export class RetryBackend extends ForwardingBackend {
  private readonly maxAttempts: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly random: () => number;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Retries done so far, for the run summary. */
  retries = 0;

  constructor(
    inner: Backend,
    private readonly opts: RetryOptions = {},
  ) {
    super(inner);
    this.maxAttempts = Math.max(1, opts.maxAttempts ?? 8);
    this.baseDelayMs = opts.baseDelayMs ?? 200;
    this.maxDelayMs = opts.maxDelayMs ?? 20_000;
    this.random = opts.random ?? Math.random;
    this.sleep = opts.sleep ?? defaultSleep;
  }

  /** Backoff before attempt n+1: a random delay up to base·2^(n−1), capped ("full jitter"). */
  delayFor(attempt: number): number {
    const ceiling = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (attempt - 1));
    return Math.round(this.random() * ceiling);
  }

  private withTimeout<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const ms = this.opts.attemptTimeoutMs;
    if (!ms) return fn();
    return new Promise<T>((resolve, reject) => {
      const t = setTimeout(() => reject(new AttemptTimeoutError(what, ms)), ms);
      fn().then(
        (v) => {
          clearTimeout(t);
          resolve(v);
        },
        (e) => {
          clearTimeout(t);
          reject(e);
        },
      );
    });
  }

  private async attempt<T>(
    op: RetriedOperation,
    type: ObjectType | undefined,
    name: string | undefined,
    fn: (attempt: number) => Promise<T>,
  ): Promise<T> {
    const what = type ? `${op} ${type}/${name ?? ''}` : op;
    for (let attempt = 1; ; attempt++) {
      if (this.opts.signal?.aborted) throw new AbortedError();
      try {
        return await this.withTimeout(what, () => fn(attempt));
      } catch (err) {
        if (attempt >= this.maxAttempts || !isTransientError(err)) {
          if (attempt > 1 && err instanceof Error && isTransientError(err))
            err.message = `${err.message} (gave up after ${attempt} attempts)`;
          throw err;
        }
        const delayMs = this.delayFor(attempt);
        this.retries++;
        this.opts.onRetry?.({ op, type, name, attempt, delayMs, error: err });
        await this.sleep(delayMs, this.opts.signal);
      }
    }
  }

  override async save(
    type: ObjectType,
    name: string,
    data: Uint8Array,
    options?: SaveOptions,
  ): Promise<void> {
    await this.attempt('save', type, name, async (attempt) => {
      try {
        await this.inner.save(type, name, data, options);
      } catch (err) {
        // attempt > 1 means an earlier attempt failed for a passing reason and may have been stored.
        if (err instanceof ObjectExistsError && options?.ifNotExists && attempt > 1) {
          // Our previous attempt may have been written before the connection broke: if the stored
          // object is byte for byte ours, the save succeeded.
          // (The check itself is a retried load: the store that just dropped a connection may do it again.)
          const stored = await this.load(type, name).catch(() => undefined);
          if (
            stored &&
            Buffer.compare(stored, Buffer.from(data.buffer, data.byteOffset, data.byteLength)) === 0
          )
            return;
        }
        throw err;
      }
    });
  }

  override async load(type: ObjectType, name: string, offset = 0, length?: number): Promise<Buffer> {
    return this.attempt('load', type, name, async () => {
      if (length === undefined && this.opts.verifyWholeLoads) {
        const { size } = await this.inner.stat(type, name);
        const buf = await this.inner.load(type, name, offset);
        const expected = Math.max(0, size - offset);
        if (buf.length !== expected)
          throw new TruncatedReadError(`loading ${type}/${name}`, buf.length, expected);
        return buf;
      }
      const buf = await this.inner.load(type, name, offset, length);
      if (length !== undefined && buf.length !== length) {
        if (buf.length > length)
          throw new TruncatedReadError(`loading ${type}/${name} (too long)`, buf.length, length);
        // Short: fine only when the range ran past the end of the object.
        const { size } = await this.inner.stat(type, name);
        const expected = Math.max(0, Math.min(length, size - offset));
        if (buf.length !== expected)
          throw new TruncatedReadError(`loading ${type}/${name}`, buf.length, expected);
      }
      return buf;
    });
  }

  override stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    return this.attempt('stat', type, name, () => this.inner.stat(type, name));
  }

  override remove(type: ObjectType, name: string): Promise<void> {
    return this.attempt('remove', type, name, () => this.inner.remove(type, name));
  }

  override async *list(type: ObjectType): AsyncIterable<ObjectInfo> {
    const seen = new Set<string>();
    for (let attempt = 1; ; attempt++) {
      try {
        for await (const o of this.inner.list(type)) {
          if (seen.has(o.name)) continue;
          seen.add(o.name);
          yield o;
        }
        return;
      } catch (err) {
        if (attempt >= this.maxAttempts || !isTransientError(err)) throw err;
        const delayMs = this.delayFor(attempt);
        this.retries++;
        this.opts.onRetry?.({ op: 'list', type, attempt, delayMs, error: err });
        await this.sleep(delayMs, this.opts.signal);
      }
    }
  }

  override exists(): Promise<boolean> {
    return this.attempt('exists', undefined, undefined, () => this.inner.exists());
  }

  override init(): Promise<void> {
    return this.attempt('init', undefined, undefined, () => this.inner.init());
  }
}
