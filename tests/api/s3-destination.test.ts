// S3 destinations through the API. With the in-memory engine (always): the schema's rules (https unless
// loopback or explicitly allowed, a secret key required for a new S3 job) and the secret kept out of the
// job. With the app's real wiring against radosgw (when Ceph is installed): destinations.test reports
// each check, an S3 job is created through the API (repository initialised in the bucket, the secret key
// in the secret store and nowhere in the catalog database), backed up through the catalog's runner,
// edited with the secret left blank (kept) or wrong (refused, job unchanged).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createApi, type Wired } from '../../src/main/api/wiring.js';
import { FakeEngine } from '../../src/main/api/fake-engine.js';
import type { ApiEvent, JobInput, RunSummary, S3Destination } from '../../src/shared/api.js';
import { randomPrefix, useRadosgw, type S3Server } from '../s3/servers.js';

let tmp: string;
beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-s3-'));
  fs.mkdirSync(path.join(tmp, 'src'));
  fs.writeFileSync(path.join(tmp, 'src', 'a.txt'), 'hello s3\n'.repeat(1000));
  fs.writeFileSync(path.join(tmp, 'src', 'b.bin'), Buffer.alloc(300_000, 7));
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A job input (loosely typed: some tests send what the schema must refuse). */
const job = (destination: unknown, extra: Record<string, unknown> = {}): JobInput =>
  ({
    name: 'Office PC',
    sources: [path.join(tmp, 'src')],
    destination,
    schedule: { kind: 'manual' },
    password: 'correct horse battery',
    ...extra,
  }) as JobInput;

describe('S3 destinations in the API (in-memory engine)', () => {
  let wired: Wired;
  beforeAll(() => {
    wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'fake'), engine: new FakeEngine() });
  });
  afterAll(async () => {
    await wired.api.close();
    wired.close();
  });

  const s3 = {
    kind: 's3',
    endpoint: 'https://s3.example.com',
    bucket: 'office',
    prefix: 'pcs/one',
    pathStyle: true,
    accessKeyId: 'AKIDEXAMPLE',
  };

  it('refuses plain http to another host unless allowed, and needs the secret key', async () => {
    await expect(
      wired.api.call(
        'jobs.create',
        job({ ...s3, endpoint: 'http://nas.local:9000' }, { secretAccessKey: 's' }),
      ),
    ).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [
        expect.objectContaining({ path: 'destination.endpoint', message: expect.stringMatching(/https/) }),
      ],
    });
    await expect(wired.api.call('jobs.create', job(s3))).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [expect.objectContaining({ path: 'secretAccessKey' })],
    });
    await expect(
      wired.api.call('destinations.test', { destination: s3 as S3Destination }),
    ).rejects.toMatchObject({ code: 'VALIDATION' });
  });

  it('keeps the secret beside the job, never in it; a blank secret on edit keeps it, a wrong one is refused', async () => {
    const created = await wired.api.call(
      'jobs.create',
      job(
        { ...s3, endpoint: 'http://nas.local:9000', allowInsecureHttp: true },
        { secretAccessKey: 'sekrit' },
      ),
    );
    expect(created.destination).toEqual({
      ...s3,
      endpoint: 'http://nas.local:9000',
      allowInsecureHttp: true,
    });
    expect(JSON.stringify(created)).not.toContain('sekrit');
    expect(JSON.stringify(await wired.api.call('jobs.list', {}))).not.toContain('sekrit');
    // rename only: the stored secret still opens the repository (the fake store checks the key pair)
    const renamed = await wired.api.call('jobs.update', { id: created.id, changes: { name: 'Renamed' } });
    expect(renamed.name).toBe('Renamed');
    await expect(wired.api.call('snapshots.list', { jobId: created.id })).resolves.toEqual([]);
    // a new key ID (or address) needs its secret: the stored one is never sent elsewhere
    await expect(
      wired.api.call('jobs.update', {
        id: created.id,
        changes: { destination: { ...created.destination, accessKeyId: 'OTHER' } as S3Destination },
      }),
    ).rejects.toMatchObject({
      code: 'VALIDATION',
      issues: [expect.objectContaining({ path: 'secretAccessKey' })],
    });
    await expect(
      wired.api.call('destinations.test', {
        destination: { ...created.destination, endpoint: 'https://elsewhere.example' } as S3Destination,
        jobId: created.id,
      }),
    ).rejects.toMatchObject({ code: 'VALIDATION' });
    // the right pair is checked against the store: a wrong secret for the new key ID is refused
    await expect(
      wired.api.call('jobs.update', {
        id: created.id,
        changes: { destination: { ...created.destination, accessKeyId: 'OTHER' } as S3Destination },
        secretAccessKey: 'guess',
      }),
    ).rejects.toMatchObject({ code: 'S3_WRONG_KEYS' });
    expect((await wired.api.call('jobs.get', { id: created.id })).destination).toMatchObject({
      accessKeyId: 'AKIDEXAMPLE',
    });
  });

  it('tests a local folder: writable, empty or holding a repository', async () => {
    const r = await wired.api.call('destinations.test', {
      destination: { kind: 'local', path: path.join(tmp, 'new-repo') },
    });
    expect(r.ok).toBe(true);
    expect(r.checks.map((c) => [c.name, c.status])).toEqual([
      ['folder', 'passed'],
      ['writable', 'passed'],
      ['repository', 'passed'],
    ]);
    const busy = await wired.api.call('destinations.test', {
      destination: { kind: 'local', path: path.join(tmp, 'src') },
    });
    expect(busy.ok).toBe(false);
    expect(busy.summary).toMatch(/not empty and holds no Tidemark repository/);
  });
});

const rgw = await useRadosgw();
describe.skipIf(typeof rgw === 'string')(
  `S3 job through the app's wiring into radosgw${typeof rgw === 'string' ? ` (skipped: ${rgw})` : ''}`,
  () => {
    let wired: Wired;
    const events: { event: ApiEvent; payload: any }[] = [];
    let dest: S3Destination;
    let secret: string;
    beforeAll(() => {
      const s = rgw as S3Server;
      wired = createApi({ mode: 'browser', dataDir: path.join(tmp, 'real') });
      wired.api.on((event, payload) => events.push({ event, payload }));
      dest = {
        kind: 's3',
        endpoint: s.endpoint,
        bucket: `api-${randomPrefix().slice(2)}`,
        prefix: 'office/pc-1',
        pathStyle: true,
        accessKeyId: s.accessKeyId,
      };
      secret = s.secretAccessKey;
    });
    afterAll(async () => {
      await wired?.api.close();
      wired?.close();
    });

    it('tests the destination: a missing bucket, a wrong secret, then (bucket made) every check passes', async () => {
      const missing = await wired.api.call('destinations.test', {
        destination: dest,
        secretAccessKey: secret,
      });
      expect(missing.ok).toBe(false);
      expect(missing.checks.find((c) => c.name === 'bucket')).toMatchObject({
        status: 'failed',
        code: 'S3_NO_SUCH_BUCKET',
      });
      const wrong = await wired.api.call('destinations.test', {
        destination: dest,
        secretAccessKey: 'not-the-secret',
      });
      expect(wrong.checks.find((c) => c.name === 'credentials')).toMatchObject({
        status: 'failed',
        code: 'S3_WRONG_KEYS',
        message: expect.stringMatching(/secret access key does not match/),
      });
      // creating the job creates the bucket and the repository in it
      const created = await wired.api.call('jobs.create', job(dest, { secretAccessKey: secret }));
      expect(created.destination).toMatchObject({ kind: 's3', bucket: dest.bucket, prefix: 'office/pc-1' });
      const ok = await wired.api.call('destinations.test', { destination: dest, secretAccessKey: secret });
      expect(ok.ok).toBe(true);
      expect(ok.repositoryExists).toBe(true);
      expect(Object.fromEntries(ok.checks.map((c) => [c.name, c.status]))).toMatchObject({
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
      // the edit page tests with the stored secret when the field is left blank
      const stored = await wired.api.call('destinations.test', { destination: dest, jobId: created.id });
      expect(stored.ok).toBe(true);
    });

    it('backs up into the bucket through the runner; the secret is only in the secret store', async () => {
      const [j] = await wired.api.call('jobs.list', {});
      await wired.api.call('jobs.runNow', { id: j.id });
      const deadline = Date.now() + 60_000;
      let finished: RunSummary | undefined;
      while (!finished) {
        finished = events.find((e) => e.event === 'run.finished' && e.payload.jobId === j.id)?.payload;
        if (Date.now() > deadline) throw new Error('the backup did not finish');
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(finished.status, JSON.stringify(finished.error)).toBe('completed');
      const snaps = await wired.api.call('snapshots.list', { jobId: j.id });
      expect(snaps).toHaveLength(1);
      // the catalog database never holds the secret; the 0600 key file does
      const dataDir = path.join(tmp, 'real');
      for (const f of fs.readdirSync(dataDir).filter((n) => n.startsWith('catalog')))
        expect(fs.readFileSync(path.join(dataDir, f)).includes(Buffer.from(secret))).toBe(false);
      const keyFile = JSON.parse(fs.readFileSync(path.join(dataDir, 'secrets.json'), 'utf8'));
      expect(Object.entries(keyFile)).toContainEqual([
        expect.stringMatching(/^repository\/\d+\/option\/secretAccessKey$/),
        secret,
      ]);
    });

    it('an edit with a wrong secret is refused and changes nothing; a blank one keeps the stored key', async () => {
      const [j] = await wired.api.call('jobs.list', {});
      await expect(
        wired.api.call('jobs.update', { id: j.id, changes: { name: 'x' }, secretAccessKey: 'wrong-secret' }),
      ).rejects.toMatchObject({ code: 'S3_WRONG_KEYS' });
      expect((await wired.api.call('jobs.get', { id: j.id })).name).toBe('Office PC');
      const renamed = await wired.api.call('jobs.update', { id: j.id, changes: { name: 'Office PC 1' } });
      expect(renamed.name).toBe('Office PC 1');
      expect(await wired.api.call('snapshots.list', { jobId: j.id })).toHaveLength(1);
    });
  },
);
