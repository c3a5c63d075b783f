/**
 * What a restore plans (types and limits shared by its stages): the files and folders to write, what
 * each pack must give (its blobs, and for each the files and offsets it goes to), and the packs queued
 * for reading. A million-file restore holds tens of thousands of planned files at once, so each is kept
 * small (see PlannedFile, PlannedDir).
 */
import type { TreeNode } from '../repo/types.js';

export type Meta = Pick<TreeNode, 'mode' | 'uid' | 'gid' | 'mtimeNs'>;

/** A file to write. A million-file restore holds tens of thousands at once (up to `planLimit` pieces),
 *  so it holds what the writes and the metadata need, not its tree node (let go once its pieces are
 *  planned), nor its path in the snapshot (`displayOf` derives it from `abs`). */
export interface PlannedFile extends Meta {
  abs: Buffer;
  /** The folder it is restored into (latin1: one string shared by the folder's files), where the walk
   *  knew it: whether this run made that folder is looked up by it. */
  dir: string | undefined;
  /** Until its pieces are planned. */
  node?: TreeNode;
  size: number;
  /** Made of one blob: a worker writes it whole. */
  single: boolean;
  remaining: number;
  failed?: string;
  /** Created (and sized) by a worker writing it whole, or by `prepare`. */
  created?: boolean;
  /** Set once `prepare` started creating and sizing it. */
  ready?: Promise<void>;
  /** To be written (not skipped by the overwrite policy, nothing in the way). */
  chosen?: boolean;
}

/** A folder to make, and its metadata to set at the end. Kept for every folder until then, so it is
 *  small: the path as a latin1 string (a small Buffer is a slice of an 8 KiB pool slab and would keep
 *  the whole slab alive: ~90 MB for the 10,502 folders of a million-file restore), and only the fields
 *  `applyMetadata` needs. */
export interface PlannedDir extends Meta {
  path: string;
  depth: number;
}

/** A symlink, made at the end: its path and target as latin1 strings, with only the metadata it needs
 *  (not its tree node). */
export interface PlannedLink {
  path: string;
  target: string;
  uid?: number;
  gid?: number;
  mtimeNs: string;
}

/** A hard link to a file restored under another name (the first one the walk met). */
export interface PlannedHardlink {
  path: string;
  first: PlannedFile;
}

export interface Use {
  file: PlannedFile;
  offset: number;
}

/** A blob a restore reads: its ID, where it lies in its pack, and the pieces it fills. */
export interface PlannedBlob {
  id: string;
  offset: number;
  length: number;
  rawLength: number;
  compressed: boolean;
  /** One piece (most blobs: a file's whole content) or several; NONE once handed to a worker. Not a list
   *  of one: a planned small file holds one such blob, and a list and a Map entry for it were a fifth of
   *  its weight. */
  uses: Use | Use[];
}

/** What a restore needs from one pack: its blobs, and for each the files (and offsets) it goes to. */
export interface PackPlan {
  blobs: PlannedBlob[];
  /** The same by ID, while the walk adds to the plan (let go once the pack is queued). */
  byId: Map<string, PlannedBlob>;
  /** Uses in all. */
  count: number;
}

/** A range of a pack read at once (its blobs sorted by offset, gaps under 512 KiB read through, under
 *  2 MiB in all): what a loop of the pack reader hands to a worker. */
export interface PackJob {
  pack: string;
  start: number;
  end: number;
  blobs: PlannedBlob[];
  /** The uses its blobs fill. */
  count: number;
  /** Its blobs are large on average (BULK_BLOB or more): a range of them is mostly read and written,
   *  little decoded, where a range of small files is mostly decoding and creating files. */
  bulk: boolean;
}

export const BULK_BLOB = 128 * 1024;

/** Files planned and prepared together (folders made, existing files looked at); a batch is handed over
 *  at this many files or folders, or once its files hold `batchPieces` pieces, whichever comes first. */
export const BATCH_FILES = 1024;
/** The pieces a batch's files may hold before it is handed over, and a large file's pieces planned at a
 *  time (the planner waits for room between such slices): a batch of 1,024 block files of a few GiB
 *  each, or one file of a million blocks, is then planned bit by bit within the plan's bound instead of
 *  whole before the bound is looked at. */
export const BATCH_PIECES = 8192;

/** The pieces planned at a time for a plan bounded at `planLimit` (a small limit in tests: small slices). */
export const batchPieces = (planLimit: number): number =>
  Math.max(1, Math.min(BATCH_PIECES, Math.floor(planLimit / 4)));
/* The uses (a file's piece from a blob) a restore holds planned and not written are bounded by the memory
 * mode's planLimit (pool/memory.ts: 16,384, 4,096 in low mode). A planned small file takes ~0.5 KB of
 * heap (its record, path, use and blob), and V8 lets the heap grow to about twice what is live: a bound
 * of 65,536 let a restore of 300,000 small files peak ~60 MiB higher, and no faster (the loops read
 * ranges, not whole packs, so a pack queued before all of it was planned is read by all of them at once). */

export interface Batch {
  files: PlannedFile[];
  dirs: PlannedDir[];
}

export const newBatch = (): Batch => ({ files: [], dirs: [] });

/** An empty list shared where a blob has no file to write whole or no piece (frozen: never added to). */
export const NONE = Object.freeze([]) as never[];

/** Whether a use is a file made of this one blob, to be written whole by the worker (not yet claimed). */
export const wholeUse = (u: Use) => u.offset === 0 && u.file.single && !u.file.failed && !u.file.created;
