/**
 * Diagnosis of an S3 destination before a job is saved (the wizard's "Test connection", the API's
 * destinations.test and `tidemark repo test`). It really talks to the store, one step after another,
 * and reports every step separately — reachable, keys accepted, bucket there, list, write, read back,
 * delete (a small probe object under the prefix, removed again and checked gone), clock offset, and
 * whether a Tidemark repository is already there — each with a sentence a user can act on: wrong
 * access key (InvalidAccessKeyId), wrong secret (SignatureDoesNotMatch), missing bucket (NoSuchBucket),
 * which operation AccessDenied refused, TLS/refused/DNS/timeouts, and a skewed clock.
 *
 * It never creates the bucket and leaves nothing behind. It does not retry: a test should say what
 * happens on the first attempt (the SDK corrects a skewed clock after one refusal, which the backup
 * retries would hide; the diagnosis reports it instead).
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
import type { Diagnosis, DiagnosisCheck } from '../diagnosis.js';

/** Clock offsets above this are flagged (S3 refuses signatures 15 minutes off). */
export const CLOCK_WARN_MS = 5 * 60_000;

const LABELS: Record<string, string> = {
  address: 'Address',
  reach: 'Server reachable',
  credentials: 'Access keys accepted',
  bucket: 'Bucket exists',
  list: 'List objects',
  write: 'Write a test object',
  read: 'Read it back',
  delete: 'Delete it',
  clock: 'Clock in step with the server',
  repository: 'Tidemark repository',
};

interface Cause {
  code?: string;
  name?: string;
  message?: string;
  cause?: unknown;
}

/** The first error code found along an error's cause chain (network and TLS codes live deep in it). */
function causeCodes(err: unknown): string[] {
  const out: string[] = [];
  let cur: unknown = err;
  for (let i = 0; cur && typeof cur === 'object' && i < 6; i++) {
    const c = cur as Cause;
    if (c.code) out.push(String(c.code));
    if (c.name) out.push(String(c.name));
    if (c.message) out.push(String(c.message));
    cur = c.cause;
  }
  return out;
}

const TLS_CODES =
  /CERT_HAS_EXPIRED|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT|ERR_TLS_CERT_ALTNAME_INVALID|CERT_NOT_YET_VALID|CERT_UNTRUSTED|self.signed certificate/;

/**
 * A plain sentence for a failure to reach the store at all (refused, DNS, timeout, TLS), or undefined
 * when the store did answer.
 */
export function explainUnreachable(err: unknown, endpoint: string): string | undefined {
  const codes = causeCodes(err).join(' ');
  let host = endpoint;
  try {
    host = new URL(endpoint).host;
  } catch {}
  if (/ECONNREFUSED/.test(codes))
    return `nothing answers at ${host} (connection refused): check the address and port, and that the storage service is running`;
  if (/ENOTFOUND|EAI_AGAIN|EAI_NONAME/.test(codes))
    return `the host name ${host.replace(/:\d+$/, '')} cannot be found (DNS): check the address`;
  if (TLS_CODES.test(codes))
    return `the server's TLS certificate is not trusted (${(TLS_CODES.exec(codes) ?? [''])[0]}): check the address, or install the certificate of your own CA`;
  if (/EPROTO|wrong version number|ERR_SSL/i.test(codes))
    return `${host} does not speak https on this port: check the port, or use http:// for a server on this computer`;
  if (/ETIMEDOUT|TimeoutError|timed? ?out|ENETUNREACH|EHOSTUNREACH|ENETDOWN/i.test(codes))
    return `no answer from ${host} (timed out or unreachable): check the address, the network and any firewall`;
  if (/ECONNRESET|socket hang up|UND_ERR_SOCKET|ERR_STREAM_PREMATURE_CLOSE/.test(codes))
    return `the connection to ${host} was cut (reset): check the address and port (an http server on an https address does this)`;
  return undefined;
}

function minutes(ms: number): string {
  const m = Math.round(Math.abs(ms) / 60_000);
  return `${m} minute${m === 1 ? '' : 's'}`;
}

export interface S3DiagnoseOptions {
  /** Give up on a silent connection after this long (default 15 s). */
  timeoutMs?: number;
}

/** Diagnoses an S3 destination. Never throws: every failure becomes a failed check. */
export async function diagnoseS3(opts: S3Options, o: S3DiagnoseOptions = {}): Promise<Diagnosis> {
  const checks: DiagnosisCheck[] = [];
  const put = (name: string, status: DiagnosisCheck['status'], message: string, err?: unknown) => {
    const c: DiagnosisCheck = { name, label: LABELS[name] ?? name, status, message };
    if (err !== undefined) c.code = errorToWire(err).code;
    const i = checks.findIndex((x) => x.name === name);
    if (i >= 0) checks[i] = c;
    else checks.push(c);
  };
  const skipRest = (names: string[], why: string) => {
    for (const n of names) if (!checks.some((c) => c.name === n)) put(n, 'skipped', why);
  };
  const where = `${opts.bucket}${opts.prefix ? `/${opts.prefix.replace(/^\/+|\/+$/g, '')}` : ''}`;
  let location = `s3 bucket ${where}`;
  let repositoryExists: boolean | null = null;
  let b: S3Backend | undefined;

  const finish = (): Diagnosis => {
    const clockOffsetMs = b?.lastServerDateOffsetMs;
    const firstBad = checks.find((c) => c.status === 'failed');
    const warn = checks.find((c) => c.status === 'warning');
    const ok =
      !firstBad &&
      ['list', 'write', 'read', 'delete'].every((n) =>
        checks.some((c) => c.name === n && c.status === 'passed'),
      );
    return {
      ok,
      location,
      checks,
      repositoryExists,
      ...(clockOffsetMs !== undefined ? { clockOffsetMs } : {}),
      summary: ok
        ? `${location} works: listing, writing, reading and deleting all succeeded${warn ? ` (but ${warn.message})` : ''}`
        : `cannot use ${location}: ${firstBad?.message ?? 'the checks did not run'}`,
    };
  };

  try {
    b = new S3Backend({
      ...opts,
      createBucket: false,
      connections: 2,
      idleTimeoutMs: o.timeoutMs ?? 15_000,
    });
    location = b.location.replace(/^s3:/, '');
  } catch (err) {
    put('address', 'failed', errorToWire(err).message, err);
    skipRest(
      Object.keys(LABELS).filter((n) => n !== 'address'),
      'not tried: the address is not usable',
    );
    return finish();
  }
  const bk = b;
  const rest = ['credentials', 'bucket', 'list', 'write', 'read', 'delete', 'clock', 'repository'];

  try {
    // 1. One list request under the prefix: reachable, keys, clock, bucket, list permission.
    let listErr: unknown;
    try {
      await bk.checkBucket();
    } catch (err) {
      listErr = err;
    }
    if (listErr === undefined) {
      put('reach', 'passed', `${bk.endpoint} answers`);
      put('credentials', 'passed', 'the access key ID and secret key are accepted');
      put('bucket', 'passed', `the bucket ${bk.bucket} exists`);
      put('list', 'passed', `may list ${where}`);
    } else {
      const wire = errorToWire(listErr);
      const unreachable = explainUnreachable(listErr, bk.endpoint);
      if (unreachable && wire.code !== 'S3_WRONG_KEYS') {
        put('reach', 'failed', unreachable, listErr);
        skipRest(rest, 'not tried: the server cannot be reached');
        return finish();
      }
      put('reach', 'passed', `${bk.endpoint} answers`);
      if (wire.code === 'S3_WRONG_KEYS') {
        put('credentials', 'failed', wire.message, listErr);
        skipRest(rest, 'not tried: the keys were refused');
        return finish();
      }
      if (wire.code === 'S3_CLOCK_SKEW') {
        put('clock', 'failed', wire.message, listErr);
        skipRest(rest, "not tried: the store refused this computer's clock");
        return finish();
      }
      if (wire.code === 'S3_NO_SUCH_BUCKET') {
        put('credentials', 'passed', 'the access key ID and secret key are accepted');
        put(
          'bucket',
          'failed',
          `the bucket "${bk.bucket}" does not exist at ${bk.endpoint}: create it (or check the name and region); Tidemark creates it when the job is saved if the key may create buckets`,
          listErr,
        );
        skipRest(rest, 'not tried: there is no bucket');
        return finish();
      }
      if (wire.code === 'S3_ACCESS_DENIED') {
        put('credentials', 'passed', 'the access key ID and secret key are accepted');
        put('bucket', 'skipped', 'not known: the key may not list it');
        put(
          'list',
          'failed',
          `the key may not list objects in ${where} (AccessDenied): backups need to list — allow s3:ListBucket in the key's policy`,
          listErr,
        );
      } else {
        put('list', 'failed', wire.message, listErr);
        skipRest(rest, 'not tried: listing failed');
        return finish();
      }
    }

    // 2–4. Write, read back and delete a probe object under the prefix.
    const prefix = bk.prefix ? `${bk.prefix}/` : '';
    const key = `${prefix}.tidemark-probe/test-${crypto.randomBytes(8).toString('hex')}`;
    const body = crypto.randomBytes(64);
    const what = 'a test object';
    const denied = (err: unknown, verb: string, fix: string) =>
      errorToWire(err).code === 'S3_ACCESS_DENIED'
        ? `the key may not ${verb} (AccessDenied): backups need this — ${fix}`
        : errorToWire(err).message;
    let written = false;
    try {
      await bk.sdk.send(
        new PutObjectCommand({ Bucket: bk.bucket, Key: key, Body: body, ContentLength: body.length }),
      );
      written = true;
      put('write', 'passed', `wrote a test object under ${where}`);
    } catch (err) {
      const e = bk.translate(err, 'write', what);
      put(
        'write',
        'failed',
        denied(e, `write objects in ${where}`, "allow s3:PutObject in the key's policy"),
        e,
      );
    }
    if (written) {
      try {
        const res = await bk.sdk.send(new GetObjectCommand({ Bucket: bk.bucket, Key: key }));
        const back = Buffer.from((await res.Body?.transformToByteArray()) ?? []);
        if (!back.equals(body)) throw new Error('the test object came back with different bytes');
        put('read', 'passed', 'read the test object back intact');
      } catch (err) {
        const e = bk.translate(err, 'read', what);
        put(
          'read',
          'failed',
          denied(e, `read objects in ${where}`, "allow s3:GetObject in the key's policy"),
          e,
        );
      }
      try {
        await bk.sdk.send(new DeleteObjectCommand({ Bucket: bk.bucket, Key: key }));
        let gone = false;
        try {
          await bk.sdk.send(new HeadObjectCommand({ Bucket: bk.bucket, Key: key }));
        } catch (err) {
          if (bk.translate(err, 'read', what) instanceof NotFoundError) gone = true;
          else throw err;
        }
        if (!gone)
          put(
            'delete',
            'failed',
            'the store accepted the delete but the test object is still there (object lock or versioning?): prune could not free space',
          );
        else put('delete', 'passed', 'deleted the test object');
      } catch (err) {
        const e = bk.translate(err, 'delete', what);
        put(
          'delete',
          'failed',
          denied(
            e,
            `delete objects in ${where}`,
            "prune and lock release delete objects; allow s3:DeleteObject in the key's policy",
          ),
          e,
        );
        // leave nothing behind when we can: the owner's key may come later, but try once more now
        await bk.sdk.send(new DeleteObjectCommand({ Bucket: bk.bucket, Key: key })).catch(() => {});
      }
    } else {
      skipRest(['read', 'delete'], 'not tried: the test object could not be written');
    }

    // 5. Clock (a warning from 5 minutes: S3 refuses signatures 15 minutes off).
    const offset = bk.lastServerDateOffsetMs;
    if (offset === undefined) put('clock', 'skipped', 'the store sent no Date header');
    else if (Math.abs(offset) < CLOCK_WARN_MS)
      put(
        'clock',
        'passed',
        `this computer's clock agrees with the server's (within ${Math.max(1, Math.round(Math.abs(offset) / 1000))} s)`,
      );
    else
      put(
        'clock',
        'warning',
        `this computer's clock is about ${minutes(offset)} ${offset > 0 ? 'behind' : 'ahead of'} the server's; S3 refuses requests beyond 15 minutes — turn on automatic time sync`,
      );

    // 6. A repository already there?
    try {
      repositoryExists = await bk.exists();
      put(
        'repository',
        'passed',
        repositoryExists
          ? 'a Tidemark repository is already here: saving reuses it (its password is needed)'
          : 'no repository here yet: saving creates one',
      );
    } catch (err) {
      put('repository', 'skipped', `not known: ${errorToWire(err).message}`);
    }
    return finish();
  } finally {
    await bk.close().catch(() => {});
  }
}
