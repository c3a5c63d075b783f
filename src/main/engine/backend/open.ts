/**
 * Opens a backend from a location string: a local folder path (or `local:/path`). Object-store
 * locations (`s3:…`) are added by the s3 backend.
 */
import path from 'node:path';
import type { Backend } from './types.js';
import { LocalBackend } from './local/index.js';
import { UsageError } from '../errors.js';

export interface BackendOptions {
  /** Secrets and options for remote backends (e.g. S3 access keys), supplied by the caller. */
  [key: string]: unknown;
}

export async function openBackend(location: string, _options: BackendOptions = {}): Promise<Backend> {
  if (location.startsWith('local:')) return new LocalBackend(path.resolve(location.slice('local:'.length)));
  if (/^[a-z0-9]+:(?!\\)/i.test(location) && !/^[a-zA-Z]:[\\/]/.test(location))
    throw new UsageError(`unsupported repository location ${location}`);
  return new LocalBackend(path.resolve(location));
}
