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

/**
 * Reads `s3:https://host[:port]/bucket/prefix[?region=…&style=path|virtual]` (also without `s3:` or
 * the scheme, https implied, and `s3://bucket/prefix` for AWS S3). Returns an error message instead
 * of fields when the text cannot be read.
 */
export function parseS3Paste(text: string): S3Fields | { error: string } {
  let rest = text.trim().replace(/^s3:(?!\/\/)/i, '');
  let query = '';
  const q = rest.indexOf('?');
  if (q >= 0) {
    query = rest.slice(q + 1);
    rest = rest.slice(0, q);
  }
  let endpoint: string;
  let pathPart: string;
  if (/^s3:\/\//i.test(rest)) {
    pathPart = rest.slice(5);
    endpoint = 'https://s3.amazonaws.com';
  } else {
    const m = /^(?:(https?):\/\/)?([^/\s]+)(\/.*)?$/i.exec(rest);
    if (!m) return { error: 'expected s3:https://host/bucket/prefix' };
    const scheme = (m[1] ?? 'https').toLowerCase();
    try {
      const u = new URL(`${scheme}://${m[2]}`);
      if (u.username || u.password) return { error: 'put the keys in the key fields, not in the address' };
      endpoint = `${scheme}://${u.host}`;
    } catch {
      return { error: `"${m[2]}" is not a host name` };
    }
    pathPart = (m[3] ?? '').slice(1);
  }
  const parts = pathPart.split('/').filter(Boolean);
  if (!parts.length) return { error: 'the address names no bucket (s3:https://host/bucket/prefix)' };
  const out: S3Fields = { endpoint, bucket: parts[0], prefix: parts.slice(1).join('/') };
  for (const [k, v] of new URLSearchParams(query)) {
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
