/**
 * S3 servers for tests: s3rver (in-process, on 127.0.0.1, always available) and a real Ceph radosgw
 * started by scripts/radosgw.sh when Ceph is installed. Each backend gets a fresh random prefix, so
 * tests in one bucket never see each other's objects.
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { CreateBucketCommand, PutBucketPolicyCommand } from '@aws-sdk/client-s3';
import { S3Backend, type S3Options } from '../../src/main/engine/backend/s3/index.js';
import { OBJECT_TYPES } from '../../src/main/engine/backend/types.js';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const RADOSGW_SCRIPT = path.join(root, 'scripts/radosgw.sh');
export const RADOSGW_DIR = process.env.TIDEMARK_RGW_DIR ?? '/tmp/tidemark-radosgw';
/** The test run's id for `radosgw.sh acquire/release` (the vitest main process, set by global-setup.ts). */
export function testRunId(): string {
  return process.env.TIDEMARK_VITEST_PID ?? String(process.pid);
}

export interface S3Server {
  name: string;
  endpoint: string;
  accessKeyId: string;
  secretAccessKey: string;
  region: string;
  /** radosgw only: a second user that owns nothing (for permission tests with bucket policies). */
  limited?: { user: string; accessKeyId: string; secretAccessKey: string };
  close(): Promise<void>;
}

export async function startS3rver(): Promise<S3Server> {
  const { default: S3rver } = await import('s3rver');
  const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'tm-s3rver-'));
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir });
  const addr = await server.run();
  return {
    name: 's3rver',
    endpoint: `http://127.0.0.1:${addr.port}`,
    accessKeyId: 'S3RVER',
    secretAccessKey: 'S3RVER',
    region: 'us-east-1',
    close: async () => {
      await server.close();
      await fs.promises.rm(dir, { recursive: true, force: true });
    },
  };
}

function readEnv(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]] = m[2];
  }
  return out;
}

let radosgw: Promise<S3Server | string> | undefined;

/**
 * The local radosgw, started on demand (the script is idempotent and serialised with flock, so test
 * files running in parallel share one). Resolves to a reason string when it cannot run here.
 */
export function useRadosgw(): Promise<S3Server | string> {
  radosgw ??= (async () => {
    if (process.env.TIDEMARK_SKIP_RADOSGW) return 'TIDEMARK_SKIP_RADOSGW is set';
    try {
      await run('sh', ['-c', 'command -v radosgw && command -v ceph-mon && command -v ceph-osd']);
    } catch {
      return 'Ceph radosgw is not installed (apt-get install -y --no-install-recommends radosgw ceph-mon ceph-osd, or run .ci/setup.d/40-radosgw.sh)';
    }
    // acquire starts the cluster when needed and records this test run as a user, under the script's
    // lock (test files running in parallel, and parallel test runs, share one cluster).
    try {
      await run('bash', [RADOSGW_SCRIPT, 'acquire', testRunId()], { timeout: 200_000 });
    } catch (err) {
      return `radosgw failed to start: ${(err as { stderr?: string }).stderr?.slice(-2000) ?? String(err)}`;
    }
    const env = readEnv(path.join(RADOSGW_DIR, 'env'));
    return {
      name: 'radosgw',
      endpoint: env.TIDEMARK_RGW_ENDPOINT,
      accessKeyId: env.TIDEMARK_RGW_ACCESS_KEY,
      secretAccessKey: env.TIDEMARK_RGW_SECRET_KEY,
      region: env.TIDEMARK_RGW_REGION ?? 'us-east-1',
      limited: {
        user: env.TIDEMARK_RGW_LIMITED_USER,
        accessKeyId: env.TIDEMARK_RGW_LIMITED_ACCESS_KEY,
        secretAccessKey: env.TIDEMARK_RGW_LIMITED_SECRET_KEY,
      },
      close: async () => {},
    };
  })();
  return radosgw;
}

export function randomPrefix(tag = 't'): string {
  return `${tag}-${crypto.randomBytes(6).toString('hex')}`;
}

export function s3Backend(server: S3Server, bucket: string, extra: Partial<S3Options> = {}): S3Backend {
  return new S3Backend({
    endpoint: server.endpoint,
    region: server.region,
    accessKeyId: server.accessKeyId,
    secretAccessKey: server.secretAccessKey,
    bucket,
    prefix: randomPrefix(),
    createBucket: true,
    ...extra,
  });
}

/** Deletes everything under a backend's prefix (test cleanup; works after the backend was closed). */
export async function emptyPrefix(server: S3Server, b: S3Backend): Promise<void> {
  const fresh = s3Backend(server, b.bucket, { prefix: b.prefix, createBucket: false });
  try {
    for (const type of OBJECT_TYPES) {
      const names: string[] = [];
      for await (const o of fresh.list(type)) names.push(o.name);
      // One at a time: s3rver's file store races on rmdir when deletes in one folder overlap.
      for (const n of names) await fresh.remove(type, n);
    }
  } finally {
    await fresh.close();
  }
}

/**
 * A new bucket (owned by the server's main user) in which the limited user may list, read and write but
 * not delete: for the tests that must name exactly which permission is missing. Returns its name.
 */
export async function bucketWithoutDelete(server: S3Server, tag: string): Promise<string> {
  if (!server.limited) throw new Error('this server has no limited user');
  const bucket = `${tag}-${randomPrefix().slice(2)}`;
  const owner = s3Backend(server, bucket, { prefix: '', createBucket: false });
  try {
    await owner.sdk.send(new CreateBucketCommand({ Bucket: bucket }));
    const principal = { AWS: [`arn:aws:iam:::user/${server.limited.user}`] };
    const allow = (actions: string[], resource: string) => ({
      Effect: 'Allow',
      Principal: principal,
      Action: actions,
      Resource: [resource],
    });
    await owner.sdk.send(
      new PutBucketPolicyCommand({
        Bucket: bucket,
        Policy: JSON.stringify({
          Version: '2012-10-17',
          Statement: [
            allow(['s3:ListBucket'], `arn:aws:s3:::${bucket}`),
            allow(['s3:GetObject', 's3:PutObject'], `arn:aws:s3:::${bucket}/*`),
          ],
        }),
      }),
    );
  } finally {
    await owner.close();
  }
  return bucket;
}
