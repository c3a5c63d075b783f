/**
 * "Test connection" for an S3 destination, run by the job wizard and `tidemark` before a job is saved.
 * It exercises exactly what backups need — list, write, read back, delete — on a probe object under
 * the repository prefix, and turns the first failure into one sentence a user can act on (wrong keys,
 * missing bucket, clock skew, no permission to list/write/read/delete, unreachable host, insecure URL).
 * It also reports whether the store honours conditional writes and how far the clocks are apart.
 * It leaves nothing behind (the probe object is deleted, and that deletion is checked).
 */
import crypto from 'node:crypto';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
} from '@aws-sdk/client-s3';
import { errorToWire, NotFoundError } from '../../errors.js';
import { S3Backend, type S3Options } from './index.js';

export type CheckName = 'connect' | 'list' | 'write' | 'read' | 'delete' | 'conditional-writes' | 'clock';

export interface ConnectionCheck {
  name: CheckName;
  ok: boolean;
  message: string;
  error?: { name: string; code: string; message: string };
}

export interface ConnectionReport {
  ok: boolean;
  location: string;
  checks: ConnectionCheck[];
  /** Whether the store refuses a second If-None-Match: * create (undefined when not reached). */
  conditionalWrites?: boolean;
  /** Server clock minus ours, in ms, from the last response's Date header. */
  clockOffsetMs?: number;
  /** One sentence: all good, or the first thing that is wrong. */
  summary: string;
}

const CLOCK_WARN_MS = 5 * 60_000;

export async function testConnection(target: S3Options | S3Backend): Promise<ConnectionReport> {
  const checks: ConnectionCheck[] = [];
  const fail = (name: CheckName, err: unknown): void => {
    const wire = errorToWire(err);
    checks.push({ name, ok: false, message: wire.message, error: wire });
  };
  const report = (b: S3Backend | undefined, location: string): ConnectionReport => {
    const required = checks.filter((c) => c.name !== 'conditional-writes' && c.name !== 'clock');
    const ok =
      required.length > 0 &&
      required.every((c) => c.ok) &&
      ['list', 'write', 'read', 'delete'].every((n) => checks.some((c) => c.name === n));
    const firstBad = checks.find((c) => !c.ok);
    return {
      ok,
      location,
      checks,
      conditionalWrites: checks.find((c) => c.name === 'conditional-writes')?.ok,
      clockOffsetMs: b?.lastServerDateOffsetMs,
      summary: ok
        ? `connected to ${location}: listing, writing, reading and deleting all work`
        : `cannot use ${location}: ${firstBad?.message ?? 'the checks did not run'}`,
    };
  };

  let b: S3Backend;
  const owned = !(target instanceof S3Backend);
  try {
    b = target instanceof S3Backend ? target : new S3Backend(target);
  } catch (err) {
    fail('connect', err);
    return report(
      undefined,
      target instanceof S3Backend ? target.location : `s3 bucket ${(target as S3Options).bucket}`,
    );
  }
  try {
    // 1. List: proves the host answers, the keys are right, the clock is close enough and the bucket exists.
    try {
      await b.checkBucket();
      checks.push({ name: 'list', ok: true, message: `listed ${b.bucket}${b.prefix ? `/${b.prefix}` : ''}` });
    } catch (err) {
      fail('list', err);
      const code = errorToWire(err).code;
      // Nothing else can work with wrong keys, a wrong clock, no bucket or no connection.
      if (code !== 'S3_ACCESS_DENIED') return report(b, b.location);
    }

    // 2–4. Write, read back and delete a probe object.
    const key = `${b.prefix ? `${b.prefix}/` : ''}.tidemark-probe/connection-${crypto.randomBytes(8).toString('hex')}`;
    const body = crypto.randomBytes(64);
    const what = 'a test object';
    let written = false;
    try {
      await b.sdk.send(
        new PutObjectCommand({ Bucket: b.bucket, Key: key, Body: body, ContentLength: body.length }),
      );
      written = true;
      checks.push({ name: 'write', ok: true, message: 'wrote a test object' });
    } catch (err) {
      fail('write', b.translate(err, 'write', what));
    }
    if (written) {
      try {
        const res = await b.sdk.send(new GetObjectCommand({ Bucket: b.bucket, Key: key }));
        const back = Buffer.from((await res.Body?.transformToByteArray()) ?? []);
        if (Buffer.compare(back, body) !== 0)
          throw new Error('the test object came back with different bytes');
        checks.push({ name: 'read', ok: true, message: 'read the test object back intact' });
      } catch (err) {
        fail('read', b.translate(err, 'read', what));
      }
      try {
        await b.sdk.send(new DeleteObjectCommand({ Bucket: b.bucket, Key: key }));
        try {
          await b.sdk.send(new HeadObjectCommand({ Bucket: b.bucket, Key: key }));
          throw new Error(
            'the store accepted the delete but the test object is still there (object lock or versioning?)',
          );
        } catch (err) {
          if (!(b.translate(err, 'read', what) instanceof NotFoundError)) throw err;
        }
        checks.push({ name: 'delete', ok: true, message: 'deleted the test object' });
      } catch (err) {
        fail('delete', b.translate(err, 'delete', what));
      }
    }

    // 5. Conditional writes (informational: without them Tidemark falls back to check-then-write).
    if (written) {
      try {
        const supported = await b.conditionalWrites();
        checks.push({
          name: 'conditional-writes',
          ok: supported,
          message: supported
            ? 'the store supports conditional writes (If-None-Match)'
            : 'the store ignores conditional writes; Tidemark checks before writing instead',
        });
      } catch (err) {
        fail('conditional-writes', err);
      }
    }

    // 6. Clock (informational unless it is already near the 15-minute limit S3 enforces).
    const offset = b.lastServerDateOffsetMs;
    if (offset !== undefined) {
      const minutes = Math.round(Math.abs(offset) / 60_000);
      checks.push({
        name: 'clock',
        ok: Math.abs(offset) < CLOCK_WARN_MS,
        message:
          Math.abs(offset) < CLOCK_WARN_MS
            ? 'clocks agree'
            : `this computer's clock is about ${minutes} minutes ${offset > 0 ? 'behind' : 'ahead of'} the server's; S3 refuses requests beyond 15 minutes — turn on automatic time sync`,
      });
    }
    return report(b, b.location);
  } finally {
    if (owned) await b.close();
  }
}
