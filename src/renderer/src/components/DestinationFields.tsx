/**
 * The job wizard's S3 destination: the fields of an S3-compatible bucket (with a paste box that reads
 * `s3:https://host/bucket/prefix`), and the "Test connection" panel that shows each check the engine
 * made against the destination as passed / failed / warning / not tried, with its message.
 */
import { useState } from 'react';
import type { DestinationCheck, DestinationTestResult } from '../api';
import { parseS3Paste, isLoopbackUrl } from '../../../shared/destination';
import { Field } from './ui';
import { Icon } from './Icon';

export interface S3Form {
  endpoint: string;
  bucket: string;
  prefix: string;
  region: string;
  pathStyle: boolean;
  accessKeyId: string;
  allowInsecureHttp: boolean;
}

export const emptyS3: S3Form = {
  endpoint: 'https://',
  bucket: '',
  prefix: '',
  region: '',
  pathStyle: true,
  accessKeyId: '',
  allowInsecureHttp: false,
};

export function S3Fields({
  value,
  onChange,
  secret,
  onSecret,
  secretStored,
  error,
}: {
  value: S3Form;
  onChange: (v: S3Form) => void;
  secret: string;
  onSecret: (s: string) => void;
  /** Editing a job whose secret is stored: blank keeps it. */
  secretStored: boolean;
  error: (key: string) => string | undefined;
}) {
  const [paste, setPaste] = useState('');
  const [pasteError, setPasteError] = useState<string | null>(null);
  const set = (patch: Partial<S3Form>) => onChange({ ...value, ...patch });
  const usePaste = (text: string) => {
    setPaste(text);
    if (!text.trim()) return setPasteError(null);
    const r = parseS3Paste(text);
    if ('error' in r) return setPasteError(r.error);
    setPasteError(null);
    onChange({
      ...value,
      endpoint: r.endpoint,
      bucket: r.bucket,
      prefix: r.prefix,
      region: r.region ?? value.region,
      pathStyle: r.pathStyle ?? !/\.amazonaws\.com$/i.test(new URL(r.endpoint).hostname),
    });
  };
  const insecure = /^http:/i.test(value.endpoint) && !isLoopbackUrl(value.endpoint);
  return (
    <>
      <Field
        label="S3 address (paste)"
        htmlFor="s3-paste"
        error={pasteError ?? undefined}
        hint="Paste s3:https://host/bucket/folder to fill the fields below, or fill them yourself."
      >
        <input
          id="s3-paste"
          value={paste}
          onChange={(e) => usePaste(e.target.value)}
          placeholder="s3:https://s3.example.com/my-bucket/backups"
          spellCheck={false}
        />
      </Field>
      <div className="form-grid two" style={{ alignItems: 'start' }}>
        <Field
          label="Endpoint URL"
          htmlFor="s3-endpoint"
          error={error('destination.endpoint')}
          hint="https://… (plain http only for this computer, or when allowed below)"
        >
          <input
            id="s3-endpoint"
            value={value.endpoint}
            onChange={(e) => set({ endpoint: e.target.value })}
            spellCheck={false}
          />
        </Field>
        <Field label="Bucket" htmlFor="s3-bucket" error={error('destination.bucket')}>
          <input
            id="s3-bucket"
            value={value.bucket}
            onChange={(e) => set({ bucket: e.target.value })}
            spellCheck={false}
          />
        </Field>
        <Field
          label="Folder in the bucket (prefix)"
          htmlFor="s3-prefix"
          error={error('destination.prefix')}
          hint="Optional, e.g. tidemark/office-pc"
        >
          <input
            id="s3-prefix"
            value={value.prefix}
            onChange={(e) => set({ prefix: e.target.value })}
            spellCheck={false}
          />
        </Field>
        <Field
          label="Region"
          htmlFor="s3-region"
          error={error('destination.region')}
          hint="Optional (default: from an AWS address, else us-east-1)"
        >
          <input
            id="s3-region"
            value={value.region}
            onChange={(e) => set({ region: e.target.value })}
            spellCheck={false}
          />
        </Field>
        <Field label="Access key ID" htmlFor="s3-key-id" error={error('destination.accessKeyId')}>
          <input
            id="s3-key-id"
            value={value.accessKeyId}
            onChange={(e) => set({ accessKeyId: e.target.value })}
            autoComplete="off"
            spellCheck={false}
          />
        </Field>
        <Field
          label="Secret access key"
          htmlFor="s3-secret"
          error={error('secretAccessKey')}
          hint={
            secretStored
              ? 'Stored in the secret store; leave blank to keep it.'
              : 'Kept in the secret store (OS keychain or a private key file), never in the job list.'
          }
        >
          <input
            id="s3-secret"
            type="password"
            value={secret}
            placeholder={secretStored ? '•••••••• (unchanged)' : ''}
            onChange={(e) => onSecret(e.target.value)}
            autoComplete="new-password"
          />
        </Field>
      </div>
      <fieldset className="field">
        <legend>Addressing</legend>
        <div className="segmented" role="radiogroup" aria-label="Addressing">
          <label className={`seg ${value.pathStyle ? 'on' : ''}`}>
            <input
              type="radio"
              name="s3-style"
              checked={value.pathStyle}
              onChange={() => set({ pathStyle: true })}
            />
            Path-style (host/bucket)
          </label>
          <label className={`seg ${!value.pathStyle ? 'on' : ''}`}>
            <input
              type="radio"
              name="s3-style"
              checked={!value.pathStyle}
              onChange={() => set({ pathStyle: false })}
            />
            Virtual-hosted (bucket.host)
          </label>
        </div>
      </fieldset>
      {insecure || value.allowInsecureHttp ? (
        <label className="check">
          <input
            type="checkbox"
            checked={value.allowInsecureHttp}
            onChange={(e) => set({ allowInsecureHttp: e.target.checked })}
          />
          Allow insecure HTTP (keys and data cross the network unprotected — only on a trusted local network)
        </label>
      ) : null}
    </>
  );
}

const STATUS: Record<DestinationCheck['status'], { text: string; tone: string; icon: string }> = {
  passed: { text: 'Passed', tone: 'good', icon: 'check' },
  failed: { text: 'Failed', tone: 'bad', icon: 'x' },
  warning: { text: 'Warning', tone: 'warn', icon: 'clock' },
  skipped: { text: 'Not tried', tone: 'neutral', icon: 'pause' },
};

export function DestinationTestPanel({
  result,
  testing,
  stale,
  onTest,
  error,
}: {
  result: DestinationTestResult | null;
  testing: boolean;
  /** The fields changed since this result. */
  stale: boolean;
  onTest: () => void;
  error: string | null;
}) {
  return (
    <div className="destination-test">
      <div className="row">
        <button className="button" onClick={onTest} disabled={testing}>
          <Icon name="pulse" size={16} /> {testing ? 'Testing…' : 'Test connection'}
        </button>
        {result && !testing ? (
          <span role="status" className={`badge tone-${result.ok ? 'good' : 'bad'}`}>
            {result.ok ? 'Connection works' : 'Connection failed'}
            {stale ? ' (before your last change)' : ''}
          </span>
        ) : null}
      </div>
      {error ? (
        <p className="error-text" role="alert">
          {error}
        </p>
      ) : null}
      {result && !testing ? (
        <>
          <ul className="source-list" aria-label="Connection checks">
            {result.checks.map((c) => (
              <li key={c.name} data-check={c.name} data-status={c.status}>
                <Icon name={STATUS[c.status].icon} size={16} />{' '}
                <span className={`badge tone-${STATUS[c.status].tone}`}>{STATUS[c.status].text}</span>{' '}
                <span>
                  <strong>{c.label}</strong>: {c.message}
                </span>
              </li>
            ))}
          </ul>
          <p className={result.ok ? 'hint' : 'error-text'}>{result.summary}</p>
        </>
      ) : null}
    </div>
  );
}
