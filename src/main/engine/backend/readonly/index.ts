/**
 * Read-only wrapper: every read passes through, every write (save, remove) throws
 * ReadOnlyError, and init() prepares nothing, before reaching the store. Used for restores, browsing and verification, so a bug or a
 * mistaken click in those paths can never change a repository.
 */
import type { ObjectType, SaveOptions } from '../types.js';
import { ForwardingBackend } from '../forwarding.js';
import { TidemarkError } from '../../errors.js';

export class ReadOnlyError extends TidemarkError {
  constructor(what: string, location: string) {
    super('READ_ONLY', `${what} refused: ${location} is opened read-only`);
  }
}

/** Reads (and `localFile`: reads pass unchanged) go on to the store; `saveParts` is not offered. */
export class ReadOnlyBackend extends ForwardingBackend {
  override async save(
    type: ObjectType,
    name: string,
    _data?: Uint8Array,
    _options?: SaveOptions,
  ): Promise<void> {
    throw new ReadOnlyError(`writing ${type}/${name}`, this.location);
  }
  override async remove(type: ObjectType, name: string): Promise<void> {
    throw new ReadOnlyError(`deleting ${type}/${name}`, this.location);
  }
  /** Nothing to prepare for reading; creating folders or buckets would be a write, so none is done. */
  override async init(): Promise<void> {}
}
