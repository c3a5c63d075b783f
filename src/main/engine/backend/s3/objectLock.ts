/**
 * S3 object lock for an immutable repository (repo/immutability.ts). In a bucket made with object lock
 * (which turns on versioning), every object of the repository's history is written with a retention
 * date in governance or compliance mode: until then the store refuses to delete or overwrite that
 * version, whoever asks — a stolen access key included (compliance: nobody at all; governance: only a
 * key with s3:BypassGovernanceRetention, which the backup's key should not have).
 *
 * What a "delete" does there: a DELETE of the object (no version) only puts a delete marker on top;
 * the locked version stays, billed and recoverable. So prune works as anywhere (its view of the
 * repository shrinks at once), and what it removed is really freed later: `purgeExpiredVersions`
 * deletes the old versions whose retention has run out and reports those it may not delete yet, with
 * the date they may. `extendLocks` moves the retention of every current object forward, so the data
 * the newest snapshots still use stays locked however old it is. `recoverAsOf` undoes what happened
 * after a moment (an attacker's deletes and overwrites): every object as it was then becomes current
 * again.
 *
 * Locked: config, keys, packs, index files, snapshots and alarm dismissals. Not locked: lock leases and
 * maintenance records, which are coordination and are removed as part of normal work.
 */
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectLockConfigurationCommand,
  GetObjectRetentionCommand,
  ListObjectVersionsCommand,
  PutObjectRetentionCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import type { ObjectInfo, ObjectType } from '../types.js';
import { NotFoundError, TidemarkError } from '../../errors.js';

/** What these operations need of the store (./index.ts's S3Backend, which imports this module: a small
 *  interface of their own, so that the two do not import each other). */
export interface LockedBucket {
  readonly bucket: string;
  readonly prefix: string;
  readonly sdk: S3Client;
  key(type: ObjectType, name: string): string;
  request<T>(
    verb: 'list' | 'read' | 'write' | 'delete' | 'check',
    what: string,
    fn: () => Promise<T>,
  ): Promise<T>;
  list(type: ObjectType): AsyncIterable<ObjectInfo>;
  storeNow(): Promise<number>;
}

export type LockMode = 'governance' | 'compliance';

export interface ObjectLockSettings {
  mode: LockMode;
  /** How long each written object stays locked (days). */
  days: number;
}

/** The types whose objects are the repository's history (and locked). */
export const LOCKED_TYPES: readonly ObjectType[] = ['config', 'keys', 'data', 'index', 'snapshots', 'alarms'];

export class S3ObjectLockError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('S3_OBJECT_LOCK', message, options);
  }
}

/** What the store answers for a version it may not delete, or retention it may not shorten. */
export function isLockRefusal(err: unknown): boolean {
  const cause = (err as { cause?: { name?: string; message?: string } })?.cause;
  return (
    (err as { code?: string })?.code === 'S3_ACCESS_DENIED' ||
    cause?.name === 'AccessDenied' ||
    /object lock|retention/i.test(cause?.message ?? '')
  );
}

/** The headers that lock a new object (the retention date counted on the store's clock). */
export function lockHeaders(
  s: ObjectLockSettings,
  storeNow: number,
): { ObjectLockMode: 'GOVERNANCE' | 'COMPLIANCE'; ObjectLockRetainUntilDate: Date } {
  return {
    ObjectLockMode: s.mode === 'compliance' ? 'COMPLIANCE' : 'GOVERNANCE',
    ObjectLockRetainUntilDate: new Date(storeNow + s.days * 86_400_000),
  };
}

/** Throws S3ObjectLockError unless the bucket has object lock turned on. */
export async function verifyBucketLock(b: LockedBucket): Promise<void> {
  let enabled = false;
  try {
    const r = await b.request('check', 'the bucket’s object lock', () =>
      b.sdk.send(new GetObjectLockConfigurationCommand({ Bucket: b.bucket })),
    );
    enabled = r.ObjectLockConfiguration?.ObjectLockEnabled === 'Enabled';
  } catch (err) {
    const name = (err as { cause?: { name?: string } }).cause?.name ?? '';
    if (!/ObjectLockConfigurationNotFound/.test(name) && !(err instanceof NotFoundError)) throw err;
  }
  if (!enabled)
    throw new S3ObjectLockError(
      `the bucket "${b.bucket}" has no object lock: object lock can only be turned on when a bucket is made — let Tidemark create a new bucket (give a bucket name that does not exist yet) or make one with object lock enabled`,
    );
}

/** Sets the retention of an object's current version to `until` (PutObjectRetention). */
export async function setRetention(
  b: LockedBucket,
  key: string,
  what: string,
  s: ObjectLockSettings,
  until: Date,
) {
  await b.request('write', `the retention of ${what}`, () =>
    b.sdk.send(
      new PutObjectRetentionCommand({
        Bucket: b.bucket,
        Key: key,
        Retention: { Mode: s.mode === 'compliance' ? 'COMPLIANCE' : 'GOVERNANCE', RetainUntilDate: until },
      }),
    ),
  );
}

/**
 * Extends the retention of every current object of the locked types to now + the lock period (on the
 * store's clock). An object already locked for longer (in compliance mode the store refuses to shorten)
 * is left as it is. Returns how many were extended.
 */
export async function extendLocks(b: LockedBucket, s: ObjectLockSettings): Promise<number> {
  const until = new Date((await b.storeNow()) + s.days * 86_400_000);
  let extended = 0;
  const jobs: Promise<void>[] = [];
  for (const type of LOCKED_TYPES)
    for await (const o of b.list(type)) {
      const key = b.key(type, o.name);
      jobs.push(
        setRetention(b, key, `${type}/${o.name}`, s, until).then(
          () => void extended++,
          (err: unknown) => {
            if (!isLockRefusal(err)) throw err; // locked for longer already
          },
        ),
      );
    }
  await Promise.all(jobs);
  return extended;
}

interface Version {
  key: string;
  versionId: string;
  latest: boolean;
  modified: number;
  size: number;
  marker: boolean;
}

/** Every version and delete marker under the repository's prefix, grouped by key (oldest first). */
async function listVersions(b: LockedBucket): Promise<Map<string, Version[]>> {
  const byKey = new Map<string, Version[]>();
  let keyMarker: string | undefined;
  let versionMarker: string | undefined;
  for (;;) {
    const r = await b.request('list', 'object versions', () =>
      b.sdk.send(
        new ListObjectVersionsCommand({
          Bucket: b.bucket,
          Prefix: b.prefix ? `${b.prefix}/` : '',
          KeyMarker: keyMarker,
          VersionIdMarker: versionMarker,
        }),
      ),
    );
    const add = (v: Version) => {
      let list = byKey.get(v.key);
      if (!list) byKey.set(v.key, (list = []));
      list.push(v);
    };
    for (const v of r.Versions ?? [])
      if (v.Key && v.VersionId)
        add({
          key: v.Key,
          versionId: v.VersionId,
          latest: !!v.IsLatest,
          modified: v.LastModified?.getTime() ?? 0,
          size: v.Size ?? 0,
          marker: false,
        });
    for (const m of r.DeleteMarkers ?? [])
      if (m.Key && m.VersionId)
        add({
          key: m.Key,
          versionId: m.VersionId,
          latest: !!m.IsLatest,
          modified: m.LastModified?.getTime() ?? 0,
          size: 0,
          marker: true,
        });
    if (!r.IsTruncated) break;
    keyMarker = r.NextKeyMarker;
    versionMarker = r.NextVersionIdMarker;
    if (!keyMarker && !versionMarker) break;
  }
  for (const list of byKey.values())
    list.sort((x, y) => x.modified - y.modified || (x.latest ? 1 : 0) - (y.latest ? 1 : 0));
  return byKey;
}

export interface PurgeResult {
  /** Old versions deleted (their retention had run out, or they were never locked), and their bytes. */
  purged: number;
  bytesPurged: number;
  /** Old versions still locked: kept, and the latest date any of them may be deleted. */
  locked: number;
  bytesLocked: number;
  lockedUntil: string | null;
}

/**
 * Deletes old (non-current) versions whose retention has run out — what earlier prunes removed, and
 * superseded lock leases — and delete markers with nothing left below them. Versions still locked are
 * counted, not touched: a later prune deletes them.
 */
export async function purgeExpiredVersions(b: LockedBucket): Promise<PurgeResult> {
  const out: PurgeResult = { purged: 0, bytesPurged: 0, locked: 0, bytesLocked: 0, lockedUntil: null };
  const now = await b.storeNow();
  const del = (v: Version) =>
    b.request('delete', `an old version of ${v.key}`, () =>
      b.sdk.send(new DeleteObjectCommand({ Bucket: b.bucket, Key: v.key, VersionId: v.versionId })),
    );
  for (const [, versions] of await listVersions(b)) {
    let remaining = versions.filter((v) => !v.marker).length;
    for (const v of versions) {
      if (v.latest || v.marker) continue;
      let until: number | undefined;
      try {
        const r = await b.request('read', `the retention of ${v.key}`, () =>
          b.sdk.send(new GetObjectRetentionCommand({ Bucket: b.bucket, Key: v.key, VersionId: v.versionId })),
        );
        until = r.Retention?.RetainUntilDate?.getTime();
      } catch (err) {
        const name = (err as { cause?: { name?: string } }).cause?.name ?? '';
        if (
          !/ObjectLockConfigurationNotFound|NoSuchObjectLockConfiguration/.test(name) &&
          !(err instanceof NotFoundError)
        )
          throw err;
      }
      if (until !== undefined && until > now) {
        out.locked++;
        out.bytesLocked += v.size;
        const iso = new Date(until).toISOString();
        if (!out.lockedUntil || iso > out.lockedUntil) out.lockedUntil = iso;
        continue;
      }
      try {
        await del(v);
        out.purged++;
        out.bytesPurged += v.size;
        remaining--;
      } catch (err) {
        if (!isLockRefusal(err)) throw err;
        out.locked++;
        out.bytesLocked += v.size;
      }
    }
    // a delete marker over nothing: the object is wholly gone, the marker only clutters listings
    if (remaining === 0) for (const m of versions.filter((v) => v.marker)) await del(m).catch(() => {});
  }
  return out;
}

export interface RecoverResult {
  /** Objects brought back: deleted ones (their delete markers removed) and overwritten ones (their
   *  version of then copied back on top). */
  undeleted: string[];
  restored: string[];
  /** Objects of then that cannot be brought back (their versions were purged). */
  lost: string[];
}

/**
 * Makes the repository's objects what they were at `asOf` (ms, store time): every object that existed
 * then and was deleted or overwritten since becomes current again. Objects written since are left (new
 * snapshots and packs harm nothing; prune removes what nothing needs). Lock leases are left alone.
 */
export async function recoverAsOf(
  b: LockedBucket,
  asOf: number,
  s: ObjectLockSettings | undefined,
  dryRun = false,
): Promise<RecoverResult> {
  const out: RecoverResult = { undeleted: [], restored: [], lost: [] };
  const skip = new Set(['locks', 'maintenance']);
  for (const [key, versions] of await listVersions(b)) {
    const rel = b.prefix ? key.slice(b.prefix.length + 1) : key;
    const type = rel.split('/')[0];
    if (skip.has(type) || rel.startsWith('.')) continue;
    const then = versions.filter((v) => v.modified <= asOf);
    const state = then.at(-1);
    if (!state || state.marker) continue; // did not exist then
    const current = versions.find((v) => v.latest);
    if (current && current.versionId === state.versionId) continue; // unchanged since
    const later = versions.slice(versions.indexOf(state) + 1);
    if (dryRun) {
      (later.every((v) => v.marker) ? out.undeleted : out.restored).push(rel);
      continue;
    }
    if (later.every((v) => v.marker)) {
      for (const m of later)
        await b.request('delete', `the delete marker of ${rel}`, () =>
          b.sdk.send(new DeleteObjectCommand({ Bucket: b.bucket, Key: key, VersionId: m.versionId })),
        );
      out.undeleted.push(rel);
      continue;
    }
    try {
      await b.request('write', `${rel} as it was`, () =>
        b.sdk.send(
          new CopyObjectCommand({
            Bucket: b.bucket,
            Key: key,
            CopySource: `${b.bucket}/${key}?versionId=${encodeURIComponent(state.versionId)}`,
            ...(s ? lockHeadersNow(s) : {}),
          }),
        ),
      );
      out.restored.push(rel);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      out.lost.push(rel);
    }
  }
  return out;
}

function lockHeadersNow(s: ObjectLockSettings) {
  return lockHeaders(s, Date.now());
}
