/** Live run: phase, current file, progress and ETA, pause/cancel, and throughput graphs (≥ 1 update/s). */
import { useEffect } from 'react';
import { useRuns } from '../stores/runs';
import { useApp } from '../stores/app';
import { Badge, Empty, ProgressBar } from '../components/ui';
import { ThroughputCharts } from '../components/Charts';
import { Icon } from '../components/Icon';
import { bytes, duration, rate } from '../format';
import type { RunCounters } from '../api';

const phaseText: Record<string, string> = {
  queued: 'Waiting for the repository',
  starting: 'Starting',
  scanning: 'Looking for changes',
  'backing-up': 'Backing up',
  finalizing: 'Saving the snapshot',
  retention: 'Thinning out old snapshots',
  indexing: 'Indexing the snapshot for search',
  prune: 'Reclaiming space',
  verify: 'Verifying the backup',
  done: 'Done',
};

function Counters({ c }: { c: RunCounters }) {
  return (
    <dl className="counters">
      <div>
        <dt>Files</dt>
        <dd>
          {c.filesDone.toLocaleString()} / {c.filesScanned.toLocaleString()}
        </dd>
      </div>
      <div>
        <dt>Processed</dt>
        <dd>
          {bytes(c.bytesDone)} / {bytes(c.bytesScanned)}
        </dd>
      </div>
      <div>
        <dt>Read</dt>
        <dd>{bytes(c.bytesRead)}</dd>
      </div>
      <div>
        <dt>New data</dt>
        <dd>{bytes(c.bytesNew)}</dd>
      </div>
      <div>
        <dt>Written</dt>
        <dd>{bytes(c.bytesStored)}</dd>
      </div>
      <div>
        <dt>Errors</dt>
        <dd>{c.errors}</dd>
      </div>
    </dl>
  );
}

export function LiveRunPage({ runId }: { runId?: string }) {
  const { live, finished, details, loadLive, loadDetail, pause, resume, cancel } = useRuns();
  const navigate = useApp((s) => s.navigate);
  useEffect(() => {
    void loadLive();
  }, [loadLive]);
  const liveList = Object.values(live);
  const id = runId ?? liveList[0]?.run.id;
  const l = id ? live[id] : undefined;
  const detail = id ? details[id] : undefined;
  useEffect(() => {
    if (id && !live[id] && !details[id]) void loadDetail(id);
  }, [id, live, details, loadDetail]);

  if (!id)
    return (
      <section aria-labelledby="page-title">
        <header className="page-head">
          <h1 id="page-title">Live run</h1>
        </header>
        <Empty icon="pulse" title="Nothing is running">
          <p className="muted">Start a backup from the dashboard to watch it here.</p>
          <button className="button" onClick={() => navigate({ page: 'dashboard' })}>
            Go to the dashboard
          </button>
        </Empty>
      </section>
    );

  const run = l?.run ?? finished[id] ?? detail;
  const samples = l?.samples ?? detail?.samples ?? [];
  const lastSample = samples[samples.length - 1];
  return (
    <section aria-labelledby="page-title" className="live">
      <header className="page-head">
        <div>
          <h1 id="page-title">{run ? run.jobName : 'Run'}</h1>
          <p className="muted">
            {l ? (phaseText[l.phase] ?? l.phase) : run ? 'Finished' : 'Loading…'}{' '}
            {run ? <Badge status={run.status} /> : null}
          </p>
        </div>
        {l ? (
          <div className="row">
            {l.run.status === 'paused' ? (
              <button className="button" onClick={() => void resume(id)}>
                <Icon name="play" size={16} /> Resume
              </button>
            ) : (
              <button
                className="button"
                onClick={() => void pause(id)}
                disabled={!l.canPause}
                title={l.canPause ? undefined : 'This engine cannot pause a backup yet'}
              >
                <Icon name="pause" size={16} /> Pause
              </button>
            )}
            <button className="button danger" onClick={() => void cancel(id)}>
              <Icon name="stop" size={16} /> Cancel
            </button>
          </div>
        ) : run ? (
          <div className="row">
            <button className="button" onClick={() => navigate({ page: 'history', runId: id })}>
              <Icon name="history" size={16} /> Details and log
            </button>
            <button
              className="button primary"
              onClick={() => navigate({ page: 'restore', jobId: run.jobId })}
            >
              <Icon name="restore" size={16} /> Restore
            </button>
          </div>
        ) : null}
      </header>

      <div className="card live-progress">
        <ProgressBar value={l ? l.fraction : 1} label="Backup progress" />
        <div className="live-line">
          <span className="big">
            {l
              ? l.fraction === null
                ? 'Counting…'
                : `${Math.round(l.fraction * 100)}%`
              : run?.status === 'completed'
                ? '100%'
                : '—'}
          </span>
          <span className="muted">
            {l
              ? `${duration(l.elapsedMs)} elapsed · ${l.etaMs === null ? 'estimating…' : `about ${duration(l.etaMs)} left`}`
              : run?.endedAt
                ? `took ${duration(Date.parse(run.endedAt) - Date.parse(run.startedAt))}`
                : ''}
          </span>
          {lastSample ? (
            <span className="muted">
              {rate(lastSample.readBps)} read · {rate(lastSample.writeBps)} written ·{' '}
              {lastSample.filesPerSec.toFixed(1)} files/s
            </span>
          ) : null}
        </div>
        {l?.currentFile ? (
          <p className="current-file mono small" title={l.currentFile}>
            {l.currentFile}
          </p>
        ) : null}
        {run ? <Counters c={run.counters} /> : null}
        {run?.error ? (
          <p className="error-banner" role="alert">
            {run.error.message}
          </p>
        ) : null}
      </div>
      <ThroughputCharts samples={samples} />
    </section>
  );
}
