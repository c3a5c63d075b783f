/**
 * Read-only wrapper: every read passes through, every write (save, remove) throws
 * ReadOnlyError, and init() prepares nothing, before reaching the store. Used for restores, browsing and verification, so a bug or a
 * mistaken click in those paths can never change a repository.
 */
import type { Backend, ObjectInfo, ObjectType, SaveOptions } from '../types.js';
import { TidemarkError } from '../../errors.js';

export class ReadOnlyError extends TidemarkError {
  constructor(what: string, location: string) {
    super('READ_ONLY', `${what} refused: ${location} is opened read-only`);
  }
}

export class ReadOnlyBackend implements Backend {
  readonly location: string;
  readonly writeConcurrency?: number;

  constructor(readonly inner: Backend) {
    this.location = inner.location;
    this.writeConcurrency = inner.writeConcurrency;
  }

  async save(type: ObjectType, name: string, _data?: Uint8Array, _options?: SaveOptions): Promise<void> {
    throw new ReadOnlyError(`writing ${type}/${name}`, this.location);
  }
  async remove(type: ObjectType, name: string): Promise<void> {
    throw new ReadOnlyError(`deleting ${type}/${name}`, this.location);
  }
  /** Nothing to prepare for reading; creating folders or buckets would be a write, so none is done. */
  async init(): Promise<void> {}
  load(type: ObjectType, name: string, offset?: number, length?: number): Promise<Buffer> {
    return this.inner.load(type, name, offset, length);
  }
  localFile(type: ObjectType, name: string): string | undefined {
    return this.inner.localFile?.(type, name);
  }
  stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    return this.inner.stat(type, name);
  }
  list(type: ObjectType): AsyncIterable<ObjectInfo> {
    return this.inner.list(type);
  }
  exists(): Promise<boolean> {
    return this.inner.exists();
  }
  storeNow(): Promise<number> {
    return this.inner.storeNow ? this.inner.storeNow() : Promise.resolve(Date.now());
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
