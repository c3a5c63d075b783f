/** Live runs (from run.progress events) and the run history with per-run details and samples. */
import { create } from 'zustand';
import { api, errorMessage, type LiveRun, type RunDetail, type RunSummary } from '../api';
import { useApp } from './app';
import { HISTORY_LIMIT, KEPT_RUNS, prependCapped, setCapped } from './bounded';

interface RunsState {
  live: Record<string, LiveRun>;
  /** Runs that finished while the app was watching, by id (so the Live page can show the end state). */
  finished: Record<string, RunSummary>;
  history: RunSummary[];
  details: Record<string, RunDetail>;
  loadLive(): Promise<void>;
  loadHistory(jobId?: string): Promise<void>;
  loadDetail(id: string): Promise<RunDetail | null>;
  pause(id: string): Promise<void>;
  resume(id: string): Promise<void>;
  cancel(id: string): Promise<void>;
}

const fail = (err: unknown) => useApp.getState().toast('error', errorMessage(err));

export const useRuns = create<RunsState>((set) => ({
  live: {},
  finished: {},
  history: [],
  details: {},
  async loadLive() {
    try {
      const runs = await api.call('runs.live', {});
      set({ live: Object.fromEntries(runs.map((r) => [r.run.id, r])) });
    } catch (err) {
      fail(err);
    }
  },
  async loadHistory(jobId) {
    try {
      set({ history: await api.call('runs.list', { jobId, limit: HISTORY_LIMIT }) });
    } catch (err) {
      fail(err);
    }
  },
  async loadDetail(id) {
    try {
      const d = await api.call('runs.get', { id });
      set((s) => ({ details: setCapped(s.details, id, d, KEPT_RUNS) }));
      return d;
    } catch (err) {
      fail(err);
      return null;
    }
  },
  async pause(id) {
    try {
      const l = await api.call('runs.pause', { id });
      set((s) => ({ live: { ...s.live, [id]: l } }));
    } catch (err) {
      fail(err);
    }
  },
  async resume(id) {
    try {
      const l = await api.call('runs.resume', { id });
      set((s) => ({ live: { ...s.live, [id]: l } }));
    } catch (err) {
      fail(err);
    }
  },
  async cancel(id) {
    try {
      await api.call('runs.cancel', { id });
    } catch (err) {
      fail(err);
    }
  },
}));

api.on('run.progress', (l) => useRuns.setState((s) => ({ live: { ...s.live, [l.run.id]: l } })));
api.on('run.finished', (run) => {
  useRuns.setState((s) => {
    const live = { ...s.live };
    delete live[run.id];
    return {
      live,
      finished: setCapped(s.finished, run.id, run, KEPT_RUNS),
      history: prependCapped(s.history, run, HISTORY_LIMIT),
    };
  });
  void useRuns.getState().loadDetail(run.id);
  const app = useApp.getState();
  // a failed restore test is announced by its own event (stores/protection.ts)
  if (run.status === 'failed' && run.error?.code === 'RESTORE_TEST_FAILED') return;
  if (run.status === 'failed')
    app.toast('error', `${run.jobName}: backup failed — ${run.error?.message ?? 'unknown error'}`);
  else if (run.status === 'missed') app.toast('error', `${run.jobName}: a scheduled backup was missed`);
  else if (run.status === 'completed-with-warnings')
    app.toast('info', `${run.jobName}: finished with ${run.warnings} warnings`);
  else if (run.status === 'completed') app.toast('success', `${run.jobName}: backup finished`);
});
