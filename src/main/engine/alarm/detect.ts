/**
 * The mass-change verdict: does what one backup saw (./watch.ts) look like files being encrypted?
 *
 * Evidence is counted per file, and only changes that ordinary work does not produce count:
 * - a changed file whose first bytes no longer carry its type's signature (a .docx that is no zip, a
 *   .jpg that is no JPEG; zeros excepted: a download being filled in);
 * - a changed file whose new data does not compress where its previous version did (text, databases,
 *   executables turned to noise), unless it is still a file of its type (an Office file or a photo may
 *   compress one day and not the next);
 * - a new file replacing a removed one under an extended or changed name (a.docx → a.docx.locked),
 *   sharing none of its data and being neither a file of its own named type nor of the old one;
 * - new opaque files under an extension their folder never had, where as many files were removed.
 * Editing documents, saving photos, installing updates, importing photos, compressing logs or renaming
 * files does none of these (their data is either a valid file of its type, compresses as before, or is
 * the same data under a new name). The run is suspect when the suspicious files reach MIN_FILES and
 * FRACTION of the files the previous snapshot had. The rates and totals that support the finding (files
 * rewritten whole, the new data's compressibility, the change journal's rate) go into the reasons.
 * Tuned on simulated normal days and attacks: tests/alarm/, `npm run bench:alarm`.
 */
import type { MassChangeExample, MassChangeStats, MassChangeVerdict } from '../repo/types.js';

export type { MassChangeVerdict };

/** Suspicious files needed at least (a handful of odd files is no attack)… */
export const MIN_FILES = 10;
/** …and at least this fraction of the previous snapshot's files. */
export const FRACTION = 0.005;

/** How many suspicious files make a run with `filesBefore` files in its previous snapshot suspect. */
export function thresholdFor(filesBefore: number): number {
  return Math.max(MIN_FILES, Math.ceil(FRACTION * filesBefore));
}

export function suspiciousFiles(s: MassChangeStats): number {
  return s.signatureLost + s.collapsed + s.renamedOpaque + s.replacedOpaque;
}

const pct = (n: number, of: number) => (of > 0 ? `${((100 * n) / of).toFixed(n * 100 < of ? 1 : 0)}%` : '–');
const n = (x: number) => x.toLocaleString('en-US');

/** Judges one backup's statistics; `previous` are the previous run's (for rates), when it had them. */
export function judgeMassChange(
  stats: MassChangeStats,
  examples: MassChangeExample[],
  previous?: MassChangeStats,
): MassChangeVerdict {
  const suspicious = suspiciousFiles(stats);
  const threshold = thresholdFor(stats.filesBefore);
  const suspect = suspicious >= threshold;
  const reasons: string[] = [];
  if (suspect)
    reasons.push(
      `${n(suspicious)} files (${pct(suspicious, stats.filesBefore)} of ${n(stats.filesBefore)}) changed the way encryption changes files`,
    );
  if (stats.signatureLost)
    reasons.push(
      `${n(stats.signatureLost)} changed files no longer are files of their type (e.g. a .docx that is no zip)`,
    );
  if (stats.collapsed)
    reasons.push(`${n(stats.collapsed)} changed files turned from compressible to incompressible data`);
  if (stats.renamedOpaque)
    reasons.push(
      `${n(stats.renamedOpaque)} files were replaced by unreadable copies under a new extension (of ${n(stats.renamed)} renamed)`,
    );
  if (stats.replacedOpaque)
    reasons.push(
      `${n(stats.replacedOpaque)} deleted files were replaced by opaque files under a new extension`,
    );
  if (stats.filesModified || stats.filesAdded || stats.filesRemoved)
    reasons.push(
      `${n(stats.filesModified)} files modified (${n(stats.rewrittenWhole)} rewritten whole), ${n(stats.filesAdded)} added, ${n(stats.filesRemoved)} removed`,
    );
  if (stats.compressibilityKnown && stats.newBytes > 0) {
    const now = stats.newStored / stats.newBytes;
    const before = previous && previous.newBytes > 0 ? previous.newStored / previous.newBytes : undefined;
    reasons.push(
      `new data stored in ${pct(stats.newStored, stats.newBytes)} of its size${before !== undefined ? ` (the previous run: ${pct(before, 1)})` : ''}${now >= 0.97 ? ': it does not compress' : ''}`,
    );
  }
  if (stats.journal) {
    const prev = previous?.journal?.perHour;
    reasons.push(
      `the change journal reported ${n(stats.journal.dirtyDirs)} changed folders (${stats.journal.perHour} per hour${prev ? `; the previous run ${prev}` : ''})`,
    );
  }
  if (stats.notAnalysed)
    reasons.push(`${n(stats.notAnalysed)} further changed files were counted, not analysed`);
  return {
    version: 1,
    suspect,
    suspicious,
    threshold,
    reasons,
    examples: suspect ? examples : examples.slice(0, 5),
    stats,
  };
}
