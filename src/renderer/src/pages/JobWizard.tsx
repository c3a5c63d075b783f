/**
 * New/Edit job: sources, exclusions (presets and patterns), destination, schedule, retention and
 * password, in steps, checked with the shared schema as the user goes and by the engine on save.
 */
import { useEffect, useMemo, useRef, useState } from 'react';
import {
  api,
  ApiError,
  errorMessage,
  excludePresetPatterns,
  jobInputSchema,
  type ExcludePreset,
  type JobInput,
  type Retention,
  type Schedule,
} from '../api';
import { useApp } from '../stores/app';
import { useJobs } from '../stores/jobs';
import { FolderInput } from '../components/DirBrowser';
import { Field } from '../components/ui';
import {
  SnapshotFields,
  defaultSnapshotForm,
  snapshotFormOf,
  snapshotModeText,
  snapshotOptionsOf,
  type SnapshotForm,
} from '../components/SnapshotFields';
import { Icon } from '../components/Icon';
import { DestinationTestPanel, S3Fields, emptyS3, type S3Form } from '../components/DestinationFields';
import {
  DestinationProtection,
  MaintenancePasswordFields,
  lockDays,
  type LockChoice,
} from '../components/ProtectionFields';
import { SpeedTestPanel } from '../components/SpeedTest';
import type { Destination, DestinationTestResult } from '../api';
import { describeDestination } from '../../../shared/destination';
import { DEFAULT_COMPRESSION_LEVEL } from '../../../shared/compression';
import {
  DEFAULT_RESTORE_TEST,
  RestoreTestFields,
  describeRestoreTest,
  restoreTestForm,
  restoreTestOption,
  type RestoreTestForm,
} from '../components/RestoreTestFields';
import { MemoryField, describeMemory, memoryOptions } from '../components/MemoryField';

const steps = ['Sources', 'Destination', 'Schedule', 'Retention', 'Security', 'Review'] as const;
type Step = (typeof steps)[number];

/** Which step a field of the schema belongs to. */
function stepOf(path: string): Step {
  if (path.startsWith('sources') || path.startsWith('excludes') || path === 'name') return 'Sources';
  if (path.startsWith('destination') || path === 'secretAccessKey') return 'Destination';
  if (path.startsWith('schedule')) return 'Schedule';
  if (path.startsWith('retention')) return 'Retention';
  return 'Security';
}

interface Form {
  name: string;
  sources: string[];
  excludePresets: ExcludePreset[];
  excludesText: string;
  destination: string;
  destKind: 'local' | 's3';
  s3: S3Form;
  /** The S3 secret key as typed (blank on edit: keep the stored one). */
  s3Secret: string;
  /** Save an S3 destination without a passed connection test. */
  saveAnyway: boolean;
  schedule: Schedule;
  retention: Retention;
  password: string;
  confirm: string;
  compressionLevel: number;
  readLimitMBps: number;
  workers: number | undefined;
  /** "Use less memory": the engine's low-memory mode (components/MemoryField). */
  memoryLow: boolean;
  /** VM disks, databases and mail stores in fixed-size blocks (block-level incrementals). */
  blockFiles: boolean;
  /** Filesystem snapshot and pre/post-commands (components/SnapshotFields). */
  hooks: SnapshotForm;
  /** Restore tests after backups: every N days, N files (RestoreTestFields). */
  restoreTest: RestoreTestForm;
  /** Protection of the repository (chosen when it is created): append-only folder, S3 object lock. */
  appendOnly: boolean;
  objectLock: LockChoice;
  maintenancePassword: string;
  maintenanceConfirm: string;
}

const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];

function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a).origin.toLowerCase() === new URL(b).origin.toLowerCase();
  } catch {
    return a.toLowerCase() === b.toLowerCase();
  }
}

/** The destination the form describes, as the API takes it. */
function destinationOf(f: Form): Destination {
  if (f.destKind === 'local')
    return { kind: 'local', path: f.destination, ...(f.appendOnly ? { appendOnly: true } : {}) };
  return {
    ...(f.objectLock ? { objectLock: f.objectLock } : {}),
    kind: 's3',
    endpoint: f.s3.endpoint.trim(),
    bucket: f.s3.bucket.trim(),
    prefix: f.s3.prefix.trim(),
    ...(f.s3.region.trim() ? { region: f.s3.region.trim() } : {}),
    pathStyle: f.s3.pathStyle,
    accessKeyId: f.s3.accessKeyId.trim(),
    ...(f.s3.allowInsecureHttp ? { allowInsecureHttp: true } : {}),
  };
}

function NumberField({
  id,
  label,
  value,
  onChange,
  min = 0,
  max,
  hint,
}: {
  id: string;
  label: string;
  value: number | undefined;
  onChange: (n: number | undefined) => void;
  min?: number;
  max?: number;
  hint?: string;
}) {
  return (
    <Field label={label} htmlFor={id} hint={hint}>
      <input
        id={id}
        type="number"
        min={min}
        max={max}
        value={value ?? ''}
        onChange={(e) => onChange(e.target.value === '' ? undefined : Number(e.target.value))}
      />
    </Field>
  );
}

/** For an existing job: what the policy would keep and remove now (a dry run; nothing is deleted). */
function RetentionPreviewLine({ jobId, retention }: { jobId: string; retention: Retention }) {
  const [text, setText] = useState<string>('');
  useEffect(() => {
    const t = setTimeout(() => {
      api
        .call('jobs.previewRetention', { id: jobId, retention })
        .then((p) =>
          setText(
            p.remove.length
              ? `With this policy ${p.keep.length} snapshot(s) stay and ${p.remove.length} would be removed after the next backup.`
              : `With this policy all ${p.keep.length} existing snapshot(s) stay.`,
          ),
        )
        .catch(() => setText(''));
    }, 300);
    return () => clearTimeout(t);
  }, [jobId, retention]);
  return text ? (
    <p className="span retention-preview" role="status">
      {text}
    </p>
  ) : null;
}

export function JobWizard({ jobId }: { jobId?: string }) {
  const info = useApp((s) => s.info);
  const navigate = useApp((s) => s.navigate);
  const toast = useApp((s) => s.toast);
  const reload = useJobs((s) => s.load);
  const removeJob = useJobs((s) => s.remove);
  const editing = !!jobId;
  const [step, setStep] = useState<Step>('Sources');
  const [adding, setAdding] = useState('');
  const [saving, setSaving] = useState(false);
  const [serverIssues, setServerIssues] = useState<Record<string, string>>({});
  const [serverError, setServerError] = useState<string | null>(null);
  const [touched, setTouched] = useState<Set<Step>>(new Set());
  const [form, setForm] = useState<Form>({
    name: '',
    sources: [],
    excludePresets: ['caches', 'temp', 'trash'],
    excludesText: '',
    destination: '',
    destKind: 'local',
    s3: emptyS3,
    s3Secret: '',
    saveAnyway: false,
    schedule: { kind: 'daily', time: '21:00' },
    retention: { keepLast: 3, keepDaily: 7, keepWeekly: 4, keepMonthly: 12 },
    password: '',
    confirm: '',
    compressionLevel: DEFAULT_COMPRESSION_LEVEL,
    readLimitMBps: 0,
    workers: undefined,
    memoryLow: false,
    blockFiles: true,
    hooks: defaultSnapshotForm,
    restoreTest: DEFAULT_RESTORE_TEST,
    appendOnly: false,
    objectLock: '',
    maintenancePassword: '',
    maintenanceConfirm: '',
  });
  const set = (patch: Partial<Form>) => {
    setForm((f) => ({ ...f, ...patch }));
    setServerIssues({});
    setServerError(null);
  };

  const settings = useApp((s) => s.settings);
  const defaulted = useRef(false);
  useEffect(() => {
    // a new job starts from the default repository folder and the defaults in Settings
    if (editing || defaulted.current || !info || !settings) return;
    defaulted.current = true;
    setForm((f) => ({
      ...f,
      destination: f.destination || info.defaultRepoDir,
      compressionLevel: settings.compressionLevel,
      readLimitMBps: settings.readLimitMBps,
      workers: settings.workers,
    }));
  }, [info, settings, editing]);

  useEffect(() => {
    if (!jobId) return;
    void api
      .call('jobs.get', { id: jobId })
      .then((j) => {
        setLoaded(j.destination);
        setForm((f) => ({
          ...f,
          name: j.name,
          sources: j.sources,
          excludePresets: j.excludePresets,
          excludesText: j.excludes.join('\n'),
          appendOnly: j.destination.kind === 'local' && !!j.destination.appendOnly,
          objectLock: (j.destination.kind === 's3' && j.destination.objectLock) || '',
          ...(j.destination.kind === 'local'
            ? { destKind: 'local' as const, destination: j.destination.path }
            : {
                destKind: 's3' as const,
                s3: {
                  endpoint: j.destination.endpoint,
                  bucket: j.destination.bucket,
                  prefix: j.destination.prefix,
                  region: j.destination.region ?? '',
                  pathStyle: j.destination.pathStyle,
                  accessKeyId: j.destination.accessKeyId,
                  allowInsecureHttp: !!j.destination.allowInsecureHttp,
                },
              }),
          schedule: j.schedule,
          retention: j.retention,
          compressionLevel: j.options.compressionLevel ?? DEFAULT_COMPRESSION_LEVEL,
          readLimitMBps: j.options.readLimitMBps ?? 0,
          workers: j.options.workers,
          memoryLow: j.options.memory === 'low',
          blockFiles: j.options.blockFiles !== false,
          hooks: snapshotFormOf(j.options),
          restoreTest: restoreTestForm(j.options.restoreTest),
        }));
      })
      .catch((err) => toast('error', errorMessage(err)));
  }, [jobId, toast]);

  const input: JobInput = useMemo(
    () => ({
      name: form.name,
      sources: form.sources,
      excludes: form.excludesText
        .split('\n')
        .map((l) => l.trim())
        .filter(Boolean),
      excludePresets: form.excludePresets,
      destination: destinationOf(form),
      schedule: form.schedule,
      retention: form.retention,
      options: {
        compressionLevel: form.compressionLevel,
        readLimitMBps: form.readLimitMBps || undefined,
        ...memoryOptions(form.memoryLow, form.workers),
        blockFiles: form.blockFiles,
        ...snapshotOptionsOf(form.hooks),
        restoreTest: restoreTestOption(form.restoreTest),
      },
      password: editing ? 'unchanged-password' : form.password,
      secretAccessKey: form.destKind === 's3' && form.s3Secret ? form.s3Secret : undefined,
      ...(!editing && form.destKind === 'local' && form.appendOnly
        ? { maintenancePassword: form.maintenancePassword }
        : {}),
    }),
    [form, editing],
  );

  // The connection test: its result belongs to the destination (and secret) it was run with.
  const [loaded, setLoaded] = useState<Destination | null>(null);
  const [test, setTest] = useState<{ result: DestinationTestResult; key: string } | null>(null);
  const [testing, setTesting] = useState(false);
  const [testError, setTestError] = useState<string | null>(null);
  const destKey = JSON.stringify([input.destination, input.secretAccessKey ?? '']);
  // the stored secret serves only the same store and key ID (see sameS3Credentials in the API)
  const secretKept =
    loaded?.kind === 's3' &&
    input.destination.kind === 's3' &&
    sameOrigin(loaded.endpoint, input.destination.endpoint) &&
    loaded.accessKeyId === input.destination.accessKeyId;
  const destChanged =
    !loaded || JSON.stringify(loaded) !== JSON.stringify(input.destination) || !!form.s3Secret;
  const runTest = async () => {
    setTesting(true);
    setTestError(null);
    try {
      const result = await api.call('destinations.test', {
        destination: input.destination,
        secretAccessKey: input.secretAccessKey,
        jobId: editing && secretKept ? jobId : undefined,
      });
      setTest({ result, key: destKey });
    } catch (err) {
      setTest(null);
      if (err instanceof ApiError && err.issues?.length)
        setTestError(err.issues.map((i) => i.message).join('; '));
      else setTestError(errorMessage(err));
    } finally {
      setTesting(false);
    }
  };

  const issues = useMemo(() => {
    const out: Record<string, string> = {};
    const r = jobInputSchema.safeParse(input);
    if (!r.success) for (const i of r.error.issues) out[i.path.join('.')] ??= i.message;
    if (!editing && form.password && form.confirm !== form.password)
      out.confirm = 'the passwords do not match';
    if (!editing && form.destKind === 'local' && form.appendOnly) {
      if (!form.maintenancePassword) out.maintenancePassword ??= 'enter a maintenance password';
      else if (form.maintenancePassword === form.password)
        out.maintenancePassword = 'use a password other than the repository password';
      else if (form.maintenanceConfirm !== form.maintenancePassword)
        out.maintenanceConfirm = 'the passwords do not match';
    }
    if (form.destKind === 's3') {
      if (!form.s3Secret && !secretKept) out.secretAccessKey = 'enter the secret access key';
      const passed = test?.key === destKey && test.result.ok;
      if (destChanged && !passed && !form.saveAnyway)
        out['destination.test'] =
          test?.key === destKey
            ? 'the connection test failed: fix the settings, or tick "Save without a passed test"'
            : 'test the connection before saving (or tick "Save without a passed test")';
    }
    return { ...out, ...serverIssues };
  }, [
    input,
    editing,
    form.password,
    form.confirm,
    form.destKind,
    form.appendOnly,
    form.maintenancePassword,
    form.maintenanceConfirm,
    form.s3Secret,
    form.saveAnyway,
    secretKept,
    test,
    destKey,
    destChanged,
    serverIssues,
  ]);

  const stepIssues = (s: Step) =>
    Object.keys(issues).filter((k) => (k === 'confirm' ? 'Security' : stepOf(k)) === s);
  const shown = (key: string, s: Step) => (touched.has(s) || serverIssues[key] ? issues[key] : undefined);

  const idx = steps.indexOf(step);
  const next = () => {
    setTouched((t) => new Set(t).add(step));
    if (stepIssues(step).length === 0) setStep(steps[Math.min(idx + 1, steps.length - 1)]);
  };

  const addSource = (p: string) => {
    const v = p.trim();
    if (!v || form.sources.includes(v)) return;
    set({ sources: [...form.sources, v], name: form.name || v.split(/[\\/]/).filter(Boolean).pop() || v });
    setAdding('');
  };

  const save = async () => {
    setTouched(new Set(steps));
    const bad = steps.find((s) => stepIssues(s).length > 0);
    if (bad) {
      setStep(bad);
      return;
    }
    setSaving(true);
    try {
      if (editing) {
        // eslint-disable-next-line @typescript-eslint/no-unused-vars
        const { password, secretAccessKey, ...changes } = input;
        await api.call('jobs.update', { id: jobId!, changes, secretAccessKey });
        toast('success', `Saved "${form.name}"`);
      } else {
        await api.call('jobs.create', input);
        toast('success', `Created "${form.name}"`);
      }
      await reload();
      navigate({ page: 'dashboard' });
    } catch (err) {
      if (err instanceof ApiError && err.issues?.length) {
        const map: Record<string, string> = {};
        for (const i of err.issues) map[i.path] = i.message;
        setServerIssues(map);
        setStep(stepOf(err.issues[0].path));
      } else {
        setServerError(errorMessage(err));
        if (err instanceof ApiError && err.code === 'WRONG_PASSWORD') setStep('Security');
      }
    } finally {
      setSaving(false);
    }
  };

  const sched = form.schedule;
  return (
    <section aria-labelledby="page-title" className="wizard">
      <header className="page-head">
        <div>
          <h1 id="page-title">{editing ? `Edit “${form.name}”` : 'New backup job'}</h1>
          <p className="muted">What to back up, where to, and how often.</p>
        </div>
      </header>
      <nav className="stepper" aria-label="Steps">
        <ol>
          {steps.map((s, i) => (
            <li key={s}>
              <button
                className={`step ${s === step ? 'current' : ''} ${touched.has(s) && stepIssues(s).length ? 'invalid' : ''}`}
                aria-current={s === step ? 'step' : undefined}
                onClick={() => setStep(s)}
              >
                <span className="step-num">
                  {touched.has(s) && stepIssues(s).length === 0 && s !== step ? (
                    <Icon name="check" size={14} />
                  ) : (
                    i + 1
                  )}
                </span>
                {s}
              </button>
            </li>
          ))}
        </ol>
      </nav>

      <div className="card wizard-body">
        {step === 'Sources' && (
          <div className="form-grid">
            <Field label="Job name" htmlFor="job-name" error={shown('name', 'Sources')}>
              <input
                id="job-name"
                value={form.name}
                onChange={(e) => set({ name: e.target.value })}
                placeholder="My documents"
              />
            </Field>
            <Field
              label="Folders to back up"
              htmlFor="source-add"
              error={shown('sources', 'Sources') ?? shown('sources.0', 'Sources')}
              hint="Add one or more folders."
            >
              <ul className="source-list" aria-label="Selected folders">
                {form.sources.map((s) => (
                  <li key={s}>
                    <Icon name="folder" size={16} /> <span className="mono">{s}</span>
                    <button
                      className="icon-button"
                      aria-label={`Remove ${s}`}
                      onClick={() => set({ sources: form.sources.filter((x) => x !== s) })}
                    >
                      <Icon name="x" size={16} />
                    </button>
                  </li>
                ))}
              </ul>
              <div className="row">
                <FolderInput
                  id="source-add"
                  label="Folder to add"
                  value={adding}
                  onChange={setAdding}
                  placeholder="/home/me/Documents"
                />
                <button className="button" onClick={() => addSource(adding)} disabled={!adding.trim()}>
                  <Icon name="plus" size={16} /> Add folder
                </button>
              </div>
            </Field>
            <fieldset className="field">
              <legend>Leave out</legend>
              <div className="checks">
                {(Object.keys(excludePresetPatterns) as ExcludePreset[]).map((p) => (
                  <label key={p} className="check">
                    <input
                      type="checkbox"
                      checked={form.excludePresets.includes(p)}
                      onChange={(e) =>
                        set({
                          excludePresets: e.target.checked
                            ? [...form.excludePresets, p]
                            : form.excludePresets.filter((x) => x !== p),
                        })
                      }
                    />
                    {excludePresetPatterns[p].label}
                  </label>
                ))}
              </div>
            </fieldset>
            <Field
              label="Other patterns to leave out (one per line)"
              htmlFor="excludes"
              hint="Glob patterns, e.g. **/*.bak or **/Downloads"
            >
              <textarea
                id="excludes"
                rows={3}
                value={form.excludesText}
                onChange={(e) => set({ excludesText: e.target.value })}
                spellCheck={false}
              />
            </Field>
          </div>
        )}

        {step === 'Destination' && (
          <div className="form-grid">
            <fieldset className="field">
              <legend>Where the backups go</legend>
              <div className="segmented" role="radiogroup" aria-label="Destination type">
                {(
                  [
                    ['local', 'Local folder'],
                    ['s3', 'S3-compatible storage'],
                  ] as const
                ).map(([k, label]) => (
                  <label key={k} className={`seg ${form.destKind === k ? 'on' : ''}`}>
                    <input
                      type="radio"
                      name="dest-kind"
                      checked={form.destKind === k}
                      onChange={() => set({ destKind: k })}
                    />
                    {label}
                  </label>
                ))}
              </div>
            </fieldset>
            {form.destKind === 'local' ? (
              <Field
                label="Destination folder"
                htmlFor="destination"
                error={shown('destination.path', 'Destination')}
                hint="A folder on this computer or an external drive. A new folder is set up as an encrypted repository; an existing repository is reused."
              >
                <FolderInput
                  id="destination"
                  label="Destination folder"
                  value={form.destination}
                  onChange={(v) => set({ destination: v })}
                />
              </Field>
            ) : (
              <S3Fields
                value={form.s3}
                onChange={(v) => set({ s3: v })}
                secret={form.s3Secret}
                onSecret={(v) => set({ s3Secret: v })}
                secretStored={editing && secretKept}
                error={(k) => shown(k, 'Destination')}
              />
            )}
            <DestinationProtection
              kind={form.destKind}
              appendOnly={form.appendOnly}
              objectLock={form.objectLock}
              retention={form.retention}
              editing={editing}
              onChange={set}
              error={shown(
                form.destKind === 'local' ? 'destination.appendOnly' : 'destination.objectLock',
                'Destination',
              )}
            />
            <DestinationTestPanel
              result={test?.result ?? null}
              testing={testing}
              stale={!!test && test.key !== destKey}
              onTest={() => void runTest()}
              error={testError}
            />
            <SpeedTestPanel
              destination={input.destination}
              secretAccessKey={input.secretAccessKey}
              jobId={editing ? jobId : undefined}
              sources={form.sources}
            />
            {form.destKind === 's3' ? (
              <>
                <label className="check">
                  <input
                    type="checkbox"
                    checked={form.saveAnyway}
                    onChange={(e) => set({ saveAnyway: e.target.checked })}
                  />
                  Save without a passed test (e.g. the store is not reachable from here right now)
                </label>
                {shown('destination.test', 'Destination') ? (
                  <p className="error-text" role="alert">
                    {issues['destination.test']}
                  </p>
                ) : null}
              </>
            ) : null}
          </div>
        )}

        {step === 'Schedule' && (
          <div className="form-grid">
            <fieldset className="field">
              <legend>When to back up</legend>
              <div className="segmented" role="radiogroup" aria-label="Schedule">
                {(
                  [
                    ['manual', 'Manually'],
                    ['hourly', 'Hourly'],
                    ['every', 'Every N hours'],
                    ['daily', 'Daily'],
                    ['weekly', 'Weekly'],
                  ] as const
                ).map(([k, label]) => (
                  <label key={k} className={`seg ${sched.kind === k ? 'on' : ''}`}>
                    <input
                      type="radio"
                      name="schedule"
                      checked={sched.kind === k}
                      onChange={() =>
                        set({
                          schedule:
                            k === 'manual'
                              ? { kind: 'manual' }
                              : k === 'hourly'
                                ? { kind: 'hourly', minute: 0 }
                                : k === 'every'
                                  ? { kind: 'every', hours: 6 }
                                  : k === 'daily'
                                    ? { kind: 'daily', time: '21:00' }
                                    : { kind: 'weekly', days: [1, 3, 5], time: '21:00' },
                        })
                      }
                    />
                    {label}
                  </label>
                ))}
              </div>
            </fieldset>
            {sched.kind === 'hourly' && (
              <NumberField
                id="minute"
                label="Minute past the hour"
                min={0}
                max={59}
                value={sched.minute}
                onChange={(n) => set({ schedule: { ...sched, minute: n ?? 0 } })}
              />
            )}
            {sched.kind === 'every' && (
              <NumberField
                id="hours"
                label="Hours between backups"
                min={1}
                max={168}
                value={sched.hours}
                onChange={(n) => set({ schedule: { ...sched, hours: n ?? 1 } })}
              />
            )}
            {(sched.kind === 'daily' || sched.kind === 'weekly') && (
              <Field label="Time of day" htmlFor="time" error={shown('schedule.time', 'Schedule')}>
                <input
                  id="time"
                  type="time"
                  value={sched.time}
                  onChange={(e) => set({ schedule: { ...sched, time: e.target.value } })}
                />
              </Field>
            )}
            {sched.kind === 'weekly' && (
              <fieldset className="field">
                <legend>Days</legend>
                <div className="checks">
                  {days.map((d, i) => (
                    <label key={d} className="check">
                      <input
                        type="checkbox"
                        checked={sched.days.includes(i)}
                        onChange={(e) =>
                          set({
                            schedule: {
                              ...sched,
                              days: e.target.checked ? [...sched.days, i] : sched.days.filter((x) => x !== i),
                            },
                          })
                        }
                      />
                      {d}
                    </label>
                  ))}
                </div>
                {shown('schedule.days', 'Schedule') ? (
                  <p className="error-text">{issues['schedule.days']}</p>
                ) : null}
              </fieldset>
            )}
            <p className="hint">
              A backup missed while the computer was off runs once when Tidemark starts again.
            </p>
          </div>
        )}

        {step === 'Retention' && (
          <div className="form-grid two">
            <p className="hint span">
              Older snapshots are thinned out after each backup. A snapshot kept by any rule stays.
            </p>
            {editing ? <RetentionPreviewLine jobId={jobId!} retention={form.retention} /> : null}
            {(
              [
                ['keepLast', 'Keep the last', 'snapshots'],
                ['keepHourly', 'Hourly snapshots for', 'hours'],
                ['keepDaily', 'Daily snapshots for', 'days'],
                ['keepWeekly', 'Weekly snapshots for', 'weeks'],
                ['keepMonthly', 'Monthly snapshots for', 'months'],
                ['keepYearly', 'Yearly snapshots for', 'years'],
              ] as const
            ).map(([k, label, unit]) => (
              <NumberField
                key={k}
                id={k}
                label={`${label} (${unit})`}
                value={form.retention[k]}
                onChange={(n) => set({ retention: { ...form.retention, [k]: n } })}
              />
            ))}
          </div>
        )}

        {step === 'Security' && (
          <div className="form-grid two">
            {editing ? (
              <p className="hint span">The repository password is changed in Settings.</p>
            ) : (
              <>
                <Field
                  label="Password"
                  htmlFor="password"
                  error={shown('password', 'Security')}
                  hint="Encrypts the backup. Without it nobody — including you — can restore."
                >
                  <input
                    id="password"
                    type="password"
                    autoComplete="new-password"
                    value={form.password}
                    onChange={(e) => set({ password: e.target.value })}
                  />
                </Field>
                <Field label="Confirm password" htmlFor="confirm" error={shown('confirm', 'Security')}>
                  <input
                    id="confirm"
                    type="password"
                    autoComplete="new-password"
                    value={form.confirm}
                    onChange={(e) => set({ confirm: e.target.value })}
                  />
                </Field>
                {form.destKind === 'local' && form.appendOnly ? (
                  <MaintenancePasswordFields
                    value={form.maintenancePassword}
                    confirm={form.maintenanceConfirm}
                    onChange={set}
                    error={(k) => shown(k, 'Security')}
                  />
                ) : null}
              </>
            )}
            <NumberField
              id="compression"
              label="Compression level (0 = off)"
              min={0}
              max={19}
              value={form.compressionLevel}
              onChange={(n) => set({ compressionLevel: n ?? 0 })}
            />
            <NumberField
              id="read-limit"
              label="Read limit (MB/s, 0 = unlimited)"
              min={0}
              value={form.readLimitMBps}
              onChange={(n) => set({ readLimitMBps: n ?? 0 })}
            />
            <label className="check">
              <input
                type="checkbox"
                checked={form.blockFiles}
                onChange={(e) => set({ blockFiles: e.target.checked })}
              />{' '}
              Back up VM disks, databases and mail stores block by block{' '}
              <span className="muted small">
                (64 MiB+: incrementals read and store only the blocks that changed)
              </span>
            </label>
            <MemoryField value={form.memoryLow} onChange={(memoryLow) => set({ memoryLow })} />
            <SnapshotFields value={form.hooks} onChange={(hooks) => set({ hooks })} />
            <RestoreTestFields
              value={form.restoreTest}
              onChange={(restoreTest) => set({ restoreTest })}
              errors={{
                everyDays: shown('options.restoreTest.everyDays', 'Security'),
                files: shown('options.restoreTest.files', 'Security'),
              }}
            />
          </div>
        )}

        {step === 'Review' && (
          <dl className="review">
            <dt>Name</dt>
            <dd>{form.name || '—'}</dd>
            <dt>Folders</dt>
            <dd className="mono">{form.sources.join(', ') || '—'}</dd>
            <dt>Leave out</dt>
            <dd>
              {[...form.excludePresets.map((p) => excludePresetPatterns[p].label), ...input.excludes!].join(
                ', ',
              ) || 'Nothing'}
            </dd>
            <dt>Destination</dt>
            <dd className="mono">
              {input.destination.kind === 's3'
                ? `S3 ${describeDestination(input.destination)}`
                : form.destination}
            </dd>
            <dt>Protection</dt>
            <dd>
              {form.destKind === 'local'
                ? form.appendOnly
                  ? 'Append-only (pruning needs the maintenance password)'
                  : 'None'
                : form.objectLock
                  ? `Object lock (${form.objectLock}), ${lockDays(form.retention)} days`
                  : 'None'}
            </dd>
            <dt>Schedule</dt>
            <dd>
              {sched.kind === 'manual'
                ? 'Manually'
                : sched.kind === 'daily'
                  ? `Daily at ${sched.time}`
                  : sched.kind === 'weekly'
                    ? `Weekly at ${sched.time}`
                    : sched.kind === 'hourly'
                      ? 'Hourly'
                      : sched.kind === 'every'
                        ? `Every ${sched.hours} hours`
                        : `Custom: ${sched.expressions.join('; ')}`}
            </dd>
            <dt>Retention</dt>
            <dd>
              {Object.entries(form.retention)
                .filter(([, v]) => v)
                .map(([k, v]) => `${k.replace('keep', '')}: ${v}`)
                .join(' · ') || 'Keep everything'}
            </dd>
            <dt>Open files</dt>
            <dd>
              Snapshot: {snapshotModeText(form.hooks.snapshot)}
              {form.hooks.preCommand.trim() ? ` · before: ${form.hooks.preCommand.trim()}` : ''}
              {form.hooks.postCommand.trim() ? ` · after: ${form.hooks.postCommand.trim()}` : ''}
            </dd>
            <dt>Restore tests</dt>
            <dd>{describeRestoreTest(form.restoreTest)}</dd>
            <dt>Memory</dt>
            <dd data-testid="review-memory">{describeMemory(form.memoryLow)}</dd>
          </dl>
        )}

        {serverError ? (
          <p className="error-banner" role="alert">
            {serverError}
          </p>
        ) : null}
      </div>

      <footer className="wizard-actions">
        <button className="button ghost" onClick={() => navigate({ page: 'dashboard' })}>
          Cancel
        </button>
        {editing ? (
          <button
            className="button danger"
            onClick={async () => {
              if (!confirm(`Delete the job "${form.name}"? Its backups stay in the repository.`)) return;
              await removeJob(jobId!);
              navigate({ page: 'dashboard' });
            }}
          >
            <Icon name="trash" size={16} /> Delete job
          </button>
        ) : null}
        <span className="spacer" />
        <button className="button" disabled={idx === 0} onClick={() => setStep(steps[idx - 1])}>
          Back
        </button>
        {step !== 'Review' ? (
          <button className="button primary" onClick={next}>
            Next
          </button>
        ) : (
          <button className="button primary" onClick={() => void save()} disabled={saving}>
            {saving ? 'Saving…' : editing ? 'Save changes' : 'Create job'}
          </button>
        )}
      </footer>
    </section>
  );
}
