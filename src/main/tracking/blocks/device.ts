// Where a path's bytes live: its filesystem (device number, type, mount instance, UUID) and the whole disk
// the block layer reports for it (partitions are tracked on their disk at an offset).
import { promises as fsp, readFileSync } from 'node:fs';
import path from 'node:path';

export interface DiskInfo {
  major: number;
  minor: number;
  /** size in 512-byte sectors */
  sectors: number;
  /** /sys/block/X/diskseq: a number never reused for another disk (or media) during a boot; null if absent */
  diskseq?: number | null;
}

export interface FilesystemInfo {
  /** the filesystem's device (st_dev) */
  major: number;
  minor: number;
  disk: DiskInfo;
  /** first sector of the filesystem's device on the disk (0 unless a partition) */
  partStartSector: number;
  mountId: number;
  /** never-reused mount ID (statx STATX_MNT_ID_UNIQUE, Linux 6.8+); null when the kernel lacks it */
  mountUniqueId: string | null;
  mountPoint: string;
  fsType: string;
  mountOptions: string[];
  uuid: string | null;
}

export const EXT4_SUPER_MAGIC = 0xef53;
export const XFS_SUPER_MAGIC = 0x58465342;

/** Filesystems whose FIEMAP physical addresses are byte offsets on their (single) block device. */
export const SUPPORTED_FS_TYPES = new Set(['ext2', 'ext3', 'ext4', 'xfs']);
export const SUPPORTED_FS_MAGICS = new Set([EXT4_SUPER_MAGIC, XFS_SUPER_MAGIC]);

/** glibc's dev_t encoding → major/minor. */
export function decodeDev(dev: bigint): { major: number; minor: number } {
  const major = Number(((dev >> 8n) & 0xfffn) | ((dev >> 32n) & ~0xfffn));
  const minor = Number((dev & 0xffn) | ((dev >> 12n) & ~0xffn));
  return { major, minor };
}

export function readBootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown';
  }
}

interface MountEntry {
  mountId: number;
  major: number;
  minor: number;
  mountPoint: string;
  options: string[];
  fsType: string;
  superOptions: string[];
}

function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

export async function readMountInfo(): Promise<MountEntry[]> {
  const text = await fsp.readFile('/proc/self/mountinfo', 'utf8');
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const [left, right] = line.split(' - ');
    if (!right) continue;
    const f = left.split(' ');
    const r = right.split(' ');
    const [maj, min] = f[2].split(':').map(Number);
    out.push({
      mountId: Number(f[0]),
      major: maj,
      minor: min,
      mountPoint: unescapeMount(f[4]),
      options: f[5].split(','),
      fsType: r[0],
      superOptions: (r[2] ?? '').split(','),
    });
  }
  return out;
}

async function readSys(p: string): Promise<string> {
  return (await fsp.readFile(p, 'utf8')).trim();
}

/** Resolves the filesystem holding `p` (which must exist). Throws with a reason when it is not a block device. */
export interface FsProbes {
  fsUuid?(p: string): string | null;
  mountIdUnique?(p: string): string | null;
}

async function readDiskseq(sysDir: string): Promise<number | null> {
  try {
    return Number(await readSys(path.join(sysDir, 'diskseq')));
  } catch {
    return null;
  }
}

export async function resolveFilesystem(p: string, probes: FsProbes = {}): Promise<FilesystemInfo> {
  const abs = path.resolve(p);
  const st = await fsp.stat(abs, { bigint: true });
  const { major, minor } = decodeDev(st.dev);
  const sysDev = `/sys/dev/block/${major}:${minor}`;
  let real: string;
  try {
    real = await fsp.realpath(sysDev);
  } catch {
    throw new Error(`${abs} is not on a block device (device ${major}:${minor}: no ${sysDev})`);
  }
  let disk: DiskInfo;
  let partStartSector = 0;
  let isPartition = false;
  try {
    await fsp.access(path.join(real, 'partition'));
    isPartition = true;
  } catch {}
  if (isPartition) {
    partStartSector = Number(await readSys(path.join(real, 'start')));
    const parent = path.dirname(real);
    const [dmaj, dmin] = (await readSys(path.join(parent, 'dev'))).split(':').map(Number);
    disk = {
      major: dmaj,
      minor: dmin,
      sectors: Number(await readSys(path.join(parent, 'size'))),
      diskseq: await readDiskseq(parent),
    };
  } else {
    disk = {
      major,
      minor,
      sectors: Number(await readSys(path.join(real, 'size'))),
      diskseq: await readDiskseq(real),
    };
  }
  const mounts = (await readMountInfo()).filter((m) => m.major === major && m.minor === minor);
  // the mount whose mount point is the longest prefix of the path
  let best: MountEntry | undefined;
  for (const m of mounts) {
    const mp = m.mountPoint.endsWith('/') ? m.mountPoint : m.mountPoint + '/';
    if ((abs + '/').startsWith(mp) && (!best || m.mountPoint.length > best.mountPoint.length)) best = m;
  }
  if (!best) throw new Error(`no mount of device ${major}:${minor} holds ${abs}`);
  let uuid: string | null = null;
  let mountUniqueId: string | null = null;
  try {
    uuid = probes.fsUuid ? probes.fsUuid(abs) : null;
  } catch {}
  try {
    mountUniqueId = probes.mountIdUnique ? probes.mountIdUnique(abs) : null;
  } catch {}
  return {
    major,
    minor,
    disk,
    partStartSector,
    mountId: best.mountId,
    mountUniqueId,
    mountPoint: best.mountPoint,
    fsType: best.fsType,
    mountOptions: [...best.options, ...best.superOptions],
    uuid,
  };
}

/** Why block tracking cannot be trusted on this filesystem, or null when it can. */
export function filesystemUnsupportedReason(fs: FilesystemInfo): string | null {
  if (!SUPPORTED_FS_TYPES.has(fs.fsType))
    return `filesystem type ${fs.fsType} is not supported for block tracking (ext2/3/4 and xfs are)`;
  if (
    fs.mountOptions.some((o) => o === 'dax' || o.startsWith('dax=')) &&
    !fs.mountOptions.includes('dax=never')
  )
    return 'filesystem is mounted with DAX (writes bypass the block layer)';
  if (fs.fsType === 'xfs' && fs.mountOptions.some((o) => o.startsWith('rtdev')))
    return 'xfs with a realtime device (file data may live on another device)';
  return null;
}
