/**
 * MassChangeWatch: what one incremental backup sees of its changes, gathered for the mass-change alarm
 * (./detect.ts judges it). The backup tells it three things and nothing else (backup/index.ts):
 *
 *   read(path, node, previous node)      a changed or new file was read and chunked
 *   listed(dir, names, previous nodes)   a folder lost entries of the previous snapshot (only then: a
 *                                        folder whose previous entries are all still there costs nothing)
 *   stats()                              after the backup's last pack is indexed: the totals
 *
 * From those it learns, per file: whether it replaced a file of the previous snapshot (same path) or
 * is new, whether its new version shares any chunk with the old one (rewritten whole or edited), how
 * well its new chunks compressed against its old ones (both from the repository index: compressed,
 * stored and raw lengths, so nothing is compressed twice), whether its first bytes still carry the
 * signature its extension promises (one 16-byte read, only for files where that can tell something),
 * and which new files replace removed ones in the same folder under an extended or changed extension.
 * Memory: a few hundred bytes per changed file, for at most MAX_FILES of them (the rest are counted).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { BlobIndex } from '../repo/blobIndex.js';
import type { MassChangeExample, MassChangeStats, TreeNode } from '../repo/types.js';

export type { MassChangeExample, MassChangeStats };
import { contentIds, hasContent } from '../repo/tree.js';
import { OVERHEAD } from '../crypto/index.js';
import { HEADER_BYTES, extensionOf, hasSignature, signatureMatches, stemOf } from './signatures.js';

export interface WatchOptions {
  /** The repository index: after the backup's flush it knows every chunk's stored length. */
  index: Pick<BlobIndex, 'get'>;
  /** The zstd level the backup compresses with (0: everything stored raw). */
  compressionLevel: number;
  /** Files in the previous snapshot. */
  filesBefore: number;
  /** When the previous snapshot was taken (for the journal's rate). */
  parentTime?: string;
  /** Folders the change journal reported changed, when it planned this backup. */
  journalDirtyDirs?: number;
  now?: () => number;
}

/** Most changed files analysed one by one (~300 bytes each); the rest are only counted. */
export const MAX_FILES = 200_000;
/** At most this many examples are kept per kind of evidence. */
const EXAMPLES_PER_KIND = 8;
/** A file's data compresses when it is stored in at most this fraction of its bytes… */
const COMPRESSIBLE = 0.9;
/** …and does not when no chunk saved more than zstd's 3% threshold (compress/index.ts). */
const INCOMPRESSIBLE = 0.97;
/** Below this many bytes compressibility says little (tiny chunks are never compressed). */
const MIN_JUDGED_BYTES = 1024;
/** Header reads in flight at once. */
const HEADER_READS = 4;

interface FileRecord {
  dir: string;
  name: string;
  /** Chunks of the new version that the previous one did not have (32 raw bytes each). */
  newIds: Buffer;
  header?: Promise<Buffer | undefined>;
  modified: boolean;
  /** modified: the previous version's compressibility (stored / raw; NaN: not judged). */
  prevRatio: number;
}

interface DirState {
  /** Files of the previous listing that are gone: name → node. */
  removed: Map<string, TreeNode>;
  /** Extensions the folder's files had before. */
  prevExts: Set<string>;
}

export class MassChangeWatch {
  private readonly s: MassChangeStats;
  private readonly files: FileRecord[] = [];
  /** Folders that lost files (only those can have renamed or replaced ones). */
  private readonly dirs = new Map<string, DirState>();
  private readonly examples = new Map<string, MassChangeExample[]>();
  private headerSlots = HEADER_READS;
  private readonly headerQueue: (() => void)[] = [];

  constructor(private readonly o: WatchOptions) {
    this.s = {
      filesBefore: o.filesBefore,
      filesModified: 0,
      filesAdded: 0,
      filesRemoved: 0,
      rewrittenWhole: 0,
      newBytes: 0,
      newStored: 0,
      compressibilityKnown: o.compressionLevel > 0,
      collapsed: 0,
      signatureLost: 0,
      renamed: 0,
      renamedOpaque: 0,
      replacedOpaque: 0,
      notAnalysed: 0,
    };
    if (o.journalDirtyDirs !== undefined) {
      const hours = o.parentTime
        ? Math.max(1 / 60, ((o.now ?? Date.now)() - Date.parse(o.parentTime)) / 3_600_000)
        : NaN;
      this.s.journal = {
        dirtyDirs: o.journalDirtyDirs,
        perHour: Number.isFinite(hours) ? round(o.journalDirtyDirs / hours) : 0,
      };
    }
  }

  /** A folder lost entries: `names` are its entries now, `previous` its previous snapshot's nodes. */
  listed(dir: string, names: readonly string[], previous: readonly TreeNode[] | undefined): void {
    if (!previous?.length) return;
    const now = new Set(names);
    let state: DirState | undefined;
    for (const n of previous) {
      if (n.type !== 'file' || now.has(n.name)) continue;
      this.s.filesRemoved++;
      state ??= { removed: new Map(), prevExts: new Set() };
      state.removed.set(n.name, n);
    }
    if (!state) return;
    for (const n of previous) if (n.type === 'file') state.prevExts.add(extensionOf(n.name));
    this.dirs.set(dir, state);
  }

  /** A file was read: `file` is its path, `node` its new version (with its content), `prev` the
   *  previous snapshot's node of that name; `readAt` where it was read, when elsewhere (a filesystem
   *  snapshot of it). */
  read(file: string, node: TreeNode, prev: TreeNode | undefined, readAt = file): void {
    const dir = path.dirname(file);
    const modified = prev?.type === 'file';
    if (modified) this.s.filesModified++;
    else this.s.filesAdded++;
    if (!node.content || (modified && !hasContent(prev!))) return; // block files: counted only
    if (this.files.length >= MAX_FILES) {
      this.s.notAnalysed++;
      return;
    }
    const prevIds = modified ? new Set(contentIds(prev!)) : undefined;
    const fresh = prevIds ? node.content.filter((id) => !prevIds.has(id)) : node.content;
    if (prevIds && node.content.length && fresh.length === node.content.length && prevIds.size)
      this.s.rewrittenWhole++;
    const rec: FileRecord = {
      dir,
      name: node.name,
      newIds: Buffer.from(fresh.join(''), 'hex'),
      modified,
      prevRatio: modified ? this.ratio(contentIds(prev!)).ratio : NaN,
    };
    // the first bytes tell something where a signature is known, and for a new file (it may replace a
    // removed one of a known type: whether its folder lost files is known only once it is listed whole)
    if (fresh.length && (hasSignature(node.name) || !modified)) rec.header = this.readHeader(readAt);
    this.files.push(rec);
  }

  /** The totals and the examples; call after the backup's packs are indexed (its flush). */
  async stats(): Promise<{ stats: MassChangeStats; examples: MassChangeExample[] }> {
    const s = this.s;
    const opaque = (r: { raw: number; ratio: number }) =>
      s.compressibilityKnown && r.raw >= MIN_JUDGED_BYTES && r.ratio >= INCOMPRESSIBLE;
    const analysed = new Map<FileRecord, { raw: number; ratio: number; header?: Buffer }>();
    for (const f of this.files) {
      const r = this.ratio(idsOf(f.newIds));
      s.newBytes += r.raw;
      s.newStored += r.stored;
      analysed.set(f, { ...r, header: f.header ? await f.header : undefined });
    }
    for (const f of this.files) {
      if (!f.modified) continue;
      const a = analysed.get(f)!;
      const where = path.join(f.dir, f.name);
      const own = a.header ? signatureMatches(f.name, a.header) : undefined;
      // (a header of zeros is a file being filled in, e.g. a torrent's preallocated download: no evidence)
      if (own === false && a.header!.some((b) => b !== 0)) {
        s.signatureLost++;
        this.example('signature', where, `no longer a .${extensionOf(f.name)} file (its signature is gone)`);
      } else if (own !== true && opaque(a) && f.prevRatio <= COMPRESSIBLE) {
        // (a file still of its type says its data is that type's: a zip, a PDF or a photo may compress
        // one day and not the next, e.g. an Office file whose parts were stored and are now deflated)
        s.collapsed++;
        this.example(
          'collapsed',
          where,
          `rewritten with data that does not compress (before: stored in ${pct(f.prevRatio)})`,
        );
      }
    }
    const added = new Map<string, FileRecord[]>();
    for (const f of this.files) {
      if (f.modified || !this.dirs.has(f.dir)) continue;
      let list = added.get(f.dir);
      if (!list) added.set(f.dir, (list = []));
      list.push(f);
    }
    for (const [dir, state] of this.dirs) {
      const unpaired: FileRecord[] = [];
      for (const f of added.get(dir) ?? []) {
        const gone = pairOf(f.name, state.removed);
        if (!gone) {
          unpaired.push(f);
          continue;
        }
        state.removed.delete(gone.name);
        s.renamed++;
        const a = analysed.get(f)!;
        const mine = new Set(idsOf(f.newIds));
        if (contentIds(gone).some((id) => mine.has(id))) continue; // the same data, renamed or edited
        const own = a.header ? signatureMatches(f.name, a.header) : undefined;
        const orig = a.header ? signatureMatches(gone.name, a.header) : undefined;
        const suspicious =
          own === false ||
          (own === undefined && orig === false) ||
          (own === undefined && orig === undefined && opaque(a));
        if (suspicious) {
          s.renamedOpaque++;
          this.example('renamed', path.join(dir, f.name), `replaces ${gone.name} with unreadable content`);
        }
      }
      // random new names: opaque files under an extension new to the folder, as many as it lost
      let replaced = 0;
      for (const f of unpaired) {
        if (replaced >= state.removed.size) break;
        const a = analysed.get(f)!;
        const own = a.header ? signatureMatches(f.name, a.header) : undefined;
        if (own === false || (own === undefined && !state.prevExts.has(extensionOf(f.name)) && opaque(a))) {
          replaced++;
          this.example(
            'replaced',
            path.join(dir, f.name),
            `new opaque .${extensionOf(f.name) || '(no extension)'} file where files were deleted`,
          );
        }
      }
      s.replacedOpaque += replaced;
    }
    const examples = [...this.examples.values()].flat();
    return { stats: { ...s }, examples };
  }

  /** Stored / raw bytes of these chunks from the index (compressed ones without their sealing overhead). */
  private ratio(ids: Iterable<string>): { raw: number; stored: number; ratio: number } {
    let raw = 0;
    let stored = 0;
    for (const id of ids) {
      const loc = this.o.index.get(id);
      if (!loc) continue;
      raw += loc.rawLength;
      stored += loc.compressed ? Math.max(0, loc.length - OVERHEAD) : loc.rawLength;
    }
    return { raw, stored, ratio: raw >= MIN_JUDGED_BYTES ? stored / raw : NaN };
  }

  /** Keeps a few examples per kind of evidence, at most two per folder (so they show how far it spread). */
  private example(kind: string, file: string, what: string): void {
    let list = this.examples.get(kind);
    if (!list) this.examples.set(kind, (list = []));
    const dir = path.dirname(file);
    if (list.length < EXAMPLES_PER_KIND && list.filter((e) => path.dirname(e.path) === dir).length < 2)
      list.push({ path: file, what });
  }

  private async readHeader(p: string): Promise<Buffer | undefined> {
    if (this.headerSlots === 0) await new Promise<void>((r) => this.headerQueue.push(r));
    else this.headerSlots--;
    try {
      const fh = await fs.open(p, 'r');
      try {
        const buf = Buffer.alloc(HEADER_BYTES);
        const { bytesRead } = await fh.read(buf, 0, HEADER_BYTES, 0);
        return buf.subarray(0, bytesRead);
      } finally {
        await fh.close();
      }
    } catch {
      return undefined; // gone or unreadable since: no evidence either way
    } finally {
      const next = this.headerQueue.shift();
      if (next) next();
      else this.headerSlots++;
    }
  }
}

/** The removed file a new one takes the place of: its name extended ("a.docx" → "a.docx.locked") or
 *  its extension changed ("a.docx" → "a.crypt"). */
function pairOf(name: string, removed: Map<string, TreeNode>): TreeNode | undefined {
  // extended: every prefix ending before a dot may be the old name
  for (let i = name.indexOf('.', 1); i > 0; i = name.indexOf('.', i + 1)) {
    const old = removed.get(name.slice(0, i));
    if (old) return old;
  }
  const stem = stemOf(name);
  if (stem === name) return undefined;
  for (const [old, node] of removed) if (stemOf(old) === stem && old !== stem) return node;
  return undefined;
}

function* idsOf(buf: Buffer): Iterable<string> {
  for (let i = 0; i + 32 <= buf.length; i += 32) yield buf.toString('hex', i, i + 32);
}

const round = (n: number) => Math.round(n * 100) / 100;
const pct = (r: number) => `${Math.round(r * 100)}% of its size`;
