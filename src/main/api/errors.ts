/** Errors of the API layer and their wire form (`{name, code, message}`, docs/architecture.md §1 rule 7). */
import type { ZodError } from 'zod';
import { TidemarkError, errorToWire } from '../engine/errors.js';
import type { WireError } from '../../shared/api.js';

/** A request the API refuses (unknown method, job already running, …), with its own code. */
export class ApiUsageError extends TidemarkError {
  constructor(code: string, message: string) {
    super(code, message);
  }
}

/** Arguments that failed their schema: carries every offending field. */
export class ValidationError extends TidemarkError {
  readonly issues: { path: string; message: string }[];
  constructor(issues: { path: string; message: string }[]) {
    super('VALIDATION', issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; '));
    this.issues = issues;
  }
  static fromZod(err: ZodError): ValidationError {
    return new ValidationError(err.issues.map((i) => ({ path: i.path.join('.'), message: i.message })));
  }
}

export function toWire(err: unknown): WireError {
  const wire: WireError = errorToWire(err);
  if (err instanceof ValidationError) wire.issues = err.issues;
  return wire;
}
