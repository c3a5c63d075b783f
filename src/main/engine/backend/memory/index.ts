/**
 * In-memory backend for fast unit tests. Same semantics as the local backend (atomic saves,
 * conditional writes, NotFoundError) so it passes the one conformance suite.
 */
import type { Backend, ObjectInfo, ObjectType, SaveOptions } from '../types.js';
import { NotFoundError, ObjectExistsError } from '../../errors.js';

export class MemoryBackend implements Backend {
  readonly location: string;
  private readonly objects = new Map<string, Buffer>();
  private readonly written = new Map<string, number>();

  /** `clock` simulates the store's own clock (tests of PCs with wrong clocks); default the local one. */
  constructor(
    location = 'memory:',
    private readonly clock: () => number = Date.now,
  ) {
    this.location = location;
  }

  async storeNow(): Promise<number> {
    return this.clock();
  }

  private key(type: ObjectType, name: string): string {
    return `${type}/${name}`;
  }

  async save(type: ObjectType, name: string, data: Uint8Array, options?: SaveOptions): Promise<void> {
    const k = this.key(type, name);
    if (options?.ifNotExists && this.objects.has(k)) throw new ObjectExistsError(`${type}/${name}`);
    this.objects.set(k, Buffer.from(data));
    this.written.set(k, this.clock());
  }

  async load(type: ObjectType, name: string, offset = 0, length?: number): Promise<Buffer> {
    const buf = this.objects.get(this.key(type, name));
    if (!buf) throw new NotFoundError(`${type}/${name}`);
    const end = length === undefined ? buf.length : Math.min(buf.length, offset + length);
    return Buffer.from(buf.subarray(offset, end));
  }

  async stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    const buf = this.objects.get(this.key(type, name));
    if (!buf) throw new NotFoundError(`${type}/${name}`);
    return { name, size: buf.length };
  }

  async remove(type: ObjectType, name: string): Promise<void> {
    this.objects.delete(this.key(type, name));
  }

  async *list(type: ObjectType): AsyncIterable<ObjectInfo> {
    const prefix = `${type}/`;
    for (const [k, v] of [...this.objects]) {
      if (k.startsWith(prefix))
        yield { name: k.slice(prefix.length), size: v.length, modified: this.written.get(k) };
    }
  }

  async exists(): Promise<boolean> {
    return this.objects.has('config/config');
  }

  async init(): Promise<void> {}

  async close(): Promise<void> {}
}
