/**
 * Bandwidth limit around any backend: token buckets for upload and download bytes per second (and
 * optionally requests per second), so a backup over a home uplink leaves room for everyone else.
 *
 * A transfer larger than the bucket simply waits until its bytes are paid for, so the long-run rate
 * is exact whatever the object sizes; waiters are served in arrival order. Limits can be changed while
 * a run is going (`setLimits`), e.g. from the app's settings page. 0 or undefined means unlimited.
 * It does not split or reorder transfers, and does not limit how many run at once (the backend does).
 */
import type { Backend, ObjectInfo, ObjectType, SaveOptions } from '../types.js';
import { ForwardingBackend } from '../forwarding.js';

export interface ThrottleLimits {
  uploadBytesPerSec?: number;
  downloadBytesPerSec?: number;
  requestsPerSec?: number;
}

export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

const realClock: Clock = {
  now: () => performance.now(),
  sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
};

/** A token bucket that may go into debt: take(n) returns once n tokens have been paid for. */
export class TokenBucket {
  private tokens: number;
  private last: number;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private rate: number,
    private readonly burstSeconds = 0.5,
    private readonly clock: Clock = realClock,
  ) {
    this.tokens = this.capacity;
    this.last = clock.now();
  }

  private get capacity(): number {
    return this.rate * this.burstSeconds;
  }

  get limited(): boolean {
    return this.rate > 0 && Number.isFinite(this.rate);
  }

  setRate(rate: number): void {
    this.refill();
    this.rate = rate;
    this.tokens = Math.min(this.tokens, this.capacity);
  }

  private refill(): void {
    const now = this.clock.now();
    if (this.limited)
      this.tokens = Math.min(this.capacity, this.tokens + ((now - this.last) / 1000) * this.rate);
    this.last = now;
  }

  take(n: number): Promise<void> {
    if (!this.limited || n <= 0) return Promise.resolve();
    const turn = this.queue.then(async () => {
      this.refill();
      this.tokens -= n;
      if (this.tokens < 0 && this.limited) {
        await this.clock.sleep((-this.tokens / this.rate) * 1000);
        this.refill();
      }
    });
    this.queue = turn.catch(() => {});
    return turn;
  }
}

/** Its saves and loads are paid for, so neither `saveParts` nor `localFile` is offered. */
export class ThrottleBackend extends ForwardingBackend {
  private readonly up: TokenBucket;
  private readonly down: TokenBucket;
  private readonly ops: TokenBucket;

  constructor(inner: Backend, limits: ThrottleLimits = {}, clock: Clock = realClock) {
    super(inner);
    this.up = new TokenBucket(limits.uploadBytesPerSec ?? 0, 0.5, clock);
    this.down = new TokenBucket(limits.downloadBytesPerSec ?? 0, 0.5, clock);
    this.ops = new TokenBucket(limits.requestsPerSec ?? 0, 1, clock);
  }

  setLimits(limits: ThrottleLimits): void {
    this.up.setRate(limits.uploadBytesPerSec ?? 0);
    this.down.setRate(limits.downloadBytesPerSec ?? 0);
    this.ops.setRate(limits.requestsPerSec ?? 0);
  }

  override async save(
    type: ObjectType,
    name: string,
    data: Uint8Array,
    options?: SaveOptions,
  ): Promise<void> {
    await this.ops.take(1);
    await this.up.take(data.length);
    return this.inner.save(type, name, data, options);
  }

  override async load(type: ObjectType, name: string, offset?: number, length?: number): Promise<Buffer> {
    await this.ops.take(1);
    // Pay up front when the size is known, so concurrent loads queue instead of all starting at once.
    if (length !== undefined) await this.down.take(length);
    const buf = await this.inner.load(type, name, offset, length);
    if (length === undefined) await this.down.take(buf.length);
    return buf;
  }

  override async stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    await this.ops.take(1);
    return this.inner.stat(type, name);
  }

  override async remove(type: ObjectType, name: string): Promise<void> {
    await this.ops.take(1);
    return this.inner.remove(type, name);
  }

  override async *list(type: ObjectType): AsyncIterable<ObjectInfo> {
    await this.ops.take(1);
    yield* this.inner.list(type);
  }
}
