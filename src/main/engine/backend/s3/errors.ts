/**
 * Named errors for object stores (docs/architecture.md §1 rule 7). Each says what is wrong in words a user can act
 * on: wrong keys, a missing bucket, a clock that is off, a missing permission, an insecure endpoint.
 * `TransientStoreError` marks failures worth retrying (throttling, 5xx, dropped connections, short
 * reads); the retry wrapper recognises it by its `transient` flag, not by class, so any backend can
 * use the same convention.
 */
import { TidemarkError } from '../../errors.js';

export class S3WrongKeysError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('S3_WRONG_KEYS', message, options);
  }
}

export class S3BucketNotFoundError extends TidemarkError {
  constructor(bucket: string, endpoint: string, options?: { cause?: unknown }) {
    super(
      'S3_NO_SUCH_BUCKET',
      `the bucket "${bucket}" does not exist at ${endpoint} (create it first, or check the name and region)`,
      options,
    );
  }
}

/**
 * Marked transient on purpose: the SDK learns the server's time from the refusal and signs the next
 * request with the corrected clock, so one retry usually succeeds. When it does not, the retries run
 * out and this message reaches the user.
 */
export class S3ClockSkewError extends TidemarkError {
  readonly transient = true;
  constructor(message: string, options?: { cause?: unknown }) {
    super('S3_CLOCK_SKEW', message, options);
  }
}

export class S3AccessDeniedError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('S3_ACCESS_DENIED', message, options);
  }
}

export class S3InsecureEndpointError extends TidemarkError {
  constructor(endpoint: string) {
    super(
      'S3_INSECURE_ENDPOINT',
      `refusing plain http to ${endpoint}: access keys and data would cross the network unprotected (use https, or allow insecure http explicitly for a trusted local network)`,
    );
  }
}

/** The store answered in a way Tidemark does not understand (unexpected status, bad response). */
export class S3ProtocolError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('S3_PROTOCOL', message, options);
  }
}

/** A failure that may well succeed when tried again: throttling, 5xx, a dropped or timed-out connection, a short read. */
export class TransientStoreError extends TidemarkError {
  readonly transient = true;
  constructor(message: string, options?: { cause?: unknown; code?: string }) {
    super(options?.code ?? 'STORE_TRANSIENT', message, options);
  }
}

/** A read returned fewer bytes than the store said it would send. */
export class TruncatedReadError extends TransientStoreError {
  constructor(what: string, got: number, expected: number) {
    super(`${what}: read ${got} of ${expected} bytes (connection cut short)`, { code: 'TRUNCATED_READ' });
  }
}

/** A compare-and-swap write lost: the object is no longer the version the writer read. */
export class ObjectChangedError extends TidemarkError {
  constructor(what: string, why: string) {
    super(
      'OBJECT_CHANGED',
      `${what} changed while this computer was updating it (${why}); read it again and retry`,
    );
  }
}
