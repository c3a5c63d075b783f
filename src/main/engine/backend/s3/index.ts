/**
 * S3-compatible object storage backend (AWS S3, MinIO, Ceph radosgw, Backblaze B2, Wasabi, …) on
 * @aws-sdk/client-s3.
 *
 * Layout under `bucket/prefix/` mirrors the local backend, so a repository copied between a folder and
 * a bucket with any sync tool still opens: config/config, keys/<id>, data/<2 hex>/<id>, index/<id>,
 * snapshots/<id>, locks/<id>.
 *
 * What it guarantees:
 * - Atomic objects: a single PUT, or a multipart upload that only becomes visible on completion (and is
 *   aborted on failure). Every PUT and part carries Content-MD5, so the store rejects bytes damaged in
 *   transit; after a multipart upload the object's size is checked with a HEAD (some stores, e.g. Ceph
 *   16, return an empty ETag from CompleteMultipartUpload, so its answer is not relied on).
 * - Reads check the body length against Content-Length and throw TruncatedReadError (transient) when a
 *   connection is cut short. Ranged GETs fetch only the bytes asked for.
 * - At most `connections` requests in flight; listing pages through continuation tokens.
 * - Conditional create (If-None-Match: *) where the store honours it, detected once per backend by a
 *   probe object; elsewhere a HEAD-then-PUT fallback (racy between two writers in the same instant — the
 *   repository's lock protocol must not rely on it alone; see `conditionalWrites()`).
 * - Errors come out named: NotFoundError, ObjectExistsError, S3WrongKeysError, S3BucketNotFoundError,
 *   S3ClockSkewError, S3AccessDeniedError, TransientStoreError (for the retry wrapper).
 * - TLS by default: plain http only to a loopback host or with `allowInsecureHttp`.
 *
 * What it deliberately does not do: retry (wrap it with backend/retry), limit bandwidth (backend/throttle)
 * or keep the access keys anywhere (the caller passes them in from the secret store).
 */
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import {
  S3Client,
  GetObjectCommand,
  PutObjectCommand,
  HeadObjectCommand,
  DeleteObjectCommand,
  ListObjectsV2Command,
  ListObjectsCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  CompleteMultipartUploadCommand,
  AbortMultipartUploadCommand,
  ListMultipartUploadsCommand,
  CreateBucketCommand,
  type PutObjectCommandInput,
} from '@aws-sdk/client-s3';
import {
  LOCKED_TYPES,
  extendLocks,
  lockHeaders,
  purgeExpiredVersions,
  recoverAsOf,
  setRetention,
  verifyBucketLock,
  type ObjectLockSettings,
  type PurgeResult,
  type RecoverResult,
} from './objectLock.js';
import type { Backend, ObjectInfo, ObjectType, SaveOptions } from '../types.js';
import { NotFoundError, ObjectExistsError, TidemarkError, UsageError } from '../../errors.js';
import { Limiter } from './limiter.js';
import {
  type S3Location,
  defaultPathStyle,
  defaultRegion,
  formatS3Location,
  isLoopbackEndpoint,
  normalizePrefix,
} from './location.js';
import {
  S3AccessDeniedError,
  S3BucketNotFoundError,
  S3ClockSkewError,
  S3InsecureEndpointError,
  S3ProtocolError,
  S3WrongKeysError,
  ObjectChangedError,
  TransientStoreError,
  TruncatedReadError,
} from './errors.js';

export * from './errors.js';
export * from './location.js';
export { S3ObjectLockError, type ObjectLockSettings, type LockMode } from './objectLock.js';

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface S3Options extends S3Location, S3Credentials {
  /** Allow http:// to a host that is not this machine (keys and data travel unprotected). */
  allowInsecureHttp?: boolean;
  /** Requests in flight at once (default 8). */
  connections?: number;
  /** Objects at least this large go up as multipart uploads (default 16 MiB). */
  multipartThreshold?: number;
  /** Size of each part (default 8 MiB; S3 requires at least 5 MiB for all but the last part). */
  partSize?: number;
  /** Keys per list page (default 1000, the S3 maximum). */
  listPageSize?: number;
  /**
   * Listing API: 2 (ListObjectsV2 with continuation tokens, the default) or 1 (ListObjects with markers,
   * for old stores — and for s3rver, whose v2 continuation tokens need a cipher OpenSSL 3 dropped).
   */
  listApi?: 1 | 2;
  /** 'auto' probes the store once; 'on'/'off' skip the probe. */
  conditionalWrites?: 'auto' | 'on' | 'off';
  /** Create the bucket in init() (new repository) when it is missing, as restic does (default true). */
  createBucket?: boolean;
  /** Give up on a connection that sends or receives nothing for this long (default 60 s). */
  idleTimeoutMs?: number;
  /** Shift the clock used for signing (tests of clock-skew handling). */
  systemClockOffsetMs?: number;
  /** Send Content-MD5 with every upload so the store verifies the bytes (default true). */
  contentMd5?: boolean;
  /** With S3 object lock (a repository that asks for it, repo/immutability.ts): lock objects for at
   *  least this many days — a job's retention, when longer than the repository's own period. */
  objectLockMinDays?: number;
}

type Verb = 'list' | 'read' | 'write' | 'delete' | 'check';

const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EAI_AGAIN',
  'ENOTFOUND',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'ERR_STREAM_PREMATURE_CLOSE',
]);
const TRANSIENT_NAMES = new Set([
  'SlowDown',
  'ServiceUnavailable',
  'InternalError',
  'RequestTimeout',
  'Throttling',
  'ThrottlingException',
  'TooManyRequests',
  'ConditionalRequestConflict',
  'OperationAborted',
  'TimeoutError',
  'RequestTimeoutException',
  'BadDigest', // the bytes were damaged on the way: sending them again is the cure
]);

interface SdkError {
  name?: string;
  message?: string;
  code?: string;
  Code?: string;
  ServerTime?: string;
  RequestTime?: string;
  $metadata?: { httpStatusCode?: number; clockSkewCorrected?: boolean };
  $response?: { statusCode?: number; headers?: Record<string, string> };
}

function unquote(etag: string | undefined): string {
  return (etag ?? '').replace(/^W\//, '').replace(/^"|"$/g, '');
}

/** Parses "20261130T072022Z" (x-amz-date) as well as ISO and HTTP dates; NaN when unreadable. */
export function parseAmzDate(s: string): number {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s.trim());
  if (m) return Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +m[6]);
  return Date.parse(s);
}

export class S3Backend implements Backend {
  readonly location: string;
  readonly bucket: string;
  readonly prefix: string;
  readonly endpoint: string;
  private readonly client: S3Client;
  private readonly limiter: Limiter;
  private readonly multipartThreshold: number;
  private readonly partSize: number;
  private readonly listPageSize: number;
  private readonly listApi: 1 | 2;
  private readonly contentMd5: boolean;
  private readonly createBucket: boolean;
  private conditional: Promise<boolean> | undefined;
  /** How this store wants If-Match values: quoted (HTTP, AWS) or bare (Ceph 16). Learned on first refusal. */
  private ifMatchStyle: 'quoted' | 'bare' = 'quoted';
  /** Offset of the server's clock from ours in ms (server − local), from the last response's Date header. */
  lastServerDateOffsetMs: number | undefined;
  /** S3 object lock (./objectLock.ts): set by the repository whose config asks for it. */
  private lock: ObjectLockSettings | undefined;
  private readonly lockMinDays: number;

  constructor(opts: S3Options) {
    // The SDK's notice about its own future Node requirement is for developers, not for people
    // running a backup (and the packaged app's Electron already runs a newer Node).
    process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
    if (!opts.bucket) throw new UsageError('no S3 bucket given');
    if (!opts.accessKeyId || !opts.secretAccessKey)
      throw new UsageError('S3 access key ID and secret access key are required');
    this.bucket = opts.bucket;
    this.prefix = normalizePrefix(opts.prefix);
    const endpoint = opts.endpoint?.replace(/\/+$/, '');
    if (endpoint) {
      let url: URL;
      try {
        url = new URL(endpoint);
      } catch {
        throw new UsageError(`invalid S3 endpoint "${endpoint}"`);
      }
      if (url.protocol !== 'https:' && url.protocol !== 'http:')
        throw new UsageError(`S3 endpoint must be http(s), got ${url.protocol}`);
      if (url.protocol === 'http:' && !opts.allowInsecureHttp && !isLoopbackEndpoint(endpoint))
        throw new S3InsecureEndpointError(endpoint);
    }
    const region = opts.region ?? defaultRegion(endpoint);
    const pathStyle = opts.pathStyle ?? defaultPathStyle(endpoint);
    this.endpoint = endpoint ?? `https://s3.${region}.amazonaws.com`;
    this.location = formatS3Location({ endpoint, bucket: this.bucket, prefix: this.prefix });
    const connections = opts.connections ?? 8;
    this.limiter = new Limiter(connections);
    this.partSize = Math.max(opts.partSize ?? 8 * 1024 * 1024, 1);
    this.multipartThreshold = Math.max(opts.multipartThreshold ?? 16 * 1024 * 1024, this.partSize);
    this.listPageSize = Math.min(Math.max(opts.listPageSize ?? 1000, 1), 1000);
    this.listApi = opts.listApi ?? 2;
    this.contentMd5 = opts.contentMd5 ?? true;
    this.createBucket = opts.createBucket ?? true;
    this.lockMinDays = opts.objectLockMinDays ?? 0;
    if (opts.conditionalWrites === 'on') this.conditional = Promise.resolve(true);
    if (opts.conditionalWrites === 'off') this.conditional = Promise.resolve(false);

    const agentOpts = { keepAlive: true, maxSockets: connections + 2 };
    this.client = new S3Client({
      endpoint,
      region,
      forcePathStyle: pathStyle,
      credentials: {
        accessKeyId: opts.accessKeyId,
        secretAccessKey: opts.secretAccessKey,
        sessionToken: opts.sessionToken,
      },
      // Retries belong to backend/retry, which knows which errors are worth repeating and checks lengths.
      maxAttempts: 1,
      // Ceph 16 rejects the SDK's default streaming checksums (HTTP 411); we send Content-MD5 instead.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      systemClockOffset: opts.systemClockOffsetMs,
      requestHandler: {
        httpAgent: new http.Agent(agentOpts),
        httpsAgent: new https.Agent(agentOpts),
        connectionTimeout: 15_000,
        // An idle limit, not a total one: a part on a slow uplink may take minutes, but a connection
        // that stays silent this long is dead (the SDK's requestTimeout counts from the start of the
        // request, so it would kill slow uploads, and by default it only logs a warning).
        socketTimeout: opts.idleTimeoutMs ?? 60_000,
      },
    });
    this.client.middlewareStack.add(
      (next) => async (args) => {
        const out = await next(args);
        this.noteDate((out.response as { headers?: Record<string, string> })?.headers);
        return out;
      },
      { step: 'deserialize', name: 'tidemarkServerDate', priority: 'low' },
    );
  }

  private noteDate(headers: Record<string, string> | undefined): void {
    const date = headers?.date ?? headers?.Date;
    if (!date) return;
    const t = Date.parse(date);
    if (!Number.isNaN(t)) this.lastServerDateOffsetMs = t - Date.now();
  }

  /** The object key for (type, name), e.g. "prefix/data/3f/3fa…". */
  key(type: ObjectType, name: string): string {
    if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith('.'))
      throw new UsageError(`invalid object name ${JSON.stringify(name)}`);
    const rel = type === 'data' ? `data/${name.slice(0, 2)}/${name}` : `${type}/${name}`;
    return this.prefix ? `${this.prefix}/${rel}` : rel;
  }

  private typePrefix(type: ObjectType): string {
    return this.prefix ? `${this.prefix}/${type}/` : `${type}/`;
  }

  private where(): string {
    return this.prefix ? `${this.bucket}/${this.prefix}` : this.bucket;
  }

  /** Runs one request (including reading its body) inside a concurrency slot, translating errors. */
  request<T>(verb: Verb, what: string, fn: () => Promise<T>): Promise<T> {
    return this.limiter.run(async () => {
      const offsetBefore = this.signingOffset();
      try {
        return await fn();
      } catch (err) {
        throw this.translate(err, verb, what, offsetBefore);
      }
    });
  }

  /** The SDK's current correction of our clock for signing (ms), learned from servers' Date headers. */
  private signingOffset(): number {
    return Number((this.client.config as { systemClockOffset?: number }).systemClockOffset ?? 0);
  }

  /** Maps an SDK or network error to a named Tidemark error. */
  translate(err: unknown, verb: Verb, what: string, offsetBefore?: number): unknown {
    if (err instanceof TidemarkError) return err;
    const e = (err ?? {}) as SdkError;
    this.noteDate(e.$response?.headers);
    const name = e.name ?? '';
    const status = e.$metadata?.httpStatusCode ?? e.$response?.statusCode;
    const code = e.code ?? '';
    const detail = `${name || code || 'error'}${status ? ` (HTTP ${status})` : ''}`;
    const opts = { cause: err };
    if (name === 'NoSuchBucket') return new S3BucketNotFoundError(this.bucket, this.endpoint, opts);
    if (
      name === 'NoSuchKey' ||
      (name === 'NotFound' && verb !== 'check') ||
      (status === 404 && verb === 'read')
    )
      return new NotFoundError(what);
    if (name === 'InvalidAccessKeyId')
      return new S3WrongKeysError(
        `the access key ID is not known to ${this.endpoint} (check the access key)`,
        opts,
      );
    if (name === 'SignatureDoesNotMatch')
      return new S3WrongKeysError(
        `the secret access key does not match the access key ID at ${this.endpoint} (check the secret key)`,
        opts,
      );
    // A bodiless 403 (HEAD) after which the SDK had to correct its clock: that was the reason.
    const corrected =
      e.$metadata?.clockSkewCorrected === true ||
      (offsetBefore !== undefined && Math.abs(this.signingOffset() - offsetBefore) >= 240_000);
    const skewedBare = status === 403 && corrected && name !== 'AccessDenied';
    if (name === 'RequestTimeTooSkewed' || name === 'RequestExpired' || skewedBare) {
      // Skew = the server's time minus the time we signed with (both from the error body when the
      // store gives them; else the Date header against our clock).
      let skew = '';
      const server = e.ServerTime ? parseAmzDate(e.ServerTime) : NaN;
      const signed = e.RequestTime ? parseAmzDate(e.RequestTime) : NaN;
      const offset = !Number.isNaN(server)
        ? server - (Number.isNaN(signed) ? Date.now() : signed)
        : offsetBefore !== undefined
          ? this.signingOffset() - offsetBefore
          : this.lastServerDateOffsetMs;
      if (offset !== undefined)
        skew = ` by about ${Math.round(Math.abs(offset) / 60_000)} minutes (this computer is ${offset > 0 ? 'behind' : 'ahead'})`;
      return new S3ClockSkewError(
        `this computer's clock differs from the storage server's${skew}; S3 refuses signed requests more than 15 minutes off — set the clock right (turn on automatic time sync) and try again`,
        opts,
      );
    }
    if (name === 'AccessDenied' || name === 'AllAccessDisabled' || name === 'Forbidden' || status === 403) {
      const action = {
        list: 'list objects in',
        read: 'read',
        write: 'write',
        delete: 'delete',
        check: 'access',
      }[verb];
      const target = verb === 'list' || verb === 'check' ? this.where() : `${what} in ${this.where()}`;
      return new S3AccessDeniedError(
        `access denied: the access key has no permission to ${action} ${target} (check the key's policy${status === 403 && name !== 'AccessDenied' ? ', or the keys themselves' : ''})`,
        opts,
      );
    }
    if (name === 'PreconditionFailed' || status === 412) return new ObjectExistsError(what);
    if (TRANSIENT_NAMES.has(name) || (status !== undefined && (status >= 500 || status === 429)))
      return new TransientStoreError(
        `${verb} ${what} at ${this.endpoint}: ${detail}: ${e.message ?? ''}`.trim(),
        opts,
      );
    if (
      NETWORK_CODES.has(code) ||
      NETWORK_CODES.has(name) ||
      /socket hang up|ECONNRESET|timed? ?out/i.test(e.message ?? '')
    )
      return new TransientStoreError(
        `${verb} ${what}: connection to ${this.endpoint} failed (${code || name}): ${e.message ?? ''}`,
        opts,
      );
    return new S3ProtocolError(`${verb} ${what} at ${this.endpoint}: ${detail}: ${e.message ?? ''}`, opts);
  }

  private md5(data: Uint8Array): string | undefined {
    return this.contentMd5 ? crypto.createHash('md5').update(data).digest('base64') : undefined;
  }

  async save(type: ObjectType, name: string, data: Uint8Array, options?: SaveOptions): Promise<void> {
    const key = this.key(type, name);
    const what = `${type}/${name}`;
    let ifNoneMatch = false;
    if (options?.ifNotExists) {
      if (await this.conditionalWrites()) {
        ifNoneMatch = true;
      } else if (await this.head(key, what)) {
        // Fallback for stores that ignore If-None-Match: check first. Two writers racing in the same
        // instant can both pass; callers that need mutual exclusion add their own confirmation step.
        throw new ObjectExistsError(what);
      }
    }
    const lock = await this.lockFor(type);
    if (data.length >= this.multipartThreshold) await this.multipart(key, what, data, ifNoneMatch, lock);
    else await this.put(key, what, data, ifNoneMatch, lock);
  }

  // ---- S3 object lock (./objectLock.ts) -----------------------------------------------------

  /** Locks the repository's history from now on: `settings.days`, or the job's longer period. */
  enableObjectLock(settings: ObjectLockSettings): void {
    this.lock = { mode: settings.mode, days: Math.max(settings.days, this.lockMinDays) };
  }

  get objectLock(): ObjectLockSettings | undefined {
    return this.lock;
  }

  /** Throws S3ObjectLockError unless the bucket has object lock turned on. */
  verifyObjectLock(): Promise<void> {
    return verifyBucketLock(this);
  }

  /** Moves every current object's retention forward to now + the lock period; returns how many. */
  extendObjectLocks(): Promise<number> {
    return this.lock ? extendLocks(this, this.lock) : Promise.resolve(0);
  }

  /** Deletes old versions whose retention ran out; counts those still locked. */
  purgeExpiredVersions(): Promise<PurgeResult> {
    return purgeExpiredVersions(this);
  }

  /** Makes every object what it was at `asOf` (ms, store time). */
  recoverAsOf(asOf: number, dryRun = false): Promise<RecoverResult> {
    return recoverAsOf(this, asOf, this.lock, dryRun);
  }

  private async lockFor(type: ObjectType): Promise<ReturnType<typeof lockHeaders> | undefined> {
    if (!this.lock || !LOCKED_TYPES.includes(type)) return undefined;
    return lockHeaders(this.lock, await this.storeNow());
  }

  private async put(
    key: string,
    what: string,
    data: Uint8Array,
    ifNoneMatch: boolean,
    lock?: ReturnType<typeof lockHeaders>,
  ): Promise<void> {
    const input: PutObjectCommandInput = {
      Bucket: this.bucket,
      Key: key,
      Body: data,
      ContentLength: data.length,
      ContentMD5: this.md5(data),
      ContentType: 'application/octet-stream',
      ...lock,
    };
    if (ifNoneMatch) input.IfNoneMatch = '*';
    await this.request('write', what, () => this.client.send(new PutObjectCommand(input)));
  }

  private async multipart(
    key: string,
    what: string,
    data: Uint8Array,
    ifNoneMatch: boolean,
    lock?: ReturnType<typeof lockHeaders>,
  ): Promise<void> {
    const created = await this.request('write', what, () =>
      this.client.send(
        new CreateMultipartUploadCommand({
          Bucket: this.bucket,
          Key: key,
          ContentType: 'application/octet-stream',
          ...lock,
        }),
      ),
    );
    const uploadId = created.UploadId;
    if (!uploadId) throw new S3ProtocolError(`the store returned no upload ID for ${what}`);
    try {
      const count = Math.ceil(data.length / this.partSize);
      const parts = await Promise.all(
        Array.from({ length: count }, async (_, i) => {
          const body = data.subarray(i * this.partSize, Math.min(data.length, (i + 1) * this.partSize));
          const md5 = this.md5(body);
          // A part is retried here a few times: redoing one 8 MiB part is cheaper than redoing the pack.
          for (let attempt = 1; ; attempt++) {
            try {
              const res = await this.request('write', `${what} part ${i + 1}/${count}`, () =>
                this.client.send(
                  new UploadPartCommand({
                    Bucket: this.bucket,
                    Key: key,
                    UploadId: uploadId,
                    PartNumber: i + 1,
                    Body: body,
                    ContentLength: body.length,
                    ContentMD5: md5,
                  }),
                ),
              );
              if (!res.ETag)
                throw new S3ProtocolError(`the store returned no ETag for part ${i + 1} of ${what}`);
              return { PartNumber: i + 1, ETag: res.ETag };
            } catch (err) {
              if (attempt >= 3 || !(err as { transient?: boolean }).transient) throw err;
              await new Promise((r) => setTimeout(r, 100 * 2 ** attempt * Math.random()));
            }
          }
        }),
      );
      await this.request('write', what, () =>
        this.client.send(
          new CompleteMultipartUploadCommand({
            Bucket: this.bucket,
            Key: key,
            UploadId: uploadId,
            MultipartUpload: { Parts: parts },
            ...(ifNoneMatch ? { IfNoneMatch: '*' } : {}),
          }),
        ),
      );
    } catch (err) {
      await this.client
        .send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId: uploadId }))
        .catch(() => {});
      throw err;
    }
    // Ceph 16 answers CompleteMultipartUpload with an empty ETag, so confirm the result with a HEAD.
    const size = await this.head(key, what);
    if (size !== data.length)
      throw new TransientStoreError(
        `multipart upload of ${what} completed but the store reports ${size ?? 'no object'} bytes, not ${data.length}`,
      );
    // Ceph 16 drops the lock asked for at CreateMultipartUpload: set it on the finished object
    if (lock && this.lock) await setRetention(this, key, what, this.lock, lock.ObjectLockRetainUntilDate);
  }

  /** Size of the object at key, or undefined when it does not exist. */
  private async head(key: string, what: string): Promise<number | undefined> {
    return (await this.headInfo(key, what))?.size;
  }

  /** Size and ETag (without quotes) of the object at key, or undefined when it does not exist. */
  private async headInfo(key: string, what: string): Promise<{ size: number; etag: string } | undefined> {
    try {
      const res = await this.request('read', what, () =>
        this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key })),
      );
      return { size: res.ContentLength ?? 0, etag: unquote(res.ETag) };
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      if (err instanceof S3AccessDeniedError && (err.cause as SdkError | undefined)?.name !== 'AccessDenied')
        throw await this.explainHeadRefusal(key, what, err);
      throw err;
    }
  }

  /** The object's current ETag (no quotes), or undefined when it does not exist. For compare-and-swap. */
  async etag(type: ObjectType, name: string): Promise<string | undefined> {
    return (await this.headInfo(this.key(type, name), `${type}/${name}`))?.etag;
  }

  /**
   * Compare-and-swap: replaces the object only while its ETag is still `etag` (If-Match), and returns
   * the new ETag. Throws ObjectChangedError when another writer got there first.
   *
   * HTTP wants the ETag quoted, and AWS accepts that; Ceph 16 only matches the bare value. So the
   * standard form goes first, and when the store refuses it although the object does carry that ETag,
   * the bare form is used from then on. Stores that ignore If-Match entirely give no protection; the
   * connection test's conditional-write probe tells them apart for If-None-Match.
   */
  async replaceIfMatch(type: ObjectType, name: string, data: Uint8Array, etag: string): Promise<string> {
    const key = this.key(type, name);
    const what = `${type}/${name}`;
    const bare = unquote(etag);
    const put = (ifMatch: string) =>
      this.request('write', what, () =>
        this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: key,
            Body: data,
            ContentLength: data.length,
            ContentMD5: this.md5(data),
            IfMatch: ifMatch,
          }),
        ),
      );
    const attempt = async (style: 'quoted' | 'bare') => {
      const res = await put(style === 'quoted' ? `"${bare}"` : bare);
      return unquote(res.ETag) || (await this.etag(type, name)) || '';
    };
    try {
      return await attempt(this.ifMatchStyle);
    } catch (err) {
      const refused =
        err instanceof ObjectExistsError || (err instanceof NotFoundError && this.ifMatchStyle === 'quoted');
      if (!refused) throw err;
      const current = await this.etag(type, name);
      if (current === undefined) throw new ObjectChangedError(what, 'it was deleted');
      if (current !== bare || this.ifMatchStyle === 'bare')
        throw new ObjectChangedError(what, 'another writer replaced it');
      // The object still has the ETag we named, yet the store refused: it wants the bare form.
      this.ifMatchStyle = 'bare';
      try {
        return await attempt('bare');
      } catch (e) {
        if (e instanceof ObjectExistsError) throw new ObjectChangedError(what, 'another writer replaced it');
        throw e;
      }
    }
  }

  /**
   * A refused HEAD carries no body, so wrong keys, a skewed clock and a missing permission all look
   * alike (bare 403). A one-byte GET of the same key gets the store to say which it is.
   */
  private async explainHeadRefusal(key: string, what: string, headErr: unknown): Promise<unknown> {
    try {
      await this.request('read', what, async () => {
        const res = await this.client.send(
          new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: 'bytes=0-0' }),
        );
        await res.Body?.transformToByteArray();
      });
      return headErr;
    } catch (err) {
      return err instanceof NotFoundError ? headErr : err;
    }
  }

  async load(type: ObjectType, name: string, offset = 0, length?: number): Promise<Buffer> {
    const key = this.key(type, name);
    const what = `${type}/${name}`;
    if (offset < 0 || (length !== undefined && length < 0))
      throw new RangeError(`invalid range ${offset}+${length} for ${what}`);
    if (length === 0) {
      if ((await this.head(key, what)) === undefined) throw new NotFoundError(what);
      return Buffer.alloc(0);
    }
    let range: string | undefined;
    if (length !== undefined) range = `bytes=${offset}-${offset + length - 1}`;
    else if (offset > 0) range = `bytes=${offset}-`;
    try {
      return await this.request('read', what, async () => {
        const res = await this.client.send(
          new GetObjectCommand({ Bucket: this.bucket, Key: key, Range: range }),
        );
        const body = res.Body ? Buffer.from(await res.Body.transformToByteArray()) : Buffer.alloc(0);
        const expected = res.ContentLength;
        if (expected !== undefined && body.length !== expected)
          throw new TruncatedReadError(`reading ${what}`, body.length, expected);
        if (length !== undefined && body.length > length)
          throw new S3ProtocolError(`reading ${what}: asked for ${length} bytes, got ${body.length}`);
        return body;
      });
    } catch (err) {
      // A range that starts at or past the end: the object exists, there are just no bytes there.
      const status = ((err as { cause?: SdkError }).cause as SdkError | undefined)?.$metadata?.httpStatusCode;
      if (
        err instanceof S3ProtocolError &&
        (status === 416 || (err.cause as SdkError)?.name === 'InvalidRange')
      )
        return Buffer.alloc(0);
      throw err;
    }
  }

  async stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    const size = await this.head(this.key(type, name), `${type}/${name}`);
    if (size === undefined) throw new NotFoundError(`${type}/${name}`);
    return { name, size };
  }

  async remove(type: ObjectType, name: string): Promise<void> {
    const what = `${type}/${name}`;
    try {
      await this.request('delete', what, () =>
        this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(type, name) })),
      );
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
  }

  async *list(type: ObjectType): AsyncIterable<ObjectInfo> {
    const prefix = this.typePrefix(type);
    const what = `${type} objects`;
    let token: string | undefined;
    do {
      let contents: { Key?: string; Size?: number; LastModified?: Date }[];
      if (this.listApi === 2) {
        const res = await this.request('list', what, () =>
          this.client.send(
            new ListObjectsV2Command({
              Bucket: this.bucket,
              Prefix: prefix,
              ContinuationToken: token,
              MaxKeys: this.listPageSize,
            }),
          ),
        );
        contents = res.Contents ?? [];
        token = res.IsTruncated ? res.NextContinuationToken : undefined;
        if (res.IsTruncated && !token)
          throw new S3ProtocolError(
            `listing ${prefix}: the store said there is more but gave no continuation token`,
          );
      } else {
        const res = await this.request('list', what, () =>
          this.client.send(
            new ListObjectsCommand({
              Bucket: this.bucket,
              Prefix: prefix,
              Marker: token,
              MaxKeys: this.listPageSize,
            }),
          ),
        );
        contents = res.Contents ?? [];
        const last = contents.at(-1)?.Key;
        token = res.IsTruncated ? (res.NextMarker ?? last) : undefined;
        if (res.IsTruncated && !token)
          throw new S3ProtocolError(`listing ${prefix}: the store said there is more but gave no marker`);
      }
      for (const o of contents) {
        if (!o.Key) continue;
        const name = o.Key.slice(o.Key.lastIndexOf('/') + 1);
        if (!name || name.startsWith('.')) continue;
        yield { name, size: o.Size ?? 0, ...(o.LastModified ? { modified: o.LastModified.getTime() } : {}) };
      }
    } while (token);
  }

  async exists(): Promise<boolean> {
    return (await this.head(this.key('config', 'config'), 'config')) !== undefined;
  }

  /** Checks that the bucket is there and can be listed (creating it when asked to). */
  /**
   * Lists one key under the prefix: proves the host answers, the keys and clock are right, the bucket
   * exists and may be listed. Creates nothing (the connection test uses it).
   */
  async checkBucket(): Promise<void> {
    await this.request('list', 'the bucket', () =>
      this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.typePrefix('config'), MaxKeys: 1 }),
      ),
    );
  }

  /** Called when a new repository is created: checks the bucket and creates it when missing (unless told not to). */
  async init(): Promise<void> {
    try {
      await this.checkBucket();
    } catch (err) {
      if (!(err instanceof S3BucketNotFoundError) || !this.createBucket) throw err;
      await this.request('write', `bucket ${this.bucket}`, async () => {
        try {
          await this.client.send(
            new CreateBucketCommand({
              Bucket: this.bucket,
              ...(this.lock ? { ObjectLockEnabledForBucket: true } : {}),
            }),
          );
        } catch (e) {
          const name = (e as SdkError).name;
          if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') throw e;
        }
      });
    }
  }

  /**
   * Whether the store honours If-None-Match: * on PUT, found by a probe: create an object
   * conditionally, then try again — a store that supports it refuses the second write with 412.
   */
  conditionalWrites(): Promise<boolean> {
    if (!this.conditional) {
      const probe = (async () => {
        const key = `${this.prefix ? `${this.prefix}/` : ''}.tidemark-probe/cond-${crypto.randomBytes(8).toString('hex')}`;
        const put = () =>
          this.request('write', 'a probe object', () =>
            this.client.send(
              new PutObjectCommand({
                Bucket: this.bucket,
                Key: key,
                Body: Buffer.from('probe'),
                ContentLength: 5,
                IfNoneMatch: '*',
              }),
            ),
          );
        try {
          try {
            await put();
          } catch (err) {
            if (err instanceof S3ProtocolError) return false; // e.g. 501 NotImplemented: the header is not understood
            throw err;
          }
          try {
            await put();
            return false;
          } catch (err) {
            if (err instanceof ObjectExistsError) return true;
            if (err instanceof S3ProtocolError) return false;
            throw err;
          }
        } finally {
          await this.request('delete', 'a probe object', () =>
            this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key })),
          ).catch(() => {});
        }
      })();
      this.conditional = probe;
      // A probe that failed for a passing reason (network) is tried again next time.
      probe.catch(() => {
        if (this.conditional === probe) this.conditional = undefined;
      });
    }
    return this.conditional;
  }

  /**
   * The store's clock minus ours, in ms (from the Date header of the last answer; one cheap request
   * when there has been none yet). Lease expiry across PCs should be judged on this clock, not on
   * each PC's own: a PC whose clock runs ahead would otherwise think live locks of others expired.
   */
  async serverClockOffsetMs(): Promise<number> {
    if (this.lastServerDateOffsetMs === undefined) await this.checkBucket().catch(() => {});
    return this.lastServerDateOffsetMs ?? 0;
  }

  /** The store's clock now (see Backend.storeNow): ours plus the offset from its latest Date header. */
  async storeNow(): Promise<number> {
    const offset = await this.serverClockOffsetMs();
    return Date.now() + offset;
  }

  /**
   * Aborts multipart uploads under the prefix that were started more than `olderThanMs` ago (by the
   * store's clock) and never completed — left by a process that crashed or lost its connection while
   * uploading a pack. Their parts are invisible but billed. Prune calls this; the default age (a day)
   * is far beyond any upload still in progress. Returns how many were aborted; 0 on stores that do
   * not list uploads.
   */
  async abortStaleUploads(olderThanMs = 24 * 60 * 60_000): Promise<number> {
    const cutoff = Date.now() + (this.lastServerDateOffsetMs ?? 0) - olderThanMs;
    const prefix = this.prefix ? `${this.prefix}/` : '';
    let keyMarker: string | undefined;
    let uploadIdMarker: string | undefined;
    let aborted = 0;
    for (;;) {
      let res;
      try {
        res = await this.request('list', 'unfinished uploads', () =>
          this.client.send(
            new ListMultipartUploadsCommand({
              Bucket: this.bucket,
              Prefix: prefix,
              KeyMarker: keyMarker,
              UploadIdMarker: uploadIdMarker,
            }),
          ),
        );
      } catch (err) {
        if (err instanceof S3ProtocolError) return aborted; // e.g. NotImplemented
        throw err;
      }
      for (const u of res.Uploads ?? []) {
        if (!u.Key || !u.UploadId || !u.Initiated || u.Initiated.getTime() > cutoff) continue;
        await this.request('delete', `unfinished upload of ${u.Key}`, () =>
          this.client.send(
            new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: u.Key, UploadId: u.UploadId }),
          ),
        ).catch((err: unknown) => {
          if (!(err instanceof NotFoundError) && (err as SdkError)?.name !== 'NoSuchUpload') throw err;
        });
        aborted++;
      }
      if (!res.IsTruncated) return aborted;
      keyMarker = res.NextKeyMarker;
      uploadIdMarker = res.NextUploadIdMarker;
      if (!keyMarker && !uploadIdMarker) return aborted;
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  /** The SDK client, for the connection test and tests. */
  get sdk(): S3Client {
    return this.client;
  }
}
