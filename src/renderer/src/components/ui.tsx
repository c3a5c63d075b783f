/** Small shared building blocks: badges, progress bar, modal dialog, field wrapper, empty state. */
import { useEffect, useId, useRef, type ReactNode } from 'react';
import type { Health, RunStatus } from '../api';
import { Icon } from './Icon';

const statusText: Record<RunStatus | Health, string> = {
  queued: 'Queued',
  running: 'Running',
  paused: 'Paused',
  completed: 'Completed',
  'completed-with-warnings': 'Warnings',
  failed: 'Failed',
  cancelled: 'Cancelled',
  missed: 'Missed',
  ok: 'Healthy',
  warning: 'Attention',
  error: 'Failing',
  'never-run': 'Not run yet',
};
const statusTone: Record<RunStatus | Health, string> = {
  queued: 'neutral',
  running: 'info',
  paused: 'neutral',
  completed: 'good',
  'completed-with-warnings': 'warn',
  failed: 'bad',
  cancelled: 'neutral',
  missed: 'warn',
  ok: 'good',
  warning: 'warn',
  error: 'bad',
  'never-run': 'neutral',
};

export function Badge({ status }: { status: RunStatus | Health }) {
  return <span className={`badge tone-${statusTone[status]}`}>{statusText[status]}</span>;
}

export function ProgressBar({ value, label }: { value: number | null; label: string }) {
  const pct = value === null ? null : Math.round(value * 1000) / 10;
  return (
    <div
      className={`progress ${value === null ? 'indeterminate' : ''}`}
      role="progressbar"
      aria-label={label}
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={pct ?? undefined}
    >
      <div className="progress-fill" style={{ width: pct === null ? '30%' : `${pct}%` }} />
    </div>
  );
}

export function Modal({
  title,
  onClose,
  children,
  footer,
}: {
  title: string;
  onClose: () => void;
  children: ReactNode;
  footer?: ReactNode;
}) {
  const id = useId();
  const ref = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const prev = document.activeElement as HTMLElement | null;
    const first = ref.current?.querySelector<HTMLElement>('button, input, select, [tabindex="0"]');
    first?.focus();
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') onClose();
    };
    window.addEventListener('keydown', onKey);
    return () => {
      window.removeEventListener('keydown', onKey);
      prev?.focus();
    };
  }, [onClose]);
  return (
    <div className="modal-backdrop" onMouseDown={(e) => e.target === e.currentTarget && onClose()}>
      <div className="modal" role="dialog" aria-modal="true" aria-labelledby={id} ref={ref}>
        <header className="modal-head">
          <h2 id={id}>{title}</h2>
          <button className="icon-button" onClick={onClose} aria-label="Close">
            <Icon name="x" />
          </button>
        </header>
        <div className="modal-body">{children}</div>
        {footer ? <footer className="modal-foot">{footer}</footer> : null}
      </div>
    </div>
  );
}

export function Field({
  label,
  error,
  hint,
  children,
  htmlFor,
}: {
  label: string;
  error?: string;
  hint?: string;
  children: ReactNode;
  htmlFor?: string;
}) {
  return (
    <div className={`field ${error ? 'has-error' : ''}`}>
      <label htmlFor={htmlFor}>{label}</label>
      {children}
      {hint && !error ? <p className="hint">{hint}</p> : null}
      {error ? (
        <p className="error-text" role="alert">
          {error}
        </p>
      ) : null}
    </div>
  );
}

export function Empty({ icon, title, children }: { icon: string; title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <Icon name={icon} size={36} />
      <h3>{title}</h3>
      {children}
    </div>
  );
}
