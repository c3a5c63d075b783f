/**
 * Fault injection: retries never corrupt or lose data.
 *
 * 1. At the HTTP level: the real S3 backend talks to s3rver (and radosgw when present) through a
 *    proxy that answers 503 SlowDown, resets connections before and after the server acted, cuts
 *    response bodies short and leaves requests hanging. Under the retry wrapper, a workload of saves
 *    (single-part, multipart, conditional), whole and ranged loads, listings and removals must end
 *    with every object byte for byte right and every listing exact.
 * 2. At the backend level: the conformance suite through retry → FaultyBackend → S3 on s3rver.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import crypto from 'node:crypto';
import { S3Backend } from '../../src/main/engine/backend/s3/index.js';
import { RetryBackend } from '../../src/main/engine/backend/retry/index.js';
import { FaultyBackend } from '../../src/main/engine/backend/faulty/index.js';
import { backendConformance } from '../../src/main/engine/backend/conformance.js';
import type { ObjectType } from '../../src/main/engine/backend/types.js';
import { TransientStoreError } from '../../src/main/engine/backend/s3/errors.js';
import { emptyPrefix, randomPrefix, s3Backend, startS3rver, useRadosgw, type S3Server } from './servers.js';
import { startFaultProxy } from './faultproxy.js';

const sha = (b: Uint8Array) => crypto.createHash('sha256').update(b).digest('hex');

let s3rver: S3Server;
beforeAll(async () => {
  s3rver = await startS3rver();
});
afterAll(async () => {
  await s3rver?.close();
});

const rgw = await useRadosgw();

async function workloadThroughFaults(server: S3Server, seed: number) {
  // Create the bucket directly, then point the backend at the proxy.
  const setup = s3Backend(server, 'faults');
  await setup.init();
  await setup.close();
  const proxy = await startFaultProxy(server.endpoint, seed, 0.3);
  const prefix = randomPrefix('faults');
  const s3 = new S3Backend({
    endpoint: proxy.endpoint,
    accessKeyId: server.accessKeyId,
    secretAccessKey: server.secretAccessKey,
    region: server.region,
    bucket: 'faults',
    prefix,
    idleTimeoutMs: 1500,
    partSize: 5 * 1024 * 1024,
    multipartThreshold: 6 * 1024 * 1024,
    listPageSize: 5,
    listApi: server.name === 's3rver' ? 1 : 2,
    connections: 6,
  });
  const retries: string[] = [];
  const b = new RetryBackend(s3, {
    maxAttempts: 25,
    baseDelayMs: 5,
    maxDelayMs: 100,
    onRetry: (e) => retries.push(`${e.op}: ${String(e.error)}`),
  });
  try {
    const objects: { type: ObjectType; name: string; data: Buffer; conditional: boolean }[] = [];
    const types: ObjectType[] = ['data', 'index', 'snapshots', 'locks', 'keys'];
    for (let i = 0; i < 25; i++) {
      const type = types[i % types.length];
      const size = i === 0 ? 0 : Math.floor(((i * 7919) % 97) * 3000);
      objects.push({
        type,
        name: crypto.randomBytes(32).toString('hex'),
        data: crypto.randomBytes(size),
        conditional: type === 'snapshots' || type === 'locks',
      });
    }
    objects.push({
      type: 'data',
      name: crypto.randomBytes(32).toString('hex'),
      data: crypto.randomBytes(8 * 1024 * 1024 + 3),
      conditional: false,
    });

    await Promise.all(objects.map((o) => b.save(o.type, o.name, o.data, { ifNotExists: o.conditional })));

    // Whole and ranged reads all come back exact.
    for (const o of objects) {
      expect(sha(await b.load(o.type, o.name)), `${o.type}/${o.name}`).toBe(sha(o.data));
      if (o.data.length > 10) {
        const off = Math.floor(o.data.length / 3);
        const len = Math.min(5000, o.data.length - off);
        expect(Buffer.compare(await b.load(o.type, o.name, off, len), o.data.subarray(off, off + len))).toBe(
          0,
        );
      }
    }
    // Listings are exact (no duplicates, nothing missing) despite failed pages.
    const listAll = async (type: ObjectType) => {
      const out: string[] = [];
      for await (const x of b.list(type)) out.push(`${x.name}:${x.size}`);
      return out.sort();
    };
    for (const type of types) {
      const want = objects.filter((o) => o.type === type).map((o) => `${o.name}:${o.data.length}`);
      expect(await listAll(type)).toEqual(want.sort());
    }
    // A conditional write over an existing object is still refused, not "retried into success".
    const snap = objects.find((o) => o.type === 'snapshots')!;
    await expect(
      b.save('snapshots', snap.name, Buffer.from('other'), { ifNotExists: true }),
    ).rejects.toMatchObject({ code: 'OBJECT_EXISTS' });
    // Removals go through; the rest is untouched.
    const gone = objects.filter((_, i) => i % 2 === 0);
    await Promise.all(gone.map((o) => b.remove(o.type, o.name)));
    for (const o of objects) {
      if (gone.includes(o)) await expect(b.stat(o.type, o.name)).rejects.toMatchObject({ code: 'NOT_FOUND' });
      else expect((await b.stat(o.type, o.name)).size).toBe(o.data.length);
    }
    for (const o of objects.filter((x) => !gone.includes(x)))
      expect(sha(await b.load(o.type, o.name))).toBe(sha(o.data));
    return { proxy, retries };
  } finally {
    proxy.rate = 0;
    await b.close();
    await proxy.close();
    await emptyPrefix(server, s3Backend(server, 'faults', { prefix }));
  }
}

describe('retries under network faults never corrupt or lose data', () => {
  it('s3rver behind a fault proxy (503s, resets, truncated bodies, hangs)', async () => {
    const { proxy, retries } = await workloadThroughFaults(s3rver, 7);
    // The faults really happened, every kind of them, and were survived.
    for (const [kind, n] of Object.entries(proxy.injected)) expect(n, kind).toBeGreaterThan(0);
    expect(retries.length).toBeGreaterThanOrEqual(
      Object.values(proxy.injected).reduce((a, n) => a + n, 0) / 2,
    );
    expect(
      retries.some((r) => /TRUNCATED|read \d+ of \d+|aborted|premature|ECONNRESET|hang up/i.test(r)),
    ).toBe(true);
  }, 180_000);

  it.skipIf(typeof rgw === 'string')(
    `radosgw behind a fault proxy${typeof rgw === 'string' ? ` (skipped: ${rgw})` : ''}`,
    async () => {
      const { proxy } = await workloadThroughFaults(rgw as S3Server, 11);
      expect(Object.values(proxy.injected).every((n) => n > 0)).toBe(true);
    },
    180_000,
  );

  it('the S3 backend reports a body cut short and a 503 as transient errors', async () => {
    const setup = s3Backend(s3rver, 'faults');
    await setup.init();
    await setup.save('index', 'ab12', crypto.randomBytes(50_000));
    const proxy = await startFaultProxy(s3rver.endpoint, 1, 0);
    const direct = new S3Backend({
      endpoint: proxy.endpoint,
      accessKeyId: 'S3RVER',
      secretAccessKey: 'S3RVER',
      bucket: 'faults',
      prefix: setup.prefix,
    });
    try {
      proxy.force = 'truncate';
      const err = await direct.load('index', 'ab12').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(TransientStoreError);
      expect((err as Error).message).toMatch(/index\/ab12/);
      proxy.force = 'slowdown';
      await expect(direct.stat('index', 'ab12')).rejects.toMatchObject({
        transient: true,
        code: 'STORE_TRANSIENT',
      });
      proxy.force = undefined;
      expect((await direct.load('index', 'ab12')).length).toBe(50_000);
    } finally {
      proxy.force = undefined;
      await direct.close();
      await proxy.close();
      await emptyPrefix(s3rver, setup);
      await setup.close();
    }
  });
});

// The conformance suite through retry → FaultyBackend (throws, 503s, truncated reads, lost answers
// after a save landed) → S3 on s3rver.
let n = 0;
const every = (k: number) => () => ++n % k === 0;
backendConformance(
  'retry over a faulty S3 backend on s3rver',
  async () => {
    const s3 = s3Backend(s3rver, 'faulty-conformance', { listApi: 1 });
    const faulty = new FaultyBackend(s3, [
      {
        op: ['save', 'stat', 'list'],
        when: every(5),
        effect: { throw: () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }) },
      },
      { op: 'load', when: every(4), effect: { throw: () => new TransientStoreError('SlowDown (HTTP 503)') } },
      { op: 'load', when: every(3), effect: { truncate: 3 } },
      { op: 'save', when: every(7), effect: { dropAfterSave: true } },
    ]);
    return Object.assign(
      new RetryBackend(faulty, { maxAttempts: 20, baseDelayMs: 1, maxDelayMs: 5, verifyWholeLoads: true }),
      { s3 },
    );
  },
  (b) => emptyPrefix(s3rver, (b as unknown as { s3: S3Backend }).s3),
);
