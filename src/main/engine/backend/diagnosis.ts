/**
 * What "test the destination" reports (./diagnose.ts for folders, ./s3/diagnose.ts for S3): a list of
 * checks, each passed / failed / warning / skipped with one sentence. Types only, shared by both, so
 * that neither imports the other's module for them.
 */
export interface DiagnosisCheck {
  name: string;
  label: string;
  status: 'passed' | 'failed' | 'warning' | 'skipped';
  message: string;
  code?: string;
}

export interface Diagnosis {
  ok: boolean;
  location: string;
  checks: DiagnosisCheck[];
  /** A Tidemark repository already exists there; null when that could not be found out. */
  repositoryExists: boolean | null;
  /** Store clock minus ours (S3). */
  clockOffsetMs?: number;
  summary: string;
}
