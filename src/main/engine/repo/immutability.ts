/**
 * Immutable repositories: what a repository's config says about protecting its history, and how that
 * is put in force when it is opened. Two modes, chosen at `init` (the config is written once):
 *
 * - S3 object lock (`objectLock: {mode, days}`): every history object is written locked for `days`
 *   (or longer: a job's retention, lockDaysFor), governance or compliance mode, so a stolen key cannot
 *   delete or overwrite it; prune extends the lock of what is still current and frees old versions
 *   once their lock has run out (backend/s3/objectLock.ts).
 * - Append-only (`appendOnly`, any location, meant for folders and NAS shares): the repository is
 *   opened through AppendOnlyBackend, so a backup (or anything else) never deletes or rewrites; prune,
 *   forget and key changes need a separate maintenance password, checked against a scrypt verifier here
 *   and never stored by the app.
 */
import crypto from 'node:crypto';
import type { Backend } from '../backend/types.js';
import { AppendOnlyBackend } from '../backend/appendonly/index.js';
import { innermostBackend } from '../backend/open.js';
import { deriveKey, type KdfParams } from '../crypto/kdf.js';
import { AppendOnlyError, UsageError, WrongMaintenancePasswordError } from '../errors.js';
import type { RetentionPolicy } from '../operations.js';
import type { ObjectLockSettings } from '../backend/s3/objectLock.js';

export type { ObjectLockSettings };

export interface AppendOnlySettings {
  kdf: KdfParams;
  /** HMAC-SHA256 of a fixed label under the scrypt key of the maintenance password (hex). */
  verifier: string;
}

/** The `immutability` field of a repository's config. */
export interface Immutability {
  objectLock?: ObjectLockSettings;
  appendOnly?: AppendOnlySettings;
}

/** What `init` is asked for. */
export interface ImmutabilityOptions {
  objectLock?: ObjectLockSettings;
  /** Append-only, with this maintenance password. */
  appendOnly?: { maintenancePassword: string };
}

/** What a store with S3 object lock offers (S3Backend), found under the wrappers. */
export interface LockingStore {
  enableObjectLock(s: ObjectLockSettings): void;
  readonly objectLock: ObjectLockSettings | undefined;
  verifyObjectLock(): Promise<void>;
  extendObjectLocks(): Promise<number>;
  purgeExpiredVersions(): Promise<{
    purged: number;
    bytesPurged: number;
    locked: number;
    bytesLocked: number;
    lockedUntil: string | null;
  }>;
  recoverAsOf(
    asOf: number,
    dryRun?: boolean,
  ): Promise<{ undeleted: string[]; restored: string[]; lost: string[] }>;
}

export function lockingStore(backend: Backend): LockingStore | undefined {
  const store = innermostBackend(backend) as Partial<LockingStore>;
  return typeof store.enableObjectLock === 'function' ? (store as LockingStore) : undefined;
}

/** Days of object lock a retention policy needs: its longest reach plus a day (undefined: none). */
export function lockDaysFor(p: RetentionPolicy): number | undefined {
  const days = Math.max(
    (p.keepHourly ?? 0) / 24,
    p.keepDaily ?? 0,
    (p.keepWeekly ?? 0) * 7,
    (p.keepMonthly ?? 0) * 31,
    (p.keepYearly ?? 0) * 366,
  );
  return days > 0 ? Math.ceil(days) + 1 : undefined;
}

const LABEL = 'tidemark maintenance password v1';
const MIN_MAINTENANCE_PASSWORD = 8;

async function verifierOf(password: string, kdf: KdfParams): Promise<string> {
  const key = await deriveKey(password, kdf);
  return crypto.createHmac('sha256', key).update(LABEL).digest('hex');
}

/**
 * The config's immutability for a new repository. `kdf` lowers scrypt's cost for tests only.
 * Object lock needs an S3 store (its bucket is made with object lock when it is created).
 */
export async function newImmutability(
  backend: Backend,
  opts: ImmutabilityOptions,
  repoPassword: string,
  kdf?: { N?: number; r?: number; p?: number },
): Promise<Immutability | undefined> {
  const out: Immutability = {};
  if (opts.objectLock) {
    const store = lockingStore(backend);
    if (!store) throw new UsageError('S3 object lock needs an S3 repository (s3:…)');
    if (!(opts.objectLock.days >= 1))
      throw new UsageError(`the object lock period must be at least one day, not ${opts.objectLock.days}`);
    store.enableObjectLock(opts.objectLock);
    out.objectLock = { mode: opts.objectLock.mode, days: opts.objectLock.days };
  }
  if (opts.appendOnly) {
    const pw = opts.appendOnly.maintenancePassword;
    if (pw.length < MIN_MAINTENANCE_PASSWORD)
      throw new UsageError(`use a maintenance password of at least ${MIN_MAINTENANCE_PASSWORD} characters`);
    if (pw === repoPassword)
      throw new UsageError('the maintenance password must differ from the repository password');
    const params: KdfParams = {
      N: kdf?.N ?? 2 ** 15,
      r: kdf?.r ?? 8,
      p: kdf?.p ?? 1,
      salt: crypto.randomBytes(16).toString('base64'),
    };
    out.appendOnly = { kdf: params, verifier: await verifierOf(pw, params) };
  }
  return out.objectLock || out.appendOnly ? out : undefined;
}

/**
 * Puts a config's immutability in force on an opened backend: the store locks what it writes, and an
 * append-only repository is seen through AppendOnlyBackend. Returns the backend the repository uses.
 */
export function enforceImmutability(backend: Backend, im: Immutability | undefined): Backend {
  // a copy of an S3 repository in a folder (any sync tool makes one) opens and works as any folder:
  // the lock is a property of the S3 location, which a folder cannot have
  if (im?.objectLock) lockingStore(backend)?.enableObjectLock(im.objectLock);
  return im?.appendOnly ? new AppendOnlyBackend(backend) : backend;
}

/** Checks the maintenance password and lets deletes through (prune, forget, key changes). */
export async function unlockMaintenance(backend: Backend, im: Immutability | undefined, password: string) {
  if (!im?.appendOnly) return;
  const expected = Buffer.from(im.appendOnly.verifier, 'hex');
  const got = Buffer.from(await verifierOf(password, im.appendOnly.kdf), 'hex');
  if (expected.length !== got.length || !crypto.timingSafeEqual(expected, got))
    throw new WrongMaintenancePasswordError();
  (backend as AppendOnlyBackend).unlock();
}

/** Throws AppendOnlyError when `what` would delete from an append-only repository still locked. */
export function assertMayDelete(backend: Backend, im: Immutability | undefined, what: string): void {
  if (im?.appendOnly && !(backend as AppendOnlyBackend).isUnlocked) throw new AppendOnlyError(what);
}
