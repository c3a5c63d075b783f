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
