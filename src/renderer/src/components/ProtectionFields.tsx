/**
 * The job wizard's protection of a destination against deletion (repo/immutability.ts): S3 object lock
 * for a bucket, append-only for a folder (with its maintenance password, on the Security step). Both
 * are chosen when the repository is created, so they are shown, not edited, for an existing job.
 */
import type { Retention } from '../api';
import { Field } from './ui';

export type LockChoice = '' | 'governance' | 'compliance';

/** Days each object stays locked: the retention's longest reach plus a day, at least 30 (as the API). */
export function lockDays(r: Retention): number {
  const reach = Math.max(
    (r.keepHourly ?? 0) / 24,
    r.keepDaily ?? 0,
    (r.keepWeekly ?? 0) * 7,
    (r.keepMonthly ?? 0) * 31,
    (r.keepYearly ?? 0) * 366,
  );
  return Math.max(30, reach > 0 ? Math.ceil(reach) + 1 : 0);
}

export function DestinationProtection({
  kind,
  appendOnly,
  objectLock,
  retention,
  editing,
  onChange,
  error,
}: {
  kind: 'local' | 's3';
  appendOnly: boolean;
  objectLock: LockChoice;
  retention: Retention;
  editing: boolean;
  onChange: (patch: { appendOnly?: boolean; objectLock?: LockChoice }) => void;
  error?: string;
}) {
  if (kind === 'local')
    return (
      <div className="field span">
        <label className="check">
          <input
            type="checkbox"
            checked={appendOnly}
            disabled={editing}
            onChange={(e) => onChange({ appendOnly: e.target.checked })}
          />{' '}
          Append-only: backups never delete or overwrite anything here
        </label>
        <p className="hint">
          {editing
            ? 'Chosen when the repository was created.'
            : 'Removing old backups (pruning) then needs a separate maintenance password, which this app does not keep: ransomware on this computer cannot use it.'}
        </p>
        {error ? (
          <p className="error-text" role="alert">
            {error}
          </p>
        ) : null}
      </div>
    );
  return (
    <Field
      label="Object lock"
      htmlFor="object-lock"
      error={error}
      hint={
        editing
          ? 'Chosen when the repository was created.'
          : objectLock
            ? `Every backup object stays locked for ${lockDays(retention)} days (from the retention policy): not even a stolen key can delete it. The bucket must be new (it is made with object lock).`
            : 'Off: whoever has the access key can delete the backups.'
      }
    >
      <select
        id="object-lock"
        value={objectLock}
        disabled={editing}
        onChange={(e) => onChange({ objectLock: e.target.value as LockChoice })}
      >
        <option value="">Off</option>
        <option value="governance">Governance (an administrator key may still remove it)</option>
        <option value="compliance">Compliance (nobody can remove it before its time)</option>
      </select>
    </Field>
  );
}

export function MaintenancePasswordFields({
  value,
  confirm,
  onChange,
  error,
}: {
  value: string;
  confirm: string;
  onChange: (patch: { maintenancePassword?: string; maintenanceConfirm?: string }) => void;
  error: (key: 'maintenancePassword' | 'maintenanceConfirm') => string | undefined;
}) {
  return (
    <>
      <Field
        label="Maintenance password"
        htmlFor="maintenance-password"
        error={error('maintenancePassword')}
        hint="Needed to prune this append-only repository. It is not stored: write it down somewhere safe."
      >
        <input
          id="maintenance-password"
          type="password"
          autoComplete="new-password"
          value={value}
          onChange={(e) => onChange({ maintenancePassword: e.target.value })}
        />
      </Field>
      <Field
        label="Confirm maintenance password"
        htmlFor="maintenance-confirm"
        error={error('maintenanceConfirm')}
      >
        <input
          id="maintenance-confirm"
          type="password"
          autoComplete="new-password"
          value={confirm}
          onChange={(e) => onChange({ maintenanceConfirm: e.target.value })}
        />
      </Field>
    </>
  );
}
