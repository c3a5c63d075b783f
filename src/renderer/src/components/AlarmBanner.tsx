/**
 * The mass-change alarm's banner on the dashboard: for each job whose last backups changed files the
 * way encryption does (possible ransomware), what changed, that the older backups are held from
 * deletion, a way to restore from before, and — when the user made those changes — a dismissal.
 */
import { useState } from 'react';
import { api, errorMessage, type AlarmInfo, type JobSummary } from '../api';
import { useApp } from '../stores/app';
import { useJobs } from '../stores/jobs';
import { Icon } from './Icon';
import { Modal } from './ui';
import { when } from '../format';

function Alarm({ alarm }: { alarm: AlarmInfo }) {
  const navigate = useApp((s) => s.navigate);
  const toast = useApp((s) => s.toast);
  const load = useJobs((s) => s.load);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const dismiss = async () => {
    setBusy(true);
    try {
      await api.call('alarms.dismiss', { jobId: alarm.jobId, snapshotId: alarm.snapshotId });
      toast('success', `Alarm dismissed: retention applies to the backups of "${alarm.jobName}" again`);
      setConfirming(false);
      await load();
    } catch (err) {
      toast('error', errorMessage(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <article className="alarm-banner" role="alert" aria-labelledby={`alarm-${alarm.snapshotId}`}>
      <header>
        <Icon name="alert" size={20} />
        <h2 id={`alarm-${alarm.snapshotId}`}>Possible ransomware: {alarm.jobName}</h2>
      </header>
      <p>
        The backup of {when(alarm.time)} on {alarm.host} changed <strong>{alarm.suspicious} files</strong> the
        way encryption changes files. It was kept, and the {alarm.held} backup(s) up to it are protected from
        deletion until you dismiss this alarm.
      </p>
      <ul className="alarm-reasons">
        {alarm.reasons.map((r) => (
          <li key={r}>{r}</li>
        ))}
      </ul>
      {alarm.examples.length ? (
        <details>
          <summary>Files that changed this way</summary>
          <ul className="alarm-examples">
            {alarm.examples.map((e) => (
              <li key={e.path}>
                <code>{e.path}</code>: {e.what}
              </li>
            ))}
          </ul>
        </details>
      ) : null}
      <footer className="job-actions">
        <button className="button primary" onClick={() => navigate({ page: 'restore', jobId: alarm.jobId })}>
          <Icon name="restore" size={16} /> Restore from an earlier backup
        </button>
        <button className="button" onClick={() => setConfirming(true)}>
          These changes were mine
        </button>
      </footer>
      {confirming ? (
        <Modal
          title="Dismiss the alarm?"
          onClose={() => setConfirming(false)}
          footer={
            <>
              <button className="button" onClick={() => setConfirming(false)}>
                Keep the alarm
              </button>
              <button className="button danger" disabled={busy} onClick={() => void dismiss()}>
                Dismiss the alarm
              </button>
            </>
          }
        >
          <p>
            Only dismiss it if you (or a program you trust) changed these files, for example by encrypting
            them yourself. Afterwards the job's retention may delete the older backups again.
          </p>
        </Modal>
      ) : null}
    </article>
  );
}

export function AlarmBanner({ jobs }: { jobs: JobSummary[] }) {
  const alarms = jobs.flatMap((j) => (j.alarm ? [j.alarm] : []));
  if (!alarms.length) return null;
  return (
    <div className="alarms">
      {alarms.map((a) => (
        <Alarm key={a.snapshotId} alarm={a} />
      ))}
    </div>
  );
}
