/**
 * The connection test and error naming, against s3rver (keys, bucket, clock, TLS policy) and radosgw
 * (real permissions through a bucket policy that grants a second user everything but delete).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testConnection } from '../../src/main/engine/backend/s3/connection.js';
import {
  S3Backend,
  S3AccessDeniedError,
  S3BucketNotFoundError,
  S3ClockSkewError,
  S3InsecureEndpointError,
  S3WrongKeysError,
} from '../../src/main/engine/backend/s3/index.js';
import { innermostBackend, openBackend } from '../../src/main/engine/backend/open.js';
import {
  bucketWithoutDelete,
  randomPrefix,
  s3Backend,
  startS3rver,
  useRadosgw,
  type S3Server,
} from './servers.js';

let server: S3Server;
beforeAll(async () => {
  server = await startS3rver();
});
afterAll(async () => {
  await server?.close();
});

const opts = (extra: Record<string, unknown> = {}) => ({
  endpoint: server.endpoint,
  accessKeyId: server.accessKeyId,
  secretAccessKey: server.secretAccessKey,
  bucket: 'conn',
  prefix: randomPrefix(),
  ...extra,
});

describe('S3 connection test and named errors (s3rver)', () => {
  it('passes every check on a good destination and leaves nothing behind', async () => {
    const b = new S3Backend({ ...opts(), createBucket: true });
    await b.init();
    const report = await testConnection(b);
    expect(report.ok).toBe(true);
    expect(
      report.checks.filter((c) => ['list', 'write', 'read', 'delete'].includes(c.name)).every((c) => c.ok),
    ).toBe(true);
    expect(report.conditionalWrites).toBe(false); // s3rver ignores If-None-Match on PUT
    expect(report.summary).toMatch(/listing, writing, reading and deleting all work/);
    expect(Math.abs(report.clockOffsetMs ?? 1e9)).toBeLessThan(60_000);
    const { ListObjectsV2Command } = await import('@aws-sdk/client-s3');
    const left = await b.sdk.send(new ListObjectsV2Command({ Bucket: b.bucket, Prefix: `${b.prefix}/` }));
    expect(left.Contents ?? []).toEqual([]);
    await b.close();
  });

  it("reports the store's clock offset (HTTP Date has one-second resolution)", async () => {
    const b = new S3Backend(opts());
    expect(Math.abs(await b.serverClockOffsetMs())).toBeLessThan(5_000);
    await b.close();
  });

  it('names a missing bucket', async () => {
    const report = await testConnection(opts({ bucket: 'no-such-bucket-here' }));
    expect(report.ok).toBe(false);
    expect(report.checks[0]).toMatchObject({ name: 'list', ok: false, error: { code: 'S3_NO_SUCH_BUCKET' } });
    expect(report.summary).toMatch(/bucket "no-such-bucket-here" does not exist/);
    const b = new S3Backend(opts({ bucket: 'no-such-bucket-here', createBucket: false }));
    await expect(b.init()).rejects.toBeInstanceOf(S3BucketNotFoundError);
    await b.close();
    // Creating a new repository creates its bucket (as restic does); the connection test never does.
    const fresh = new S3Backend(opts({ bucket: 'made-by-init' }));
    await fresh.init();
    expect((await testConnection(opts({ bucket: 'made-by-init' }))).ok).toBe(true);
    await fresh.close();
  });

  it('names an unknown access key, also behind a bodiless HEAD refusal', async () => {
    const wrongId = await testConnection(opts({ accessKeyId: 'NOBODY' }));
    expect(wrongId.checks[0].error?.code).toBe('S3_WRONG_KEYS');
    expect(wrongId.summary).toMatch(/access key ID is not known/);
    const b = new S3Backend(opts({ accessKeyId: 'NOBODY' }));
    await expect(b.stat('data', 'aa')).rejects.toBeInstanceOf(S3WrongKeysError);
    await b.close();
  });

  it('recognises clock skew and says by how much', async () => {
    const report = await testConnection(opts({ systemClockOffsetMs: 60 * 60_000 }));
    expect(report.ok).toBe(false);
    expect(report.checks[0].error?.code).toBe('S3_CLOCK_SKEW');
    expect(report.summary).toMatch(/clock differs .* by about 60 minutes \(this computer is ahead\)/);
    const b = new S3Backend(opts({ systemClockOffsetMs: -30 * 60_000 }));
    const err = await b.stat('data', 'aa').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(S3ClockSkewError);
    expect((err as Error).message).toMatch(/about 30 minutes \(this computer is behind\)/);
    // The SDK learned the server's time from the refusal: the next request is signed correctly,
    // which is why the retry wrapper treats clock skew as worth one more try.
    await expect(b.stat('data', 'aa')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await b.close();
  });

  it('refuses plain http to a remote host unless explicitly allowed, but not to loopback', async () => {
    expect(() => new S3Backend(opts({ endpoint: 'http://s3.example.com' }))).toThrow(S3InsecureEndpointError);
    const report = await testConnection(opts({ endpoint: 'http://s3.example.com' }));
    expect(report.checks[0]).toMatchObject({
      name: 'connect',
      ok: false,
      error: { code: 'S3_INSECURE_ENDPOINT' },
    });
    expect(
      () => new S3Backend(opts({ endpoint: 'http://s3.example.com', allowInsecureHttp: true })),
    ).not.toThrow();
    expect(() => new S3Backend(opts({ endpoint: 'http://localhost:9000' }))).not.toThrow();
    expect(() => new S3Backend(opts({ endpoint: 'https://s3.example.com' }))).not.toThrow();
  });

  it('opens S3 locations through openBackend, with retries stacked on top', async () => {
    const b = await openBackend(`s3:${server.endpoint}/conn/${randomPrefix()}`, {
      accessKeyId: server.accessKeyId,
      secretAccessKey: server.secretAccessKey,
    });
    expect(b.location).toMatch(/^s3:http:\/\/127\.0\.0\.1:\d+\/conn\/t-/);
    await b.init();
    await b.save('keys', 'k1', Buffer.from('key'));
    expect((await b.load('keys', 'k1')).toString()).toBe('key');
    expect(b.constructor.name).toBe('RetryBackend');
    expect(innermostBackend(b)).toBeInstanceOf(S3Backend);
    await b.close();
    await expect(openBackend(`s3:${server.endpoint}/conn`, { env: {} })).rejects.toThrow(/no S3 access keys/);
    const fromEnv = await openBackend(`s3:${server.endpoint}/conn/x`, {
      env: { AWS_ACCESS_KEY_ID: server.accessKeyId, AWS_SECRET_ACCESS_KEY: server.secretAccessKey },
      readOnly: true,
    });
    await expect(fromEnv.save('keys', 'k', Buffer.from('x'))).rejects.toMatchObject({ code: 'READ_ONLY' });
    await fromEnv.close();
  });
});

const rgw = await useRadosgw();
describe.skipIf(typeof rgw === 'string')(
  `S3 permissions on radosgw${typeof rgw === 'string' ? ` (skipped: ${rgw})` : ''}`,
  () => {
    it('reports conditional-write support and a clean bill of health for the owner', async () => {
      const s = rgw as S3Server;
      const setup = s3Backend(s, 'conn');
      await setup.init(); // the connection test itself never creates a bucket
      await setup.close();
      const report = await testConnection({
        endpoint: s.endpoint,
        accessKeyId: s.accessKeyId,
        secretAccessKey: s.secretAccessKey,
        bucket: 'conn',
        prefix: randomPrefix(),
      });
      expect(report.ok).toBe(true);
      expect(report.conditionalWrites).toBe(true);
    });

    it('tells a wrong secret key from a wrong access key ID (s3rver does not check v4 signatures)', async () => {
      const s = rgw as S3Server;
      const o = {
        endpoint: s.endpoint,
        accessKeyId: s.accessKeyId,
        secretAccessKey: 'not-the-secret',
        bucket: 'conn',
        prefix: randomPrefix(),
      };
      const report = await testConnection(o);
      expect(report.checks[0].error?.code).toBe('S3_WRONG_KEYS');
      expect(report.summary).toMatch(/secret access key does not match/);
      const b = new S3Backend(o);
      await expect(b.stat('data', 'aa')).rejects.toBeInstanceOf(S3WrongKeysError);
      await b.close();
    });

    it('says exactly which permission is missing: a key that may list, read and write but not delete', async () => {
      const s = rgw as S3Server;
      const bucket = await bucketWithoutDelete(s, 'perm');
      const limited = {
        endpoint: s.endpoint,
        accessKeyId: s.limited!.accessKeyId,
        secretAccessKey: s.limited!.secretAccessKey,
        bucket,
        prefix: 'repo',
      };
      const report = await testConnection(limited);
      expect(report.ok).toBe(false);
      expect(report.checks.map((c) => [c.name, c.ok])).toEqual(
        expect.arrayContaining([
          ['list', true],
          ['write', true],
          ['read', true],
          ['delete', false],
        ]),
      );
      expect(report.summary).toMatch(/no permission to delete a test object/);
      const b = new S3Backend(limited);
      await b.save('locks', 'l1', Buffer.from('lock'));
      await expect(b.remove('locks', 'l1')).rejects.toBeInstanceOf(S3AccessDeniedError);
      await b.close();
    });
  },
);
