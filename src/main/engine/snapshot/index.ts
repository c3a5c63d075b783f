/**
 * snapshot/ — reading a job's sources from a point-in-time filesystem snapshot, so that files that are open
 * and changing while the backup runs (mail stores, databases, VM disks) are saved as they were at one
 * instant, not torn between old and new pages.
 *
 * `SourceSnapshots.take` finds, for each source and each filesystem mounted inside one, the volume that
 * holds it (a btrfs subvolume, an LVM logical volume, a Windows volume, an APFS volume), takes one
 * snapshot per volume, and returns source views (BackupOptions.sourceViews: recorded path → where to
 * read it) and a report of which paths were read from a snapshot and why the others were not. `release`
 * removes them. Every snapshot is recorded (registry.ts) before it is made, and named
 * tidemark-<pid>-<time>-<random>: the next run removes what a crash or kill left behind.
 *
 * Guarantees: mode 'always' fails the run before anything is read when a path has no snapshot; in
 * 'when-possible' a path without one is read live, and the report says why. A snapshot is released even
 * when the backup fails. Not here: deciding when in the run the snapshot is taken (after the change
 * journal's cursor and the block tracker's bitmap: tracking/service.ts), or pre/post commands
 * (schedule/hooks.ts). Platform code is split by folder (linux/, windows/, macos/), chosen in `provider()`.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { SourceView } from '../operations.js';
import { SnapshotError, SnapshotUnavailableError } from './errors.js';
import { SnapshotRegistry, ownerAlive, snapshotName } from './registry.js';
import type {
  MadeSnapshot,
  SnapshotMode,
  SnapshotProvider,
  SnapshotRecord,
  SnapshotReport,
  SnapshotTarget,
  SourceReadReport,
} from './types.js';
import { LinuxSnapshots } from './linux/index.js';
import { WindowsSnapshots } from './windows/index.js';
import { MacSnapshots } from './macos/index.js';

export * from './types.js';
export * from './errors.js';
export { SnapshotRegistry, snapshotName, parseSnapshotName } from './registry.js';

/** Where a data folder keeps its snapshot records. */
export function snapshotRecordDir(dataDir: string): string {
  return path.join(dataDir, 'snapshots');
}

/** The platform's snapshot provider; undefined where Tidemark has none (then every source is read live). */
export function provider(platform = process.platform): SnapshotProvider | undefined {
  if (platform === 'linux') return new LinuxSnapshots();
  if (platform === 'win32') return new WindowsSnapshots();
  if (platform === 'darwin') return new MacSnapshots();
  return undefined;
}

export interface SourceSnapshotsOptions {
  /** Where the records live (`<data folder>/snapshots`). */
  stateDir: string;
  mode: SnapshotMode;
  log?: (line: string) => void;
  /** Default: the platform's (provider()). */
  provider?: SnapshotProvider;
}

export interface TakenViews {
  views: SourceView[];
  /** Live paths the backup must leave out (where the snapshots themselves are kept). */
  hidden: string[];
  report: SnapshotReport;
}

/** Names of the snapshots held by sessions of this process. */
const active = new Set<string>();

const within = (p: string, dir: string) =>
  p === dir || p.startsWith(dir.endsWith(path.sep) ? dir : dir + path.sep);

export class SourceSnapshots {
  private readonly provider: SnapshotProvider | undefined;
  private readonly registry: SnapshotRegistry;
  private readonly made: SnapshotRecord[] = [];
  private readonly log: (line: string) => void;
  /** Filled by take() (and cleanLeftovers()); kept with the run. */
  report: SnapshotReport;

  constructor(private readonly opts: SourceSnapshotsOptions) {
    this.provider = opts.provider === undefined ? provider() : opts.provider;
    this.registry = new SnapshotRegistry(opts.stateDir);
    this.log = opts.log ?? (() => {});
    this.report = { mode: opts.mode, sources: [] };
  }

  /** Removes the snapshots earlier runs left behind (recorded, or found by name on `targets`' volumes). */
  async cleanLeftovers(targets: SnapshotTarget[] = []): Promise<string[]> {
    const p = this.provider;
    if (!p) return [];
    const removed: string[] = [];
    const seen = new Set<string>();
    // a record of this very process that no session holds is a leftover too (a release that failed)
    const found = (await this.registry.list()).filter((r) =>
      r.pid === process.pid ? !active.has(r.name) : !ownerAlive(r.pid, r.createdAt),
    );
    if (p.leftovers) found.push(...(await p.leftovers(targets).catch(() => [])));
    for (const r of found) {
      if (seen.has(r.name)) continue;
      seen.add(r.name);
      try {
        await p.remove(r);
        await this.registry.delete(r.name);
        removed.push(r.name);
        this.log(
          `snapshot: removed ${r.name}, left behind by an earlier run (process ${r.pid}) that stopped before releasing it`,
        );
      } catch (err) {
        this.log(`snapshot: could not remove ${r.name}, left by an earlier run: ${(err as Error).message}`);
      }
    }
    if (removed.length) this.report.leftoversRemoved = [...(this.report.leftoversRemoved ?? []), ...removed];
    return removed;
  }

  /**
   * Takes the snapshots for these sources and returns where to read them. Mode 'never': nothing is taken
   * (leftovers are still removed). Mode 'always': throws SnapshotUnavailableError when any path has none.
   */
  async take(sources: string[], signal?: AbortSignal): Promise<TakenViews> {
    const mode = this.opts.mode;
    const p = this.provider;
    const report: SourceReadReport[] = [];
    this.report.sources = report;
    if (mode === 'never' || !p) {
      const reason =
        mode === 'never'
          ? 'snapshots are off for this job'
          : `Tidemark has no filesystem snapshots on ${process.platform}`;
      for (const s of sources) report.push({ path: s, reason });
      if (mode === 'always')
        throw new SnapshotUnavailableError(`no snapshot for ${sources.join(', ')}: ${reason}`);
      if (p) await this.cleanLeftovers();
      this.log(`snapshot: none (${reason}); sources are read as they are`);
      return { views: [], hidden: [], report: this.report };
    }
    // the sources, then the filesystems mounted (or subvolumes nested) inside them
    const roots: { path: string; nested: boolean }[] = sources.map((s) => ({ path: s, nested: false }));
    for (const s of sources)
      for (const n of (await p.nestedMounts?.(s).catch(() => [])) ?? [])
        if (!roots.some((r) => r.path === n)) roots.push({ path: n, nested: true });
    const targets = new Map<string, SnapshotTarget | { none: string }>();
    for (const r of roots) {
      try {
        targets.set(r.path, await p.target(r.path));
      } catch (err) {
        targets.set(r.path, { none: `cannot tell which volume holds it: ${(err as Error).message}` });
      }
    }
    const none = roots.filter((r) => 'none' in targets.get(r.path)!);
    if (mode === 'always' && none.length)
      throw new SnapshotUnavailableError(
        `the job asks for a snapshot always, and ${none.map((r) => `${r.path} has none (${(targets.get(r.path) as { none: string }).none})`).join('; ')}`,
      );
    const volumes = new Map<string, SnapshotTarget>();
    for (const t of targets.values()) if (!('none' in t)) volumes.set(t.key, t);
    await this.cleanLeftovers([...volumes.values()]);
    const made = new Map<string, (MadeSnapshot & { record: SnapshotRecord }) | { failed: string }>();
    for (const [key, t] of volumes) {
      if (signal?.aborted) break;
      const record: SnapshotRecord = {
        name: snapshotName(),
        kind: t.kind,
        volume: t.volume,
        pid: process.pid,
        createdAt: Date.now(),
        data: { ...t.data },
      };
      try {
        await this.registry.add(record); // before it exists: a crash from here on leaves a record
        this.made.push(record);
        active.add(record.name);
        const m = await p.create(t, record, signal);
        await this.registry.update(record);
        made.set(key, { ...m, record });
        this.log(`snapshot: took ${record.name} of ${t.describe}`);
      } catch (err) {
        const msg = (err as Error).message;
        made.set(key, { failed: msg });
        await this.removeOne(record);
        if (mode === 'always')
          throw new SnapshotUnavailableError(
            `the job asks for a snapshot always, and the snapshot of ${t.describe} failed: ${msg}`,
          );
      }
    }
    const views: SourceView[] = [];
    const hidden = new Set<string>();
    for (const r of roots) {
      const t = targets.get(r.path)!;
      const m = 'none' in t ? undefined : made.get(t.key);
      const nested = r.nested ? { nested: true } : {};
      if (!m || 'failed' in m) {
        const reason = 'none' in t ? t.none : m ? `the snapshot failed: ${m.failed}` : 'cancelled';
        report.push({ path: r.path, reason, ...nested });
        // inside a snapshotted source, a path read live needs its own (identity) view
        views.push({ path: r.path, readFrom: r.path });
        this.log(`snapshot: ${r.path} is read live: ${reason}`);
        continue;
      }
      const vt = t as SnapshotTarget;
      const real = await fsp.realpath(r.path);
      const rel = path.relative(vt.volume, real);
      views.push({
        path: r.path,
        readFrom: rel ? path.join(m.root, rel) : m.root,
        ...(m.dev ? { dev: m.dev } : {}),
      });
      for (const h of m.hidden ?? []) if (sources.some((s) => within(h, s))) hidden.add(h);
      report.push({
        path: r.path,
        snapshot: { kind: vt.kind, name: m.record.name, volume: vt.volume },
        ...nested,
      });
      this.log(`snapshot: ${r.path} is read from ${m.record.name} (${vt.kind})`);
    }
    if (views.every((v) => v.readFrom === v.path)) return { views: [], hidden: [], report: this.report };
    return { views, hidden: [...hidden], report: this.report };
  }

  /** Problems that showed after the backup (an overflowed LVM snapshot), one message each. */
  async problems(): Promise<string[]> {
    const out: string[] = [];
    for (const r of this.made) {
      const msg = await this.provider?.problem?.(r).catch(() => undefined);
      if (msg) out.push(msg);
    }
    return out;
  }

  /** Removes every snapshot this session took (each is tried; the first failure is thrown after all). */
  async release(): Promise<void> {
    let first: unknown;
    while (this.made.length) {
      const r = this.made.pop()!;
      try {
        await this.removeOne(r, true);
      } catch (err) {
        first ??= err;
      }
    }
    if (first) throw first;
  }

  private async removeOne(r: SnapshotRecord, strict = false): Promise<void> {
    const i = this.made.indexOf(r);
    if (i >= 0) this.made.splice(i, 1);
    active.delete(r.name);
    try {
      await this.provider?.remove(r);
      await this.registry.delete(r.name);
      if (strict) this.log(`snapshot: released ${r.name}`);
    } catch (err) {
      const msg = `snapshot: could not remove ${r.name} (${(err as Error).message}); the next run tries again`;
      this.log(msg);
      if (strict) throw new SnapshotError(msg, { cause: err });
    }
  }
}
