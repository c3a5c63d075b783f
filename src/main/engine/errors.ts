/**
 * Named errors with stable codes (docs/architecture.md §1 rule 7). Every error the engine throws on purpose is a
 * TidemarkError: it carries a machine-readable `code` (used for CLI exit codes and for the API's
 * `{name, code, message}` wire form) and a message that tells the user what went wrong and what to do.
 */
export class TidemarkError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

export class WrongPasswordError extends TidemarkError {
  constructor(message = 'wrong password: no key in this repository opens with it') {
    super('WRONG_PASSWORD', message);
  }
}
export class RepoNotFoundError extends TidemarkError {
  constructor(location: string) {
    super('REPO_NOT_FOUND', `no Tidemark repository at ${location} (run "tidemark init" first)`);
  }
}
export class RepoExistsError extends TidemarkError {
  constructor(location: string) {
    super('REPO_EXISTS', `a repository already exists at ${location}`);
  }
}
export class RepoLockedError extends TidemarkError {
  constructor(message: string) {
    super('REPO_LOCKED', message);
  }
}
export class CorruptObjectError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CORRUPT_OBJECT', message, options);
  }
}
export class NotFoundError extends TidemarkError {
  constructor(what: string) {
    super('NOT_FOUND', `${what} not found`);
  }
}
export class UnsupportedVersionError extends TidemarkError {
  constructor(version: number) {
    super('UNSUPPORTED_VERSION', `repository format version ${version} is not supported by this Tidemark`);
  }
}
export class DestinationFullError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('DESTINATION_FULL', message, options);
  }
}
export class DestinationUnwritableError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('DESTINATION_UNWRITABLE', message, options);
  }
}
/** The destination went away while in use: a drive unplugged, a share unmounted, the network lost. */
export class DestinationGoneError extends TidemarkError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('DESTINATION_GONE', message, options);
  }
}
export class UsageError extends TidemarkError {
  constructor(message: string) {
    super('USAGE', message);
  }
}
export class AbortedError extends TidemarkError {
  constructor(message = 'operation cancelled') {
    super('ABORTED', message);
  }
}
export class UnsafePathError extends TidemarkError {
  constructor(message: string) {
    super('UNSAFE_PATH', message);
  }
}

/** Adds context to an error without losing its class or code: "reading pack 3fa…: <message>". */
export function withContext<T>(context: string, fn: () => Promise<T>): Promise<T> {
  return fn().catch((err: unknown) => {
    throw addContext(context, err);
  });
}

export function addContext(context: string, err: unknown): unknown {
  if (err instanceof Error) {
    err.message = `${context}: ${err.message}`;
    return err;
  }
  return new Error(`${context}: ${String(err)}`);
}

/** The wire form of an error (API boundary, --json output). */
export function errorToWire(err: unknown): { name: string; code: string; message: string } {
  if (err instanceof TidemarkError) return { name: err.name, code: err.code, message: err.message };
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code ?? 'INTERNAL';
    return { name: err.name, code, message: err.message };
  }
  return { name: 'Error', code: 'INTERNAL', message: String(err) };
}

export function throwIfAborted(signal?: AbortSignal): void {
  if (signal?.aborted) throw new AbortedError();
}
export class ObjectExistsError extends TidemarkError {
  constructor(what: string) {
    super('OBJECT_EXISTS', `${what} already exists`);
  }
}
/** An append-only repository refused to delete or rewrite something (prune, forget, a key change):
 *  that needs its maintenance password (repo/immutability.ts). */
export class AppendOnlyError extends TidemarkError {
  constructor(what: string) {
    super(
      'APPEND_ONLY',
      `this repository is append-only: ${what} needs its maintenance password (--maintenance-password-file, or TIDEMARK_MAINTENANCE_PASSWORD)`,
    );
  }
}
/** The maintenance password of an append-only repository did not match. */
export class WrongMaintenancePasswordError extends TidemarkError {
  constructor() {
    super('WRONG_MAINTENANCE_PASSWORD', 'wrong maintenance password: nothing was deleted');
  }
}
