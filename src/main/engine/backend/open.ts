/**
 * Opens a backend from a location string, and stacks the wrappers a run asks for.
 *
 * Locations: a local folder path (or `local:/path`), or an S3 location (`s3:https://host/bucket/prefix`,
 * `s3:host/bucket/prefix`, `s3://bucket/prefix` for AWS; see backend/s3/location.ts). S3 settings may
 * also come as fields in the options (`endpoint`, `bucket`, `prefix`, …) with the location just "s3:".
 * Access keys come in the options (from the catalog's secret store); without them the environment's
 * `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY` are used (the CLI's way, as with restic), unless `env: {}`.
 *
 * The stack, outermost first: read-only → retry → request log → bandwidth limit → store. The log sits
 * inside the retry so every attempt is recorded; the limit is innermost so retried bytes count too.
 * Retries are on by default for object stores and off for local folders (a disk error is an answer).
 */
import path from 'node:path';
import type { Backend } from './types.js';
import { LocalBackend } from './local/index.js';
import type { S3Options } from './s3/index.js';
import { isS3Location, normalizePrefix, parseS3Location } from './s3/location.js';
import { RetryBackend, type RetryOptions } from './retry/index.js';
import { RequestLogBackend, type RequestRecord } from './requestlog/index.js';
import { ThrottleBackend } from './throttle/index.js';
import { ReadOnlyBackend } from './readonly/index.js';
import { UsageError } from '../errors.js';

export interface BackendOptions {
  /** Secrets and options for remote backends (e.g. S3 access keys), supplied by the caller. */
  [key: string]: unknown;
  // S3 fields (override what the location says).
  endpoint?: string;
  bucket?: string;
  prefix?: string;
  region?: string;
  pathStyle?: boolean;
  accessKeyId?: string;
  secretAccessKey?: string;
  sessionToken?: string;
  allowInsecureHttp?: boolean;
  /** Requests in flight at once (S3; default 8). */
  connections?: number;
  /** S3 object lock: lock what is written for at least this many days (a job's retention, when the
   *  repository locks its history; repo/immutability.ts). */
  objectLockDays?: number;
  /** Where to look for AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY when no keys are given (default: process.env; {} for none). */
  env?: Record<string, string | undefined>;
  // Wrappers.
  readOnly?: boolean;
  /** Retry settings, or false to turn retries off (default: on for object stores, off for folders). */
  retry?: RetryOptions | boolean;
  uploadBytesPerSec?: number;
  downloadBytesPerSec?: number;
  /** Receives one record per request attempt (for the run history). */
  requestLog?: (record: RequestRecord) => void;
  /** Wraps the store itself, under every other wrapper (tests: a FaultyBackend). */
  wrapStore?: (store: Backend) => Backend;
}

/** The S3 settings for a location plus option fields (throws UsageError when something is missing). */
export function s3OptionsFrom(location: string, options: BackendOptions = {}): S3Options {
  const env = options.env ?? process.env;
  const fromString = location.replace(/^s3:\/*$/i, '') === '' ? undefined : parseS3Location(location);
  const bucket = options.bucket ?? fromString?.bucket;
  if (!bucket)
    throw new UsageError('no S3 bucket given (use s3:https://host/bucket/prefix or the bucket field)');
  const accessKeyId = options.accessKeyId ?? env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = options.secretAccessKey ?? env.AWS_SECRET_ACCESS_KEY;
  if (!accessKeyId || !secretAccessKey)
    throw new UsageError(
      `no S3 access keys for ${location || bucket} (enter the access key ID and secret key, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)`,
    );
  return {
    endpoint: options.endpoint ?? fromString?.endpoint,
    bucket,
    prefix: normalizePrefix(options.prefix ?? fromString?.prefix),
    region: options.region ?? fromString?.region ?? env.AWS_DEFAULT_REGION,
    pathStyle: options.pathStyle ?? fromString?.pathStyle,
    accessKeyId,
    secretAccessKey,
    sessionToken: options.sessionToken ?? (options.accessKeyId ? undefined : env.AWS_SESSION_TOKEN),
    allowInsecureHttp: options.allowInsecureHttp,
    connections: options.connections,
    objectLockMinDays: options.objectLockDays,
  };
}

async function openStore(
  location: string,
  options: BackendOptions,
): Promise<{ store: Backend; remote: boolean }> {
  if (isS3Location(location) || (location === '' && options.bucket)) {
    // loaded on first use: the AWS SDK is a third of every command's start-up time otherwise
    const { S3Backend } = await import('./s3/index.js');
    return { store: new S3Backend(s3OptionsFrom(location, options)), remote: true };
  }
  if (location.startsWith('local:'))
    return { store: new LocalBackend(path.resolve(location.slice('local:'.length))), remote: false };
  if (/^[a-z0-9]+:(?!\\)/i.test(location) && !/^[a-zA-Z]:[\\/]/.test(location))
    throw new UsageError(`unsupported repository location ${location}`);
  if (!location) throw new UsageError('no repository location given');
  return { store: new LocalBackend(path.resolve(location)), remote: false };
}

export async function openBackend(location: string, options: BackendOptions = {}): Promise<Backend> {
  const { store, remote } = await openStore(location, options);
  let b: Backend = options.wrapStore ? options.wrapStore(store) : store;
  if (options.uploadBytesPerSec || options.downloadBytesPerSec)
    b = new ThrottleBackend(b, {
      uploadBytesPerSec: options.uploadBytesPerSec,
      downloadBytesPerSec: options.downloadBytesPerSec,
    });
  if (options.requestLog) b = new RequestLogBackend(b, options.requestLog);
  const retry = options.retry ?? remote;
  if (retry) b = new RetryBackend(b, typeof retry === 'object' ? retry : {});
  if (options.readOnly) b = new ReadOnlyBackend(b);
  return b;
}

/**
 * The store under a stack of wrappers (each keeps its inner backend in `inner`), for features only a
 * store has — e.g. `S3Backend.abortStaleUploads()` for prune, `replaceIfMatch()` for compare-and-swap,
 * `conditionalWrites()` to learn whether If-None-Match is atomic there.
 */
export function innermostBackend(b: Backend): Backend {
  let cur = b;
  while ((cur as { inner?: Backend }).inner) cur = (cur as { inner?: Backend }).inner!;
  return cur;
}
