import { TidemarkError } from '../errors.js';

/** A snapshot could not be made, exposed or removed (the message says which and why). */
export class SnapshotError extends TidemarkError {
  readonly notInstalled: boolean;
  constructor(message: string, opts: { cause?: unknown; notInstalled?: boolean } = {}) {
    super('SNAPSHOT_FAILED', message, { cause: opts.cause });
    this.notInstalled = !!opts.notInstalled;
  }
}

/** The job asks for a snapshot always, and a source has none (the run fails before reading anything). */
export class SnapshotUnavailableError extends TidemarkError {
  constructor(message: string) {
    super('SNAPSHOT_UNAVAILABLE', message);
  }
}
