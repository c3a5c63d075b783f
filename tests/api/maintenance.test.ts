// The API names the host that maintains (prunes on schedule) a job's repository: nobody before the
// first claim, then the owner with its interval and when another host may take over.
import { afterAll, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { memoryApi } from '../helpers/api.js';
import { RealEngine } from '../../src/main/api/engine-adapter.js';
import { LocalBackend } from '../../src/main/engine/backend/local/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { claimMaintenance } from '../../src/main/engine/repo/maintenance.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-api-maint-'));
const api = memoryApi(new RealEngine(), tmp);

afterAll(async () => {
  await api.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

it("names the repository's maintenance owner", async () => {
  const src = path.join(tmp, 'src');
  fs.mkdirSync(src, { recursive: true });
  fs.writeFileSync(path.join(src, 'a.txt'), 'a');
  const repoDir = path.join(tmp, 'repo');
  const job = await api.call('jobs.create', {
    name: 'Shared',
    sources: [src],
    destination: { kind: 'local', path: repoDir },
    schedule: { kind: 'manual' },
    password: 'shared password',
  });
  expect(await api.call('jobs.maintenance', { id: job.id })).toBeNull();

  // another PC claims maintenance of the shared repository
  const other = await Repository.open(new LocalBackend(repoDir), 'shared password');
  const claimed = await claimMaintenance(other.backend, other.key, {
    host: 'office-pc',
    intervalMs: 86_400_000,
  });
  await other.close();

  const info = await api.call('jobs.maintenance', { id: job.id });
  expect(info).toMatchObject({ owner: 'office-pc', intervalMs: 86_400_000, lastPruneAt: null });
  // never pruned: others may take over twice its interval after it claimed
  expect(Date.parse(info!.takeoverAfter) - Date.parse(claimed.record.claimedAt)).toBe(2 * 86_400_000);
});
