/**
 * Snapshots held by the mass-change alarm. A backup whose changes looked like mass encryption is saved
 * with `massChange.suspect` (engine/alarm); until the user dismisses that alarm, the suspect snapshot and
 * every older snapshot of the same host are held: forget (retention) keeps them whatever its policy says,
 * so the last good versions of the files survive however many encrypted backups follow.
 *
 * A dismissal is an encrypted object `alarms/<id>` naming the snapshot (and who dismissed it, when, and
 * why), written once and never changed — so it lives in the repository, like the snapshot it answers,
 * and every computer and a rebuilt catalog see the same holds. Writing one is adding an object, which an
 * append-only repository allows; what it releases (forget, prune) still needs the maintenance password
 * there.
 */
import os from 'node:os';
import type { Backend } from '../backend/types.js';
import type { MasterKey } from '../crypto/index.js';
import { NotFoundError, UsageError, CorruptObjectError } from '../errors.js';
import { loadJson, saveJson } from './objects.js';
import type { ID, SnapshotEntry } from './types.js';

export interface AlarmDismissal {
  version: 1;
  /** The suspect snapshot whose alarm this dismisses. */
  snapshot: ID;
  dismissedAt: string;
  host: string;
  username?: string;
  /** The user's reason ("I encrypted my tax folder myself"). */
  note?: string;
}

interface Store {
  backend: Backend;
  key: MasterKey;
}

/** Every dismissal in the repository (damaged ones are skipped: the alarm then stays, which is safe). */
export async function listDismissals(repo: Store): Promise<AlarmDismissal[]> {
  const out: AlarmDismissal[] = [];
  for await (const o of repo.backend.list('alarms')) {
    try {
      out.push(await loadJson<AlarmDismissal>(repo.backend, repo.key, 'alarms', o.name));
    } catch (err) {
      if (!(err instanceof NotFoundError) && !(err instanceof CorruptObjectError)) throw err;
    }
  }
  return out;
}

/** Suspect snapshots whose alarm nobody dismissed, oldest first. */
export function activeAlarms(snapshots: SnapshotEntry[], dismissals: AlarmDismissal[]): SnapshotEntry[] {
  const dismissed = new Set(dismissals.map((d) => d.snapshot));
  return snapshots
    .filter((s) => s.massChange?.suspect && !dismissed.has(s.id))
    .sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : 0));
}

/**
 * The snapshots an active alarm holds: the suspect snapshot itself and every snapshot of its host taken
 * before it. Maps each held snapshot to the suspect snapshot holding it (the oldest, if several do).
 */
export function heldSnapshots(
  snapshots: SnapshotEntry[],
  dismissals: AlarmDismissal[],
): Map<ID, SnapshotEntry> {
  const held = new Map<ID, SnapshotEntry>();
  for (const alarm of activeAlarms(snapshots, dismissals))
    for (const s of snapshots)
      if (s.host === alarm.host && s.time <= alarm.time && !held.has(s.id)) held.set(s.id, alarm);
  return held;
}

const HELD = 'held by the mass-change alarm of ';

/** Why a held snapshot is kept (for forget's reasons). */
export function holdReason(alarm: SnapshotEntry): string {
  return `${HELD}${alarm.id.slice(0, 8)} (${alarm.time.slice(0, 16).replace('T', ' ')}); dismiss it to release`;
}

/** How many of a retention decision's kept snapshots only an alarm's hold keeps (see holdReason). */
export function heldCount(keep: readonly { reasons: readonly string[] }[]): number {
  return keep.filter((k) => k.reasons.some((r) => r.startsWith(HELD))).length;
}

/**
 * Dismisses the alarm of a suspect snapshot (the user says the changes were theirs). Throws UsageError
 * when the snapshot is not suspect or its alarm is already dismissed.
 */
export async function dismissAlarm(
  repo: Store,
  snapshot: SnapshotEntry,
  opts: { host?: string; note?: string; now?: Date } = {},
): Promise<AlarmDismissal> {
  if (!snapshot.massChange?.suspect)
    throw new UsageError(`snapshot ${snapshot.id.slice(0, 8)} raised no mass-change alarm`);
  if ((await listDismissals(repo)).some((d) => d.snapshot === snapshot.id))
    throw new UsageError(`the alarm of snapshot ${snapshot.id.slice(0, 8)} is already dismissed`);
  const d: AlarmDismissal = {
    version: 1,
    snapshot: snapshot.id,
    dismissedAt: (opts.now ?? new Date()).toISOString(),
    host: opts.host ?? os.hostname(),
    ...(safeUser() ? { username: safeUser() } : {}),
    ...(opts.note ? { note: opts.note } : {}),
  };
  await saveJson(repo.backend, repo.key, 'alarms', d);
  return d;
}

function safeUser(): string | undefined {
  try {
    return os.userInfo().username;
  } catch {
    return undefined;
  }
}
