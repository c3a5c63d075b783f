/**
 * Windows: Volume Shadow Copy (VSS) through the native addon (native/src/windows/vss_snapshot.cc, the
 * sequence in native/src/common/vss_flow.h). One shadow copy set per run holds a shadow copy of each
 * volume with a source; files are read through the shadow copy's device path
 * (\\?\GLOBALROOT\Device\HarddiskVolumeShadowCopyN\…). The shadow copies are of the auto-release kind:
 * Windows deletes them when the session is released or the process dies, so a crash leaves none; the
 * records still let the next run delete any that remain (vssDeleteSnapshots).
 *
 * UNTESTED ON WINDOWS: this compiles with mingw-w64 (tests/tracking/windows-build.test.ts), its call
 * sequence and path mapping are unit-tested with a fake (native/test/vss_test.cc, tests/snapshot/), and
 * this provider is tested with a fake addon; it has never run on a Windows machine.
 */
import path from 'node:path';
import { loadNativeAddon } from '../../native.js';
import type { MadeSnapshot, SnapshotProvider, SnapshotRecord, SnapshotTarget } from '../types.js';

export interface VssShadow {
  volume: string;
  snapshotId: string;
  device: string;
}
export interface VssSessionHandle {
  create(volumes: string[]): Promise<{ setId: string; shadows: VssShadow[] }>;
  release(): Promise<void>;
}
export interface VssAddon {
  VssSession?: new () => VssSessionHandle;
  vssDeleteSnapshots?(ids: string[]): Promise<{ deleted: string[]; notFound: string[]; errors: string[] }>;
  vssShadowPath(device: string, volumeRoot: string, p: string): string;
}

/** The volume root VSS takes for a path ("C:\"), or why there is none (network shares). */
export function volumeOf(p: string): string | { none: string } {
  const abs = path.win32.resolve(p);
  if (/^\\\\(?![?.]\\)/.test(abs))
    return { none: `${p} is on a network share (shadow copies are taken on the server)` };
  const m = /^([a-zA-Z]):\\/.exec(abs);
  if (!m) return { none: `cannot tell the volume of ${p}` };
  return `${m[1].toUpperCase()}:\\`;
}

export class WindowsSnapshots implements SnapshotProvider {
  readonly platform = 'win32';
  private readonly sessions = new Map<string, VssSessionHandle>();

  constructor(
    private readonly addon: VssAddon | undefined = loadNativeAddon<VssAddon>('', 'tidemark_tracker'),
  ) {}

  async target(p: string): Promise<SnapshotTarget | { none: string }> {
    if (!this.addon?.VssSession) return { none: 'the native addon with shadow copy support is not built' };
    const v = volumeOf(p);
    if (typeof v !== 'string') return v;
    return {
      kind: 'vss',
      key: `vss:${v}`,
      volume: v,
      describe: `volume ${v} (Volume Shadow Copy)`,
      data: {},
    };
  }

  async create(t: SnapshotTarget, record: SnapshotRecord): Promise<MadeSnapshot> {
    const session = new this.addon!.VssSession!();
    this.sessions.set(record.name, session);
    const set = await session.create([t.volume]);
    const shadow = set.shadows.find((s) => s.volume.toUpperCase() === t.volume.toUpperCase());
    if (!shadow) throw new Error(`VSS made no shadow copy of ${t.volume}`);
    record.data = { ...record.data, setId: set.setId, snapshotId: shadow.snapshotId, device: shadow.device };
    return { root: this.addon!.vssShadowPath(shadow.device, t.volume, t.volume) };
  }

  async remove(record: SnapshotRecord): Promise<void> {
    const session = this.sessions.get(record.name);
    this.sessions.delete(record.name);
    if (session) return session.release();
    // a leftover of another process: delete it by ID if Windows has not already
    if (!record.data.snapshotId || !this.addon?.vssDeleteSnapshots) return;
    const r = await this.addon.vssDeleteSnapshots([record.data.snapshotId]);
    if (r.errors.length) throw new Error(r.errors.join('; '));
  }
}
