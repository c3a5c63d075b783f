/** The shell: navigation, theme, toasts, and the current page. */
import { useEffect, useRef } from 'react';
import { useApp, type Route } from './stores/app';
import { useRuns } from './stores/runs';
import { useJobs } from './stores/jobs';
import { Icon } from './components/Icon';
import { Dashboard } from './pages/Dashboard';
import { JobWizard } from './pages/JobWizard';
import { LiveRunPage } from './pages/LiveRun';
import { RestorePage } from './pages/Restore';
import { HistoryPage } from './pages/History';
import { SettingsPage } from './pages/Settings';

const nav: { route: Route; label: string; icon: string }[] = [
  { route: { page: 'dashboard' }, label: 'Dashboard', icon: 'dashboard' },
  { route: { page: 'wizard' }, label: 'New job', icon: 'plus' },
  { route: { page: 'run' }, label: 'Live run', icon: 'pulse' },
  { route: { page: 'restore' }, label: 'Restore', icon: 'restore' },
  { route: { page: 'history' }, label: 'History', icon: 'history' },
  { route: { page: 'settings' }, label: 'Settings', icon: 'settings' },
];

function useTheme() {
  const theme = useApp((s) => s.settings?.theme ?? 'system');
  useEffect(() => {
    const media = window.matchMedia('(prefers-color-scheme: dark)');
    const apply = () => {
      document.documentElement.dataset.theme =
        theme === 'system' ? (media.matches ? 'dark' : 'light') : theme;
    };
    apply();
    media.addEventListener('change', apply);
    return () => media.removeEventListener('change', apply);
  }, [theme]);
}

export function App() {
  const { route, navigate, toasts, dismiss, load, connected, settings, updateSettings } = useApp();
  const liveCount = useRuns((s) => Object.keys(s.live).length);
  useTheme();
  useEffect(() => {
    void load();
    void useRuns.getState().loadLive();
    void useJobs.getState().load();
  }, [load]);
  const shownPage = useRef(route.page);
  useEffect(() => {
    // after navigating, focus goes to the new page (screen readers announce it); not on first load,
    // where the first Tab must reach the skip link
    if (shownPage.current === route.page) return;
    shownPage.current = route.page;
    document.getElementById('main')?.focus();
  }, [route.page]);
  const dark = document.documentElement.dataset.theme === 'dark';
  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <aside className="sidebar">
        <div className="brand">
          <img src="./favicon.svg" alt="" width={30} height={30} />
          <span>Tidemark</span>
        </div>
        <nav aria-label="Main">
          <ul>
            {nav.map((n) => (
              <li key={n.label}>
                <button
                  className={`nav-item ${route.page === n.route.page ? 'active' : ''}`}
                  aria-current={route.page === n.route.page ? 'page' : undefined}
                  onClick={() => navigate(n.route)}
                >
                  <Icon name={n.icon} />
                  <span>{n.label}</span>
                  {n.route.page === 'run' && liveCount ? (
                    <span className="pill" aria-label={`${liveCount} running`}>
                      {liveCount}
                    </span>
                  ) : null}
                </button>
              </li>
            ))}
          </ul>
        </nav>
        <div className="sidebar-foot">
          <button
            className="icon-button"
            aria-label={dark ? 'Switch to light theme' : 'Switch to dark theme'}
            onClick={() => void updateSettings({ theme: dark ? 'light' : 'dark' })}
            disabled={!settings}
          >
            <Icon name={dark ? 'sun' : 'moon'} />
          </button>
        </div>
      </aside>
      <main id="main" tabIndex={-1}>
        {!connected ? (
          <div className="error-banner" role="alert">
            Lost the connection to Tidemark — reconnecting…
          </div>
        ) : null}
        {route.page === 'dashboard' && <Dashboard />}
        {route.page === 'wizard' && <JobWizard key={route.jobId ?? 'new'} jobId={route.jobId} />}
        {route.page === 'run' && <LiveRunPage runId={route.runId} />}
        {route.page === 'restore' && <RestorePage jobId={route.jobId} />}
        {route.page === 'history' && <HistoryPage runId={route.runId} />}
        {route.page === 'settings' && <SettingsPage />}
      </main>
      <div className="toasts" aria-live="polite">
        {toasts.map((t) => (
          <div key={t.id} className={`toast toast-${t.kind}`} role={t.kind === 'error' ? 'alert' : 'status'}>
            <span>{t.text}</span>
            <button className="icon-button" aria-label="Dismiss" onClick={() => dismiss(t.id)}>
              <Icon name="x" size={14} />
            </button>
          </div>
        ))}
      </div>
    </div>
  );
}
