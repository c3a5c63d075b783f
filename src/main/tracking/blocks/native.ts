// Loads the tidemark_cbt addon (native/cbt). Absent, unbuilt or unloadable → a reason, never an exception.
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export interface NativeExtent {
  logical: number;
  physical: number;
  length: number;
  flags: number;
}

export interface NativeFileMap {
  size: number;
  ino: number;
  devMajor: number;
  devMinor: number;
  mtimeNs: bigint;
  ctimeNs: bigint;
  blockSize: number;
  fsType: number;
  generation: number | null;
  /** false when size/mtime/ctime changed while the map was taken */
  stable: boolean;
  extents: NativeExtent[];
}

export interface NativeGeneration {
  bitmap: Buffer;
  blockShift: number;
  blocks: number;
  seq: number;
  events: number;
  overflow: boolean;
  inflightLost: number;
}

export interface NativeTrackerDevice {
  major: number;
  minor: number;
  sectors: number;
  blockShift: number;
}

export interface NativeTracker {
  start(
    devices: NativeTrackerDevice[],
    opts?: { pinDir?: string; lockPath?: string },
  ): { sessionId: string; resumed: boolean };
  readAndSwap(major: number, minor: number): NativeGeneration;
  stop(opts?: { unpin?: boolean }): void;
  status(): {
    running: boolean;
    sessionId?: string;
    startedAt?: number;
    pinned?: boolean;
    resumed?: boolean;
    stopped?: boolean;
    devices?: (NativeTrackerDevice & { seq: number })[];
  };
}

export interface CbtNative {
  Tracker: new () => NativeTracker;
  fiemap(path: string): Promise<NativeFileMap>;
  syncfs(path: string): Promise<void>;
  fsUuid(path: string): string | null;
  /** the mount's never-reused 64-bit ID (Linux 6.8+) as a decimal string, or null */
  mountIdUnique(path: string): string | null;
  probe(): { available: boolean; reason?: string };
}

export type NativeLoad = { ok: true; native: CbtNative } | { ok: false; reason: string };

const here = path.dirname(fileURLToPath(import.meta.url));

/** Candidate locations of the built addon: the source tree (dev, tests) and next to the app (packaged). */
export function addonCandidates(): string[] {
  const fromEnv = process.env.TIDEMARK_CBT_ADDON;
  const list = [
    path.resolve(here, '../../../../native/cbt/build/Release/tidemark_cbt.node'),
    path.resolve(process.cwd(), 'native/cbt/build/Release/tidemark_cbt.node'),
  ];
  return fromEnv ? [fromEnv, ...list] : list;
}

let cached: NativeLoad | undefined;

export function loadCbtNative(): NativeLoad {
  if (cached) return cached;
  if (process.platform !== 'linux')
    return (cached = { ok: false, reason: 'block-level tracking is Linux-only' });
  const file = addonCandidates().find((f) => existsSync(f));
  if (!file) {
    return (cached = {
      ok: false,
      reason:
        'the block-tracking addon is not built (run `node native/cbt/build.mjs`; needs clang, bpftool, libbpf-dev)',
    });
  }
  try {
    const require = createRequire(import.meta.url);
    cached = { ok: true, native: require(file) as CbtNative };
  } catch (e) {
    cached = { ok: false, reason: `cannot load ${file}: ${(e as Error).message}` };
  }
  return cached;
}
