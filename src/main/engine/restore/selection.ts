/**
 * What a restore selects (main thread): the paths `include` names (all when none) and the folder
 * `relativeTo` names as the target (its contents land directly in the target folder). Where the walk
 * goes, whether a path is restored, and the target path of a snapshot path, checked: never outside the
 * target, no unsafe names.
 */
import path from 'node:path';
import { isSafeName } from '../repo/tree.js';
import { UnsafePathError } from '../errors.js';
import { SEP, type RestoreRun } from './run.js';

const WHOLE = { wanted: true, underStrip: true };

export class Selection {
  private readonly includes: string[];
  private readonly strip: string;
  /** A whole restore: every path is wanted and inside it. */
  private readonly everything: boolean;

  constructor(private readonly run: RestoreRun) {
    this.includes = (run.opts.include ?? []).map((p) => path.posix.resolve('/', p));
    this.strip = run.strip;
    this.everything = this.includes.length === 0 && this.strip === '/';
  }

  /** The include patterns, resolved (for the "nothing matches" message). */
  get patterns(): string[] {
    return this.includes;
  }

  /** Whether a snapshot path is restored (it or a folder above it is included). */
  selected(p: string): boolean {
    const { includes } = this;
    return (
      includes.length === 0 ||
      includes.some((inc) => p === inc || p.startsWith(inc === '/' ? '/' : inc + '/'))
    );
  }

  /** Whether a snapshot path leads to something included below it. */
  private leadsTo(p: string): boolean {
    const { includes } = this;
    return (
      includes.length === 0 || includes.some((inc) => inc === p || inc.startsWith(p === '/' ? '/' : p + '/'))
    );
  }

  /** Whether the walk goes into a path at all, and whether it lies inside what is restored (not above
   *  the relativeTo folder). */
  placeOf(childPath: string): { wanted: boolean; underStrip: boolean } {
    if (this.everything) return WHOLE; // a whole restore: every path is wanted and inside it
    const { strip } = this;
    const underStrip = strip === '/' || childPath === strip || childPath.startsWith(strip + '/');
    const aboveStrip = strip !== '/' && strip.startsWith(childPath + '/');
    return {
      wanted: (this.selected(childPath) || this.leadsTo(childPath)) && (underStrip || aboveStrip),
      underStrip,
    };
  }

  /** Where a snapshot path is restored, from its raw name components below the snapshot's root (the
   *  relativeTo prefix stripped); undefined for the relativeTo folder itself or what lies above it. */
  targetOf(snapPath: string, raws: Buffer[]): Buffer | undefined {
    const { strip, run } = this;
    const stripParts = strip === '/' ? 0 : strip.split('/').filter(Boolean).length;
    const rest = raws.slice(stripParts);
    if (rest.length === 0) return undefined;
    for (const r of rest)
      if (!isSafeName(r))
        throw new UnsafePathError(`refusing the unsafe name ${JSON.stringify(r.toString())} in ${snapPath}`);
    const parts: Buffer[] = [run.target];
    for (const r of rest) parts.push(SEP, r);
    const out = Buffer.concat(parts);
    // belt and braces: the joined path must stay inside target
    const rel = path.relative(run.targetPath, out.toString('latin1'));
    if (rel.startsWith('..') || path.isAbsolute(rel))
      throw new UnsafePathError(`${snapPath} would be written outside ${run.opts.target}`);
    return out;
  }
}
