/**
 * Source views (BackupOptions.sourceViews): the backup walks and records the original paths, and reads
 * every file, folder and link at the same place inside a point-in-time filesystem snapshot
 * (engine/snapshot/). This is the one translation between the two; the walk applies `read` where it touches
 * the filesystem and `recorded` to the device numbers it gets back.
 */
import path from 'node:path';
import { minimatch } from 'minimatch';
import type { BackupOptions, SourceView } from '../operations.js';
import type { EntryStat } from '../scan/stat.js';

export interface SourceViewMap {
  /** Where to read a recorded absolute path. */
  read(abs: Buffer): Buffer;
  /** An entry's lstat as recorded: the snapshot's device number becomes the original's. */
  recorded<T extends EntryStat>(st: T): T;
}

const identity: SourceViewMap = { read: (abs) => abs, recorded: (st) => st };

/** The map for these views; without views, the identity (reads live, costs nothing). */
export function sourceViewMap(views: SourceView[] | undefined): SourceViewMap {
  // views that read live matter only beside others (a filesystem mounted inside a snapshotted source)
  if (!views?.some((v) => v.readFrom !== v.path || v.dev)) return identity;
  const mapped = views;
  const sep = path.sep.charCodeAt(0);
  // deepest first: a filesystem mounted inside a source has its own view
  const list = mapped
    .map((v) => {
      const p = path.resolve(v.path);
      return { prefix: Buffer.from(p === path.sep ? '' : p), readFrom: Buffer.from(v.readFrom) };
    })
    .sort((a, b) => b.prefix.length - a.prefix.length);
  const devs = new Map<number, number>();
  for (const v of mapped) if (v.dev) devs.set(v.dev.snapshot, v.dev.original);
  return {
    read(abs) {
      for (const v of list) {
        const n = v.prefix.length;
        if (
          abs.length >= n &&
          (n === 0 || abs.compare(v.prefix, 0, n, 0, n) === 0) &&
          (abs.length === n || abs[n] === sep || n === 0)
        )
          return n === abs.length ? v.readFrom : Buffer.concat([v.readFrom, abs.subarray(n)]);
      }
      return abs;
    },
    recorded(st) {
      const dev = devs.get(st.dev);
      if (dev !== undefined) st.dev = dev;
      return st;
    },
  };
}

/** Exclusion patterns that match exactly these absolute paths (and what is below them). */
export function hiddenPatterns(paths: string[] | undefined): string[] {
  return (paths ?? []).flatMap((p) => {
    const e = minimatch.escape(path.resolve(p));
    return [e, `${e}/**`];
  });
}

/** The options with their source views made (BackupOptions.prepareSourceViews called once, here). */
export async function withSourceViews(opts: BackupOptions): Promise<BackupOptions> {
  if (!opts.prepareSourceViews) return opts;
  const made = await opts.prepareSourceViews();
  return {
    ...opts,
    prepareSourceViews: undefined,
    sourceViews: [...(opts.sourceViews ?? []), ...(made?.views ?? [])],
    hiddenPaths: [...(opts.hiddenPaths ?? []), ...(made?.hidden ?? [])],
  };
}
