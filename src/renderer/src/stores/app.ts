/** App-wide state: engine info, settings and theme, the current route, and toasts. */
import { create } from 'zustand';
import { api, errorMessage, type AppInfo, type Settings } from '../api';

export type Route =
  | { page: 'dashboard' }
  | { page: 'wizard'; jobId?: string }
  | { page: 'run'; runId?: string }
  | { page: 'restore'; jobId?: string }
  | { page: 'history'; runId?: string }
  | { page: 'settings' };

export function parseRoute(hash: string): Route {
  const [page, arg] = hash.replace(/^#\/?/, '').split('/');
  switch (page) {
    case 'jobs':
      return { page: 'wizard', jobId: arg && arg !== 'new' ? decodeURIComponent(arg) : undefined };
    case 'run':
      return { page: 'run', runId: arg ? decodeURIComponent(arg) : undefined };
    case 'restore':
      return { page: 'restore', jobId: arg ? decodeURIComponent(arg) : undefined };
    case 'history':
      return { page: 'history', runId: arg ? decodeURIComponent(arg) : undefined };
    case 'settings':
      return { page: 'settings' };
    default:
      return { page: 'dashboard' };
  }
}

export function routeHash(r: Route): string {
  switch (r.page) {
    case 'dashboard':
      return '#/';
    case 'wizard':
      return `#/jobs/${r.jobId ? encodeURIComponent(r.jobId) : 'new'}`;
    case 'run':
      return `#/run${r.runId ? '/' + encodeURIComponent(r.runId) : ''}`;
    case 'restore':
      return `#/restore${r.jobId ? '/' + encodeURIComponent(r.jobId) : ''}`;
    case 'history':
      return `#/history${r.runId ? '/' + encodeURIComponent(r.runId) : ''}`;
    case 'settings':
      return '#/settings';
  }
}

export interface Toast {
  id: number;
  kind: 'info' | 'error' | 'success';
  text: string;
}

interface AppState {
  info: AppInfo | null;
  settings: Settings | null;
  route: Route;
  toasts: Toast[];
  connected: boolean;
  load(): Promise<void>;
  navigate(r: Route): void;
  updateSettings(changes: Partial<Settings>): Promise<void>;
  toast(kind: Toast['kind'], text: string): void;
  dismiss(id: number): void;
}

let toastId = 1;

export const useApp = create<AppState>((set, get) => ({
  info: null,
  settings: null,
  route: parseRoute(location.hash),
  toasts: [],
  connected: true,
  async load() {
    try {
      const [info, settings] = await Promise.all([api.call('app.info', {}), api.call('settings.get', {})]);
      set({ info, settings });
    } catch (err) {
      get().toast('error', errorMessage(err));
    }
  },
  navigate(r) {
    const hash = routeHash(r);
    if (location.hash !== hash) history.pushState(null, '', hash);
    set({ route: r });
  },
  async updateSettings(changes) {
    try {
      set({ settings: await api.call('settings.update', changes) });
    } catch (err) {
      get().toast('error', errorMessage(err));
    }
  },
  toast(kind, text) {
    const id = toastId++;
    set((s) => ({ toasts: [...s.toasts.slice(-3), { id, kind, text }] }));
    setTimeout(() => get().dismiss(id), kind === 'error' ? 8000 : 4000);
  },
  dismiss(id) {
    set((s) => ({ toasts: s.toasts.filter((t) => t.id !== id) }));
  },
}));

window.addEventListener('popstate', () => useApp.setState({ route: parseRoute(location.hash) }));
api.on('settings.changed', (settings) => useApp.setState({ settings }));
const conn = (api as { onConnection?: (l: (s: string) => void) => () => void }).onConnection;
conn?.call(api, (s) => {
  useApp.setState({ connected: s !== 'closed' });
  if (s === 'open') void useApp.getState().load();
});
