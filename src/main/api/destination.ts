/**
 * Between the API's `Destination` (what the wizard edits) and the engine's repository location
 * (a folder path, or `s3:https://host/bucket/prefix?region=…&style=…` plus backend options). The S3
 * secret access key is never part of either: it is passed in from the secret store when a
 * repository is opened (`RepoTarget.options`), exactly as the repository password is.
 */
import path from 'node:path';
import type { Destination, S3Destination } from '../../shared/api.js';
import type { BackendOptions } from '../engine/backend/open.js';
import {
  defaultPathStyle,
  formatS3Location,
  isS3Location,
  normalizePrefix,
  parseS3Location,
} from '../engine/backend/s3/location.js';

/** What the engine needs to open a destination: its location string and backend options (with secrets). */
export interface RepoTarget {
  location: string;
  options: BackendOptions;
}

/** The canonical location string of a destination (folders resolved to absolute paths). */
export function destinationLocation(d: Destination): string {
  if (d.kind === 'local') return path.resolve(d.path);
  return formatS3Location({
    endpoint: d.endpoint.replace(/\/+$/, ''),
    bucket: d.bucket,
    prefix: normalizePrefix(d.prefix),
    region: d.region || undefined,
    pathStyle: d.pathStyle,
  });
}

/** Backend options kept in the catalog for a destination (never secrets). */
export function destinationOptions(d: Destination): Record<string, unknown> {
  if (d.kind === 'local') return d.appendOnly ? { appendOnly: true } : {};
  return {
    accessKeyId: d.accessKeyId,
    ...(d.allowInsecureHttp ? { allowInsecureHttp: true } : {}),
    ...(d.objectLock ? { objectLock: d.objectLock } : {}),
  };
}

/**
 * How a destination is opened. `env: {}`: the app never falls back to the environment's AWS keys
 * (a job uses the keys it was saved with, or fails saying they are missing).
 */
export function destinationTarget(d: Destination, secretAccessKey?: string): RepoTarget {
  if (d.kind === 'local') return { location: destinationLocation(d), options: {} };
  // (object lock is the repository's own setting, in its config: not a backend option)
  const { objectLock: _lock, ...options } = destinationOptions(d);
  return {
    location: destinationLocation(d),
    options: { ...options, secretAccessKey, env: {} },
  };
}

/** The destination a catalog repository stands for (location string + stored options). */
export function destinationOf(location: string, options: Record<string, unknown>): Destination {
  if (!isS3Location(location))
    return {
      kind: 'local',
      path: location.replace(/^local:/, ''),
      ...(options.appendOnly === true ? { appendOnly: true } : {}),
    };
  const l = parseS3Location(location);
  const endpoint = l.endpoint ?? `https://s3.${l.region ?? 'us-east-1'}.amazonaws.com`;
  const d: S3Destination = {
    kind: 's3',
    endpoint,
    bucket: l.bucket,
    prefix: l.prefix,
    pathStyle: l.pathStyle ?? defaultPathStyle(l.endpoint),
    accessKeyId: typeof options.accessKeyId === 'string' ? options.accessKeyId : '',
  };
  if (l.region) d.region = l.region;
  if (options.allowInsecureHttp === true) d.allowInsecureHttp = true;
  if (options.objectLock === 'governance' || options.objectLock === 'compliance')
    d.objectLock = options.objectLock;
  return d;
}

/** Identity of the place a destination points at (the same bucket and prefix, or the same folder). */
export function placeKey(d: Destination): string {
  if (d.kind === 'local') return `local:${path.resolve(d.path)}`;
  let host = d.endpoint.toLowerCase();
  try {
    const u = new URL(d.endpoint);
    host = `${u.protocol}//${u.host}`.toLowerCase();
  } catch {}
  return `s3:${host}/${d.bucket}/${normalizePrefix(d.prefix)}`;
}

/** The place key of a catalog repository row. */
export function placeKeyOf(location: string, options: Record<string, unknown>): string {
  try {
    return placeKey(destinationOf(location, options));
  } catch {
    return location;
  }
}

/**
 * Whether a stored S3 secret may be used for destination `b`: only for the same store (scheme, host
 * and port) and the same access key ID, so a changed address never receives requests signed with it.
 */
export function sameS3Credentials(a: Destination, b: Destination): boolean {
  if (a.kind !== 's3' || b.kind !== 's3') return false;
  const origin = (e: string) => {
    try {
      return new URL(e).origin.toLowerCase();
    } catch {
      return e.toLowerCase();
    }
  };
  return origin(a.endpoint) === origin(b.endpoint) && a.accessKeyId === b.accessKeyId;
}
