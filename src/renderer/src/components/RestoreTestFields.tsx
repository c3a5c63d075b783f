/** The job option "test restores" (wizard): on or off, how often, how many files. */
import type { JobOptions } from '../api';
import { Field } from './ui';

export interface RestoreTestForm {
  enabled: boolean;
  everyDays: number;
  files: number;
}

/** New jobs test a sample of 20 files once a week (and every block file once a month). */
export const DEFAULT_RESTORE_TEST: RestoreTestForm = { enabled: true, everyDays: 7, files: 20 };

export function restoreTestForm(o: JobOptions['restoreTest']): RestoreTestForm {
  return o ? { enabled: true, ...o } : { ...DEFAULT_RESTORE_TEST, enabled: false };
}

export function restoreTestOption(f: RestoreTestForm): JobOptions['restoreTest'] {
  return f.enabled ? { everyDays: f.everyDays, files: f.files } : undefined;
}

export function describeRestoreTest(f: RestoreTestForm): string {
  if (!f.enabled) return 'Off';
  const when =
    f.everyDays === 0 ? 'after every backup' : f.everyDays === 1 ? 'daily' : `every ${f.everyDays} days`;
  return `${f.files} random files ${when}; every VM disk and database file monthly`;
}

export function RestoreTestFields({
  value,
  onChange,
  errors = {},
}: {
  value: RestoreTestForm;
  onChange: (v: RestoreTestForm) => void;
  errors?: { everyDays?: string; files?: string };
}) {
  const num = (s: string) => (s === '' ? 0 : Math.max(0, Math.floor(Number(s)) || 0));
  return (
    <>
      <label className="check span">
        <input
          type="checkbox"
          checked={value.enabled}
          onChange={(e) => onChange({ ...value, enabled: e.target.checked })}
        />{' '}
        Test restores{' '}
        <span className="muted small">
          (after a backup, restore a random sample into a temporary folder and compare it with the backup)
        </span>
      </label>
      {value.enabled ? (
        <>
          <Field
            label="Test every (days, 0 = after each backup)"
            htmlFor="restore-test-days"
            error={errors.everyDays}
          >
            <input
              id="restore-test-days"
              type="number"
              min={0}
              max={365}
              value={value.everyDays}
              onChange={(e) => onChange({ ...value, everyDays: num(e.target.value) })}
            />
          </Field>
          <Field label="Files per test" htmlFor="restore-test-files" error={errors.files}>
            <input
              id="restore-test-files"
              type="number"
              min={1}
              max={10000}
              value={value.files}
              onChange={(e) => onChange({ ...value, files: num(e.target.value) })}
            />
          </Field>
        </>
      ) : null}
    </>
  );
}
