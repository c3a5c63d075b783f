/**
 * "Test the destination" for any repository location: a local folder here, an S3 bucket in
 * s3/diagnose.ts. A diagnosis is a list of checks, each passed / failed / warning / skipped with one
 * sentence, plus whether a Tidemark repository is already there. It never throws for a bad
 * destination (that is what it reports) and never leaves anything behind. It creates nothing: a
 * folder that does not exist yet is reported as "will be created" after checking its parent.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import crypto from 'node:crypto';
import { isS3Location } from './s3/location.js';
import { s3OptionsFrom, type BackendOptions } from './open.js';
import type { S3DiagnoseOptions } from './s3/diagnose.js';
import { errorToWire } from '../errors.js';
import type { Diagnosis, DiagnosisCheck } from './diagnosis.js';

export type { Diagnosis, DiagnosisCheck } from './diagnosis.js';

function gib(bytes: number): string {
  return bytes >= 1024 ** 3
    ? `${(bytes / 1024 ** 3).toFixed(1)} GiB`
    : `${Math.round(bytes / 1024 ** 2)} MiB`;
}

/** Diagnoses a local (or mounted network) folder as a repository destination. */
export async function diagnoseFolder(folder: string): Promise<Diagnosis> {
  const dir = path.resolve(folder);
  const checks: DiagnosisCheck[] = [];
  const put = (c: Omit<DiagnosisCheck, 'label'> & { label?: string }) =>
    checks.push({
      label: { folder: 'Folder', writable: 'Writable', repository: 'Tidemark repository' }[c.name] ?? c.name,
      ...c,
    });
  let repositoryExists: boolean | null = null;
  const done = (): Diagnosis => {
    const bad = checks.find((c) => c.status === 'failed');
    return {
      ok: !bad,
      location: dir,
      checks,
      repositoryExists,
      summary: bad ? `cannot use ${dir}: ${bad.message}` : `${dir} can hold the backups`,
    };
  };

  // 1. The folder, or the nearest existing parent it would be created in.
  const st = await fs.stat(dir).catch((e: NodeJS.ErrnoException) => e);
  let probeDir = dir;
  if (st instanceof Error) {
    if (st.code !== 'ENOENT') {
      put({
        name: 'folder',
        status: 'failed',
        message: `cannot look at ${dir}: ${st.message}`,
        code: st.code,
      });
      return done();
    }
    let parent = path.dirname(dir);
    let pst = await fs.stat(parent).catch(() => null);
    while (!pst && path.dirname(parent) !== parent) {
      parent = path.dirname(parent);
      pst = await fs.stat(parent).catch(() => null);
    }
    if (!pst?.isDirectory()) {
      put({
        name: 'folder',
        status: 'failed',
        message: `${dir} does not exist and cannot be created under ${parent}`,
      });
      return done();
    }
    probeDir = parent;
    put({
      name: 'folder',
      status: 'passed',
      message: `${dir} does not exist yet: it is created in ${parent} when the job is saved`,
    });
  } else if (!st.isDirectory()) {
    put({ name: 'folder', status: 'failed', message: `${dir} is a file, not a folder` });
    return done();
  } else {
    let free = '';
    try {
      const s = await fs.statfs(dir);
      free = ` (${gib(s.bavail * s.bsize)} free)`;
    } catch {}
    put({ name: 'folder', status: 'passed', message: `${dir} exists${free}` });
  }

  // 2. Write, read back and delete a probe file.
  const probe = path.join(probeDir, `.tidemark-probe-${crypto.randomBytes(6).toString('hex')}`);
  try {
    const body = crypto.randomBytes(64);
    await fs.writeFile(probe, body, { flag: 'wx' });
    const back = await fs.readFile(probe);
    if (!back.equals(body)) throw new Error('a test file came back with different bytes');
    await fs.rm(probe);
    put({
      name: 'writable',
      status: 'passed',
      message: `files can be written, read and deleted in ${probeDir}`,
    });
  } catch (err) {
    await fs.rm(probe, { force: true }).catch(() => {});
    const w = errorToWire(err);
    const why =
      w.code === 'EACCES' || w.code === 'EPERM'
        ? `no permission to write in ${probeDir}`
        : w.code === 'EROFS'
          ? `${probeDir} is on a read-only drive`
          : w.code === 'ENOSPC'
            ? `the drive holding ${probeDir} is full`
            : `cannot write in ${probeDir}: ${w.message}`;
    put({ name: 'writable', status: 'failed', message: why, code: w.code });
  }

  // 3. A repository already there, an empty folder, or someone else's files?
  if (probeDir !== dir) {
    repositoryExists = false;
    put({ name: 'repository', status: 'passed', message: 'a new repository is created there' });
  } else {
    const names = (await fs.readdir(dir).catch(() => [] as string[])).filter(
      (n) => !n.startsWith('.tidemark-probe-'),
    );
    const hasConfig = await fs
      .stat(path.join(dir, 'config', 'config'))
      .then(() => true)
      .catch(() => false);
    repositoryExists = hasConfig;
    if (hasConfig)
      put({
        name: 'repository',
        status: 'passed',
        message: 'a Tidemark repository is already here: saving reuses it (its password is needed)',
      });
    else if (names.length === 0)
      put({
        name: 'repository',
        status: 'passed',
        message: 'the folder is empty: a new repository is created there',
      });
    else
      put({
        name: 'repository',
        status: 'failed',
        message: `${dir} is not empty and holds no Tidemark repository: choose an empty or new folder`,
      });
  }
  return done();
}

/**
 * Diagnoses a repository location as openBackend reads it (a folder, `local:/path`, or `s3:…` with
 * option fields and keys as in BackendOptions).
 */
export async function diagnoseLocation(
  location: string,
  options: BackendOptions = {},
  o: S3DiagnoseOptions = {},
): Promise<Diagnosis> {
  if (isS3Location(location) || (location === '' && options.bucket)) {
    let s3;
    try {
      s3 = s3OptionsFrom(location, options);
    } catch (err) {
      const w = errorToWire(err);
      return {
        ok: false,
        location,
        checks: [{ name: 'address', label: 'Address', status: 'failed', message: w.message, code: w.code }],
        repositoryExists: null,
        summary: `cannot use ${location}: ${w.message}`,
      };
    }
    const { diagnoseS3 } = await import('./s3/diagnose.js'); // the AWS SDK, loaded on first use
    return diagnoseS3(s3, o);
  }
  return diagnoseFolder(location.replace(/^local:/, ''));
}
