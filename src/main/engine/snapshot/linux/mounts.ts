/**
 * /proc/self/mountinfo: which filesystem a path is on (the deepest mount point above it), and the
 * filesystems mounted inside a folder.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';

export interface MountEntry {
  /** major:minor of the filesystem (for btrfs an anonymous device, not the disk). */
  dev: string;
  /** The folder of the filesystem that is mounted (bind mounts and btrfs subvolumes: not '/'). */
  root: string;
  mountPoint: string;
  options: string[];
  fstype: string;
  source: string;
}

/** mountinfo escapes space, tab, newline and backslash as \ooo. */
const unescape = (s: string) =>
  s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

export function parseMountInfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    const f = line.split(' ');
    const dash = f.indexOf('-');
    if (dash < 6) continue;
    out.push({
      dev: f[2],
      root: unescape(f[3]),
      mountPoint: unescape(f[4]),
      options: f[5].split(','),
      fstype: f[dash + 1],
      source: unescape(f[dash + 2] ?? ''),
    });
  }
  return out;
}

export async function readMounts(): Promise<MountEntry[]> {
  return parseMountInfo(await fsp.readFile('/proc/self/mountinfo', 'utf8'));
}

const inside = (p: string, dir: string) => dir === '/' || p === dir || p.startsWith(dir + path.sep);

/** The filesystem a (resolved) path is on: the last-mounted of the deepest mount points above it. */
export function mountOf(mounts: MountEntry[], p: string): MountEntry | undefined {
  let best: MountEntry | undefined;
  for (const m of mounts)
    if (inside(p, m.mountPoint) && (!best || m.mountPoint.length >= best.mountPoint.length)) best = m;
  return best;
}

/** Mount points strictly inside a folder, outermost first, leaving out those under `ignore`. */
export function mountsInside(mounts: MountEntry[], dir: string, ignore: string[] = []): string[] {
  const found = new Set<string>();
  for (const m of mounts)
    if (m.mountPoint !== dir && inside(m.mountPoint, dir) && !ignore.some((i) => inside(m.mountPoint, i)))
      found.add(m.mountPoint);
  return [...found].sort((a, b) => a.length - b.length);
}
