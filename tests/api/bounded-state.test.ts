// Finished restores over a long session of the app: the API keeps the newest KEPT_FINISHED (a restore
// of long ago answers NOT_FOUND) and each one's errors up to MAX_RESTORE_ERRORS, with all of them counted.
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FakeEngine } from '../../src/main/api/fake-engine.js';
import { KEPT_FINISHED, MAX_RESTORE_ERRORS } from '../../src/main/api/bounded.js';
import type { RestoreStatus } from '../../src/shared/api.js';
import { memoryApi } from '../helpers/api.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tidemark-bounded-issue-31b-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('finished restores', () => {
  it('are kept up to KEPT_FINISHED, the newest; their errors up to MAX_RESTORE_ERRORS, all counted', async () => {
    const engine = new FakeEngine(0);
    const failing = MAX_RESTORE_ERRORS + 500;
    engine.restore = async () => ({
      filesRestored: 0,
      bytesRestored: 0,
      skipped: 0,
      errors: Array.from({ length: failing }, (_, i) => ({
        path: `/f${i}`,
        message: 'cannot write',
        code: 'EACCES',
      })),
    });
    fs.mkdirSync(path.join(tmp, 'src'));
    const api = memoryApi(engine, tmp);
    try {
      const job = await api.call('jobs.create', {
        name: 'Docs',
        sources: [path.join(tmp, 'src')],
        destination: { kind: 'local', path: path.join(tmp, 'repo') },
        schedule: { kind: 'manual' },
        password: 'a good password',
      });
      const jobId = job.id;
      const snapshotId = 'any';
      const ids: string[] = [];
      for (let i = 0; i < 3 * KEPT_FINISHED; i++) {
        const r = await api.call('restore.start', {
          jobId,
          snapshotId,
          paths: ['/'],
          target: { kind: 'folder', path: path.join(tmp, 'out') },
          overwrite: 'overwrite',
        });
        ids.push(r.id);
        let st: RestoreStatus;
        do st = await api.call('restore.get', { id: r.id });
        while (st.status === 'running' && (await new Promise((ok) => setTimeout(ok, 5, true))));
        expect(st.status).toBe('completed-with-errors');
        expect(st.errors).toHaveLength(MAX_RESTORE_ERRORS);
        expect(st.errorCount).toBe(failing);
      }
      await expect(api.call('restore.get', { id: ids[0] })).rejects.toMatchObject({ code: 'NOT_FOUND' });
      const kept: string[] = [];
      for (const id of ids)
        if (
          await api.call('restore.get', { id }).then(
            () => true,
            () => false,
          )
        )
          kept.push(id);
      // the newest ones (the last started was still running when the older ones were dropped)
      expect(kept.length).toBeGreaterThanOrEqual(KEPT_FINISHED);
      expect(kept.length).toBeLessThanOrEqual(KEPT_FINISHED + 1);
      expect(kept).toEqual(ids.slice(-kept.length));
    } finally {
      await api.close();
    }
  });
});
