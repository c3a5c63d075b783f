/**
 * LVM: a snapshot of the logical volume that holds a source's filesystem (ext4, XFS, …), mounted read-only
 * in a folder of its own. A thin volume gets a thin snapshot (no size; it shares the pool). A classic
 * volume gets a copy-on-write snapshot as large as the origin where the volume group has that much free
 * space (so it cannot overflow), else all of the free space; its fill is checked after the backup, since an
 * overflowed snapshot becomes unreadable. Taking it suspends the volume, which freezes the filesystem:
 * the snapshot is consistent as after a clean unmount. Snapshots carry the LVM tag `tidemark-snapshot`.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Exec, MadeSnapshot, SnapshotRecord, SnapshotTarget } from '../types.js';
import { parseSnapshotName, ownerAlive } from '../registry.js';
import { readMounts } from './mounts.js';

export const LVM_TAG = 'tidemark-snapshot';
/** Where LVM snapshots are mounted: outside every user folder, and gone after a reboot. */
export const LVM_MOUNT_BASE = '/run/tidemark-snapshots';

export interface LvInfo {
  vg: string;
  lv: string;
  segtype: string;
  attr: string;
  sizeBytes: number;
  vgFreeBytes: number;
  extentBytes: number;
  dmPath: string;
  tags: string[];
}

const FIELDS = 'vg_name,lv_name,segtype,lv_attr,lv_size,vg_free,vg_extent_size,lv_dm_path,lv_tags';

/** Parses `lvs --noheadings --nameprefixes --units b --nosuffix -o FIELDS` output (LVM2_NAME='value'). */
export function parseLvs(stdout: string): LvInfo[] {
  const out: LvInfo[] = [];
  for (const line of stdout.split('\n')) {
    const f: Record<string, string> = {};
    for (const m of line.matchAll(/LVM2_([A-Z_]+)='((?:[^'\\]|\\.)*)'/g))
      f[m[1]] = m[2].replace(/\\(.)/g, '$1');
    if (!f.VG_NAME || !f.LV_NAME) continue;
    out.push({
      vg: f.VG_NAME,
      lv: f.LV_NAME,
      segtype: f.SEGTYPE ?? '',
      attr: f.LV_ATTR ?? '',
      sizeBytes: Number(f.LV_SIZE ?? 0),
      vgFreeBytes: Number(f.VG_FREE ?? 0),
      extentBytes: Number(f.VG_EXTENT_SIZE ?? 0),
      dmPath: f.LV_DM_PATH ?? '',
      tags: (f.LV_TAGS ?? '').split(',').filter(Boolean),
    });
  }
  return out;
}

async function lvs(exec: Exec, what: string[]): Promise<LvInfo[]> {
  const r = await exec('lvs', [
    '--noheadings',
    '--nameprefixes',
    '--units',
    'b',
    '--nosuffix',
    '-o',
    FIELDS,
    ...what,
  ]);
  return parseLvs(r.stdout);
}

/**
 * The /dev/mapper path of a block device (major:minor) that is a logical volume, or undefined. Named from
 * sysfs, not from the mount table: a filesystem mounted by its /dev/dm-N name (by mount(2) directly, some
 * initramfs) shows that name there, and lvs does not take it ("Volume group dm-0 not found").
 */
export async function lvmDevice(majMin: string): Promise<string | undefined> {
  const dm = `/sys/dev/block/${majMin}/dm`;
  const uuid = await fsp.readFile(`${dm}/uuid`, 'utf8').catch(() => '');
  if (!uuid.startsWith('LVM-')) return undefined;
  const name = (await fsp.readFile(`${dm}/name`, 'utf8').catch(() => '')).trim();
  return name ? `/dev/mapper/${name}` : undefined;
}

/** The snapshot target of a filesystem on the logical volume `device` (mounted at mountPoint), or why none. */
export async function lvmTarget(
  exec: Exec,
  device: string,
  mountPoint: string,
  fstype: string,
): Promise<SnapshotTarget | { none: string }> {
  const [lv] = await lvs(exec, [device]);
  if (!lv) return { none: `${device} is a device-mapper device that lvs does not list` };
  const thin = lv.segtype === 'thin';
  if (!thin && lv.attr[0] === 's') return { none: `${lv.vg}/${lv.lv} is itself a snapshot` };
  if (!thin && lv.vgFreeBytes < lv.extentBytes)
    return {
      none: `volume group ${lv.vg} has no free space for a snapshot of ${lv.lv} (free some with lvreduce, or add a disk with vgextend)`,
    };
  // as large as the origin (plus ~1% for the copy-on-write table) where there is room: then it cannot overflow
  const want = Math.ceil((lv.sizeBytes * 1.01) / lv.extentBytes) * lv.extentBytes;
  const size = Math.min(want, Math.floor(lv.vgFreeBytes / lv.extentBytes) * lv.extentBytes);
  return {
    kind: thin ? 'lvm-thin' : 'lvm',
    key: `lvm:${lv.vg}/${lv.lv}`,
    volume: mountPoint,
    describe: `${thin ? 'thin ' : ''}logical volume ${lv.vg}/${lv.lv} (${fstype} at ${mountPoint})`,
    data: {
      vg: lv.vg,
      lv: lv.lv,
      fstype,
      ...(thin ? {} : { sizeBytes: String(size), originBytes: String(lv.sizeBytes) }),
    },
  };
}

export async function createLvm(
  exec: Exec,
  t: SnapshotTarget,
  record: SnapshotRecord,
  mountBase = LVM_MOUNT_BASE,
): Promise<MadeSnapshot> {
  const { vg, lv, fstype } = t.data;
  record.data = { ...record.data, vg, origin: lv, mountPoint: path.join(mountBase, record.name) };
  const args =
    t.kind === 'lvm-thin'
      ? ['-s', '-kn', '-n', record.name, '--addtag', LVM_TAG, `${vg}/${lv}`] // -kn: activate it like any volume
      : ['-s', '-L', `${t.data.sizeBytes}b`, '-n', record.name, '--addtag', LVM_TAG, `${vg}/${lv}`];
  await exec('lvcreate', ['-q', ...args]);
  const [made] = await lvs(exec, [`${vg}/${record.name}`]);
  if (!made?.dmPath) throw new Error(`lvcreate made ${vg}/${record.name} but lvs does not show its device`);
  const mnt = record.data.mountPoint;
  await fsp.mkdir(mnt, { recursive: true, mode: 0o700 });
  // XFS refuses a second filesystem with the same UUID unless told; both replay their journal in memory
  const opts = fstype === 'xfs' ? 'ro,nouuid' : 'ro';
  await exec('mount', ['-t', fstype, '-o', opts, made.dmPath, mnt]);
  const [live, snap] = await Promise.all([fsp.stat(t.volume), fsp.stat(mnt)]);
  return { root: mnt, dev: { snapshot: snap.dev, original: live.dev }, hidden: [mountBase] };
}

/** Why a classic snapshot cannot be trusted after the backup (it overflowed), or undefined. */
export async function lvmProblem(exec: Exec, record: SnapshotRecord): Promise<string | undefined> {
  if (record.kind !== 'lvm') return undefined;
  const [lv] = await lvs(exec, [`${record.data.vg}/${record.name}`]).catch(() => []);
  if (lv && lv.attr[4] === 'I')
    return `the LVM snapshot of ${record.data.vg}/${record.data.origin ?? record.data.lv} overflowed during the backup: files read after that may be incomplete (give volume group ${record.data.vg} more free space)`;
  return undefined;
}

export async function removeLvm(exec: Exec, record: SnapshotRecord): Promise<void> {
  const mnt = record.data.mountPoint ?? path.join(LVM_MOUNT_BASE, record.name);
  if ((await readMounts()).some((m) => m.mountPoint === mnt)) {
    try {
      await exec('umount', [mnt]);
    } catch {
      await exec('umount', ['-l', mnt]); // busy (a reader still open): detach now, freed when it closes
    }
  }
  await fsp.rmdir(mnt).catch(() => {});
  const vg = record.data.vg;
  if (!vg) return; // the record was written before lvcreate: nothing to remove by name without the group
  const exists = (await lvs(exec, [`${vg}/${record.name}`]).catch(() => [])).length > 0;
  if (exists) await exec('lvremove', ['-q', '-f', `${vg}/${record.name}`]);
}

/** Tagged snapshots whose owner process is gone, on any volume group of this machine. */
export async function lvmLeftovers(exec: Exec): Promise<SnapshotRecord[]> {
  const all = await lvs(exec, [`@${LVM_TAG}`]).catch(() => []);
  const out: SnapshotRecord[] = [];
  for (const lv of all) {
    const owner = parseSnapshotName(lv.lv);
    if (!owner || ownerAlive(owner.pid, owner.createdAt)) continue;
    out.push({
      name: lv.lv,
      kind: 'lvm',
      volume: '',
      pid: owner.pid,
      createdAt: owner.createdAt,
      data: { vg: lv.vg, mountPoint: path.join(LVM_MOUNT_BASE, lv.lv) },
    });
  }
  return out;
}
