/**
 * The base of storage wrappers (kopia-style: one behaviour around any backend). Every call goes on to
 * `inner` unchanged; a wrapper overrides only the calls it changes.
 *
 * The optional capabilities of the contract (types.ts) are offered by the base whenever `inner` offers
 * them, unless the wrapper changes what they stand for, so that a wrapper can neither lose one by
 * forgetting to forward it nor be bypassed by one:
 * - `saveParts` is a save: offered unless the wrapper overrides `save` without overriding `saveParts`
 *   (callers then save the concatenation, through the wrapper's `save`);
 * - `openWriter` is a save too (written as it is made): the same rule, so a wrapper that limits, retries,
 *   refuses or alters saves (throttle, retry, read-only, faulty) is never passed by a stream — the
 *   backup then gathers its packs whole and saves them through it — unless it offers its own writer
 *   (request log: logged; append-only: checked);
 * - `localFile` lets another thread read an object itself, past the wrapper: offered unless the wrapper
 *   overrides `load` (it counts, limits or alters reads) without overriding `localFile`.
 * `storeNow` falls back to the local clock where `inner` has none.
 */
import type { Backend, ObjectInfo, ObjectType, ObjectWriter, SaveOptions } from './types.js';

type Capabilities = Pick<Backend, 'saveParts' | 'openWriter' | 'localFile'>;

export class ForwardingBackend implements Backend {
  // `declare`: no field of the base may hide a method a wrapper defines (class fields are own properties)
  declare readonly saveParts?: Backend['saveParts'];
  declare readonly localFile?: Backend['localFile'];
  declare readonly openWriter?: Backend['openWriter'];

  constructor(readonly inner: Backend) {
    const own = this as Capabilities;
    if (inner.saveParts && !this.saveParts && !overrides(this, 'save'))
      own.saveParts = (type, name, parts, options) => inner.saveParts!(type, name, parts, options);
    if (inner.openWriter && !this.openWriter && !overrides(this, 'save'))
      own.openWriter = (type, options) => inner.openWriter!(type, options);
    if (inner.localFile && !this.localFile && !overrides(this, 'load'))
      own.localFile = (type, name) => inner.localFile!(type, name);
  }

  get location(): string {
    return this.inner.location;
  }
  get writeConcurrency(): number | undefined {
    return this.inner.writeConcurrency;
  }
  save(type: ObjectType, name: string, data: Uint8Array, options?: SaveOptions): Promise<void> {
    return this.inner.save(type, name, data, options);
  }
  load(type: ObjectType, name: string, offset?: number, length?: number): Promise<Buffer> {
    return this.inner.load(type, name, offset, length);
  }
  stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    return this.inner.stat(type, name);
  }
  remove(type: ObjectType, name: string): Promise<void> {
    return this.inner.remove(type, name);
  }
  list(type: ObjectType): AsyncIterable<ObjectInfo> {
    return this.inner.list(type);
  }
  exists(): Promise<boolean> {
    return this.inner.exists();
  }
  init(): Promise<void> {
    return this.inner.init();
  }
  storeNow(): Promise<number> {
    return this.inner.storeNow ? this.inner.storeNow() : Promise.resolve(Date.now());
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Whether a class between `obj`'s own and ForwardingBackend defines `method`. */
function overrides(obj: object, method: keyof Backend): boolean {
  for (
    let p = Object.getPrototypeOf(obj);
    p && p !== ForwardingBackend.prototype;
    p = Object.getPrototypeOf(p)
  )
    if (Object.prototype.hasOwnProperty.call(p, method)) return true;
  return false;
}

/** A streamed writer that forwards to `w` but for the calls `own` gives (a wrapper's logging or check). */
export function forwardingWriter(
  w: ObjectWriter,
  own: Partial<Pick<ObjectWriter, 'write' | 'flush' | 'commit' | 'abort'>>,
): ObjectWriter {
  return {
    get size() {
      return w.size;
    },
    write: own.write ?? ((data) => w.write(data)),
    flush: own.flush ?? (() => w.flush()),
    commit: own.commit ?? ((name) => w.commit(name)),
    abort: own.abort ?? (() => w.abort()),
  };
}
