// The speed test on an S3 destination (s3rver, in-process): PUTs and GETs of pack-sized objects and small
// ranged GETs at each in-flight count, with the requests and bytes they made counted; the probe objects
// live under the destination's .tidemark-speedtest/ folder and are gone afterwards — after a cancel too —
// while the repository in the same prefix and another computer's live test stay untouched, and what an
// interrupted test left is removed by the next one. A missing bucket and (on radosgw, which checks
// signatures) a wrong secret key are named errors.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CreateBucketCommand,
  DeleteBucketCommand,
  ListObjectsCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { runS3SpeedTest, speedTestProbeRoot } from '../../src/main/engine/speedtest/s3.js';
import { probeName } from '../../src/main/engine/speedtest/probes.js';
import { initRepository } from '../../src/main/engine/repo/repository.js';
import { s3Backend, startS3rver, useRadosgw, type S3Server } from '../s3/servers.js';
import type { SpeedTestProgress } from '../../src/main/engine/speedtest/types.js';

const MiB = 1024 * 1024;
let server: S3Server;
const bucket = 'speedtest';
const prefix = 'pcs/office-1';

beforeAll(async () => {
  server = await startS3rver();
  const b = s3Backend(server, bucket, { prefix: '' });
  await b.sdk.send(new CreateBucketCommand({ Bucket: bucket }));
  await b.close();
});
afterAll(async () => {
  await server?.close();
});

const location = () => `s3:${server.endpoint}/${bucket}/${prefix}`;
const keys = () => ({ accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey });

/** Every object in the bucket: key → size and ETag (s3rver's v1 listing; no paging needed here). */
async function objects(): Promise<Record<string, string>> {
  const b = s3Backend(server, bucket, { prefix: '' });
  try {
    const res = await b.sdk.send(new ListObjectsCommand({ Bucket: bucket, MaxKeys: 1000 }));
    expect(res.IsTruncated ?? false).toBe(false);
    return Object.fromEntries((res.Contents ?? []).map((o) => [o.Key!, `${o.Size}:${o.ETag}`]));
  } finally {
    await b.close();
  }
}

async function put(key: string, body: string): Promise<void> {
  const b = s3Backend(server, bucket, { prefix: '' });
  await b.sdk.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body }));
  await b.close();
}

describe('the S3 speed test', () => {
  it('measures each pattern at each in-flight count and leaves only what was there', async () => {
    // a repository in the prefix, an interrupted test's leftovers, and another computer's live test
    const repoBackend = s3Backend(server, bucket, { prefix, createBucket: false });
    const repo = await initRepository(repoBackend, 'pw-123', { kdf: { N: 1024 } });
    await repo.saveBlob(0, Buffer.from('data that must stay'));
    await repo.flush();
    await repo.close();
    const root = speedTestProbeRoot(prefix);
    const stale = probeName(Date.now() - 60_000, 'old-pc', 1);
    await put(`${root}${stale}/data/p0/p00000000`, 'left behind');
    await put(`${root}${stale}/data/p0/p00000001`, 'left behind');
    const live = `${root}${probeName(Date.now() + 3_600_000, 'other-pc', 1)}/data/p0/p00000000`;
    await put(live, 'another test running');
    const before = await objects();
    expect(Object.keys(before).filter((k) => k.startsWith(`${prefix}/data/`)).length).toBeGreaterThan(0);

    const seen: SpeedTestProgress[] = [];
    const res = await runS3SpeedTest(location(), keys(), {
      durationMs: 400,
      inFlight: [1, 4],
      progress: (p) => seen.push(p),
    });
    expect(res.kind).toBe('s3');
    expect(res.staleRemoved).toBe(2);
    expect(res.results.map((r) => `${r.pattern}@${r.depth}`)).toEqual([
      'pack-put@1',
      'pack-put@4',
      'pack-get@1',
      'pack-get@4',
      'small-get@1',
      'small-get@4',
    ]);
    for (const r of res.results) {
      const ops = r.reads + r.writes;
      expect(ops, r.pattern).toBeGreaterThan(0);
      expect(r.engine).toBe('s3');
      if (r.pattern === 'pack-put') {
        expect(r.reads).toBe(0);
        expect(r.bytesWritten).toBe(r.writes * 16 * MiB);
      } else if (r.pattern === 'pack-get') {
        expect(r.writes).toBe(0);
        expect(r.bytesRead).toBe(r.reads * 16 * MiB);
      } else {
        expect(r.bytesRead).toBe(r.reads * 16 * 1024);
        expect(r.random).toBe(true);
      }
      expect(r.iops).toBeGreaterThan(0);
      expect(r.latencyUs.p50).toBeGreaterThan(0);
      expect(r.latencyUs.p99!).toBeGreaterThanOrEqual(r.latencyUs.p50!);
    }
    expect(seen.some((p) => p.phase === 'testing' && p.inFlight === 4)).toBe(true);
    // the repository and the other computer's test are as they were; the leftovers and the probes are gone
    const after = await objects();
    const {
      [`${root}${stale}/data/p0/p00000000`]: _a,
      [`${root}${stale}/data/p0/p00000001`]: _b,
      ...kept
    } = before;
    expect(after).toEqual(kept);
    expect(Object.keys(after).filter((k) => k.startsWith(root))).toEqual([live]);
  });

  it('cancel cuts the requests off and removes the probe objects', async () => {
    const before = await objects();
    const ac = new AbortController();
    const p = runS3SpeedTest(location(), keys(), {
      durationMs: 60_000,
      patterns: ['pack-put'],
      inFlight: [4],
      signal: ac.signal,
      progress: (x) => {
        if (x.phase === 'testing' && x.sample) ac.abort();
      },
    });
    await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
    expect(await objects()).toEqual(before);
  });

  it('a missing bucket is a named error, and nothing is left', async () => {
    const before = await objects();
    await expect(
      runS3SpeedTest(`s3:${server.endpoint}/no-such-bucket/${prefix}`, keys(), { durationMs: 200 }),
    ).rejects.toMatchObject({ code: 'S3_NO_SUCH_BUCKET' });
    expect(await objects()).toEqual(before);
  });
});

const rgw = await useRadosgw();
describe.skipIf(typeof rgw === 'string')(
  `the S3 speed test on radosgw${typeof rgw === 'string' ? ` (skipped: ${rgw})` : ''}`,
  () => {
    it('a wrong secret key is S3WrongKeysError, before anything is written', async () => {
      const s = rgw as S3Server;
      const b = s3Backend(s, `speedtest-${process.pid}`, { prefix: '' });
      await b.sdk.send(new CreateBucketCommand({ Bucket: b.bucket })).catch(() => {});
      try {
        await expect(
          runS3SpeedTest(
            `s3:${s.endpoint}/${b.bucket}/x`,
            { accessKeyId: s.accessKeyId, secretAccessKey: 'not-the-secret' },
            { durationMs: 200 },
          ),
        ).rejects.toMatchObject({ name: 'S3WrongKeysError', code: 'S3_WRONG_KEYS' });
        const left = await b.sdk.send(new ListObjectsCommand({ Bucket: b.bucket }));
        expect(left.Contents ?? []).toEqual([]);
      } finally {
        await b.sdk.send(new DeleteBucketCommand({ Bucket: b.bucket })).catch(() => {});
        await b.close();
      }
    });
  },
);
