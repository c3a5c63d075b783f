// The running eBPF tracker, seen from TypeScript: which disks it watches, and "sync this filesystem, then hand
// me the blocks written since the last swap". The kernel part runs as long as this object is started.
import { execFileSync } from 'node:child_process';
import { existsSync, statfsSync } from 'node:fs';
import os from 'node:os';
import { BlockBitmap } from './bitmap.js';
import { resolveFilesystem, type DiskInfo, type FilesystemInfo } from './device.js';
import { loadCbtNative, type CbtNative, type NativeTracker } from './native.js';

/** Blocks written on one disk between two swaps. */
export interface BlockDelta {
  sessionId: string;
  /** generation number of this delta on this disk within the session (1, 2, …) */
  seq: number;
  /** log2 of 512-byte sectors per tracked block */
  blockShift: number;
  bitmap: BlockBitmap;
  /** some write could not be placed (or a completion was lost): treat every block as changed */
  overflow: boolean;
}

/** What the store needs from a tracker (a fake implements it in tests). */
export interface ChangedBlockSource {
  readonly sessionId: string;
  tracks(disk: DiskInfo): boolean;
  /** Flushes the filesystems holding fsPaths (all on `disk`), then atomically takes the disk's changed blocks. */
  syncAndSwap(fsPaths: string[], disk: DiskInfo): Promise<BlockDelta>;
}

export type TrackerStart = { ok: true; tracker: BlockTracker } | { ok: false; reason: string };

export const DEFAULT_BLOCK_BYTES = 4096;
/** Largest bitmap per disk before the block size doubles (16 MiB covers 512 GiB at 4 KiB). */
export const MAX_BITMAP_BYTES = 16 << 20;

/** Smallest block shift (≥ the requested block size) whose bitmap for the disk fits in MAX_BITMAP_BYTES. */
export function chooseBlockShift(sectors: number, blockBytes = DEFAULT_BLOCK_BYTES): number {
  let shift = Math.max(0, Math.round(Math.log2(blockBytes / 512)));
  while (Math.ceil(sectors / 2 ** shift / 8) > MAX_BITMAP_BYTES && shift < 24) shift++;
  return shift;
}

const BPF_FS_MAGIC = 0xcafe4a11;
export const BPF_FS_ROOT = '/sys/fs/bpf';

/** Makes sure bpffs is mounted (as systemd does at boot); returns why not when it cannot be. */
export function ensureBpfFs(): string | null {
  const isBpf = () => {
    try {
      return statfsSync(BPF_FS_ROOT).type === BPF_FS_MAGIC;
    } catch {
      return false;
    }
  };
  if (isBpf()) return null;
  try {
    execFileSync('mount', ['-t', 'bpf', 'bpf', BPF_FS_ROOT], { stdio: 'ignore' });
  } catch {}
  return isBpf() ? null : `${BPF_FS_ROOT} is not a bpf filesystem and could not be mounted`;
}

export interface TrackerOptions {
  /** tracked block size in bytes (default 4 KiB; doubled for disks too large for a 16 MiB bitmap) */
  blockBytes?: number;
  /**
   * Pin the tracker in bpffs under this name: it keeps tracking after this process stops or exits, and a
   * later start with the same name and disks resumes the same session (no whole-file reads after an app
   * restart). Without it, tracking ends with the process.
   */
  pin?: string;
}

export class BlockTracker implements ChangedBlockSource {
  private constructor(
    private readonly native: CbtNative,
    private readonly handle: NativeTracker,
    readonly sessionId: string,
    readonly disks: (DiskInfo & { blockShift: number })[],
    readonly filesystems: FilesystemInfo[],
    /** true when an already running pinned tracker was adopted */
    readonly resumed: boolean,
  ) {}

  /**
   * Starts tracking the disks holding `paths`. Returns `{ok:false, reason}` (never throws) when eBPF is
   * unavailable, the process is unprivileged, or no path is on a block device.
   */
  static async start(paths: string[], opts: TrackerOptions = {}): Promise<TrackerStart> {
    const load = loadCbtNative();
    if (!load.ok) return { ok: false, reason: `unavailable: ${load.reason}` };
    const native = load.native;
    const fss: FilesystemInfo[] = [];
    const problems: string[] = [];
    for (const p of paths) {
      try {
        fss.push(await resolveFilesystem(p, native));
      } catch (e) {
        problems.push((e as Error).message);
      }
    }
    if (fss.length === 0)
      return { ok: false, reason: `unavailable: ${problems.join('; ') || 'no paths given'}` };
    const disks = new Map<string, DiskInfo & { blockShift: number }>();
    for (const f of fss) {
      const key = `${f.disk.major}:${f.disk.minor}`;
      if (!disks.has(key))
        disks.set(key, { ...f.disk, blockShift: chooseBlockShift(f.disk.sectors, opts.blockBytes) });
    }
    // a stable order, so a pinned tracker is recognised whatever order the paths come in
    const list = [...disks.values()].sort((a, b) => a.major - b.major || a.minor - b.minor);
    const devices = list.map(({ major, minor, sectors, blockShift }) => ({
      major,
      minor,
      sectors,
      blockShift,
    }));
    let pinOpts: { pinDir: string; lockPath: string } | undefined;
    if (opts.pin !== undefined) {
      if (!/^[A-Za-z0-9_.-]+$/.test(opts.pin))
        return { ok: false, reason: `unavailable: bad pin name ${JSON.stringify(opts.pin)}` };
      const why = ensureBpfFs();
      if (why) return { ok: false, reason: `unavailable: ${why}` };
      // /run is a tmpfs reset at boot, like the pins themselves
      const lockDir = existsSync('/run') ? '/run' : os.tmpdir();
      pinOpts = {
        pinDir: `${BPF_FS_ROOT}/tidemark-${opts.pin}`,
        lockPath: `${lockDir}/tidemark-cbt-${opts.pin}.lock`,
      };
    }
    const handle = new native.Tracker();
    try {
      const { sessionId, resumed } = handle.start(devices, pinOpts);
      return { ok: true, tracker: new BlockTracker(native, handle, sessionId, list, fss, resumed) };
    } catch (e) {
      return { ok: false, reason: `unavailable: ${(e as Error).message}` };
    }
  }

  tracks(disk: DiskInfo): boolean {
    return this.disks.some((d) => d.major === disk.major && d.minor === disk.minor);
  }

  async syncAndSwap(fsPaths: string[], disk: DiskInfo): Promise<BlockDelta> {
    for (const p of fsPaths) await this.native.syncfs(p);
    const g = this.handle.readAndSwap(disk.major, disk.minor);
    const bytes = new Uint8Array(g.bitmap.buffer, g.bitmap.byteOffset, g.bitmap.byteLength);
    return {
      sessionId: this.sessionId,
      seq: g.seq,
      blockShift: g.blockShift,
      bitmap: new BlockBitmap(g.blocks, bytes),
      overflow: g.overflow || g.inflightLost > 0,
    };
  }

  status(): ReturnType<NativeTracker['status']> {
    return this.handle.status();
  }

  /** Lets go of the tracker. A pinned one keeps tracking in the kernel unless `unpin` is set. */
  stop(opts: { unpin?: boolean } = {}): void {
    this.handle.stop(opts);
  }
}
