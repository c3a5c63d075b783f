/**
 * Folder listings for the walk (main thread): a folder's entries and their lstat results, read by a
 * worker with synchronous calls (far cheaper per entry than promise-based calls, and off the thread that
 * serves the UI; scan/listDir.ts), with excluded entries left out. The walk is depth-first (bounded
 * memory); listings of the next folders are fetched ahead, so the disk and the thread pool always have
 * work.
 */
import type { Excluder, EntryStat, HintPlan } from '../scan/index.js';
import type { WorkerPool } from '../pool/index.js';
import type { ListDirResult } from '../pool/wire.js';
import { join, show, type BackupRun } from './run.js';

/** One folder's entries and their lstat results (or errors; undefined when excluded). */
export interface Listing {
  names: Buffer[];
  stats: (EntryStat | Error | undefined)[];
}

/** Listings fetched ahead at most. */
const PREFETCH = 12;

export class Lister {
  private readonly prefetched = new Map<string, Promise<Listing | Error>>();

  constructor(
    private readonly run: BackupRun,
    private readonly pool: WorkerPool,
    private readonly excluder: Excluder,
    private readonly hint: HintPlan | undefined,
  ) {}

  /** The folder's listing: fetched ahead, or now; an Error when the folder cannot be read. */
  take(abs: Buffer): Promise<Listing | Error> {
    const key = abs.toString('latin1');
    const pending = this.prefetched.get(key);
    this.prefetched.delete(key);
    return pending ?? this.list(abs);
  }

  /** Starts listing the folders among a listing's entries that the walk will scan, while there is room. */
  prefetchChildren(abs: Buffer, { names, stats }: Listing, mode: 'scan' | 'full'): void {
    const { prefetched, hint } = this;
    for (let i = 0; i < names.length && prefetched.size < PREFETCH; i++) {
      const st = stats[i];
      if (
        st &&
        !(st instanceof Error) &&
        st.type === 'dir' &&
        (mode === 'full' || !hint || hint.decide(show(join(abs, names[i]))) === 'scan')
      ) {
        const childAbs = join(abs, names[i]);
        const k = childAbs.toString('latin1');
        if (!prefetched.has(k)) {
          const p = this.list(childAbs);
          p.catch(() => {});
          prefetched.set(k, p);
        }
      }
    }
  }

  private async list(abs: Buffer): Promise<Listing | Error> {
    const { run, excluder } = this;
    await run.opts.pauseGate?.wait();
    run.counters.readdir++;
    const r = await this.pool.run<ListDirResult>({ op: 'listDir', path: run.view.read(abs) });
    if (r.error) return Object.assign(new Error(r.error.message), { code: r.error.code });
    run.counters.stat += r.names.length;
    const names = r.names.map((n) => Buffer.from(n.buffer, n.byteOffset, n.byteLength));
    const stats = r.stats.map((st, i) => {
      if (!excluder.empty && excluder.excludes(show(join(abs, names[i])), show(names[i]))) return undefined;
      return 'error' in st
        ? Object.assign(new Error(st.error.message), { code: st.error.code })
        : run.view.recorded(st);
    });
    return { names, stats };
  }
}
