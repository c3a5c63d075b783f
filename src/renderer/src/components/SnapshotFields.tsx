/**
 * The job wizard's "open files" options: read the sources from a filesystem snapshot (when possible /
 * always / never) and the pre- and post-commands with their timeout. Kept apart from JobWizard.tsx; the
 * History page's SnapshotCard shows what a run did with them.
 */
import type { JobOptions, RunSnapshots } from '../api';
import { Field } from './ui';

export interface SnapshotForm {
  snapshot: NonNullable<JobOptions['snapshot']>;
  preCommand: string;
  postCommand: string;
  hookTimeoutSec: number | undefined;
}

export const defaultSnapshotForm: SnapshotForm = {
  snapshot: 'when-possible',
  preCommand: '',
  postCommand: '',
  hookTimeoutSec: undefined,
};

/** The form's values from a job's options. */
export function snapshotFormOf(o: JobOptions): SnapshotForm {
  return {
    snapshot: o.snapshot ?? 'when-possible',
    preCommand: o.preCommand ?? '',
    postCommand: o.postCommand ?? '',
    hookTimeoutSec: o.hookTimeoutSec,
  };
}

/** The job options for the form's values. */
export function snapshotOptionsOf(f: SnapshotForm): Partial<JobOptions> {
  return {
    snapshot: f.snapshot,
    preCommand: f.preCommand.trim() || undefined,
    postCommand: f.postCommand.trim() || undefined,
    hookTimeoutSec: f.hookTimeoutSec,
  };
}

const modes: { value: SnapshotForm['snapshot']; label: string; hint: string }[] = [
  { value: 'when-possible', label: 'When possible', hint: 'read live where the disk has no snapshots' },
  { value: 'always', label: 'Always', hint: 'the backup fails if a snapshot cannot be taken' },
  { value: 'never', label: 'Never', hint: 'read files as they are' },
];

export const snapshotModeText = (m: SnapshotForm['snapshot']) => modes.find((x) => x.value === m)!.label;

export function SnapshotFields({
  value,
  onChange,
}: {
  value: SnapshotForm;
  onChange: (v: SnapshotForm) => void;
}) {
  const set = (patch: Partial<SnapshotForm>) => onChange({ ...value, ...patch });
  return (
    <fieldset className="span snapshot-fields">
      <legend>Open files</legend>
      <p className="hint">
        A snapshot freezes the disk for the backup, so files in use (mail, databases, virtual machines) are
        saved as they were at one moment (btrfs and LVM on Linux, Volume Shadow Copy on Windows, APFS on
        macOS).
      </p>
      <div role="radiogroup" aria-label="Use a snapshot">
        {modes.map((m) => (
          <label className="check" key={m.value}>
            <input
              type="radio"
              name="snapshot-mode"
              value={m.value}
              checked={value.snapshot === m.value}
              onChange={() => set({ snapshot: m.value })}
            />{' '}
            Use a snapshot: {m.label} <span className="muted small">({m.hint})</span>
          </label>
        ))}
      </div>
      <Field
        label="Before the backup, run"
        htmlFor="pre-command"
        hint="A shell command, e.g. to dump a database. If it fails, nothing is backed up."
      >
        <input
          id="pre-command"
          className="mono"
          value={value.preCommand}
          placeholder="(nothing)"
          onChange={(e) => set({ preCommand: e.target.value })}
        />
      </Field>
      <Field
        label="After the backup, run"
        htmlFor="post-command"
        hint="Gets the result in TIDEMARK_RUN_STATUS (completed, completed-with-warnings, failed, cancelled)."
      >
        <input
          id="post-command"
          className="mono"
          value={value.postCommand}
          placeholder="(nothing)"
          onChange={(e) => set({ postCommand: e.target.value })}
        />
      </Field>
      <Field label="Stop a command after (seconds)" htmlFor="hook-timeout">
        <input
          id="hook-timeout"
          type="number"
          min={1}
          max={86400}
          value={value.hookTimeoutSec ?? ''}
          placeholder="600"
          onChange={(e) =>
            set({ hookTimeoutSec: e.target.value === '' ? undefined : Math.max(1, Number(e.target.value)) })
          }
        />
      </Field>
    </fieldset>
  );
}

/** History: which sources a run read from a snapshot, and why not the others. */
export function SnapshotCard({ snapshots: s }: { snapshots: RunSnapshots }) {
  return (
    <div className="card" role="region" aria-label="Snapshots">
      <h3 className="section-title">Snapshots</h3>
      <p className="muted small">Use a snapshot: {snapshotModeText(s.mode)}</p>
      <ul className="snapshot-sources">
        {s.sources.map((r) => (
          <li key={r.path}>
            <span className="mono">{r.path}</span>
            {r.nested ? <span className="muted small"> (a filesystem inside a source)</span> : null}:{' '}
            {r.snapshot ? (
              <span>
                read from snapshot <span className="mono">{r.snapshot.name}</span> ({r.snapshot.kind} of{' '}
                <span className="mono">{r.snapshot.volume}</span>)
              </span>
            ) : (
              <span>read live — {r.reason}</span>
            )}
          </li>
        ))}
      </ul>
      {s.leftoversRemoved?.length ? (
        <p className="muted small">
          Removed {s.leftoversRemoved.length} snapshot(s) an interrupted earlier run left behind:{' '}
          {s.leftoversRemoved.join(', ')}
        </p>
      ) : null}
    </div>
  );
}
