/**
 * The types of engine/snapshot/ (see index.ts): a provider per kind of filesystem snapshot, what a run
 * asked for, and what it got per source.
 */
import type { SourceView } from '../operations.js';

/** A job's choice: snapshot where one can be had (default), fail the run when one cannot, or never. */
export type SnapshotMode = 'when-possible' | 'always' | 'never';
export const SNAPSHOT_MODES: readonly SnapshotMode[] = ['when-possible', 'always', 'never'];

export type SnapshotKind = 'btrfs' | 'lvm-thin' | 'lvm' | 'vss' | 'apfs';

/** How one source (or a filesystem mounted inside one) was read: from a snapshot, or live and why. */
export interface SourceReadReport {
  path: string;
  /** The snapshot it was read from; absent: read live. */
  snapshot?: { kind: SnapshotKind; name: string; volume: string };
  /** Why it was read live (absent when read from a snapshot). */
  reason?: string;
  /** A filesystem mounted inside a source (it has its own snapshot, or none). */
  nested?: boolean;
}

/** What the snapshot step did for a run, kept with the run (the History page shows it). */
export interface SnapshotReport {
  mode: SnapshotMode;
  sources: SourceReadReport[];
  /** Leftover snapshots of earlier runs that were found and removed (their names). */
  leftoversRemoved?: string[];
}

/** Runs an external command (btrfs, lvcreate, mount, tmutil …); injected so providers are unit-tested. */
export type Exec = (
  cmd: string,
  args: string[],
  opts?: { timeoutMs?: number; input?: string },
) => Promise<{ stdout: string; stderr: string }>;

/** A record of one snapshot this machine made (written before it is made, removed after it is removed):
 *  how the next run finds and removes it after a crash or kill. */
export interface SnapshotRecord {
  /** Recognisable name: tidemark-<pid>-<time base36>-<random>. */
  name: string;
  kind: SnapshotKind;
  /** The live filesystem root (subvolume, logical volume's mount point, volume) it is a snapshot of. */
  volume: string;
  pid: number;
  createdAt: number;
  /** Provider-specific: where it lives and how to remove it. */
  data: Record<string, string>;
}

/** What one provider would snapshot to cover a path. Paths on one volume share one snapshot. */
export interface SnapshotTarget {
  kind: SnapshotKind;
  /** Identifies the volume (paths with the same key share a snapshot). */
  key: string;
  /** The live path of the volume's root (a btrfs subvolume's root, a mount point, C:\). */
  volume: string;
  /** Human description for the run log ("btrfs subvolume /home on /dev/sda2"). */
  describe: string;
  /** Provider-specific details the create step needs. */
  data: Record<string, string>;
}

/** A snapshot, made and readable. */
export interface MadeSnapshot {
  /** Where the volume's root is readable inside the snapshot. */
  root: string;
  /** The snapshot's and the original's device numbers, when they differ (SourceView.dev). */
  dev?: { snapshot: number; original: number };
  /** Absolute live paths the backup must leave out (the folder the snapshot itself is kept in). */
  hidden?: string[];
}

/**
 * One kind of snapshot per platform folder (linux/, windows/, macos/): `target` says whether it can
 * cover a path (or why not), `create` makes and exposes the snapshot (the record is already written),
 * `remove` undoes everything `create` did and is idempotent (used for leftovers too), `leftovers` finds
 * snapshots by their recognisable names where the platform lets it (btrfs folders, LVM tags).
 */
export interface SnapshotProvider {
  readonly platform: string;
  target(path: string): Promise<SnapshotTarget | { none: string }>;
  create(target: SnapshotTarget, record: SnapshotRecord, signal?: AbortSignal): Promise<MadeSnapshot>;
  remove(record: SnapshotRecord): Promise<void>;
  /** After the backup: why the snapshot may not have held (an overflowed LVM snapshot), or undefined. */
  problem?(record: SnapshotRecord): Promise<string | undefined>;
  /** Snapshots named by Tidemark that exist on this machine (their records may be lost). */
  leftovers?(volumes: SnapshotTarget[]): Promise<SnapshotRecord[]>;
  /** Filesystems mounted strictly inside a path (each needs its own snapshot, or is read live). */
  nestedMounts?(path: string): Promise<string[]>;
}

export type { SourceView };
