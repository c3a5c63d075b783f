/**
 * The data model of a repository as the rest of the engine (and the catalog, API and UI) sees it:
 * tree nodes, trees and snapshot manifests. Encoding lives in tree.ts / snapshot.ts.
 */

/** Hex-encoded 32-byte ID (keyed BLAKE3 for blobs, BLAKE3 of the stored bytes for files). */
export type ID = string;

export type NodeType = 'file' | 'dir' | 'symlink' | 'fifo' | 'socket' | 'chardev' | 'blockdev';

export interface TreeNode {
  /** Name as UTF-8 text (lossy for names that are not valid UTF-8; see rawName). */
  name: string;
  /** Base64 of the raw name bytes, present only when the name is not valid UTF-8. */
  rawName?: string;
  type: NodeType;
  mode: number;
  /** Modification time in nanoseconds since the epoch, as a decimal string (exceeds 2^53). */
  mtimeNs: string;
  ctimeNs?: string;
  atimeNs?: string;
  uid?: number;
  gid?: number;
  user?: string;
  group?: string;
  size?: number;
  inode?: number;
  dev?: number;
  nlink?: number;
  /** file: the blob IDs of its chunks, in order (a block file has blockIds instead; read either with
   *  contentIds() / contentCount() from tree.ts). */
  content?: ID[];
  /** file: set when the content was cut into fixed-size blocks of this many bytes (the last one may be
   *  shorter) instead of content-defined chunks — large files that change in place (VM disks, databases),
   *  so that block-level tracking re-reads only the blocks that changed (docs/architecture.md §3, level 1). */
  blockSize?: number;
  /** file with blockSize: the blob IDs of its blocks, 32 raw bytes each, in order. A 2 GiB file has
   *  256 Ki blocks: as hex in JSON its list took ~70 ms to load and ~75 ms to save on every incremental;
   *  the tree stores it in binary after its JSON (tree.ts) and an incremental patches a copy in place.
   *  Trees written before it name a block file's blocks in `content`, which stays valid. */
  blockIds?: Buffer;
  /** file with blockSize, a long block list (tree.ts, "Block lists in two parts"): the ID of a tree-type blob
   *  holding a base list (32 raw bytes per block), the file's block count, and the blocks that differ from
   *  the base (36 bytes each: the block's index, uint32 LE, ascending, then its ID). Repository.loadTree
   *  sets blockIds to the whole list from them; a tree stores these instead of blockIds. */
  blockBase?: ID;
  blockCount?: number;
  blockPatch?: Buffer;
  /** dir: the ID of its tree blob. */
  subtree?: ID;
  /** dir: totals of everything below it (derived from the subtree, so it never breaks the Merkle property). */
  summary?: DirSummary;
  /** symlink: the link target (base64 of raw bytes in linkTargetRaw when not valid UTF-8). */
  linkTarget?: string;
  linkTargetRaw?: string;
  /** device files: the device number. */
  rdev?: number;
}

export interface DirSummary {
  files: number;
  dirs: number;
  bytes: number;
}

export interface Tree {
  nodes: TreeNode[];
}

export interface SkippedEntry {
  path: string;
  reason: string;
  code?: string;
}

export interface SnapshotStats {
  files: number;
  dirs: number;
  /** Sum of file sizes in the snapshot. */
  totalBytes: number;
  /** Files and bytes actually read from the source (changed or new files). */
  filesRead: number;
  bytesRead: number;
  /** Files whose content was reused from the parent snapshot without reading. */
  filesUnchanged: number;
  /** Blobs and plaintext bytes that were not in the repository before. */
  newBlobs: number;
  newBytes: number;
  /** Bytes added to the repository (after compression and encryption, including trees). */
  storedBytes: number;
  durationMs: number;
}

/** Statistics of a snapshot that recorded nothing (fixtures, crafted snapshots). */
export function emptySnapshotStats(): SnapshotStats {
  return {
    files: 0,
    dirs: 0,
    totalBytes: 0,
    filesRead: 0,
    bytesRead: 0,
    filesUnchanged: 0,
    newBlobs: 0,
    newBytes: 0,
    storedBytes: 0,
    durationMs: 0,
  };
}

export interface Snapshot {
  version: 1;
  time: string; // ISO-8601
  host: string;
  username?: string;
  paths: string[];
  tags: string[];
  job?: string;
  tree: ID;
  parent?: ID;
  excludes?: string[];
  stats: SnapshotStats;
  skipped: SkippedEntry[];
  /** Change-journal cursor this snapshot is consistent with (see tracking/). */
  journalCursor?: Record<string, unknown>;
  /** How the scan found changes: 'full-scan' | 'journal' | 'blocks', with the reason for any fallback. */
  scanMode?: { mode: string; reason?: string };
  /** The mass-change alarm's verdict on this backup's changes (engine/alarm; absent without a parent
   *  snapshot). A suspect snapshot holds every older snapshot of its host against forget until the
   *  alarm is dismissed (repo/holds.ts). */
  massChange?: MassChangeVerdict;
  /** Set by `repair` on a snapshot saved again without what was lost: the snapshot it replaces. */
  repairedFrom?: ID;
}

/** What the alarm counts of one backup; kept in the snapshot (massChange.stats). */
export interface MassChangeStats {
  /** Files in the previous snapshot: the base of the fractions. */
  filesBefore: number;
  /** Files at a path the previous snapshot had, whose content was read again. */
  filesModified: number;
  /** New files, and files of the previous snapshot gone from folders that were listed. */
  filesAdded: number;
  filesRemoved: number;
  /** Modified files that share no chunk with their previous version. */
  rewrittenWhole: number;
  /** Plaintext bytes of the new chunks of modified and added files, and what they take stored
   *  (compressed; without encryption overhead): their ratio is the new data's compressibility. */
  newBytes: number;
  newStored: number;
  /** False when the job stores everything raw (compression level 0): no compressibility evidence. */
  compressibilityKnown: boolean;
  /** Modified files whose new data does not compress although their previous version did. */
  collapsed: number;
  /** Modified files whose first bytes no longer carry the signature their extension promises. */
  signatureLost: number;
  /** New files that replace a removed file of the same folder under an extended or changed extension
   *  (report.docx → report.docx.locked, report.docx → report.crypt), and of those the ones whose content
   *  is opaque and unrelated to the removed file (no chunk shared; not a file of its own named type). */
  renamed: number;
  renamedOpaque: number;
  /** New opaque files under an extension their folder did not have before, in folders that lost as
   *  many files (random-name encryption): counted up to the number of files the folder lost. */
  replacedOpaque: number;
  /** The change journal, when it planned the backup: folders it reported changed, and per hour since
   *  the previous snapshot. */
  journal?: { dirtyDirs: number; perHour: number };
  /** Changed files beyond the analysis limit (counted, not analysed). */
  notAnalysed: number;
}

/** A file the alarm found suspicious, for the alert ("what changed"). */
export interface MassChangeExample {
  path: string;
  what: string;
}

export interface MassChangeVerdict {
  version: 1;
  /** True when the run looks like mass encryption: it is kept, and retention holds the older ones. */
  suspect: boolean;
  /** Files whose change looks like encryption, and how many make a run suspect. */
  suspicious: number;
  threshold: number;
  /** What changed, in sentences for the alert. */
  reasons: string[];
  /** Some of the files (a few per kind of evidence). */
  examples: MassChangeExample[];
  stats: MassChangeStats;
}

/** A snapshot together with its ID, as listed. */
export interface SnapshotEntry extends Snapshot {
  id: ID;
}
