/** Dashboard: every job with its last result, next run, repository size and health; "Back up now". */
import { useEffect } from 'react';
import { useJobs } from '../stores/jobs';
import { useRuns } from '../stores/runs';
import { useApp } from '../stores/app';
import { Badge, Empty, ProgressBar } from '../components/ui';
import { Icon } from '../components/Icon';
import { AlarmBanner } from '../components/AlarmBanner';
import { bytes, duration, when } from '../format';
import type { JobSummary } from '../api';
import { describeDestination } from '../../../shared/destination';
import { RepairButton, RestoreTestLine, TestRestoreButton, looksDamaged } from '../components/JobProtection';

function scheduleText(j: JobSummary): string {
  const s = j.schedule;
  switch (s.kind) {
    case 'manual':
      return 'Manual';
    case 'hourly':
      return `Hourly at :${String(s.minute).padStart(2, '0')}`;
    case 'every':
      return `Every ${s.hours} hours`;
    case 'daily':
      return `Daily at ${s.time}`;
    case 'cron':
      return `Custom (${s.expressions.join('; ')})`;
    case 'weekly':
      return `Weekly (${s.days.map((d) => 'SMTWTFS'[d]).join(' ')}) at ${s.time}`;
  }
}

function JobCard({ job }: { job: JobSummary }) {
  const navigate = useApp((s) => s.navigate);
  const runNow = useJobs((s) => s.runNow);
  const check = useJobs((s) => s.check);
  const checking = useJobs((s) => s.checking.includes(job.id));
  const live = useRuns((s) => Object.values(s.live).find((l) => l.run.jobId === job.id));
  const last = job.lastRun;
  return (
    <article className="card job-card" aria-labelledby={`job-${job.id}`}>
      <header className="job-head">
        <div>
          <h3 id={`job-${job.id}`}>{job.name}</h3>
          <p className="muted small path-line" title={job.sources.join('\n')}>
            <Icon name="folder" size={14} /> {job.sources.join(', ')}
          </p>
          <p className="muted small path-line" title={describeDestination(job.destination)}>
            <Icon name="drive" size={14} /> {job.destination.kind === 's3' ? 'S3 ' : ''}
            {describeDestination(job.destination)}
            {job.destination.kind === 'local' && job.destination.appendOnly ? ' · append-only' : ''}
            {job.destination.kind === 's3' && job.destination.objectLock
              ? ` · object lock (${job.destination.objectLock})`
              : ''}
          </p>
        </div>
        {live ? (
          <Badge status={live.run.status} />
        ) : job.missed ? (
          <Badge status="missed" />
        ) : (
          <Badge status={job.health} />
        )}
      </header>
      {live ? (
        <div className="job-live">
          <ProgressBar value={live.fraction} label={`Progress of ${job.name}`} />
          <p className="small muted">
            {live.phase === 'queued'
              ? 'Waiting for the repository…'
              : `${Math.round((live.fraction ?? 0) * 100)}% · ${duration(live.etaMs)} left`}
          </p>
        </div>
      ) : null}
      <dl className="job-facts">
        <div>
          <dt>Last backup</dt>
          <dd>{last ? `${when(last.endedAt ?? last.startedAt)}` : 'Never'}</dd>
        </div>
        <div>
          <dt>Next run</dt>
          <dd>{job.nextRunAt ? when(job.nextRunAt) : scheduleText(job)}</dd>
        </div>
        <div>
          <dt>Snapshots</dt>
          <dd>{job.snapshotCount}</dd>
        </div>
        <div>
          <dt>Repository</dt>
          <dd>{bytes(job.repoBytes)}</dd>
        </div>
      </dl>
      {job.lastCheck ? (
        <p className={`small ${job.lastCheck.ok ? 'muted' : 'error-text'}`}>
          {job.lastCheck.ok
            ? `Verified ${when(job.lastCheck.checkedAt)}: no problems`
            : `Check ${when(job.lastCheck.checkedAt)}: ${job.lastCheck.problems.length} problem(s) — ${job.lastCheck.problems[0]?.message ?? ''}`}
        </p>
      ) : null}
      <RestoreTestLine job={job} />
      {last?.status === 'failed' && last.error ? (
        <p className="error-text small" role="status">
          {last.error.message}
        </p>
      ) : null}
      <footer className="job-actions">
        {live ? (
          <button className="button primary" onClick={() => navigate({ page: 'run', runId: live.run.id })}>
            <Icon name="pulse" size={16} /> View live run
          </button>
        ) : (
          <button
            className="button primary"
            onClick={async () => {
              const run = await runNow(job.id);
              if (run) navigate({ page: 'run', runId: run.id });
            }}
          >
            <Icon name="play" size={16} /> Back up now
          </button>
        )}
        <button
          className="button"
          onClick={() => navigate({ page: 'restore', jobId: job.id })}
          disabled={job.snapshotCount === 0 && !last}
        >
          <Icon name="restore" size={16} /> Restore
        </button>
        <span className="spacer" />
        <span className="job-more">
          <button
            className="button ghost small"
            onClick={() => navigate({ page: 'wizard', jobId: job.id })}
            aria-label={`Edit ${job.name}`}
          >
            Edit
          </button>
          {!live ? (
            <button
              className="button ghost small"
              title="Re-read every file instead of only the changed ones, to re-verify the backup"
              onClick={async () => {
                const run = await runNow(job.id, true);
                if (run) navigate({ page: 'run', runId: run.id });
              }}
            >
              Full backup
            </button>
          ) : null}
          <button
            className="button ghost small"
            disabled={checking || job.snapshotCount === 0}
            title="Verify that the repository is complete and readable"
            onClick={() => void check(job.id)}
          >
            {checking ? 'Checking…' : 'Check'}
          </button>
          <TestRestoreButton job={job} />
          <RepairButton job={job} damaged={looksDamaged(job)} />
        </span>
      </footer>
    </article>
  );
}

export function Dashboard() {
  const { jobs, loaded, load } = useJobs();
  const navigate = useApp((s) => s.navigate);
  useEffect(() => {
    void load();
  }, [load]);
  const protectedBytes = jobs.reduce((n, j) => n + (j.lastRun?.counters.bytesScanned ?? 0), 0);
  const failing = jobs.filter((j) => j.health === 'error' || j.missed).length;
  const lastBackup = jobs
    .map((j) => j.lastRun?.endedAt)
    .filter(Boolean)
    .sort()
    .pop();
  return (
    <section aria-labelledby="page-title">
      <header className="page-head">
        <div>
          <h1 id="page-title">Dashboard</h1>
          <p className="muted">Your backup jobs at a glance.</p>
        </div>
        <button className="button primary" onClick={() => navigate({ page: 'wizard' })}>
          <Icon name="plus" size={16} /> New backup job
        </button>
      </header>
      <AlarmBanner jobs={jobs} />
      <div className="stats">
        <div className="stat card">
          <span className="stat-label">Jobs</span>
          <span className="stat-value">{jobs.length}</span>
        </div>
        <div className="stat card">
          <span className="stat-label">Data protected</span>
          <span className="stat-value">{bytes(protectedBytes)}</span>
        </div>
        <div className="stat card">
          <span className="stat-label">Last backup</span>
          <span className="stat-value">{when(lastBackup)}</span>
        </div>
        <div className={`stat card ${failing ? 'stat-bad' : 'stat-good'}`}>
          <span className="stat-label">Health</span>
          <span className="stat-value">
            {failing ? `${failing} need attention` : jobs.length ? 'All good' : '—'}
          </span>
        </div>
      </div>
      {loaded && jobs.length === 0 ? (
        <Empty icon="drive" title="No backup jobs yet">
          <p className="muted">Create a job to back up a folder to a local disk or an external drive.</p>
          <button className="button primary" onClick={() => navigate({ page: 'wizard' })}>
            <Icon name="plus" size={16} /> Create your first job
          </button>
        </Empty>
      ) : (
        <div className="job-grid">
          {jobs.map((j) => (
            <JobCard key={j.id} job={j} />
          ))}
        </div>
      )}
    </section>
  );
}
