import { describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import { RetryBackend, isTransientError, type RetryEvent } from './index.js';
import { MemoryBackend } from '../memory/index.js';
import { FaultyBackend } from '../faulty/index.js';
import { backendConformance } from '../conformance.js';
import type { Backend, ObjectInfo, ObjectType } from '../types.js';
import { NotFoundError, ObjectExistsError } from '../../errors.js';
import { S3AccessDeniedError, S3WrongKeysError, TransientStoreError } from '../s3/errors.js';

const reset = () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
const slowDown = () => new TransientStoreError('SlowDown (HTTP 503): please reduce your request rate');
const sdk503 = () =>
  Object.assign(new Error('Service Unavailable'), {
    name: 'ServiceUnavailable',
    $metadata: { httpStatusCode: 503 },
  });

function setup(
  rules: ConstructorParameters<typeof FaultyBackend>[1] = [],
  extra: ConstructorParameters<typeof RetryBackend>[1] = {},
) {
  const mem = new MemoryBackend();
  const faulty = new FaultyBackend(mem, rules);
  const sleeps: number[] = [];
  const events: RetryEvent[] = [];
  const retry = new RetryBackend(faulty, {
    random: () => 1,
    sleep: async (ms) => void sleeps.push(ms),
    onRetry: (e) => events.push(e),
    ...extra,
  });
  return { mem, faulty, retry, sleeps, events };
}

describe('retry wrapper', () => {
  it('classifies errors: passing failures are transient, answers are not', () => {
    expect(isTransientError(reset())).toBe(true);
    expect(isTransientError(slowDown())).toBe(true);
    expect(isTransientError(sdk503())).toBe(true);
    expect(isTransientError(new NotFoundError('x'))).toBe(false);
    expect(isTransientError(new ObjectExistsError('x'))).toBe(false);
    expect(isTransientError(new S3AccessDeniedError('no'))).toBe(false);
    expect(isTransientError(new S3WrongKeysError('no'))).toBe(false);
    expect(isTransientError(new Error('a bug'))).toBe(false);
  });

  it('retries throttling and dropped connections with exponential backoff, then succeeds', async () => {
    const { mem, faulty, retry, sleeps, events } = setup([
      { op: 'save', times: 1, effect: { throw: slowDown } },
      { op: 'save', times: 1, effect: { throw: reset } },
      { op: 'save', times: 1, effect: { throw: sdk503 } },
    ]);
    await retry.save('data', 'aa11', Buffer.from('hello'));
    expect(faulty.calls.save).toBe(4);
    expect(sleeps).toEqual([200, 400, 800]);
    expect(events.map((e) => e.attempt)).toEqual([1, 2, 3]);
    expect((await mem.load('data', 'aa11')).toString()).toBe('hello');
  });

  it('spreads retries with full jitter below a capped ceiling', () => {
    const r = new RetryBackend(new MemoryBackend(), {
      baseDelayMs: 100,
      maxDelayMs: 1000,
      random: () => 0.5,
    });
    expect([1, 2, 3, 4, 5, 6].map((a) => r.delayFor(a))).toEqual([50, 100, 200, 400, 500, 500]);
  });

  it.each([
    ['NotFoundError', () => new NotFoundError('data/x')],
    ['ObjectExistsError', () => new ObjectExistsError('data/x')],
    ['S3AccessDeniedError', () => new S3AccessDeniedError('access denied')],
    ['S3WrongKeysError', () => new S3WrongKeysError('wrong keys')],
    ['an unknown error', () => new Error('bug')],
  ])('never retries %s', async (_label, make) => {
    const { faulty, retry, sleeps } = setup([{ op: 'stat', effect: { throw: make } }]);
    await expect(retry.stat('data', 'x')).rejects.toThrow(make().message);
    expect(faulty.calls.stat).toBe(1);
    expect(sleeps).toEqual([]);
  });

  it('gives up after maxAttempts and says how often it tried', async () => {
    const { faulty, retry } = setup([{ op: 'load', effect: { throw: reset } }], { maxAttempts: 4 });
    await expect(retry.load('index', 'x')).rejects.toThrow(/gave up after 4 attempts/);
    expect(faulty.calls.load).toBe(4);
  });

  it('retries a truncated ranged read and returns exactly the requested bytes', async () => {
    const data = crypto.randomBytes(4096);
    const { mem, faulty, retry } = setup([{ op: 'load', times: 2, effect: { truncate: 7 } }]);
    await mem.save('data', 'aa', data);
    const got = await retry.load('data', 'aa', 100, 1000);
    expect(Buffer.compare(got, data.subarray(100, 1100))).toBe(0);
    expect(faulty.calls.load).toBe(3);
  });

  it('accepts a short ranged read that simply ran past the end of the object', async () => {
    const data = crypto.randomBytes(1000);
    const { mem, faulty, retry } = setup();
    await mem.save('data', 'aa', data);
    expect(Buffer.compare(await retry.load('data', 'aa', 900, 500), data.subarray(900))).toBe(0);
    expect(faulty.calls.load).toBe(1);
  });

  it('with verifyWholeLoads, catches and retries a truncated whole-object read', async () => {
    const data = crypto.randomBytes(3000);
    const { mem, retry } = setup([{ op: 'load', times: 1, effect: { truncate: 1 } }], {
      verifyWholeLoads: true,
    });
    await mem.save('index', 'ii', data);
    expect(Buffer.compare(await retry.load('index', 'ii'), data)).toBe(0);
  });

  it('treats a conditional save whose earlier attempt landed as a success, but not a different object', async () => {
    const { mem, faulty, retry } = setup([{ op: 'save', times: 1, effect: { dropAfterSave: true } }]);
    await retry.save('snapshots', 's1', Buffer.from('mine'), { ifNotExists: true });
    expect(faulty.calls.save).toBe(2);
    expect((await mem.load('snapshots', 's1')).toString()).toBe('mine');
    await expect(
      retry.save('snapshots', 's1', Buffer.from('theirs'), { ifNotExists: true }),
    ).rejects.toBeInstanceOf(ObjectExistsError);
    expect((await mem.load('snapshots', 's1')).toString()).toBe('mine');
  });

  it('restarts a listing that fails half way without repeating names', async () => {
    const mem = new MemoryBackend();
    for (let i = 0; i < 10; i++) await mem.save('index', `n${i}`, Buffer.from([i]));
    let failures = 1;
    const flaky: Backend = Object.assign(Object.create(mem) as Backend, {
      async *list(type: ObjectType): AsyncIterable<ObjectInfo> {
        let n = 0;
        for await (const o of mem.list(type)) {
          if (n++ === 5 && failures-- > 0) throw reset();
          yield o;
        }
      },
    });
    const retry = new RetryBackend(flaky, { sleep: async () => {} });
    const names: string[] = [];
    for await (const o of retry.list('index')) names.push(o.name);
    expect(names.sort()).toEqual(Array.from({ length: 10 }, (_, i) => `n${i}`).sort());
  });

  it('abandons an attempt that hangs and tries again', async () => {
    const { mem, retry } = setup([{ op: 'load', times: 1, effect: { delayMs: 3000 } }], {
      attemptTimeoutMs: 100,
    });
    await mem.save('keys', 'k', Buffer.from('key'));
    expect((await retry.load('keys', 'k')).toString()).toBe('key');
    expect(retry.retries).toBe(1);
  });
});

// The whole conformance suite through the retry wrapper over a backend that fails a third of all
// calls with dropped connections, 503s and truncated reads (and sometimes drops the answer after a
// save landed): every test must still see exactly the right bytes.
let seed = 1;
const chance = () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed / 2 ** 31;
};
backendConformance('retry over a flaky memory backend', async () => {
  const faulty = new FaultyBackend(new MemoryBackend(), [
    { op: ['save', 'stat', 'remove', 'list'], when: () => chance() < 0.2, effect: { throw: reset } },
    { op: 'load', when: () => chance() < 0.2, effect: { throw: sdk503 } },
    { op: 'load', when: () => chance() < 0.2, effect: { truncate: 1 } },
    { op: 'save', when: () => chance() < 0.1, effect: { dropAfterSave: true } },
  ]);
  return new RetryBackend(faulty, { maxAttempts: 30, sleep: async () => {}, verifyWholeLoads: true });
});
