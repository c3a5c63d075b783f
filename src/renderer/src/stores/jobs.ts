/** Jobs with their last result and next run, kept fresh from engine events. */
import { create } from 'zustand';
import { api, errorMessage, type JobSummary, type RunSummary } from '../api';
import { useApp } from './app';

interface JobsState {
  jobs: JobSummary[];
  loaded: boolean;
  load(): Promise<void>;
  runNow(id: string, full?: boolean): Promise<RunSummary | null>;
  remove(id: string): Promise<void>;
  /** Verifies the job's repository; reports the result as a toast. */
  check(id: string): Promise<void>;
  checking: string[];
}

export const useJobs = create<JobsState>((set, get) => ({
  jobs: [],
  loaded: false,
  async load() {
    try {
      set({ jobs: await api.call('jobs.list', {}), loaded: true });
    } catch (err) {
      useApp.getState().toast('error', errorMessage(err));
    }
  },
  async runNow(id, full) {
    try {
      const run = await api.call('jobs.runNow', { id, full });
      void get().load();
      return run;
    } catch (err) {
      useApp.getState().toast('error', errorMessage(err));
      return null;
    }
  },
  checking: [],
  async check(id) {
    set((s) => ({ checking: [...s.checking, id] }));
    try {
      const r = await api.call('jobs.check', { id });
      const app = useApp.getState();
      if (r.ok)
        app.toast(
          'success',
          `Repository verified: ${r.snapshots} snapshot(s), ${r.packs} pack(s), no problems`,
        );
      else
        app.toast(
          'error',
          `Repository check found ${r.problems.length} problem(s): ${r.problems[0]?.message ?? ''}`,
        );
    } catch (err) {
      useApp.getState().toast('error', errorMessage(err));
    } finally {
      set((s) => ({ checking: s.checking.filter((x) => x !== id) }));
      void get().load();
    }
  },
  async remove(id) {
    try {
      await api.call('jobs.remove', { id });
      await get().load();
    } catch (err) {
      useApp.getState().toast('error', errorMessage(err));
    }
  },
}));

let pending: ReturnType<typeof setTimeout> | undefined;
const reload = () => {
  if (pending) return;
  pending = setTimeout(() => {
    pending = undefined;
    void useJobs.getState().load();
  }, 150);
};
api.on('jobs.changed', reload);
api.on('run.finished', reload);
// a mass-change alarm: the dashboard's banner shows it; a toast (and the browser's notification, where the
// user allowed them) says so wherever the user is in the app
api.on('alarm.raised', (a) => {
  reload();
  const text = `Possible ransomware: the backup of "${a.jobName}" changed ${a.suspicious} files the way encryption does`;
  useApp.getState().toast('error', text);
  if (typeof Notification !== 'undefined' && Notification.permission === 'granted')
    new Notification('Tidemark: possible ransomware', { body: text });
});
