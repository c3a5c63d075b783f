/**
 * The destination diagnosis behind "Test connection" (engine/backend/s3/diagnose.ts): each check's
 * status and the sentence it says, against s3rver (always: addresses, refused connections, a missing
 * bucket, an unknown key) and a real radosgw (a wrong secret, a skewed clock, and a key that may list,
 * read and write but not delete — the exact permission is named).
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { diagnoseS3 } from '../../src/main/engine/backend/s3/diagnose.js';
import { diagnoseLocation } from '../../src/main/engine/backend/diagnose.js';
import { S3Backend } from '../../src/main/engine/backend/s3/index.js';
import { initRepository } from '../../src/main/engine/repo/repository.js';
import type { Diagnosis } from '../../src/main/engine/backend/diagnose.js';
import { bucketWithoutDelete, randomPrefix, startS3rver, useRadosgw, type S3Server } from './servers.js';
import { cliEnv, runCli } from '../helpers/fixtures.js';

const statuses = (d: Diagnosis) => Object.fromEntries(d.checks.map((c) => [c.name, c.status]));
const check = (d: Diagnosis, name: string) => d.checks.find((c) => c.name === name)!;

/** A port on 127.0.0.1 where nothing listens. */
async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

let s3rver: S3Server;
beforeAll(async () => {
  s3rver = await startS3rver();
  const b = new S3Backend({ ...keys(s3rver), bucket: 'diag', prefix: '' });
  await b.init();
  await b.close();
});
afterAll(async () => {
  await s3rver?.close();
});

function keys(s: S3Server) {
  return { endpoint: s.endpoint, accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey };
}

describe('S3 diagnosis (s3rver)', () => {
  it('passes every check on a good destination, finds an existing repository, leaves nothing behind', async () => {
    const prefix = randomPrefix();
    const fresh = await diagnoseS3({ ...keys(s3rver), bucket: 'diag', prefix });
    expect(fresh.ok).toBe(true);
    expect(statuses(fresh)).toEqual({
      reach: 'passed',
      credentials: 'passed',
      bucket: 'passed',
      list: 'passed',
      write: 'passed',
      read: 'passed',
      delete: 'passed',
      clock: 'passed',
      repository: 'passed',
    });
    expect(fresh.repositoryExists).toBe(false);
    expect(check(fresh, 'repository').message).toMatch(/saving creates one/);
    expect(Math.abs(fresh.clockOffsetMs!)).toBeLessThan(60_000);
    const b = new S3Backend({ ...keys(s3rver), bucket: 'diag', prefix });
    const left = await b.sdk.send(new ListObjectsV2Command({ Bucket: 'diag', Prefix: `${prefix}/` }));
    expect(left.Contents ?? []).toEqual([]);
    const repo = await initRepository(b, 'a long password', { kdf: { N: 1024 } });
    await repo.close();
    const again = await diagnoseLocation(`s3:${s3rver.endpoint}/diag/${prefix}`, {
      accessKeyId: s3rver.accessKeyId,
      secretAccessKey: s3rver.secretAccessKey,
    });
    expect(again.ok).toBe(true);
    expect(again.repositoryExists).toBe(true);
    expect(check(again, 'repository').message).toMatch(/already here/);
  });

  it('names a missing bucket and an unknown access key, and tries nothing after them', async () => {
    const noBucket = await diagnoseS3({ ...keys(s3rver), bucket: 'no-such-bucket', prefix: '' });
    expect(noBucket.ok).toBe(false);
    expect(check(noBucket, 'bucket')).toMatchObject({ status: 'failed', code: 'S3_NO_SUCH_BUCKET' });
    expect(check(noBucket, 'write').status).toBe('skipped');
    expect(noBucket.summary).toMatch(/bucket "no-such-bucket" does not exist/);
    const badId = await diagnoseS3({ ...keys(s3rver), accessKeyId: 'NOBODY', bucket: 'diag', prefix: '' });
    expect(check(badId, 'reach').status).toBe('passed');
    expect(check(badId, 'credentials')).toMatchObject({
      status: 'failed',
      code: 'S3_WRONG_KEYS',
      message: expect.stringMatching(/access key ID is not known/),
    });
  });

  it('says when nothing answers, when the port speaks no TLS, and refuses plain http to another host', async () => {
    const port = await closedPort();
    const refused = await diagnoseS3({
      ...keys(s3rver),
      endpoint: `http://127.0.0.1:${port}`,
      bucket: 'diag',
      prefix: '',
    });
    expect(check(refused, 'reach')).toMatchObject({ status: 'failed' });
    expect(check(refused, 'reach').message).toMatch(
      /nothing answers at 127\.0\.0\.1:\d+ \(connection refused\)/,
    );
    expect(check(refused, 'credentials').status).toBe('skipped');
    const tls = await diagnoseS3({
      ...keys(s3rver),
      endpoint: s3rver.endpoint.replace('http:', 'https:'),
      bucket: 'diag',
      prefix: '',
    });
    expect(check(tls, 'reach').message).toMatch(/does not speak https on this port/);
    const insecure = await diagnoseS3({
      ...keys(s3rver),
      endpoint: 'http://s3.example.com',
      bucket: 'diag',
      prefix: '',
    });
    expect(check(insecure, 'address')).toMatchObject({ status: 'failed', code: 'S3_INSECURE_ENDPOINT' });
    const noKeys = await diagnoseLocation(`s3:${s3rver.endpoint}/diag`, { env: {} });
    expect(noKeys.checks[0]).toMatchObject({ name: 'address', status: 'failed', code: 'USAGE' });
    expect(noKeys.summary).toMatch(/no S3 access keys/);
  });
});

/** A proxy in front of a store whose answers carry a Date header `shiftMs` off (a server with a wrong clock). */
async function dateShiftingProxy(
  upstream: string,
  shiftMs: number,
): Promise<{ endpoint: string; close(): Promise<void> }> {
  const up = new URL(upstream);
  const srv = http.createServer((req, res) => {
    const fwd = http.request(
      { host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers },
      (r) => {
        const headers = { ...r.headers, date: new Date(Date.now() + shiftMs).toUTCString() };
        res.writeHead(r.statusCode ?? 502, headers);
        r.pipe(res);
      },
    );
    fwd.on('error', () => res.destroy());
    req.pipe(fwd);
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    endpoint: `http://127.0.0.1:${(srv.address() as net.AddressInfo).port}`,
    close: () => new Promise((r) => srv.close(() => r())),
  };
}

describe('S3 diagnosis: clocks', () => {
  it('warns when the server clock is more than 5 minutes away (but under the 15 minutes S3 enforces)', async () => {
    const proxy = await dateShiftingProxy(s3rver.endpoint, 7 * 60_000);
    try {
      const d = await diagnoseS3({
        ...keys(s3rver),
        endpoint: proxy.endpoint,
        bucket: 'diag',
        prefix: randomPrefix(),
      });
      expect(d.ok).toBe(true); // a warning does not fail the test
      expect(check(d, 'clock')).toMatchObject({ status: 'warning' });
      expect(check(d, 'clock').message).toMatch(/about 7 minutes behind the server's; .*15 minutes/);
      expect(d.summary).toMatch(/but this computer's clock is about 7 minutes behind/);
    } finally {
      await proxy.close();
    }
  });
});

describe('tidemark test-connection', () => {
  it('prints each check, exits 0 when the destination works and 14 when a check fails; --json gives the diagnosis', async () => {
    const env = cliEnv({
      AWS_ACCESS_KEY_ID: s3rver.accessKeyId,
      AWS_SECRET_ACCESS_KEY: s3rver.secretAccessKey,
    });
    const good = await runCli(['test-connection', `s3:${s3rver.endpoint}/diag/${randomPrefix()}`], env);
    expect(good.code, good.stderr).toBe(0);
    expect(good.stdout).toMatch(/✓ Delete it: deleted the test object/);
    expect(good.stdout).toMatch(/^OK: /m);
    const bad = await runCli(
      [
        'test-connection',
        '--json',
        '--endpoint',
        s3rver.endpoint,
        '--bucket',
        'nope-bucket',
        '--prefix',
        'x',
      ],
      env,
    );
    expect(bad.code).toBe(14);
    expect(bad.json).toMatchObject({ ok: false, repositoryExists: null });
    expect(bad.json.checks.find((c: { name: string }) => c.name === 'bucket')).toMatchObject({
      status: 'failed',
      code: 'S3_NO_SUCH_BUCKET',
    });
    const folder = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tm-testconn-'));
    await fs.promises.writeFile(path.join(folder, 'someone-elses-file'), 'x');
    const busy = await runCli(['test-connection', folder], env);
    expect(busy.code).toBe(14);
    expect(busy.stdout).toMatch(/✗ Tidemark repository: .* is not empty and holds no Tidemark repository/);
    await fs.promises.rm(folder, { recursive: true });
  });
});

const rgw = await useRadosgw();
describe.skipIf(typeof rgw === 'string')(
  `S3 diagnosis on radosgw${typeof rgw === 'string' ? ` (skipped: ${rgw})` : ''}`,
  () => {
    const s = () => rgw as S3Server;
    let bucket: string;
    beforeAll(async () => {
      bucket = await bucketWithoutDelete(s(), 'diag'); // the limited user may not delete
    });

    it('passes with the owner and reports conditional-write-capable radosgw as healthy', async () => {
      const d = await diagnoseS3({ ...keys(s()), bucket, prefix: randomPrefix() });
      expect(d.ok, d.summary).toBe(true);
      expect(d.checks.every((c) => c.status === 'passed')).toBe(true);
    });

    it('tells a wrong secret from a wrong key ID', async () => {
      const secret = await diagnoseS3({
        ...keys(s()),
        secretAccessKey: 'not-the-secret',
        bucket,
        prefix: 'x',
      });
      expect(check(secret, 'credentials')).toMatchObject({
        status: 'failed',
        code: 'S3_WRONG_KEYS',
        message: expect.stringMatching(/secret access key does not match the access key ID/),
      });
      const id = await diagnoseS3({ ...keys(s()), accessKeyId: 'NOSUCHKEY0000000', bucket, prefix: 'x' });
      expect(check(id, 'credentials').message).toMatch(/access key ID is not known/);
    });

    it('names a clock 40 minutes off', async () => {
      const d = await diagnoseS3({ ...keys(s()), bucket, prefix: 'x', systemClockOffsetMs: 40 * 60_000 });
      expect(d.ok).toBe(false);
      expect(check(d, 'clock')).toMatchObject({ status: 'failed', code: 'S3_CLOCK_SKEW' });
      expect(check(d, 'clock').message).toMatch(/about 40 minutes/);
    });

    it('names the one missing permission: a key that may not delete', async () => {
      const d = await diagnoseS3({
        endpoint: s().endpoint,
        accessKeyId: s().limited!.accessKeyId,
        secretAccessKey: s().limited!.secretAccessKey,
        bucket,
        prefix: 'repo',
      });
      expect(d.ok).toBe(false);
      expect(statuses(d)).toMatchObject({
        credentials: 'passed',
        list: 'passed',
        write: 'passed',
        read: 'passed',
        delete: 'failed',
      });
      expect(check(d, 'delete')).toMatchObject({ code: 'S3_ACCESS_DENIED' });
      expect(d.summary).toMatch(/the key may not delete objects in .*repo \(AccessDenied\)/);
    });
  },
);
