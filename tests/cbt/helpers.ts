// Shared fixtures for the block-tracking tests: capability check (root, eBPF, tools), building the addon on
// demand, and loop-mounted ext4 images so the tracked disk sees only the test's own writes.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadCbtNative, addonCandidates } from '../../src/main/tracking/blocks/native.js';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function have(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
}

let availability: { ok: true } | { ok: false; reason: string } | undefined;

/** Whether the real tracker can run here; builds the addon first when it is missing. */
export function cbtAvailability(): { ok: true } | { ok: false; reason: string } {
  if (availability) return availability;
  const no = (reason: string) => (availability = { ok: false, reason });
  if (process.platform !== 'linux') return no('block tracking is Linux-only');
  if (process.getuid?.() !== 0) return no('needs root (eBPF, loop devices, mount)');
  for (const cmd of ['losetup', 'mkfs.ext4', 'mount', 'umount', 'fallocate', 'dd'])
    if (!have(cmd)) return no(`${cmd} is not installed`);
  if (!addonCandidates().some((f) => existsSync(f))) {
    const r = spawnSync(process.execPath, [path.join(repoRoot, 'native/cbt/build.mjs')], {
      encoding: 'utf8',
    });
    if (r.status !== 0)
      return no(
        `the addon could not be built: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' | ')}`,
      );
  }
  const load = loadCbtNative();
  if (!load.ok) return no(load.reason);
  const probe = load.native.probe();
  if (!probe.available) return no(`eBPF unavailable: ${probe.reason}`);
  return (availability = { ok: true });
}

export interface LoopFs {
  dir: string;
  image: string;
  loopDev: string;
  /** the mounted filesystem (or the partition's) */
  mnt: string;
  fsDev: string;
  remount(): void;
  /** unmount, detach the image, attach it again to the same loop device, mount (a "new medium") */
  reattach(): void;
  cleanup(): void;
}

function sh(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/**
 * A sparse image with an ext4 filesystem, attached to a loop device and mounted. With `partition`, the
 * filesystem lives in a partition starting `partition.startSector` sectors into the disk (added with BLKPG,
 * so no partition-table parser is needed).
 */
export function makeLoopExt4(
  sizeMiB: number,
  opts: { partition?: { startSector: number }; directIo?: boolean; parentDir?: string } = {},
): LoopFs {
  const dir = mkdtempSync(path.join(opts.parentDir ?? os.tmpdir(), 'tidemark-cbt-'));
  const image = path.join(dir, 'disk.img');
  const mnt = path.join(dir, 'mnt');
  mkdirSync(mnt);
  sh('truncate', ['-s', `${sizeMiB}M`, image]);
  const loopDev = sh('losetup', [
    '-f',
    '--show',
    ...(opts.partition ? ['-P'] : []),
    ...(opts.directIo ? ['--direct-io=on'] : []),
    image,
  ]);
  let fsDev = loopDev;
  try {
    if (opts.partition) {
      const total = sizeMiB * 2048;
      sh('addpart', [
        loopDev,
        '1',
        String(opts.partition.startSector),
        String(total - opts.partition.startSector),
      ]);
      fsDev = `${loopDev}p1`;
      for (let i = 0; i < 50 && !existsSync(fsDev); i++) spawnSync('sleep', ['0.1']);
    }
    sh('mkfs.ext4', ['-q', '-F', '-b', '4096', '-E', 'lazy_itable_init=0,lazy_journal_init=0', fsDev]);
    sh('mount', [fsDev, mnt]);
  } catch (e) {
    spawnSync('losetup', ['-d', loopDev]);
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    dir,
    image,
    loopDev,
    mnt,
    fsDev,
    remount() {
      sh('umount', [mnt]);
      sh('mount', [fsDev, mnt]);
    },
    reattach() {
      sh('umount', [mnt]);
      sh('losetup', ['-d', loopDev]);
      for (let i = 0; i < 50; i++) {
        if (spawnSync('losetup', [loopDev, image]).status === 0) break;
        spawnSync('sleep', ['0.1']);
      }
      sh('mount', [fsDev, mnt]);
    },
    cleanup() {
      spawnSync('umount', [mnt]);
      spawnSync('losetup', ['-d', loopDev]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** mmap the file, overwrite [offset, offset+data.length) through the mapping, msync. */
export function mmapWrite(file: string, offset: number, data: Buffer): void {
  const py = [
    'import mmap, os, sys',
    'f = os.open(sys.argv[1], os.O_RDWR)',
    'off = int(sys.argv[2]); data = sys.stdin.buffer.read()',
    'size = os.fstat(f).st_size',
    'm = mmap.mmap(f, size)',
    'm[off:off+len(data)] = data',
    'm.flush()',
    'm.close(); os.close(f)',
  ].join('\n');
  execFileSync('python3', ['-c', py, file, String(offset)], { input: data });
}

/** O_DIRECT write of whole 4 KiB blocks from `src` at block `seekBlock`. */
export function directWrite(file: string, src: string, seekBlock: number, blocks: number): void {
  execFileSync('dd', [
    `if=${src}`,
    `of=${file}`,
    'bs=4096',
    `seek=${seekBlock}`,
    `count=${blocks}`,
    'oflag=direct',
    'conv=notrunc',
    'status=none',
  ]);
}

export function hasPython(): boolean {
  return have('python3');
}
export function hasAddpart(): boolean {
  return have('addpart');
}
