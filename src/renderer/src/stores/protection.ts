/** Restore tests (on demand, and the history of them) and repairs of jobs' repositories. */
import { create } from 'zustand';
import { api, errorMessage, type RepairProgress, type RepairSummary, type RestoreTestSummary } from '../api';
import { useApp } from './app';
import { HISTORY_LIMIT, prependCapped } from './bounded';

interface ProtectionState {
  /** Jobs whose restore test the user started and that has not answered yet. */
  testing: string[];
  /** Newest first (History). */
  tests: RestoreTestSummary[];
  /** Jobs being repaired, with the latest progress (null until the first arrives). */
  repairing: Record<string, RepairProgress | null>;
  /** The last repair of each job in this session. */
  repairs: Record<string, RepairSummary>;
  loadTests(jobId?: string): Promise<void>;
  testRestore(jobId: string): Promise<void>;
  /** `maintenancePassword`: an append-only repository's (repair removes what it replaced). */
  repair(jobId: string, maintenancePassword?: string): Promise<RepairSummary | null>;
}

const fail = (err: unknown) => useApp.getState().toast('error', errorMessage(err));

export const useProtection = create<ProtectionState>((set) => ({
  testing: [],
  tests: [],
  repairing: {},
  repairs: {},
  async loadTests(jobId) {
    try {
      set({ tests: await api.call('restoreTests.list', { jobId, limit: HISTORY_LIMIT }) });
    } catch (err) {
      fail(err);
    }
  },
  async testRestore(jobId) {
    set((s) => ({ testing: [...s.testing, jobId] }));
    try {
      // the verdict arrives as restoreTest.finished (below), also for tests after scheduled backups
      await api.call('jobs.testRestore', { id: jobId });
    } catch (err) {
      fail(err);
    } finally {
      set((s) => ({ testing: s.testing.filter((x) => x !== jobId) }));
    }
  },
  async repair(jobId, maintenancePassword) {
    set((s) => ({ repairing: { ...s.repairing, [jobId]: null } }));
    try {
      const r = await api.call('jobs.repair', { id: jobId, maintenancePassword });
      set((s) => ({ repairs: { ...s.repairs, [jobId]: r } }));
      const app = useApp.getState();
      if (r.clean) app.toast('success', 'Nothing needed repairing');
      else if (r.lostCount) app.toast('info', `Repaired; ${r.lostCount} item(s) could not be saved`);
      else app.toast('success', 'Repaired; nothing was lost');
      return r;
    } catch (err) {
      fail(err);
      return null;
    } finally {
      set((s) => {
        const repairing = { ...s.repairing };
        delete repairing[jobId];
        return { repairing };
      });
    }
  },
}));

api.on('repair.progress', (p) =>
  useProtection.setState((s) =>
    p.jobId in s.repairing ? { repairing: { ...s.repairing, [p.jobId]: p } } : s,
  ),
);
api.on('restoreTest.finished', (t) => {
  useProtection.setState((s) => ({ tests: prependCapped(s.tests, t, HISTORY_LIMIT) }));
  const app = useApp.getState();
  if (t.status === 'failed')
    app.toast(
      'error',
      `${t.jobName}: restore test FAILED — ${t.failures.length} problem(s), e.g. ${t.failures[0]?.path ?? ''}`,
    );
  else if (t.status === 'error')
    app.toast('error', `${t.jobName}: the restore test could not run — ${t.error?.message ?? ''}`);
  else if (t.trigger === 'manual')
    app.toast('success', `${t.jobName}: restore test passed (${t.files} file(s) restored and compared)`);
});
