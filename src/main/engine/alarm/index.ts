/**
 * The mass-change alarm: flags a backup whose changes look like files being encrypted (ransomware).
 * What it guarantees: it works from what the backup already sees — which files changed, whether their
 * new chunks share anything with the old ones, how their new data compressed next to the old (from the
 * repository index), which new files replace removed ones under another extension, the change journal's
 * rate — plus one 16-byte read of the files where a file-type signature can tell (./signatures.ts).
 * It never re-reads or re-compresses file data, and never fails a backup (a suspect run is saved, marked
 * `massChange.suspect`, and holds the older snapshots: repo/holds.ts).
 * What it does not do: stop the encryption, judge a first backup (nothing to compare with) or block
 * files (VM disks, databases: counted, not analysed), or decide what the user sees (the runner, the API
 * and the app turn a suspect snapshot into an alert).
 *
 *   watch.ts       gathers the statistics while the backup runs (three calls from backup/index.ts)
 *   detect.ts      the verdict: which statistics count as evidence, and the thresholds
 *   signatures.ts  file-type signatures by extension
 */
import type { SnapshotEntry } from '../repo/types.js';
import { judgeMassChange, type MassChangeVerdict } from './detect.js';
import type { MassChangeWatch } from './watch.js';

export { MassChangeWatch, MAX_FILES } from './watch.js';
export type { MassChangeStats, MassChangeExample, WatchOptions } from './watch.js';
export { judgeMassChange, suspiciousFiles, thresholdFor, MIN_FILES, FRACTION } from './detect.js';
export type { MassChangeVerdict } from './detect.js';

/** The verdict on a finished backup's changes (call after its packs are indexed). */
export async function massChangeVerdict(
  watch: MassChangeWatch,
  parent: SnapshotEntry,
): Promise<MassChangeVerdict> {
  const { stats, examples } = await watch.stats();
  return judgeMassChange(stats, examples, parent.massChange?.stats);
}

/** One line for a run log: the verdict in short. */
export function describeVerdict(v: MassChangeVerdict): string {
  return v.suspect
    ? `MASS-CHANGE ALARM: ${v.reasons.join('; ')}`
    : `mass-change check: ${v.suspicious} suspicious files (alarm at ${v.threshold})`;
}
