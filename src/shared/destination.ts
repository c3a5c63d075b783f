/**
 * Small pure helpers about job destinations, shared by the API schema (main) and the renderer:
 * whether an endpoint is this machine (plain http is acceptable there), reading a pasted
 * `s3:https://host/bucket/prefix`, and a short readable form for lists. No Node or Electron imports.
 */

/** True when an http(s) endpoint's host is this machine. */
export function isLoopbackUrl(endpoint: string): boolean {
  let host: string;
  try {
    host = new URL(endpoint).hostname.replace(/^\[|\]$/g, '');
  } catch {
    return false;
  }
  return host === 'localhost' || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

export interface S3Fields {
  endpoint: string;
  bucket: string;
  prefix: string;
  region?: string;
  pathStyle?: boolean;
}

/** The pieces of an S3 address, before either reader applies its own rules to them. */
export type S3AddressSplit =
  | { endpoint?: string; path: string; options: [string, string][] }
  | { problem: 'unreadable' | 'credentials' | 'bad-host'; host?: string };

/**
 * Splits `https://host[:port]/bucket/prefix[?options]` (https implied without a scheme) or
 * `//bucket/prefix` (AWS S3: no endpoint) — an S3 address without its `s3:` — into endpoint, the path
 * after the host, and the query options. The engine's strict reader (parseS3Location) and the wizard's
 * lenient paste box (parseS3Paste) share it and differ only in what they accept of the pieces.
 */
export function splitS3Address(text: string): S3AddressSplit {
  let rest = text;
  let query = '';
  const q = rest.indexOf('?');
  if (q >= 0) {
    query = rest.slice(q + 1);
    rest = rest.slice(0, q);
  }
  const options = [...new URLSearchParams(query)];
  if (rest.startsWith('//')) return { path: rest.slice(2), options };
  const m = /^(?:(https?):\/\/)?([^/\s]+)(\/.*)?$/i.exec(rest);
  if (!m) return { problem: 'unreadable' };
  const scheme = (m[1] ?? 'https').toLowerCase();
  let u: URL;
  try {
    u = new URL(`${scheme}://${m[2]}`);
  } catch {
    return { problem: 'bad-host', host: m[2] };
  }
  if (u.username || u.password) return { problem: 'credentials' };
  return { endpoint: `${scheme}://${u.host}`, path: (m[3] ?? '').slice(1), options };
}

/**
 * Reads `s3:https://host[:port]/bucket/prefix[?region=…&style=path|virtual]` (also without `s3:` or
 * the scheme, https implied, and `s3://bucket/prefix` for AWS S3). Returns an error message instead
 * of fields when the text cannot be read.
 */
export function parseS3Paste(text: string): S3Fields | { error: string } {
  const split = splitS3Address(text.trim().replace(/^s3:/i, ''));
  if ('problem' in split) {
    if (split.problem === 'credentials')
      return { error: 'put the keys in the key fields, not in the address' };
    if (split.problem === 'bad-host') return { error: `"${split.host}" is not a host name` };
    return { error: 'expected s3:https://host/bucket/prefix' };
  }
  const parts = split.path.split('/').filter(Boolean);
  if (!parts.length) return { error: 'the address names no bucket (s3:https://host/bucket/prefix)' };
  const out: S3Fields = {
    endpoint: split.endpoint ?? 'https://s3.amazonaws.com',
    bucket: parts[0],
    prefix: parts.slice(1).join('/'),
  };
  for (const [k, v] of split.options) {
    if (k === 'region') out.region = v;
    else if (k === 'style' && (v === 'path' || v === 'virtual')) out.pathStyle = v === 'path';
  }
  return out;
}

/** "host/bucket/prefix" for an S3 destination, the folder path for a local one. */
export function describeDestination(
  d: { kind: 'local'; path: string } | { kind: 's3'; endpoint: string; bucket: string; prefix?: string },
): string {
  if (d.kind === 'local') return d.path;
  let host = d.endpoint;
  try {
    host = new URL(d.endpoint).host;
  } catch {}
  return [host, d.bucket, d.prefix].filter(Boolean).join('/');
}
