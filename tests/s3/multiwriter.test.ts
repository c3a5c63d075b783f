/**
 * Several PCs, one repository: three `tidemark backup` processes (hosts pc1, pc2, pc3) write three
 * different trees into one S3 repository at the same time while a fourth process runs `prune`
 * (with garbage to collect from a forgotten snapshot). Afterwards every snapshot restores byte for
 * byte, a later backup of shared data from a fourth PC stores next to nothing, and
 * `check --read-data` is clean.
 *
 * Runs against the local radosgw, or s3rver when Ceph is not installed. A command refused because
 * the repository is locked (exit code 11) is run again, as a scheduler would; how often that happened
 * is printed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomPrefix, s3Backend, startS3rver, useRadosgw, type S3Server } from './servers.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CLI = path.join(root, 'bin/tidemark.mjs');
const haveCli = fs.existsSync(path.join(root, 'src/main/cli/main.ts'));

/** A source tree declared as data: relative path → contents (a directory when the value is null). */
type TreeSpec = Record<string, Buffer | string | null>;

function rand(seed: string, size: number): Buffer {
  const out = Buffer.alloc(size);
  let block = crypto.createHash('sha256').update(seed).digest();
  for (let off = 0; off < size; off += block.length) {
    block.copy(out, off);
    block = crypto.createHash('sha256').update(block).digest();
  }
  return out;
}

const shared = rand('shared between all three PCs', 3 * 1024 * 1024);
const trees: Record<string, TreeSpec> = {
  pc1: {
    'docs/report.txt': 'quarterly report\n'.repeat(500),
    'docs/shared.bin': shared,
    'photos/a.jpg': rand('pc1 photo a', 900_000),
    'photos/b.jpg': rand('pc1 photo b', 2_500_000),
    'empty.txt': '',
    'nested/deeper/still/file.txt': 'deep',
    emptydir: null,
  },
  pc2: {
    'work/shared-copy.bin': shared,
    'work/sheet.csv': Array.from({ length: 5000 }, (_, i) => `${i},${i * i}\n`).join(''),
    'music/track.flac': rand('pc2 track', 4_000_000),
  },
  pc3: {
    'shared.bin': shared,
    'vm/disk.img': Buffer.concat([
      rand('pc3 disk head', 1_000_000),
      Buffer.alloc(2_000_000),
      rand('pc3 disk tail', 700_000),
    ]),
    'notes.md': '# notes\n',
  },
};

function writeTree(dir: string, spec: TreeSpec): void {
  for (const [rel, content] of Object.entries(spec)) {
    const p = path.join(dir, rel);
    if (content === null) {
      fs.mkdirSync(p, { recursive: true });
      continue;
    }
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, content);
  }
}

/** Every file and folder below dir, with file hashes, for byte-for-byte comparison. */
function describeTree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      const p = path.join(d, e.name);
      if (e.isDirectory()) {
        out[r] = 'dir';
        walk(p, r);
      } else out[r] = crypto.createHash('sha256').update(fs.readFileSync(p)).digest('hex');
    }
  };
  walk(dir, '');
  return out;
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

let server: S3Server;
let ownS3rver = false;
let work: string;
let env: NodeJS.ProcessEnv;
let location: string;
const lockRetries: Record<string, number> = {};

function tidemark(args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, '--repo', location, ...args], { env, cwd: work });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}

/** Runs a command, again while the repository is locked by another process (exit 11), up to a limit. */
async function tidemarkWhenUnlocked(label: string, args: string[]): Promise<Run> {
  for (let i = 0; ; i++) {
    const r = await tidemark(args);
    if (r.code !== 11 || i >= 120) return r;
    lockRetries[label] = (lockRetries[label] ?? 0) + 1;
    await new Promise((res) => setTimeout(res, 100 + Math.random() * 300));
  }
}

const rgw = await useRadosgw();

describe.skipIf(!haveCli)('several PCs back up into one S3 repository while another prunes', () => {
  beforeAll(async () => {
    if (typeof rgw === 'string') {
      server = await startS3rver();
      ownS3rver = true;
    } else server = rgw;
    // The bucket exists (as it would for an office); the repository gets its own prefix.
    const b = s3Backend(server, 'offices');
    await b.init();
    await b.close();
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'tm-multi-'));
    location = `s3:${server.endpoint}/offices/${randomPrefix('repo')}`;
    env = {
      ...process.env,
      AWS_ACCESS_KEY_ID: server.accessKeyId,
      AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
      TIDEMARK_PASSWORD: 'correct horse battery staple',
      TIDEMARK_HOME: path.join(work, 'home'),
      TIDEMARK_TEST_KDF_N: '1024', // fast key derivation for tests
    };
    for (const [host, spec] of Object.entries(trees)) writeTree(path.join(work, host), spec);
  });

  afterAll(async () => {
    if (ownS3rver) await server?.close();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it(`three concurrent backups and a prune, then byte-exact restores and a clean check (${typeof rgw === 'string' ? 's3rver' : 'radosgw'})`, async () => {
    const init = await tidemark(['init']);
    expect(init.code, init.stderr).toBe(0);

    // Garbage for prune: two snapshots of a tree nobody else has, the older one forgotten (its
    // 3 MB of unique data is then needed by nothing).
    for (const version of ['v1', 'v2']) {
      writeTree(path.join(work, 'old'), { 'old-only.bin': rand(`forgotten ${version}`, 3_000_000) });
      const old = await tidemark(['backup', '--host', 'old-pc', path.join(work, 'old')]);
      expect(old.code, old.stderr).toBe(0);
    }
    const forgot = await tidemark(['--json', 'forget', '--host', 'old-pc', '--keep-last', '1']);
    expect(forgot.code, forgot.stderr).toBe(0);
    expect((JSON.parse(forgot.stdout) as { remove: unknown[] }).remove).toHaveLength(1);

    // Three PCs back up at once while a fourth process prunes, again and again until they are done,
    // so prune's exclusive lock meets the backups' shared locks at every stage.
    let backupsDone = false;
    const backups = Promise.all(
      Object.keys(trees).map((host) =>
        tidemarkWhenUnlocked(host, ['--json', 'backup', '--host', host, path.join(work, host)]),
      ),
    ).finally(() => (backupsDone = true));
    const prunes: Run[] = [];
    const pruner = (async () => {
      do {
        const r = await tidemark(['--json', 'prune']);
        if (r.code === 11) lockRetries.prune = (lockRetries.prune ?? 0) + 1;
        else prunes.push(r);
        await new Promise((res) => setTimeout(res, 50 + Math.random() * 200));
      } while (!backupsDone || prunes.length === 0);
    })();
    const [runs] = await Promise.all([backups, pruner]);
    for (const r of [...runs, ...prunes]) expect(r.code, r.stderr).toBe(0);
    const pruned = prunes.map((r) => JSON.parse(r.stdout) as { packsRemoved: number; bytesFreed: number });
    console.log(
      `multi-writer on ${server.name}: ${prunes.length} prunes completed, lock refusals ${JSON.stringify(lockRetries)}, ` +
        `packs removed ${pruned.map((p) => p.packsRemoved).join('+')}`,
    );
    expect(pruned.reduce((n, p) => n + p.packsRemoved, 0)).toBeGreaterThan(0); // the forgotten snapshot's data is gone

    // One snapshot per PC, recording its host.
    const list = await tidemark(['--json', 'snapshots']);
    expect(list.code, list.stderr).toBe(0);
    const snaps = JSON.parse(list.stdout) as { id: string; host: string; paths: string[] }[];
    expect(snaps.map((s) => s.host).sort()).toEqual(['old-pc', 'pc1', 'pc2', 'pc3']);
    const onlyPc2 = JSON.parse((await tidemark(['--json', 'snapshots', '--host', 'pc2'])).stdout) as {
      host: string;
    }[];
    expect(onlyPc2.map((s) => s.host)).toEqual(['pc2']);

    // Chunks are shared across PCs: a fourth PC that backs up a tree holding the shared 3 MiB adds
    // next to nothing. (Backups that ran at the same time could not see each other's new chunks, so
    // the concurrent round may have stored the shared file more than once — see the report.)
    writeTree(path.join(work, 'pc4'), { 'copy-of-shared.bin': shared, 'own.txt': 'pc4' });
    const pc4 = await tidemarkWhenUnlocked('pc4', [
      '--json',
      'backup',
      '--host',
      'pc4',
      path.join(work, 'pc4'),
    ]);
    expect(pc4.code, pc4.stderr).toBe(0);
    const pc4Stats = (
      JSON.parse(pc4.stdout) as { snapshot: { stats: { storedBytes: number; totalBytes: number } } }
    ).snapshot.stats;
    expect(pc4Stats.totalBytes).toBeGreaterThan(shared.length);
    expect(pc4Stats.storedBytes).toBeLessThan(64 * 1024);
    snaps.push(JSON.parse((await tidemark(['--json', 'snapshots', '--host', 'pc4'])).stdout)[0]);

    // Every snapshot restores byte for byte.
    for (const s of snaps.filter((x) => x.host !== 'old-pc')) {
      const target = path.join(work, 'restore', s.host);
      const source = path.join(work, s.host);
      const r = await tidemark(['restore', s.id, '--target', target, '--relative-to', source]);
      expect(r.code, r.stderr).toBe(0);
      expect(describeTree(target)).toEqual(describeTree(source));
    }

    // Every byte in the repository reads back and verifies.
    const check = await tidemark(['--json', 'check', '--read-data']);
    expect(check.code, check.stdout + check.stderr).toBe(0);
    const report = JSON.parse(check.stdout) as { ok: boolean; problems: unknown[] };
    expect(report.ok).toBe(true);
    expect(report.problems).toEqual([]);
  }, 300_000);
});
