/** Settings: theme, notifications, start at login, defaults for compression/throughput/workers, passwords,
 *  and which host maintains (prunes) each job's repository. */
import { useEffect, useState } from 'react';
import { useApp } from '../stores/app';
import { useJobs } from '../stores/jobs';
import {
  api,
  errorMessage,
  type AppInfo,
  type CleanUpSummary,
  type JobSummary,
  type MaintenanceInfo,
} from '../api';
import { bytes, dateTime } from '../format';
import { Field } from '../components/ui';
import { DEFAULT_COMPRESSION_LEVEL } from '../../../shared/compression';

/** Which host prunes a job's repository on schedule (several PCs may share one repository). */
/** What makes incrementals fast here (docs/architecture.md §3), read fresh: the tracker starts after the app. */
function ChangeTracking() {
  const [tracking, setTracking] = useState<AppInfo['tracking'] | null>(null);
  useEffect(() => {
    let live = true;
    api.call('app.info', {}).then(
      (i) => live && setTracking(i.tracking),
      () => live && setTracking(undefined),
    );
    return () => {
      live = false;
    };
  }, []);
  if (tracking === null) return <p className="muted small">Reading…</p>;
  if (!tracking)
    return <p className="muted small">No change tracker runs here: every backup scans its folders.</p>;
  return (
    <dl className="review" role="status" aria-label="Change tracking">
      <dt>Changed folders</dt>
      <dd>
        {tracking.journal
          ? `${tracking.journal} change journal over ${tracking.folders} folder(s): incrementals visit only what changed`
          : tracking.folders
            ? 'no change journal (unavailable here): backups scan every folder'
            : 'no folders tracked yet: add a job'}
      </dd>
      <dt>Changed blocks of large files</dt>
      <dd>
        {tracking.blockLevel
          ? 'on: VM disks and databases are read only where they changed'
          : `off — file-level tracking only (${tracking.blockReason ?? 'unavailable'}); large files that change are read whole`}
      </dd>
    </dl>
  );
}

function Maintenance() {
  const jobs = useJobs((s) => s.jobs);
  const [jobId, setJobId] = useState('');
  const [info, setInfo] = useState<MaintenanceInfo | null | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const id = jobId || jobs[0]?.id || '';
  useEffect(() => {
    if (!id) return;
    let live = true;
    setInfo(undefined);
    setError(null);
    api.call('jobs.maintenance', { id }).then(
      (r) => live && setInfo(r),
      (err) => live && setError(errorMessage(err)),
    );
    return () => {
      live = false;
    };
  }, [id]);
  if (!jobs.length) return <p className="muted">Create a job first.</p>;
  const days = (ms: number) => `${+(ms / 86_400_000).toFixed(1)} day(s)`;
  return (
    <div className="form-grid two">
      <Field label="Job" htmlFor="maint-job">
        <select id="maint-job" value={id} onChange={(e) => setJobId(e.target.value)}>
          {jobs.map((j) => (
            <option key={j.id} value={j.id}>
              {j.name}
            </option>
          ))}
        </select>
      </Field>
      <div role="status" aria-label="Maintenance owner">
        {error ? (
          <p className="error-banner">{error}</p>
        ) : info === undefined ? (
          <p className="muted small">Reading the repository…</p>
        ) : info === null ? (
          <p className="small">Nobody maintains this repository yet: the next scheduled backup claims it.</p>
        ) : (
          <>
            <p className="small">
              Maintained by <strong>{info.owner}</strong> (prunes every {days(info.intervalMs)}; last prune{' '}
              {info.lastPruneAt ? dateTime(info.lastPruneAt) : 'not yet'}).
            </p>
            <p className="muted small">
              Another computer takes over if it has not pruned by {dateTime(info.takeoverAfter)}.
              {info.takeover ? ` Took over from ${info.takeover.from}: ${info.takeover.reason}.` : ''}
            </p>
          </>
        )}
      </div>
      {jobs.find((j) => j.id === id) ? <CleanUp job={jobs.find((j) => j.id === id)!} /> : null}
    </div>
  );
}

/** "Clean up now": the job's retention applied and the space no snapshot needs freed, at once. An
 *  append-only repository asks for its maintenance password (backups alone never delete there). */
function CleanUp({ job }: { job: JobSummary }) {
  const appendOnly = job.destination.kind === 'local' && !!job.destination.appendOnly;
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<CleanUpSummary | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setResult(null);
    setError(null);
    setPassword('');
  }, [job.id]);
  const run = async () => {
    setBusy(true);
    setError(null);
    setResult(null);
    try {
      setResult(
        await api.call('jobs.cleanUp', {
          id: job.id,
          maintenancePassword: appendOnly ? password : undefined,
        }),
      );
      setPassword('');
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form
      className="form-grid two"
      aria-label="Clean up now"
      onSubmit={(e) => {
        e.preventDefault();
        void run();
      }}
    >
      {appendOnly ? (
        <Field label="Maintenance password" htmlFor="cleanup-password" hint="this repository is append-only">
          <input
            id="cleanup-password"
            type="password"
            autoComplete="off"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        </Field>
      ) : null}
      <div>
        <button className="button" type="submit" disabled={busy || job.running || (appendOnly && !password)}>
          {busy ? 'Cleaning up…' : 'Clean up now'}
        </button>
        <p className="muted small">
          Applies this job&apos;s retention and frees the space no snapshot needs.
        </p>
      </div>
      <div role="status" aria-label="Clean-up result">
        {error ? <p className="error-banner">{error}</p> : null}
        {result ? (
          <p className="small">
            Removed {result.snapshotsRemoved} snapshot(s), kept {result.snapshotsKept}
            {result.snapshotsHeld ? ` (${result.snapshotsHeld} held by a mass-change alarm)` : ''}; freed{' '}
            {bytes(result.bytesFreed)} ({result.packsRemoved} pack(s) removed, {result.packsRewritten}{' '}
            rewritten).
          </p>
        ) : null}
      </div>
    </form>
  );
}

function PasswordChange() {
  const jobs = useJobs((s) => s.jobs);
  const toast = useApp((s) => s.toast);
  const [jobId, setJobId] = useState('');
  const [oldPassword, setOld] = useState('');
  const [newPassword, setNew] = useState('');
  const [confirm, setConfirm] = useState('');
  const [error, setError] = useState<string | null>(null);
  const id = jobId || jobs[0]?.id || '';
  const submit = async () => {
    if (newPassword !== confirm) return setError('the new passwords do not match');
    try {
      await api.call('jobs.changePassword', { id, oldPassword, newPassword });
      toast('success', 'Password changed');
      setOld('');
      setNew('');
      setConfirm('');
      setError(null);
    } catch (err) {
      setError(errorMessage(err));
    }
  };
  if (!jobs.length) return <p className="muted">Create a job first.</p>;
  return (
    <form
      className="form-grid two"
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <Field label="Job" htmlFor="pw-job">
        <select id="pw-job" value={id} onChange={(e) => setJobId(e.target.value)}>
          {jobs.map((j) => (
            <option key={j.id} value={j.id}>
              {j.name}
            </option>
          ))}
        </select>
      </Field>
      <Field label="Current password" htmlFor="pw-old">
        <input
          id="pw-old"
          type="password"
          autoComplete="current-password"
          value={oldPassword}
          onChange={(e) => setOld(e.target.value)}
        />
      </Field>
      <Field label="New password" htmlFor="pw-new">
        <input
          id="pw-new"
          type="password"
          autoComplete="new-password"
          value={newPassword}
          onChange={(e) => setNew(e.target.value)}
        />
      </Field>
      <Field label="Confirm new password" htmlFor="pw-confirm" error={error ?? undefined}>
        <input
          id="pw-confirm"
          type="password"
          autoComplete="new-password"
          value={confirm}
          onChange={(e) => setConfirm(e.target.value)}
        />
      </Field>
      <div>
        <button className="button primary" type="submit" disabled={!oldPassword || newPassword.length < 8}>
          Change password
        </button>
      </div>
    </form>
  );
}

export function SettingsPage() {
  const { settings, info, updateSettings } = useApp();
  if (!settings) return null;
  return (
    <section aria-labelledby="page-title" className="settings">
      <header className="page-head">
        <div>
          <h1 id="page-title">Settings</h1>
          <p className="muted">
            Tidemark {info?.version} · {info?.mode === 'electron' ? 'desktop app' : 'browser mode'} · data in{' '}
            <span className="mono">{info?.dataDir}</span>
          </p>
        </div>
      </header>
      <div className="card">
        <h2 className="section-title">Appearance and behaviour</h2>
        <div className="form-grid two">
          <Field label="Theme" htmlFor="theme">
            <select
              id="theme"
              value={settings.theme}
              onChange={(e) => void updateSettings({ theme: e.target.value as 'system' | 'light' | 'dark' })}
            >
              <option value="system">Follow the system</option>
              <option value="light">Light</option>
              <option value="dark">Dark</option>
            </select>
          </Field>
          <div className="checks column">
            <label className="check">
              <input
                type="checkbox"
                checked={settings.notifications}
                onChange={(e) => void updateSettings({ notifications: e.target.checked })}
              />{' '}
              Notify me about failed or missed backups
            </label>
            <label className="check">
              <input
                type="checkbox"
                checked={settings.startAtLogin}
                disabled={info?.mode !== 'electron'}
                onChange={(e) => void updateSettings({ startAtLogin: e.target.checked })}
              />{' '}
              Start Tidemark when I log in{' '}
              {info?.mode !== 'electron' ? <span className="muted small">(desktop app only)</span> : null}
            </label>
          </div>
        </div>
      </div>
      <div className="card">
        <h2 className="section-title">Defaults for new jobs</h2>
        <div className="form-grid three">
          <Field
            label={`Compression level (0 = off, ${DEFAULT_COMPRESSION_LEVEL} = default, 19 = smallest)`}
            htmlFor="set-compression"
          >
            <input
              id="set-compression"
              type="number"
              min={0}
              max={19}
              value={settings.compressionLevel}
              onChange={(e) => void updateSettings({ compressionLevel: Number(e.target.value) })}
            />
          </Field>
          <Field label="Read limit (MB/s, 0 = unlimited)" htmlFor="set-limit">
            <input
              id="set-limit"
              type="number"
              min={0}
              value={settings.readLimitMBps}
              onChange={(e) => void updateSettings({ readLimitMBps: Number(e.target.value) })}
            />
          </Field>
          <Field label="Worker threads" htmlFor="set-workers">
            <input
              id="set-workers"
              type="number"
              min={1}
              max={64}
              value={settings.workers}
              onChange={(e) => void updateSettings({ workers: Number(e.target.value) })}
            />
          </Field>
        </div>
      </div>
      <div className="card">
        <h2 className="section-title">Repository password</h2>
        <PasswordChange />
      </div>
      <div className="card">
        <h2 className="section-title">Change tracking</h2>
        <ChangeTracking />
      </div>
      <div className="card">
        <h2 className="section-title">Repository maintenance</h2>
        <Maintenance />
      </div>
    </section>
  );
}
