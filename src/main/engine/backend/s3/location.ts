/**
 * S3 locations as users write them, and the settings that go with them.
 *
 *   s3:https://host[:port]/bucket[/prefix…]   any S3-compatible store (MinIO, Ceph, B2, Wasabi, …)
 *   s3:host[:port]/bucket[/prefix…]           the same, https implied
 *   s3://bucket[/prefix…]                     AWS S3 itself (region from the options, default us-east-1)
 *
 * An optional query string carries addressing details: `?region=eu-west-1&style=path|virtual`.
 * Access keys never appear in a location: they come from the catalog's secret store (or the CLI's
 * environment) and are passed in separately.
 */
import { UsageError } from '../../errors.js';
import { splitS3Address } from '../../../../shared/destination.js';

export interface S3Location {
  /** Scheme, host and port, e.g. "https://s3.example.com:9000"; undefined for AWS S3's own endpoints. */
  endpoint?: string;
  bucket: string;
  /** Folder inside the bucket, without leading or trailing slashes ("" for the bucket root). */
  prefix: string;
  region?: string;
  /** Path-style (https://host/bucket/key) instead of virtual-hosted (https://bucket.host/key) addressing. */
  pathStyle?: boolean;
}

const BUCKET_RE = /^[a-z0-9][a-z0-9.\-_]{1,254}$/i;

export function normalizePrefix(prefix: string | undefined): string {
  const p = (prefix ?? '').replace(/\/{2,}/g, '/').replace(/^\/+|\/+$/g, '');
  if (p.split('/').some((s) => s === '.' || s === '..'))
    throw new UsageError(`invalid S3 prefix "${prefix}"`);
  return p;
}

export function isS3Location(location: string): boolean {
  return /^s3:/i.test(location);
}

export function parseS3Location(location: string): S3Location {
  if (!isS3Location(location)) throw new UsageError(`not an S3 location: ${location}`);
  const split = splitS3Address(location.slice(3));
  if ('problem' in split) {
    if (split.problem === 'credentials')
      throw new UsageError('put access keys in the key fields, not in the S3 location');
    if (split.problem === 'bad-host') throw new UsageError(`invalid host in S3 location "${location}"`);
    throw new UsageError(
      `cannot read the S3 location "${location}" (expected s3:https://host/bucket/prefix)`,
    );
  }
  const slash = split.path.indexOf('/');
  const out: S3Location = {
    bucket: slash < 0 ? split.path : split.path.slice(0, slash),
    prefix: normalizePrefix(slash < 0 ? '' : split.path.slice(slash + 1)),
  };
  if (split.endpoint) out.endpoint = split.endpoint;
  if (!out.bucket)
    throw new UsageError(
      `the S3 location "${location}" names no bucket (expected s3:https://host/bucket/prefix)`,
    );
  if (!BUCKET_RE.test(out.bucket)) throw new UsageError(`"${out.bucket}" is not a valid bucket name`);
  for (const [k, v] of split.options) {
    if (k === 'region') out.region = v;
    else if (k === 'style' && (v === 'path' || v === 'virtual')) out.pathStyle = v === 'path';
    else throw new UsageError(`unknown S3 location option "${k}=${v}" (known: region=…, style=path|virtual)`);
  }
  return out;
}

/** The canonical location string for a set of fields (what the job wizard stores). */
export function formatS3Location(loc: S3Location): string {
  const prefix = normalizePrefix(loc.prefix);
  const path = prefix ? `${loc.bucket}/${prefix}` : loc.bucket;
  const params = new URLSearchParams();
  if (loc.region) params.set('region', loc.region);
  if (loc.pathStyle !== undefined) params.set('style', loc.pathStyle ? 'path' : 'virtual');
  const qs = params.toString();
  const base = loc.endpoint ? `s3:${loc.endpoint.replace(/\/+$/, '')}/${path}` : `s3://${path}`;
  return qs ? `${base}?${qs}` : base;
}

/** True when an endpoint's host is this machine (plain http is acceptable there): the same test the
 *  API's destination schema and the job wizard use. */
export { isLoopbackUrl as isLoopbackEndpoint } from '../../../../shared/destination.js';

/** AWS's own hosts use virtual-hosted addressing; other stores (MinIO, Ceph, NAS boxes on an IP) path-style. */
export function defaultPathStyle(endpoint: string | undefined): boolean {
  if (!endpoint) return false;
  try {
    return !new URL(endpoint).hostname.endsWith('.amazonaws.com');
  } catch {
    return true;
  }
}

/** Region from an AWS endpoint like s3.eu-west-1.amazonaws.com, else us-east-1 (what most other stores expect). */
export function defaultRegion(endpoint: string | undefined): string {
  const m = endpoint && /s3[.-]([a-z0-9-]+)\.amazonaws\.com/.exec(endpoint);
  return m && m[1] !== 'external-1' ? m[1] : 'us-east-1';
}
