/**
 * A destination's protection (repo/immutability.ts) as the API handles it: S3 object lock for an S3
 * destination (locked for as long as the job's retention keeps a snapshot, at least DEFAULT_LOCK_DAYS),
 * append-only for a folder (with a maintenance password that the app never stores). Both are chosen
 * when a repository is created; an existing repository's protection is what its config says.
 */
import type { Destination, Retention } from '../../shared/api.js';
import { lockDaysFor, type Immutability, type ImmutabilityOptions } from '../engine/repo/immutability.js';
import { ValidationError } from './errors.js';

/** The lock period of a repository whose job keeps only the last N snapshots (or everything). */
export const DEFAULT_LOCK_DAYS = 30;

/** What to ask `init` for, when the destination's repository does not exist yet. */
export function initProtection(
  d: Destination,
  p: { maintenancePassword?: string; retention?: Retention },
): ImmutabilityOptions {
  if (d.kind === 's3' && d.objectLock)
    return {
      objectLock: {
        mode: d.objectLock,
        days: Math.max(DEFAULT_LOCK_DAYS, lockDaysFor(p.retention ?? {}) ?? 0),
      },
    };
  if (d.kind === 'local' && d.appendOnly) {
    if (!p.maintenancePassword)
      throw new ValidationError([
        {
          path: 'maintenancePassword',
          message: 'an append-only repository needs a maintenance password (to prune it later)',
        },
      ]);
    return { appendOnly: { maintenancePassword: p.maintenancePassword } };
  }
  return {};
}

/**
 * The destination with the protection its repository really has (`im`, from its config). Asking for
 * a protection an existing repository was made without is an error (it cannot be added afterwards).
 * Without `im`: the protection of `current` (a job's destination that stays where it is).
 */
export function withProtection(
  d: Destination,
  im: Immutability | undefined,
  current?: Destination,
): Destination {
  if (current) {
    if (d.kind === 'local')
      return { ...d, appendOnly: current.kind === 'local' && current.appendOnly ? true : undefined };
    return { ...d, objectLock: current.kind === 's3' ? current.objectLock : undefined };
  }
  if (d.kind === 'local') {
    if (d.appendOnly && !im?.appendOnly)
      throw new ValidationError([
        {
          path: 'destination.appendOnly',
          message:
            'this folder holds a repository made without append-only: choose an empty or new folder for one',
        },
      ]);
    const { appendOnly: _a, ...rest } = d;
    return im?.appendOnly ? { ...rest, appendOnly: true } : rest;
  }
  if (d.objectLock && !im?.objectLock)
    throw new ValidationError([
      {
        path: 'destination.objectLock',
        message: 'this repository was made without object lock: choose a new bucket (or prefix) for one',
      },
    ]);
  const { objectLock: _o, ...rest } = d;
  return im?.objectLock ? { ...rest, objectLock: im.objectLock.mode } : rest;
}
