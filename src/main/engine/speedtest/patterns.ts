/**
 * The speed test's patterns. Four simulate a backup product's disk traffic the way the DiskSpd seed
 * report (Veeam KB 2014) does: an active full is 100% sequential writes; a synthetic full 50% reads and
 * 50% writes at random offsets aligned to 4 KiB (-w50 -r4K); a reverse incremental 67% writes and 33%
 * reads, random, 4 KiB aligned (-w67 -r4K); a restore is sequential reads — each in blocks of the chosen
 * size (-b: 256 KiB WAN, 512 KiB LAN, 4 MiB local), with DiskSpd's defaults of one thread and two
 * operations in flight (-t1 -o2) unless asked otherwise. Two are Tidemark's own, from the engine's real
 * figures: its pack writes (packs of DEFAULT_PACK_SIZE, written FOLDER_PACK_WRITES at a time, sequential)
 * and a restore of small files (random 16 KiB reads, 4 KiB aligned, RESTORE_LOOPS in flight: the loops
 * that hand a restore's pack ranges to its workers). On S3: PUTs and GETs of pack-sized objects and
 * small ranged GETs (a restore's reads of small files' blobs), each at 1, 4 and 8 requests in flight.
 */
import { DEFAULT_PACK_SIZE } from '../repo/pack.js';
import { FOLDER_PACK_WRITES } from '../backend/local/index.js';
import { DEFAULT_PACK_WRITES } from '../repo/repository.js';
import { RESTORE_LOOPS } from '../restore/packQueue.js';
import { UsageError } from '../errors.js';
import type { DiskPatternId, PatternId, S3PatternId, SpeedTestOptions } from './types.js';

const KiB = 1024;
const MiB = 1024 * 1024;

/** DiskSpd's -r4K: random offsets on 4 KiB boundaries (also the direct-I/O alignment). */
export const ALIGN = 4 * KiB;
/** A small file's read in a restore. */
export const SMALL_READ = 16 * KiB;
export const BLOCK_PRESETS = { wan: 256 * KiB, lan: 512 * KiB, local: 4 * MiB } as const;

export interface DiskPattern {
  id: DiskPatternId;
  label: string;
  readPercent: number;
  random: boolean;
  /** A block size of its own (Tidemark's patterns); else the test's. */
  blockSize?: number;
  /** Threads and operations in flight of its own; else the test's. */
  threads?: number;
  depth?: number;
}

export const DISK_PATTERNS: readonly DiskPattern[] = [
  { id: 'active-full', label: 'Active full: 100% sequential writes', readPercent: 0, random: false },
  {
    id: 'synthetic-full',
    label: 'Synthetic full: 50% reads / 50% writes, random, 4 KiB aligned',
    readPercent: 50,
    random: true,
  },
  {
    id: 'reverse-incremental',
    label: 'Reverse incremental: 33% reads / 67% writes, random, 4 KiB aligned',
    readPercent: 33,
    random: true,
  },
  { id: 'restore', label: 'Restore: 100% sequential reads', readPercent: 100, random: false },
  {
    id: 'pack',
    label: `Tidemark packs: ${DEFAULT_PACK_SIZE / MiB} MiB sequential writes, ${FOLDER_PACK_WRITES} in flight`,
    readPercent: 0,
    random: false,
    blockSize: DEFAULT_PACK_SIZE,
    threads: 1,
    depth: FOLDER_PACK_WRITES,
  },
  {
    id: 'small-file-restore',
    label: `Small-file restore: random ${SMALL_READ / KiB} KiB reads, ${RESTORE_LOOPS} in flight`,
    readPercent: 100,
    random: true,
    blockSize: SMALL_READ,
    threads: 1,
    depth: RESTORE_LOOPS,
  },
];

export interface S3Pattern {
  id: S3PatternId;
  label: (inFlight: number) => string;
  /** Bytes per request. */
  size: number;
  write: boolean;
}

export const S3_PATTERNS: readonly S3Pattern[] = [
  {
    id: 'pack-put',
    label: (n) => `PUT ${DEFAULT_PACK_SIZE / MiB} MiB pack objects, ${n} in flight`,
    size: DEFAULT_PACK_SIZE,
    write: true,
  },
  {
    id: 'pack-get',
    label: (n) => `GET ${DEFAULT_PACK_SIZE / MiB} MiB pack objects, ${n} in flight`,
    size: DEFAULT_PACK_SIZE,
    write: false,
  },
  {
    id: 'small-get',
    label: (n) => `GET ${SMALL_READ / KiB} KiB ranges (small-file restore), ${n} in flight`,
    size: SMALL_READ,
    write: false,
  },
];

/** What a backup writes to an object store at once (Repository: DEFAULT_PACK_WRITES packs), and what a
 *  restore reads at once (RESTORE_LOOPS): the in-flight counts an estimate prefers. */
export const S3_BACKUP_IN_FLIGHT = DEFAULT_PACK_WRITES;
export const RESTORE_IN_FLIGHT = RESTORE_LOOPS;

export const DISK_PATTERN_IDS = DISK_PATTERNS.map((p) => p.id);
export const S3_PATTERN_IDS = S3_PATTERNS.map((p) => p.id);
export const PATTERN_IDS: readonly PatternId[] = [...DISK_PATTERN_IDS, ...S3_PATTERN_IDS];

export const DEFAULTS = {
  fileSize: 1024 * MiB,
  blockSize: BLOCK_PRESETS.lan,
  durationMs: 10_000,
  threads: 1,
  queueDepth: 2,
  inFlight: [1, 4, 8],
} as const;

/** Buffers a run may hold at once (threads × depth × block): a bound against a mistyped option. */
export const MAX_BUFFERS = 1024 * MiB;

export interface ResolvedOptions {
  patterns: PatternId[];
  fileSize: number;
  blockSize: number;
  durationMs: number;
  threads: number;
  queueDepth: number;
  inFlight: number[];
}

/** The options with defaults applied, checked for `kind`; a UsageError says what is wrong. */
export function resolveOptions(o: SpeedTestOptions, kind: 'folder' | 's3'): ResolvedOptions {
  const ids: readonly PatternId[] = kind === 'folder' ? DISK_PATTERN_IDS : S3_PATTERN_IDS;
  const patterns = o.patterns?.length ? [...new Set(o.patterns)] : [...ids];
  const wrong = patterns.filter((p) => !ids.includes(p));
  if (wrong.length)
    throw new UsageError(
      `pattern${wrong.length > 1 ? 's' : ''} ${wrong.join(', ')} cannot run on ${kind === 'folder' ? 'a folder' : 'S3'} (choose from ${ids.join(', ')})`,
    );
  const r: ResolvedOptions = {
    patterns,
    fileSize: o.fileSize ?? DEFAULTS.fileSize,
    blockSize: o.blockSize ?? DEFAULTS.blockSize,
    durationMs: o.durationMs ?? DEFAULTS.durationMs,
    threads: o.threads ?? DEFAULTS.threads,
    queueDepth: o.queueDepth ?? DEFAULTS.queueDepth,
    inFlight: o.inFlight?.length ? [...new Set(o.inFlight)].sort((a, b) => a - b) : [...DEFAULTS.inFlight],
  };
  const whole = (n: number) => Number.isInteger(n) && n > 0;
  if (!(r.durationMs >= 100 && r.durationMs <= 3_600_000))
    throw new UsageError('the duration of each pattern must be between 0.1 s and one hour');
  if (!whole(r.threads) || r.threads > 64)
    throw new UsageError('threads must be a whole number from 1 to 64');
  if (!whole(r.queueDepth) || r.queueDepth > 256)
    throw new UsageError('the queue depth must be a whole number from 1 to 256');
  if (r.inFlight.some((n) => !whole(n) || n > 64))
    throw new UsageError('requests in flight must be whole numbers from 1 to 64');
  if (kind === 's3') return r;
  if (!whole(r.blockSize) || r.blockSize % ALIGN || r.blockSize > 64 * MiB)
    throw new UsageError('the block size must be a multiple of 4 KiB, at most 64 MiB');
  if (!whole(r.fileSize) || r.fileSize % MiB || r.fileSize < 16 * MiB)
    throw new UsageError('the test file must be a whole number of MiB, at least 16 MiB');
  for (const id of r.patterns) {
    const p = diskPattern(id);
    const block = p.blockSize ?? r.blockSize;
    const threads = p.threads ?? r.threads;
    const depth = p.depth ?? r.queueDepth;
    if (block * threads > r.fileSize)
      throw new UsageError(
        `the test file (${r.fileSize / MiB} MiB) is too small for ${id}: it needs at least ${(block * threads) / MiB} MiB (${threads} thread(s) × ${block / KiB} KiB blocks)`,
      );
    if (block * threads * depth > MAX_BUFFERS)
      throw new UsageError(
        `${id} would hold ${(block * threads * depth) / MiB} MiB of buffers (threads × queue depth × block size): use fewer threads, a lower queue depth or smaller blocks`,
      );
  }
  return r;
}

export function diskPattern(id: PatternId): DiskPattern {
  const p = DISK_PATTERNS.find((x) => x.id === id);
  if (!p) throw new UsageError(`${id} is not a folder pattern`);
  return p;
}

export function s3Pattern(id: PatternId): S3Pattern {
  const p = S3_PATTERNS.find((x) => x.id === id);
  if (!p) throw new UsageError(`${id} is not an S3 pattern`);
  return p;
}

/** Parses a size like 512K, 4M, 1G, 1024 (bytes), 16MiB. */
export function parseSize(v: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$/i.exec(v);
  if (!m) throw new UsageError(`not a size: ${v} (use e.g. 512K, 4M, 1G)`);
  const mult = { '': 1, k: KiB, m: MiB, g: 1024 * MiB, t: 1024 * 1024 * MiB }[m[2].toLowerCase()]!;
  return Math.round(Number(m[1]) * mult);
}
