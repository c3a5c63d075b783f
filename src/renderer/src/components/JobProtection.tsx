/**
 * A job card's restore test and repair: the last restore test's verdict, "Test restore", and — on a
 * damaged job (a failed check, restore test or verification) — "Repair…", a dialog that explains what
 * repair does, runs it with its progress, and shows what was saved and what could not be.
 */
import { useState } from 'react';
import type { JobSummary, RepairSummary } from '../api';
import { useProtection } from '../stores/protection';
import { Modal, ProgressBar } from './ui';
import { bytes, when } from '../format';

const DAMAGE_CODES = ['CORRUPT_OBJECT', 'VERIFY_FAILED', 'RESTORE_TEST_FAILED'];

/** Whether the job's repository is known to be damaged (a clean check since a failed test answers it). */
export function looksDamaged(job: JobSummary): boolean {
  const t = job.lastRestoreTest;
  return (
    (job.lastCheck !== undefined && !job.lastCheck.ok) ||
    (t?.status === 'failed' && !(job.lastCheck?.ok && job.lastCheck.checkedAt > t.endedAt)) ||
    (job.lastRun?.status === 'failed' && DAMAGE_CODES.includes(job.lastRun.error?.code ?? ''))
  );
}

export function RestoreTestLine({ job }: { job: JobSummary }) {
  const t = job.lastRestoreTest;
  if (!t) return null;
  if (t.status === 'passed')
    return (
      <p className="small muted">
        Restore test {when(t.endedAt)}: {t.files} file(s), {bytes(t.bytes)} restored and matched
        {t.blockFiles ? ` (${t.blockFiles} VM disk / database file(s))` : ''}
      </p>
    );
  if (t.status === 'error')
    return (
      <p className="small muted">
        Restore test {when(t.endedAt)} could not run: {t.error?.message}
      </p>
    );
  return (
    <p className="small error-text" role="status">
      Restore test {when(t.endedAt)} FAILED: {t.failures.length} problem(s) — {t.failures[0]?.path}:{' '}
      {t.failures[0]?.message}
    </p>
  );
}

export function TestRestoreButton({ job }: { job: JobSummary }) {
  const testing = useProtection((s) => s.testing.includes(job.id));
  const testRestore = useProtection((s) => s.testRestore);
  return (
    <button
      className="button ghost small"
      disabled={testing || job.snapshotCount === 0}
      title="Restore a random sample of the newest backup into a temporary folder and compare it with the backup"
      onClick={() => void testRestore(job.id)}
    >
      {testing ? 'Testing…' : 'Test restore'}
    </button>
  );
}

function RepairResult({ r }: { r: RepairSummary }) {
  if (r.clean) return <p>Nothing needed repairing: every pack, index file and snapshot is sound.</p>;
  return (
    <>
      <ul className="repair-facts">
        <li>
          {r.damagedPacks} damaged and {r.missingPacks} missing pack(s); {r.damagedIndexFiles} damaged index
          file(s)
        </li>
        <li>
          {r.blobsSalvaged} piece(s) saved from damaged packs, {r.blobsFromSources} read again from the files
          on this computer
        </li>
        <li>
          {r.snapshotsRebuilt} snapshot(s) saved again without what is lost, {r.snapshotsRemoved} removed,{' '}
          {r.snapshotsRecovered} recovered
        </li>
      </ul>
      {r.lostCount ? (
        <>
          <p className="error-text">Could not be saved ({r.lostCount}):</p>
          <ul className="warnings" aria-label="Could not be saved">
            {r.lost.map((l, i) => (
              <li key={i}>
                <span className="mono">{l.where}</span> — {l.reason}
              </li>
            ))}
          </ul>
        </>
      ) : (
        <p>Nothing was lost.</p>
      )}
      {r.check ? (
        <p className={r.check.ok ? 'muted small' : 'error-text'}>
          {r.check.ok
            ? 'The repository checks clean now.'
            : `A check still finds ${r.check.problems.length} problem(s): ${r.check.problems[0]?.message ?? ''}`}
        </p>
      ) : null}
    </>
  );
}

/** Shown on a damaged job; stays while its dialog is open (the repair makes the job healthy under it). */
export function RepairButton({ job, damaged }: { job: JobSummary; damaged: boolean }) {
  const [open, setOpen] = useState(false);
  const progress = useProtection((s) => s.repairing[job.id]);
  const running = useProtection((s) => job.id in s.repairing);
  const result = useProtection((s) => s.repairs[job.id]);
  const repair = useProtection((s) => s.repair);
  const [started, setStarted] = useState(false);
  const appendOnly = job.destination.kind === 'local' && !!job.destination.appendOnly;
  const [password, setPassword] = useState('');
  const phases: Record<string, string> = {
    packs: 'Reading and verifying every pack',
    snapshots: 'Walking the snapshots',
    sources: 'Reading lost pieces again from the files on this computer',
    rebuild: 'Rebuilding damaged snapshots',
    writing: 'Writing what was saved',
    cleanup: 'Removing what was replaced',
    check: 'Checking the repository',
  };
  if (!damaged && !open && !running) return null;
  return (
    <>
      <button className="button small danger" onClick={() => setOpen(true)} disabled={job.running}>
        {running ? 'Repairing…' : 'Repair…'}
      </button>
      {open ? (
        <Modal
          title={`Repair ${job.name}`}
          onClose={() => setOpen(false)}
          footer={
            <>
              <button className="button ghost" onClick={() => setOpen(false)}>
                Close
              </button>
              {!started || !result ? (
                <button
                  className="button primary"
                  disabled={running || (appendOnly && !password)}
                  onClick={() => {
                    setStarted(true);
                    void repair(job.id, appendOnly ? password : undefined).then(() => setPassword(''));
                  }}
                >
                  {running ? 'Repairing…' : 'Repair now'}
                </button>
              ) : null}
            </>
          }
        >
          {running ? (
            <div>
              <p>{progress ? phases[progress.phase] : 'Taking the repository lock…'}</p>
              <ProgressBar
                value={progress && progress.total ? progress.done / progress.total : null}
                label="Repair progress"
              />
            </div>
          ) : started && result ? (
            <RepairResult r={result} />
          ) : (
            <>
              <p>
                Repair reads every pack of this job&apos;s repository, copies what is sound out of damaged
                packs, reads lost pieces again from the files on this computer where they have not changed,
                writes a new index, and saves damaged snapshots again without what cannot be saved. Damaged
                objects are removed only after their replacements are written. Backups of this repository wait
                while it runs.
              </p>
              {appendOnly ? (
                <label className="field">
                  <span>Maintenance password (this repository is append-only)</span>
                  <input
                    type="password"
                    autoComplete="off"
                    aria-label="Maintenance password"
                    value={password}
                    onChange={(e) => setPassword(e.target.value)}
                  />
                </label>
              ) : null}
            </>
          )}
        </Modal>
      ) : null}
    </>
  );
}
