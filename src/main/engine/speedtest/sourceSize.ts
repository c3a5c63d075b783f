/**
 * The size of a job's sources, for an estimate when the job has no run yet (a new job in the wizard):
 * a walk of the folders with asynchronous fs calls (the event loop stays free), bounded in time and
 * entries so a huge tree gives a lower bound rather than a long wait. Symlinks are not followed (a
 * backup stores them as links).
 */
import fs from 'node:fs/promises';
import path from 'node:path';

export interface SourceSize {
  bytes: number;
  files: number;
  /** False when the walk stopped at its limits: `bytes` is a lower bound. */
  complete: boolean;
}

export async function measureSources(
  paths: string[],
  limits: { ms?: number; entries?: number; signal?: AbortSignal } = {},
): Promise<SourceSize> {
  const until = Date.now() + (limits.ms ?? 10_000);
  const maxEntries = limits.entries ?? 1_000_000;
  let bytes = 0;
  let files = 0;
  let entries = 0;
  const stack = [...paths];
  while (stack.length) {
    if (Date.now() > until || entries >= maxEntries || limits.signal?.aborted)
      return { bytes, files, complete: false };
    const p = stack.pop()!;
    const st = await fs.lstat(p).catch(() => null);
    entries++;
    if (!st) continue;
    if (st.isFile()) {
      bytes += st.size;
      files++;
    } else if (st.isDirectory()) {
      const names = await fs.readdir(p).catch(() => [] as string[]);
      for (const n of names) stack.push(path.join(p, n));
    }
  }
  return { bytes, files, complete: true };
}
