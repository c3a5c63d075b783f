// Shared helpers for the tracking tests: scratch trees on the checkout's filesystem (fanotify
// filesystem marks need a filesystem that reports file handles; tmpfs on older kernels does not)
// and starting a real native backend, or saying why it cannot run here.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadTrackerAddon, NativeTracker } from '../../src/main/tracking/native.js';
import type { TrackerBatch } from '../../src/main/tracking/types.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export function scratchDir(prefix: string): string {
  const base = process.env.TIDEMARK_TEST_TMP ?? path.join(repoRoot, 'test-artifacts', 'tracking');
  mkdirSync(base, { recursive: true });
  return mkdtempSync(path.join(base, `${prefix}-`));
}

/** Why a native backend cannot be tested here, or undefined when it can. */
export function nativeSkipReason(backend: 'fanotify' | 'inotify'): string | undefined {
  if (process.platform !== 'linux') return `${backend} is Linux-only`;
  const { addon, error } = loadTrackerAddon();
  if (!addon)
    return process.env.TIDEMARK_SKIP_NATIVE === '1' ? `native addon not built: ${error}` : undefined; // otherwise: fail loudly below
  if (backend === 'fanotify' && process.getuid?.() !== 0)
    return 'fanotify filesystem marks need root (CAP_SYS_ADMIN)';
  return probe(backend);
}

const probed = new Map<string, string | undefined>();
/** Starts and stops the backend once on a scratch directory: a container may deny fanotify even to root. */
function probe(backend: 'fanotify' | 'inotify'): string | undefined {
  if (!probed.has(backend)) {
    const { addon } = loadTrackerAddon();
    const dir = scratchDir(`probe-${backend}`);
    try {
      const t = new addon!.Tracker(backend, [dir], () => {});
      t.start();
      t.stop();
      probed.set(backend, undefined);
    } catch (err) {
      probed.set(backend, `${backend} cannot run here: ${(err as Error).message}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return probed.get(backend);
}

export async function startNative(backend: 'fanotify' | 'inotify', roots: string[]): Promise<NativeTracker> {
  const { addon, error } = loadTrackerAddon();
  if (!addon)
    throw new Error(`the native tracker addon is not built (${error}); set TIDEMARK_SKIP_NATIVE=1 to skip`);
  const t = new NativeTracker(backend, addon, { batchMillis: 10 });
  await t.start(roots);
  return t;
}

/** Collects batches; `take()` flushes the tracker and returns (and clears) the union so far. */
export function collect(t: { onEvents(l: (b: TrackerBatch) => void): () => void; flush(): Promise<void> }) {
  let dirs = new Set<string>();
  let trees = new Set<string>();
  let lost: string[] = [];
  let broken: string[] = [];
  t.onEvents((b) => {
    b.dirtyDirs.forEach((d) => dirs.add(d));
    b.dirtyTrees.forEach((d) => trees.add(d));
    if (b.lost) lost.push(b.lost);
    if (b.broken) broken.push(b.broken);
  });
  return {
    async take() {
      await t.flush();
      const r = { dirs: [...dirs].sort(), trees: [...trees].sort(), lost, broken };
      dirs = new Set();
      trees = new Set();
      lost = [];
      broken = [];
      return r;
    },
  };
}
