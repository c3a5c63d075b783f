/**
 * What a job run keeps of its repository requests and of repository maintenance, with the real engine
 * over a local-folder repository: the run record holds request totals (matching what is on disk),
 * failed and retried requests (through a fault-injecting store), and the run claims and records
 * maintenance of the repository, so a second host does not prune it on schedule.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Catalog } from '../../src/main/engine/catalog/catalog.js';
import { KeyFileSecretStore } from '../../src/main/engine/catalog/secrets.js';
import { JobRunner } from '../../src/main/engine/schedule/runner.js';
import { createJobEngine, storeRepositorySecrets } from '../../src/main/engine/schedule/engine.js';
import { initRepository } from '../../src/main/engine/repo/repository.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { FaultyBackend } from '../../src/main/engine/backend/faulty/index.js';
import { readMaintenance } from '../../src/main/engine/repo/maintenance.js';
import type { BackendOptions } from '../../src/main/engine/backend/open.js';

let tmp: string;
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-runrecord-'));
});
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

function write(rel: string, content: string | Buffer) {
  const p = path.join(tmp, 'src', rel);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
}

function sizes(dir: string): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else {
        files++;
        bytes += fs.statSync(p).size;
      }
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return { files, bytes };
}

async function setup(host: string, backendOptions: BackendOptions = {}, dataName = 'data') {
  const repoDir = path.join(tmp, 'repo');
  if (!fs.existsSync(repoDir)) {
    const init = await initRepository(new LocalBackend(repoDir), 'pw-123', { kdf: { N: 1024 } });
    await init.close();
  }
  const dataDir = path.join(tmp, dataName);
  const secrets = new KeyFileSecretStore(dataDir);
  const catalog = new Catalog(dataDir);
  const repository = catalog.addRepository({ name: 'local', location: repoDir, options: {} });
  await storeRepositorySecrets(secrets, repository.id, { password: 'pw-123' });
  const job = catalog.addJob({
    name: 'home',
    repositoryId: repository.id,
    sources: [path.join(tmp, 'src')],
    excludes: [],
    schedule: { kind: 'manual' },
    retention: {},
    compressionLevel: 3,
    options: { workers: 1 },
    enabled: true,
  });
  const runner = new JobRunner({ catalog, engine: createJobEngine({ secrets, backendOptions }), host });
  return { repoDir, catalog, job, runner };
}

describe('run records', () => {
  it("keep the run's request totals, and the run claims and records maintenance", async () => {
    write('docs/a.txt', 'hello '.repeat(1000));
    write('photos/b.bin', Buffer.alloc(300_000, 7));
    const s = await setup('pc-one');
    const r = await s.runner.run(s.job);
    expect(r.status).toBe('completed');
    const stored = s.catalog.getRun(r.id).requests!;
    expect(stored).toBeTruthy();
    // what the run wrote is on disk: every stored object was one save of its size (prune found
    // nothing to delete in a fresh repository; config and keys were written before the run)
    const written = ['data', 'index', 'snapshots', 'maintenance'].map((t) => sizes(path.join(s.repoDir, t)));
    const onDisk = written.reduce((a, b) => ({ files: a.files + b.files, bytes: a.bytes + b.bytes }));
    const lockSaves = stored.recent.filter((x) => x.op === 'save' && x.type === 'locks');
    const lockBytes = lockSaves.reduce((a, x) => a + x.bytes, 0);
    expect(stored.byOp.save).toBeGreaterThanOrEqual(onDisk.files + lockSaves.length);
    expect(stored.bytesUp - lockBytes).toBeGreaterThanOrEqual(onDisk.bytes);
    expect(stored.bytesDown).toBeGreaterThan(0); // config, keys, locks, index read back
    expect(stored.requests).toBe(Object.values(stored.byOp).reduce((a, n) => a + n, 0));
    expect(stored.failed).toBe(stored.failures.length);
    expect(stored.slowest.length).toBeGreaterThan(0);
    const log = s.catalog.runLog(r.id).map((l) => l.line);
    expect(log.some((l) => l.startsWith(`repository: ${stored.requests} requests`))).toBe(true);
    // the first scheduled run of a repository nobody maintains claims it and prunes
    expect(
      log.includes('maintenance: this host now maintains the repository; not pruned yet, pruning now'),
    ).toBe(true);
    const m = (await readMaintenance(new LocalBackend(s.repoDir), await keyOf(s.repoDir)))!.record;
    expect(m).toMatchObject({ owner: 'pc-one', event: 'prune', intervalMs: 7 * 86_400_000 });
    expect(m.lastPruneAt).not.toBeNull();
    s.catalog.close();

    // a second PC backing up into the same repository does not prune it: pc-one maintains it
    const other = await setup('pc-two', {}, 'data2');
    const r2 = await other.runner.run(other.job);
    expect(r2.status).toBe('completed');
    const log2 = other.catalog.runLog(r2.id).map((l) => l.line);
    expect(log2.some((l) => /^maintenance: pc-one maintains this repository \(last pruned /.test(l))).toBe(
      true,
    );
    expect(other.catalog.getRepository(other.job.repositoryId).lastPruneAt).toBeNull();
    other.catalog.close();
  });

  it('keep failed and retried requests in full (fault-injecting store)', async () => {
    write('docs/a.txt', 'some data '.repeat(500));
    const faulty: FaultyBackend[] = [];
    const s = await setup('pc-one', {
      retry: { baseDelayMs: 1, maxDelayMs: 5 },
      wrapStore: (store) => {
        const f = new FaultyBackend(store, [
          {
            op: 'save',
            type: 'snapshots',
            times: 2,
            effect: {
              throw: () => Object.assign(new Error('connection reset by peer'), { code: 'ECONNRESET' }),
            },
          },
        ]);
        faulty.push(f);
        return f;
      },
    });
    const r = await s.runner.run(s.job);
    expect(r.status).toBe('completed');
    const req = s.catalog.getRun(r.id).requests!;
    expect(req.failed).toBe(2);
    expect(req.retried).toBe(2);
    expect(req.failures).toHaveLength(2);
    for (const f of req.failures) {
      expect(f).toMatchObject({ op: 'save', type: 'snapshots', ok: false, retried: true });
      expect(f.error).toMatchObject({
        code: 'ECONNRESET',
        message: expect.stringContaining('connection reset'),
      });
      expect(typeof f.at).toBe('number');
    }
    // the same snapshot name was attempted three times; the third landed
    expect(new Set(req.failures.map((f) => f.name)).size).toBe(1);
    expect(faulty[0].calls.save).toBeGreaterThanOrEqual(3);
    s.catalog.close();
  });
});

describe('store clock skew', () => {
  it('a store whose clock is minutes away from ours is a warning in the run', async () => {
    write('docs/a.txt', 'x');
    // a store whose clock runs 12 minutes ahead of this computer's
    class SkewedStore extends FaultyBackend {
      storeNow(): Promise<number> {
        return Promise.resolve(Date.now() + 12 * 60_000);
      }
    }
    const s = await setup('pc-one', { wrapStore: (store) => new SkewedStore(store) });
    const r = await s.runner.run(s.job);
    expect(r.status).toBe('completed-with-warnings');
    const problems = s.catalog.runProblems(r.id);
    expect(problems).toContainEqual(
      expect.objectContaining({
        severity: 'warning',
        code: 'CLOCK_SKEW',
        message: expect.stringMatching(/this computer's clock is 12 minute\(s\) behind the clock of /),
      }),
    );
    expect(s.catalog.runLog(r.id).some((l) => l.line.startsWith('warning: this computer'))).toBe(true);
    s.catalog.close();
  });
});

async function keyOf(repoDir: string) {
  const { openRepository } = await import('../../src/main/engine/repo/repository.js');
  const repo = await openRepository(new LocalBackend(repoDir), 'pw-123');
  const key = repo.key;
  await repo.close();
  return key;
}
