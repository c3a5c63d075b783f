/** History's table of restore tests: when, which job and snapshot, what was restored, the verdict. */
import { useEffect } from 'react';
import { useProtection } from '../stores/protection';
import { useApp } from '../stores/app';
import { bytes, dateTime } from '../format';

const verdict = { passed: 'Passed', failed: 'Failed', error: 'Not run' } as const;
const tone = { passed: 'good', failed: 'bad', error: 'warn' } as const;

export function RestoreTestHistory() {
  const { tests, loadTests } = useProtection();
  const navigate = useApp((s) => s.navigate);
  useEffect(() => {
    void loadTests();
  }, [loadTests]);
  if (tests.length === 0) return null;
  return (
    <div className="card table-card restore-tests" role="region" aria-label="Restore tests">
      <h2 className="section-title">Restore tests</h2>
      <table className="table">
        <caption className="sr-only">Restore tests</caption>
        <thead>
          <tr>
            <th scope="col">Job</th>
            <th scope="col">Tested</th>
            <th scope="col">Snapshot</th>
            <th scope="col">Restored</th>
            <th scope="col">Result</th>
          </tr>
        </thead>
        <tbody>
          {tests.map((t) => [
            <tr key={t.id}>
              <td>
                {t.runId ? (
                  <button
                    className="link-button"
                    onClick={() => navigate({ page: 'history', runId: t.runId })}
                  >
                    {t.jobName}
                  </button>
                ) : (
                  `${t.jobName} (on demand)`
                )}
              </td>
              <td>{dateTime(t.startedAt)}</td>
              <td className="mono">{t.snapshotId.slice(0, 8)}</td>
              <td>
                {t.files} file(s), {bytes(t.bytes)}
                {t.blockFiles ? ` · ${t.blockFiles} VM disk / database file(s)` : ''}
              </td>
              <td>
                <span className={`badge tone-${tone[t.status]}`}>{verdict[t.status]}</span>
                {t.status === 'failed' ? (
                  <span className="small error-text"> {t.failures.length} problem(s)</span>
                ) : null}
              </td>
            </tr>,
            t.status !== 'passed' ? (
              <tr key={`${t.id}-why`} className="detail-row">
                <td colSpan={5}>
                  {t.status === 'error' ? (
                    <span className="small muted">Could not run: {t.error?.message}</span>
                  ) : (
                    <ul className="warnings">
                      {t.failures.slice(0, 5).map((f, i) => (
                        <li key={i}>
                          <span className="mono">{f.path}</span> — {f.message}
                        </li>
                      ))}
                      {t.failures.length > 5 ? <li>… and {t.failures.length - 5} more</li> : null}
                    </ul>
                  )}
                </td>
              </tr>
            ) : null,
          ])}
        </tbody>
      </table>
    </div>
  );
}
