/**
 * Names of the speed test's own files and objects, and when one left by another test may be removed.
 * A test file in a folder is `.tidemark-speedtest-<host>.<pid>.<deadline>.<random>.tmp`; a test's S3
 * probe objects live under `<prefix>/.tidemark-speedtest/<host>.<pid>.<deadline>.<random>/`. No name of a
 * repository object looks like either (repository-format.md), so cleaning never touches one. A probe is
 * stale — left by an interrupted test, removed by the next one — when its deadline (the latest its test
 * could still be running) has passed, or when it is this computer's and its process is gone.
 */
import crypto from 'node:crypto';
import os from 'node:os';

export const FILE_PREFIX = '.tidemark-speedtest-';
export const FILE_SUFFIX = '.tmp';
export const S3_FOLDER = '.tidemark-speedtest';

/** Host names as they may appear in a name (no dots: they separate the fields). */
function hostToken(host = os.hostname()): string {
  return host.replace(/[^A-Za-z0-9-]/g, '-').slice(0, 63) || 'host';
}

/** A fresh probe name for a test that will be over by `deadline` (ms since the epoch). */
export function probeName(deadline: number, host?: string, pid = process.pid): string {
  return `${hostToken(host)}.${pid}.${Math.ceil(deadline).toString(36)}.${crypto.randomBytes(4).toString('hex')}`;
}

export function testFileName(deadline: number): string {
  return `${FILE_PREFIX}${probeName(deadline)}${FILE_SUFFIX}`;
}

interface ProbeId {
  host: string;
  pid: number;
  deadline: number;
}

export function parseProbeName(name: string): ProbeId | undefined {
  const m = /^([A-Za-z0-9-]+)\.(\d+)\.([0-9a-z]+)\.[0-9a-f]+$/.exec(name);
  if (!m) return undefined;
  return { host: m[1], pid: Number(m[2]), deadline: parseInt(m[3], 36) };
}

/** The probe part of a test file's name, or undefined when it is not one. */
export function probeOfFile(fileName: string): string | undefined {
  if (!fileName.startsWith(FILE_PREFIX) || !fileName.endsWith(FILE_SUFFIX)) return undefined;
  const probe = fileName.slice(FILE_PREFIX.length, -FILE_SUFFIX.length);
  return parseProbeName(probe) ? probe : undefined;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether a probe of another test may be removed now (`now` on the clock its deadline was set by). */
export function isStale(name: string, now = Date.now()): boolean {
  const p = parseProbeName(name);
  if (!p) return false;
  if (p.deadline <= now) return true;
  return p.host === hostToken() && p.pid !== process.pid && !alive(p.pid);
}
