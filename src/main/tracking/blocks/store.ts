// The change-tracking store: per disk and per consumer (backup job), what was written since each file's
// last backup, kept durably (temp + fsync + rename) and compactly (run-length bitmaps, base64 in JSON).
//
// Model. The tracker hands out the blocks written on a disk between two swaps. Every swap closes an
// "epoch" in every consumer's store for that disk (so one job's backup never steals another job's changes).
// At a backup, each large file's extent map is captured right after the swap: that map plus the epoch number
// is the file's baseline. At the next backup, the file may differ from the baseline only where its map
// changed or where blocks of the OR of the epochs since the baseline were written.
//
// Continuity. A store is reset (all baselines dropped → every file read whole, once) when: it is missing or
// corrupt; the machine rebooted; the disk, tracker session, or block size changed; a generation was taken
// without reaching this store (sequence gap); or the kernel reported a write it could not place. Per file, a
// changed filesystem identity (remount, device number, UUID, partition offset), inode or inode generation
// also means "read the whole file".
import { promises as fsp } from 'node:fs';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { BlockBitmap } from './bitmap.js';
import {
  filesystemUnsupportedReason,
  readBootId,
  resolveFilesystem,
  SUPPORTED_FS_MAGICS,
  type DiskInfo,
  type FilesystemInfo,
} from './device.js';
import {
  changedRangesBetween,
  untrustedExtentReason,
  type ByteRange,
  type ChangedBlocks,
  type ExtentTuple,
  type RangesDecision,
} from './ranges.js';
import type { ChangedBlockSource } from './tracker.js';
import type { NativeFileMap } from './native.js';

export const STORE_VERSION = 1;
/** Epochs kept per store; a file whose baseline is older is read whole. */
export const MAX_EPOCHS = 64;

export interface FsIdentity {
  major: number;
  minor: number;
  mountId: number;
  mountUniqueId: string | null;
  uuid: string | null;
  partStartSector: number;
  fsType: string;
}

export interface FileBaseline {
  /** the map was captured right after the swap that opened this epoch */
  epoch: number;
  fs: FsIdentity;
  ino: number;
  generation: number | null;
  size: number;
  blockSize: number;
  extents: ExtentTuple[];
  /** the snapshot whose backup recorded this baseline (commit(snapshotId)) */
  snapshot?: string;
}

export interface StoreBody {
  version: number;
  consumer: string;
  disk: DiskInfo;
  bootId: string;
  /** changes when the store is reset: baselines captured under another lineage are never applied */
  lineage: string;
  tracker: { sessionId: string; seq: number };
  blockShift: number;
  blocks: number;
  /** closed epochs [id, last], ascending and contiguous; rle = base64 of BlockBitmap.encode() of their OR.
   *  Runs of epochs at which no baseline starts are merged, so the store stays small. */
  epochs: { id: number; last: number; closedAt: string; rle: string }[];
  /** id of the epoch still accumulating in the kernel */
  openEpoch: number;
  files: Record<string, FileBaseline>;
  lastReset: { at: string; reason: string } | null;
}

/** What the store needs to map files (the addon; a fake in unit tests). */
export interface FileMapper {
  fiemap(path: string): Promise<NativeFileMap>;
  fsUuid(path: string): string | null;
  mountIdUnique?(path: string): string | null;
}

// ---------------------------------------------------------------- persistence

export function storeFileName(disk: { major: number; minor: number }, consumer: string): string {
  const safe = consumer.replace(
    /[^A-Za-z0-9_.-]/g,
    (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`,
  );
  return `disk-${disk.major}_${disk.minor}.${safe}.cbt`;
}

const HEADER = 'tidemark-cbt';

export async function writeStoreFile(file: string, body: StoreBody): Promise<void> {
  const json = JSON.stringify(body);
  const sum = createHash('sha256').update(json).digest('hex');
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const fh = await fsp.open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(`${HEADER} ${STORE_VERSION} ${sum}\n${json}`);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await fsp.rename(tmp, file);
  const dir = await fsp.open(path.dirname(file), 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/** Reads a store; a missing file gives null, a damaged one throws (the caller resets). */
export async function readStoreFile(file: string): Promise<StoreBody | null> {
  let text: string;
  try {
    text = await fsp.readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
  const nl = text.indexOf('\n');
  const head = text.slice(0, nl).split(' ');
  if (nl < 0 || head[0] !== HEADER) throw new Error('not a change-tracking store');
  if (Number(head[1]) !== STORE_VERSION) throw new Error(`store version ${head[1]} is not ${STORE_VERSION}`);
  const json = text.slice(nl + 1);
  if (createHash('sha256').update(json).digest('hex') !== head[2]) throw new Error('store checksum mismatch');
  return JSON.parse(json) as StoreBody;
}

// ---------------------------------------------------------------- locking (one process; per disk)

const locks = new Map<string, Promise<unknown>>();
async function withLock<T>(key: string, fn: () => Promise<T>): Promise<T> {
  const prev = locks.get(key) ?? Promise.resolve();
  let release!: () => void;
  const mine = new Promise<void>((r) => (release = r));
  const chained = prev.then(() => mine);
  locks.set(key, chained);
  await prev;
  try {
    return await fn();
  } finally {
    release();
    if (locks.get(key) === chained) locks.delete(key);
  }
}

// ---------------------------------------------------------------- the session of one backup

function freshBody(
  consumer: string,
  disk: DiskInfo,
  sessionId: string,
  seq: number,
  blockShift: number,
  blocks: number,
  reason: string,
  openEpoch: number,
): StoreBody {
  return {
    version: STORE_VERSION,
    consumer,
    disk,
    bootId: readBootId(),
    lineage: randomBytes(8).toString('hex'),
    tracker: { sessionId, seq },
    blockShift,
    blocks,
    epochs: [],
    openEpoch,
    files: {},
    lastReset: { at: new Date().toISOString(), reason },
  };
}

function sameFs(a: FsIdentity, b: FsIdentity): boolean {
  return (
    a.major === b.major &&
    a.minor === b.minor &&
    a.mountId === b.mountId &&
    a.mountUniqueId === b.mountUniqueId &&
    a.uuid === b.uuid &&
    a.partStartSector === b.partStartSector &&
    a.fsType === b.fsType
  );
}

function fsIdentity(fs: FilesystemInfo): FsIdentity {
  return {
    major: fs.major,
    minor: fs.minor,
    mountId: fs.mountId,
    mountUniqueId: fs.mountUniqueId,
    uuid: fs.uuid,
    partStartSector: fs.partStartSector,
    fsType: fs.fsType,
  };
}

interface DiskState {
  disk: DiskInfo;
  file: string;
  body: StoreBody;
  /** lineage at begin(): commit applies baselines only if unchanged */
  lineage: string;
  /** the epoch opened by this session's swap: baselines captured now belong to it */
  epoch: number;
  unions: Map<number, BlockBitmap | string>;
}

export interface BeginOptions {
  /** directory holding the stores (created if missing) */
  dir: string;
  /** backup job id: each job has its own store per disk */
  consumer: string;
  tracker: ChangedBlockSource;
  mapper: FileMapper;
  log?: (line: string) => void;
  /**
   * The snapshot the engine will reuse chunk lists from. Ranges are relative to each file's baseline, so a
   * baseline recorded by another snapshot's backup (a parent chosen by hand, a forgotten snapshot, another
   * job) is not trusted: the file is read whole. Omit only when the caller guarantees the match itself.
   */
  parentSnapshot?: string;
  /** resolves a path's filesystem (default: resolveFilesystem, from /proc and /sys) */
  resolveFs?: (p: string) => Promise<FilesystemInfo>;
}

export class BlockChangeSession {
  private readonly disks = new Map<string, DiskState>();
  private readonly fsByDev = new Map<string, FilesystemInfo | string>();
  private readonly captures = new Map<string, { diskKey: string; baseline: FileBaseline }>();
  private committed = false;

  private constructor(private readonly opts: BeginOptions) {}

  /**
   * Starts a backup's view of block changes: for every disk holding one of `roots`, flushes the
   * filesystems, takes the tracker's generation and records it in every consumer's store for that disk.
   */
  static async begin(roots: string[], opts: BeginOptions): Promise<BlockChangeSession> {
    const s = new BlockChangeSession(opts);
    await fsp.mkdir(opts.dir, { recursive: true, mode: 0o700 });
    const byDisk = new Map<string, { disk: DiskInfo; paths: string[] }>();
    for (const root of roots) {
      const fs = await s.filesystemOf(root);
      if (typeof fs === 'string') {
        opts.log?.(`block tracking: ${root}: ${fs}; its files are read whole`);
        continue;
      }
      if (!opts.tracker.tracks(fs.disk)) {
        opts.log?.(
          `block tracking: ${root}: disk ${fs.disk.major}:${fs.disk.minor} is not tracked; its files are read whole`,
        );
        continue;
      }
      const key = `${fs.disk.major}:${fs.disk.minor}`;
      const entry = byDisk.get(key) ?? { disk: fs.disk, paths: [] };
      entry.paths.push(fs.mountPoint);
      byDisk.set(key, entry);
    }
    for (const [key, { disk, paths }] of byDisk) {
      try {
        await withLock(`${path.resolve(opts.dir)}|${key}`, () => s.swapDisk(key, disk, [...new Set(paths)]));
      } catch (e) {
        // the disk's files are then read whole (rangesFor: "not swapped in this backup")
        opts.log?.(`block tracking: disk ${key}: ${(e as Error).message}; its files are read whole`);
      }
    }
    return s;
  }

  private async swapDisk(key: string, disk: DiskInfo, fsPaths: string[]): Promise<void> {
    const { dir, consumer, tracker, log } = this.opts;
    const delta = await tracker.syncAndSwap(fsPaths, disk);
    const prefix = `disk-${disk.major}_${disk.minor}.`;
    const mine = storeFileName(disk, consumer);
    const names = new Set((await fsp.readdir(dir)).filter((n) => n.startsWith(prefix) && n.endsWith('.cbt')));
    names.add(mine);
    const rle = Buffer.from(delta.bitmap.encode()).toString('base64');
    for (const name of names) {
      const file = path.join(dir, name);
      let body: StoreBody | null = null;
      let reason: string | null = null;
      try {
        body = await readStoreFile(file);
        if (!body) reason = 'no change-tracking store yet';
      } catch (e) {
        reason = `store unreadable (${(e as Error).message})`;
      }
      if (body) {
        if (body.bootId !== readBootId()) reason = 'the machine rebooted since the last backup';
        else if (body.tracker.sessionId !== delta.sessionId)
          reason = 'the block tracker was restarted since the last backup';
        else if (
          body.disk.major !== disk.major ||
          body.disk.minor !== disk.minor ||
          body.disk.sectors !== disk.sectors ||
          (body.disk.diskseq ?? null) !== (disk.diskseq ?? null)
        )
          reason = 'the disk changed (another device or medium)';
        else if (body.blockShift !== delta.blockShift || body.blocks !== delta.bitmap.blocks)
          reason = 'the tracking block size changed';
        else if (delta.seq !== body.tracker.seq + 1)
          reason = `tracker generation ${delta.seq} does not follow ${body.tracker.seq} (changes were taken elsewhere)`;
        else if (delta.overflow) reason = 'the tracker saw writes it could not place';
      }
      const consumerName = body?.consumer ?? (name === mine ? consumer : null);
      if (consumerName === null) continue; // another consumer's unreadable store: leave it, it resets itself
      if (reason !== null) {
        const openEpoch = (body?.openEpoch ?? 0) + 1;
        body = freshBody(
          consumerName,
          disk,
          delta.sessionId,
          delta.seq,
          delta.blockShift,
          delta.bitmap.blocks,
          reason,
          openEpoch,
        );
        if (name === mine)
          log?.(`block tracking: disk ${key}: ${reason}; large files are read whole this time`);
      } else if (body) {
        body.epochs.push({
          id: body.openEpoch,
          last: body.openEpoch,
          closedAt: new Date().toISOString(),
          rle,
        });
        body.openEpoch += 1;
        body.tracker.seq = delta.seq;
        pruneEpochs(body);
      }
      await writeStoreFile(file, body!);
      if (name === mine) {
        this.disks.set(key, {
          disk,
          file,
          body: body!,
          lineage: body!.lineage,
          epoch: body!.openEpoch,
          unions: new Map(),
        });
      }
    }
  }

  private async filesystemOf(p: string): Promise<FilesystemInfo | string> {
    let devKey: string;
    try {
      const st = await fsp.stat(p, { bigint: true });
      devKey = String(st.dev);
    } catch (e) {
      return `cannot stat (${(e as Error).message})`;
    }
    const hit = this.fsByDev.get(devKey);
    if (hit) return hit;
    let v: FilesystemInfo | string;
    try {
      const fs = this.opts.resolveFs
        ? await this.opts.resolveFs(p)
        : await resolveFilesystem(p, this.opts.mapper);
      v = filesystemUnsupportedReason(fs) ?? fs;
    } catch (e) {
      v = (e as Error).message;
    }
    this.fsByDev.set(devKey, v);
    return v;
  }

  /** OR of all epochs since `epoch` on a disk, or why it cannot be formed. */
  private changesSince(state: DiskState, epoch: number): BlockBitmap | string {
    const hit = state.unions.get(epoch);
    if (hit) return hit;
    const body = state.body;
    const wanted = body.epochs.filter((e) => e.id >= epoch);
    let v: BlockBitmap | string;
    let expect = epoch;
    for (const e of wanted) {
      if (e.id !== expect) break;
      expect = e.last + 1;
    }
    const contiguous = expect === state.epoch;
    if (epoch > state.epoch) v = `baseline epoch ${epoch} is newer than the store`;
    else if (!contiguous) v = `changes since epoch ${epoch} are no longer kept`;
    else {
      const u = new BlockBitmap(body.blocks);
      for (const e of wanted) u.or(BlockBitmap.decode(body.blocks, Buffer.from(e.rle, 'base64')));
      v = u;
    }
    state.unions.set(epoch, v);
    return v;
  }

  /** The changed byte ranges of one file since its baseline, or why it must be read whole. */
  async rangesFor(file: string): Promise<RangesDecision> {
    const abs = path.resolve(file);
    let fm: NativeFileMap;
    try {
      fm = await this.opts.mapper.fiemap(abs);
    } catch (e) {
      return { whole: `cannot map extents (${(e as Error).message})` };
    }
    if (!fm.stable) return { whole: 'file changed while its extents were mapped' };
    if (!SUPPORTED_FS_MAGICS.has(fm.fsType))
      return { whole: `filesystem type 0x${fm.fsType.toString(16)} not supported` };
    const fs = await this.filesystemOf(abs);
    if (typeof fs === 'string') return { whole: fs };
    if (fs.major !== fm.devMajor || fs.minor !== fm.devMinor)
      return { whole: 'file moved to another filesystem while mapping' };
    const diskKey = `${fs.disk.major}:${fs.disk.minor}`;
    const state = this.disks.get(diskKey);
    if (!state) return { whole: `disk ${diskKey} was not swapped in this backup` };
    const extents: ExtentTuple[] = fm.extents.map((e) => [e.logical, e.physical, e.length, e.flags]);
    const bad = untrustedExtentReason(extents);
    const current: FileBaseline = {
      epoch: state.epoch,
      fs: fsIdentity(fs),
      ino: fm.ino,
      generation: fm.generation,
      size: fm.size,
      blockSize: fm.blockSize,
      extents,
    };
    if (bad) {
      this.captures.delete(abs);
      return { whole: bad };
    }
    this.captures.set(abs, { diskKey, baseline: current });
    const base = state.body.files[abs];
    if (!base) return { whole: 'no baseline yet (first backup with block tracking for this file)' };
    const parent = this.opts.parentSnapshot;
    if (parent !== undefined && base.snapshot !== parent)
      return {
        whole: `its baseline was recorded by snapshot ${base.snapshot ?? '(none)'}, not by the parent ${parent}`,
      };
    if (!sameFs(base.fs, current.fs)) return { whole: 'filesystem was remounted or its device changed' };
    if (base.ino !== current.ino || base.generation !== current.generation)
      return { whole: 'file was replaced (new inode)' };
    if (base.blockSize !== current.blockSize) return { whole: 'filesystem block size changed' };
    const since = this.changesSince(state, base.epoch);
    if (typeof since === 'string') return { whole: since };
    const blockBytes = 512 * 2 ** state.body.blockShift;
    const changed: ChangedBlocks = {
      blockBytes,
      forEachSetRun: (first, last, fn) => since.forEachSetRun(first, last, fn),
    };
    return changedRangesBetween(base, current, fs.partStartSector * 512, current.blockSize, changed);
  }

  /** Size of a file when rangesFor mapped it in this session. */
  mappedSize(file: string): number | undefined {
    return this.captures.get(path.resolve(file))?.baseline.size;
  }

  /**
   * Call after the backup's snapshot is durably saved, with its ID: the maps captured by rangesFor become
   * the files' baselines. Not calling it (a failed backup) keeps the previous baselines, which stay correct.
   * `onlyFiles`: the files whose content the backup really took from disk now (read whole or by ranges);
   * a file whose chunks were reused unread keeps its older baseline, so block tracking never inherits a
   * change the scan missed.
   */
  async commit(snapshotId?: string, onlyFiles?: Iterable<string>): Promise<void> {
    const only = onlyFiles ? new Set([...onlyFiles].map((f) => path.resolve(f))) : undefined;
    if (this.committed) throw new Error('block tracking session already committed');
    this.committed = true;
    for (const [key, state] of this.disks) {
      await withLock(`${path.resolve(this.opts.dir)}|${key}`, async () => {
        let body: StoreBody | null = null;
        try {
          body = await readStoreFile(state.file);
        } catch {}
        if (!body || body.lineage !== state.lineage) {
          this.opts.log?.(
            `block tracking: disk ${key}: store was reset during the backup; baselines not recorded`,
          );
          return;
        }
        for (const [file, c] of this.captures) {
          if (only && !only.has(file)) continue;
          if (c.diskKey === key)
            body.files[file] =
              snapshotId === undefined ? c.baseline : { ...c.baseline, snapshot: snapshotId };
        }
        for (const file of Object.keys(body.files)) {
          try {
            await fsp.lstat(file);
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code === 'ENOENT') delete body.files[file];
          }
        }
        pruneEpochs(body);
        mergeEpochs(body);
        await writeStoreFile(state.file, body);
      });
    }
  }
}

/** Drops epochs no baseline needs, and (beyond MAX_EPOCHS) the oldest epochs with their baselines. */
function pruneEpochs(body: StoreBody): void {
  if (body.epochs.length > MAX_EPOCHS) {
    const cut = body.epochs[body.epochs.length - MAX_EPOCHS].id;
    for (const [f, b] of Object.entries(body.files)) if (b.epoch < cut) delete body.files[f];
  }
  const oldest = Math.min(body.openEpoch, ...Object.values(body.files).map((b) => b.epoch));
  body.epochs = body.epochs.filter((e) => e.id >= oldest);
}

/** Merges each epoch at which no baseline starts into the one before it (their OR is all anyone needs). */
function mergeEpochs(body: StoreBody): void {
  const starts = new Set(Object.values(body.files).map((b) => b.epoch));
  const out: StoreBody['epochs'] = [];
  for (const e of body.epochs) {
    const prev = out[out.length - 1];
    if (prev && !starts.has(e.id) && prev.last + 1 === e.id) {
      const u = BlockBitmap.decode(body.blocks, Buffer.from(prev.rle, 'base64'));
      u.or(BlockBitmap.decode(body.blocks, Buffer.from(e.rle, 'base64')));
      out[out.length - 1] = {
        id: prev.id,
        last: e.last,
        closedAt: e.closedAt,
        rle: Buffer.from(u.encode()).toString('base64'),
      };
    } else out.push(e);
  }
  body.epochs = out;
}

/**
 * Changed byte ranges of large files for the engine's ChangeHint.changedRanges: files present in the map
 * may be read only in those ranges (an empty list: content unchanged); files absent must be read whole.
 */
export interface ComputeOptions {
  /** files smaller than this are left out (read whole); default 0 */
  minSize?: number;
  onWholeFile?: (file: string, reason: string) => void;
  statSize?: (f: string) => Promise<number>;
  /**
   * When the reader widens every range to whole chunks of about `window` bytes, changes spread over more
   * than `maxFraction` of those windows make it read almost everything anyway, in pieces: such files are
   * left out, so they get one plain sequential read. (bench:cbt: 1% of 4 KiB pages rewritten at random
   * touches ~95% of 1 MiB chunks, and the ranged read was then slower than a plain one.)
   */
  spread?: { window: number | ((file: string) => number); maxFraction: number };
}

/** Fraction of the `window`-sized windows of a file of `size` bytes that the ranges touch. */
export function windowsTouched(ranges: ByteRange[], size: number, window: number): number {
  if (size <= 0) return 0;
  const touched = new Set<number>();
  for (const r of ranges) {
    if (r.length <= 0) continue;
    for (let w = Math.floor(r.offset / window); w <= Math.floor((r.offset + r.length - 1) / window); w++)
      touched.add(w);
  }
  return touched.size / Math.ceil(size / window);
}

/**
 * Changed byte ranges of large files for the engine's ChangeHint.changedRanges: files present in the map
 * may be read only in those ranges (an empty list: content unchanged); files absent must be read whole.
 */
export async function computeChangedRanges(
  files: Iterable<string>,
  session: BlockChangeSession,
  opts: ComputeOptions = {},
): Promise<Map<string, ByteRange[]>> {
  const minSize = opts.minSize ?? 0;
  const out = new Map<string, ByteRange[]>();
  for (const f of files) {
    const abs = path.resolve(f);
    if (minSize > 0) {
      try {
        const size = opts.statSize ? await opts.statSize(abs) : (await fsp.stat(abs)).size;
        if (size < minSize) continue;
      } catch {
        continue;
      }
    }
    const d = await session.rangesFor(abs);
    if (!('ranges' in d)) {
      opts.onWholeFile?.(abs, d.whole);
      continue;
    }
    const size = session.mappedSize(abs) ?? 0;
    if (opts.spread && size > 0) {
      const w = opts.spread.window;
      const window = typeof w === 'function' ? w(abs) : w;
      const frac = windowsTouched(d.ranges, size, window);
      if (frac > opts.spread.maxFraction) {
        opts.onWholeFile?.(
          abs,
          `changes touch ${(100 * frac).toFixed(0)}% of its ${window}-byte windows: one plain read is faster`,
        );
        continue;
      }
    }
    out.set(abs, d.ranges);
  }
  return out;
}
