/** History: every run with its status, counters, warnings (with paths), log, repository requests
 *  (totals, failures in full, the slowest) and throughput graphs. */
import { useEffect } from 'react';
import type { RunRequestRecord, RunRequests } from '../api';
import { useRuns } from '../stores/runs';
import { useApp } from '../stores/app';
import { Badge, Empty } from '../components/ui';
import { ThroughputCharts } from '../components/Charts';
import { bytes, dateTime, duration } from '../format';
import { SnapshotCard } from '../components/SnapshotFields';
import { RestoreTestHistory } from '../components/RestoreTestHistory';

export function HistoryPage({ runId }: { runId?: string }) {
  const { history, details, loadHistory, loadDetail } = useRuns();
  const navigate = useApp((s) => s.navigate);
  useEffect(() => {
    void loadHistory();
  }, [loadHistory]);
  useEffect(() => {
    if (runId) void loadDetail(runId);
  }, [runId, loadDetail]);
  const detail = runId ? details[runId] : undefined;
  return (
    <section aria-labelledby="page-title">
      <header className="page-head">
        <div>
          <h1 id="page-title">History</h1>
          <p className="muted">Every backup run, with its warnings and log, and every restore test.</p>
        </div>
      </header>
      {history.length === 0 ? (
        <Empty icon="history" title="No runs yet" />
      ) : (
        <div className={`history-layout ${detail ? 'with-detail' : ''}`}>
          <div className="card table-card">
            <table className="table">
              <caption className="sr-only">Backup runs</caption>
              <thead>
                <tr>
                  <th scope="col">Job</th>
                  <th scope="col">Started</th>
                  <th scope="col">Duration</th>
                  <th scope="col">Files</th>
                  <th scope="col">New data</th>
                  <th scope="col">Status</th>
                </tr>
              </thead>
              <tbody>
                {history.map((r) => (
                  <tr key={r.id} className={r.id === runId ? 'current' : ''}>
                    <td>
                      <button
                        className="link-button"
                        onClick={() => navigate({ page: 'history', runId: r.id })}
                      >
                        {r.jobName}
                        {r.kind === 'full-backup' ? ' (full)' : ''}
                      </button>
                    </td>
                    <td>{dateTime(r.startedAt)}</td>
                    <td>{r.endedAt ? duration(Date.parse(r.endedAt) - Date.parse(r.startedAt)) : '…'}</td>
                    <td>{r.counters.filesDone.toLocaleString()}</td>
                    <td>{bytes(r.counters.bytesNew)}</td>
                    <td>
                      <Badge status={r.status} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {detail ? (
            <div className="run-detail">
              <div className="card">
                <h2 className="section-title">
                  {detail.jobName} · {dateTime(detail.startedAt)} <Badge status={detail.status} />
                </h2>
                {detail.error ? <p className="error-banner">{detail.error.message}</p> : null}
                <p className="muted small">
                  {detail.counters.filesDone.toLocaleString()} files · {bytes(detail.counters.bytesRead)} read
                  · {bytes(detail.counters.bytesNew)} new · {bytes(detail.counters.bytesStored)} written
                  {detail.snapshotId ? ` · snapshot ${detail.snapshotId.slice(0, 10)}` : ''}
                </p>
              </div>
              {detail.samples.length ? <ThroughputCharts samples={detail.samples} /> : null}
              {detail.warningList.length ? (
                <div className="card">
                  <h3 className="section-title">
                    Warnings ({Math.max(detail.warnings, detail.warningList.length)})
                    {detail.warnings > detail.warningList.length ? (
                      <span className="muted small"> — the first {detail.warningList.length} shown</span>
                    ) : null}
                  </h3>
                  <ul className="warnings">
                    {detail.warningList.map((w, i) => (
                      <li key={i}>
                        <span className="mono">{w.path}</span> — {w.reason}
                      </li>
                    ))}
                  </ul>
                </div>
              ) : null}
              {detail.snapshots ? <SnapshotCard snapshots={detail.snapshots} /> : null}
              {detail.requests ? <RequestsCard requests={detail.requests} /> : null}
              <div className="card">
                <h3 className="section-title">Log</h3>
                <pre className="log" tabIndex={0} aria-label="Run log">
                  {detail.log.join('\n') || 'No log lines.'}
                </pre>
              </div>
            </div>
          ) : null}
        </div>
      )}
      <RestoreTestHistory />
    </section>
  );
}

const OPS: RunRequestRecord['op'][] = ['save', 'load', 'list', 'stat', 'remove', 'exists', 'init'];

function object(r: RunRequestRecord): string {
  if (!r.type) return '—';
  return r.name ? `${r.type}/${r.name.length > 16 ? `${r.name.slice(0, 12)}…` : r.name}` : r.type;
}

function ms(n: number): string {
  return n < 1000 ? `${Math.round(n)} ms` : `${(n / 1000).toFixed(1)} s`;
}

/** What the run asked of its repository: totals per operation, every failed request, the slowest. */
function RequestsCard({ requests: q }: { requests: RunRequests }) {
  return (
    <div className="card" role="region" aria-label="Repository requests">
      <h3 className="section-title">Repository requests</h3>
      <p className="small">
        {q.requests.toLocaleString()} requests · {q.failed.toLocaleString()} failed (
        {q.retried.toLocaleString()} retried) · {bytes(q.bytesUp)} up · {bytes(q.bytesDown)} down
      </p>
      <p className="muted small">
        {OPS.filter((op) => q.byOp[op])
          .map((op) => `${op} ${q.byOp[op].toLocaleString()}`)
          .join(' · ')}
      </p>
      {q.failures.length ? (
        <table className="table">
          <caption className="sr-only">Failed requests</caption>
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Request</th>
              <th scope="col">Object</th>
              <th scope="col">Error</th>
            </tr>
          </thead>
          <tbody>
            {q.failures.map((f, i) => (
              <tr key={i}>
                <td>{new Date(f.at).toLocaleTimeString()}</td>
                <td>
                  {f.op}
                  {f.retried ? ' (retried)' : ''}
                </td>
                <td className="mono">{object(f)}</td>
                <td>{f.error ? `${f.error.code}: ${f.error.message}` : '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      {q.failuresDropped ? (
        <p className="muted small">{q.failuresDropped.toLocaleString()} more failed requests not kept</p>
      ) : null}
      {q.slowest.length ? (
        <p className="muted small">
          Slowest: {q.slowest.map((r) => `${r.op} ${object(r)} ${ms(r.ms)}`).join(' · ')}
        </p>
      ) : null}
    </div>
  );
}
