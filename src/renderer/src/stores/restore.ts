/**
 * The Restore page: chosen job, computer and snapshot, the folder being browsed, search, versions and a
 * restore. `host` null means this job's own snapshots; a host name, that computer's snapshots in the
 * job's repository (a repository shared by several PCs), which every call then asks for.
 */
import { create } from 'zustand';
import {
  api,
  errorMessage,
  type BrowseEntry,
  type FileVersion,
  type OverwritePolicy,
  type RestoreStatus,
  type SearchHit,
  type SnapshotHost,
  type SnapshotInfo,
} from '../api';
import { useApp } from './app';

interface RestoreState {
  jobId: string | null;
  /** Computers with snapshots in the job's repository (this computer first). */
  hosts: SnapshotHost[];
  /** The other computer being shown, or null for this job's own snapshots. */
  host: string | null;
  snapshots: SnapshotInfo[];
  snapshotId: string | null;
  path: string;
  entries: BrowseEntry[];
  loading: boolean;
  error: string | null;
  query: string;
  hits: SearchHit[] | null;
  searching: boolean;
  versionsOf: string | null;
  versions: FileVersion[];
  selected: string[];
  status: RestoreStatus | null;
  selectJob(jobId: string): Promise<void>;
  selectHost(host: string | null): Promise<void>;
  /** Reloads the computers and snapshots of the chosen job (a backup finished, the page was shown again),
   *  keeping the snapshot and folder being browsed when they still exist. */
  refresh(): Promise<void>;
  selectSnapshot(id: string, path?: string): Promise<void>;
  open(path: string): Promise<void>;
  search(query: string): Promise<void>;
  clearSearch(): void;
  showVersions(path: string | null): Promise<void>;
  toggle(path: string): void;
  setSelected(paths: string[]): void;
  start(
    target: { kind: 'original' } | { kind: 'folder'; path: string },
    overwrite: OverwritePolicy,
  ): Promise<void>;
}

const fail = (err: unknown) => useApp.getState().toast('error', errorMessage(err));

/** The deepest folder all of a snapshot's sources share, where browsing starts. */
function commonRoot(paths: string[]): string {
  if (!paths.length) return '/';
  const split = paths.map((p) => p.split(/[\\/]/).filter(Boolean));
  const out: string[] = [];
  for (let i = 0; i < split[0].length; i++) {
    const c = split[0][i];
    if (split.every((s) => s[i] === c)) out.push(c);
    else break;
  }
  return '/' + out.join('/');
}

/** Only the latest folder request may fill the view. */
let openSeq = 0;

/** The `host` argument of the snapshots.* calls: absent for this job's own snapshots. */
const hostArg = (host: string | null) => (host === null ? {} : { host });

export const useRestore = create<RestoreState>((set, get) => ({
  jobId: null,
  hosts: [],
  host: null,
  snapshots: [],
  snapshotId: null,
  path: '/',
  entries: [],
  loading: false,
  error: null,
  query: '',
  hits: null,
  searching: false,
  versionsOf: null,
  versions: [],
  selected: [],
  status: null,
  async selectJob(jobId) {
    set({ jobId, hosts: [] });
    await get().selectHost(null);
    try {
      const hosts = await api.call('snapshots.hosts', { jobId });
      if (get().jobId === jobId) set({ hosts });
    } catch {
      // the snapshot list has already said what is wrong with the repository
    }
  },
  async selectHost(host) {
    const { jobId } = get();
    if (!jobId) return;
    set({
      host,
      snapshots: [],
      snapshotId: null,
      entries: [],
      hits: null,
      query: '',
      selected: [],
      versionsOf: null,
      error: null,
    });
    try {
      const snapshots = await api.call('snapshots.list', { jobId, ...hostArg(host) });
      if (get().jobId !== jobId || get().host !== host) return;
      set({ snapshots });
      if (snapshots[0]) await get().selectSnapshot(snapshots[0].id);
    } catch (err) {
      set({ error: errorMessage(err) });
    }
  },
  async refresh() {
    const { jobId, host } = get();
    if (!jobId) return;
    try {
      const [hosts, snapshots] = await Promise.all([
        api.call('snapshots.hosts', { jobId }),
        api.call('snapshots.list', { jobId, ...hostArg(host) }),
      ]);
      if (get().jobId !== jobId || get().host !== host) return;
      set({ hosts, snapshots });
      const { snapshotId } = get();
      if (snapshotId && snapshots.some((s) => s.id === snapshotId)) return; // leave the view as it is
      if (snapshots[0]) await get().selectSnapshot(snapshots[0].id);
      else set({ snapshotId: null, entries: [] });
    } catch {
      // what is shown stays; the next action reports what is wrong
    }
  },
  async selectSnapshot(id, path) {
    const snap = get().snapshots.find((s) => s.id === id);
    set({ snapshotId: id, selected: [] });
    await get().open(path ?? commonRoot(snap?.paths ?? []));
  },
  async open(path) {
    const { jobId, snapshotId, host } = get();
    if (!jobId || !snapshotId) return;
    const mine = ++openSeq;
    set({ loading: true, error: null });
    try {
      const entries = await api.call('snapshots.browse', { jobId, snapshotId, path, ...hostArg(host) });
      if (mine === openSeq) set({ entries, path, loading: false });
    } catch (err) {
      if (mine === openSeq) set({ loading: false, error: errorMessage(err) });
    }
  },
  async search(query) {
    const { jobId, host } = get();
    set({ query });
    if (!jobId || !query.trim()) return set({ hits: null });
    set({ searching: true });
    try {
      const hits = await api.call('snapshots.search', {
        jobId,
        query: query.trim(),
        limit: 500,
        ...hostArg(host),
      });
      if (get().query === query && get().host === host) set({ hits, searching: false });
    } catch (err) {
      set({ searching: false });
      fail(err);
    }
  },
  clearSearch() {
    set({ hits: null, query: '' });
  },
  async showVersions(path) {
    const { jobId, host } = get();
    if (!path || !jobId) return set({ versionsOf: null, versions: [] });
    set({ versionsOf: path, versions: [] });
    try {
      const versions = await api.call('snapshots.versions', { jobId, path, ...hostArg(host) });
      if (get().versionsOf === path && get().host === host) set({ versions });
    } catch (err) {
      fail(err);
    }
  },
  toggle(path) {
    const sel = get().selected;
    set({ selected: sel.includes(path) ? sel.filter((p) => p !== path) : [...sel, path] });
  },
  setSelected(paths) {
    set({ selected: paths });
  },
  async start(target, overwrite) {
    const { jobId, snapshotId, selected } = get();
    if (!jobId || !snapshotId) return;
    try {
      const status = await api.call('restore.start', {
        jobId,
        snapshotId,
        paths: selected,
        target,
        overwrite,
      });
      set({ status });
    } catch (err) {
      fail(err);
    }
  },
}));

api.on('restore.progress', (status) => {
  if (useRestore.getState().status?.id !== status.id) return;
  useRestore.setState({ status });
  const app = useApp.getState();
  if (status.status === 'completed')
    app.toast('success', `Restored ${status.filesDone} file(s) to ${status.target}`);
  else if (status.status === 'failed') app.toast('error', `Restore failed: ${status.error?.message ?? ''}`);
  else if (status.status === 'completed-with-errors')
    app.toast('error', `Restore finished with ${status.errorCount ?? status.errors.length} error(s)`);
});

// A finished backup of the job being browsed adds a snapshot (and maybe a computer): show it.
api.on('run.finished', (run) => {
  if (run.jobId === useRestore.getState().jobId) void useRestore.getState().refresh();
});
