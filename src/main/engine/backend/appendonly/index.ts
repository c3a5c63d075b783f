/**
 * AppendOnlyBackend: a wrapper that lets a repository grow but never shrink or change (an append-only
 * repository, repo/immutability.ts). New objects are written; an object that exists is never written
 * over (a content-addressed name that exists already holds these bytes, so the write is skipped; a
 * config or key is refused); nothing is removed — except lock objects, which are leases for
 * coordinating writers, not history (a backup removes its own when it ends). `unlock()` (after the
 * maintenance password was checked) lets everything through: prune, forget, key changes.
 *
 * What it guarantees: no code path of a backup, a restore or a check — nor a bug in one — deletes or
 * rewrites repository data through it. What it cannot: stop a process with direct access to the folder
 * from deleting files; for that the folder must be one this computer may add to but not delete from (a
 * NAS share with such permissions, or one whose own snapshots keep history).
 */
import type { Backend, ObjectType, SaveOptions } from '../types.js';
import { ForwardingBackend, forwardingWriter } from '../forwarding.js';
import { AppendOnlyError, NotFoundError, ObjectExistsError } from '../../errors.js';

/** Named by the hash of their bytes (or random, once): an existing name holds the same object. */
const CONTENT_ADDRESSED = new Set<ObjectType>(['data', 'index', 'snapshots', 'alarms']);
/** Coordination, not history: written and removed freely. */
const FREE = new Set<ObjectType>(['locks']);

/** Reads (and `localFile`: reads pass unchanged) go on to the store; writes and removals are checked. */
export class AppendOnlyBackend extends ForwardingBackend {
  private unlocked = false;

  /** Lets deletes and rewrites through (the maintenance password was given). */
  unlock(): void {
    this.unlocked = true;
  }

  get isUnlocked(): boolean {
    return this.unlocked;
  }

  /** Whether (type, name) may be written: false when it exists and holds the same bytes by its name. */
  private async mayWrite(type: ObjectType, name: string, options?: SaveOptions): Promise<boolean> {
    if (this.unlocked || FREE.has(type) || type === 'maintenance') return true;
    try {
      await this.inner.stat(type, name);
    } catch (err) {
      if (err instanceof NotFoundError) return true;
      throw err;
    }
    if (options?.ifNotExists) throw new ObjectExistsError(`${type}/${name}`);
    if (CONTENT_ADDRESSED.has(type)) return false;
    throw new AppendOnlyError(`replacing ${type}/${name}`);
  }

  override async save(
    type: ObjectType,
    name: string,
    data: Uint8Array,
    options?: SaveOptions,
  ): Promise<void> {
    if (await this.mayWrite(type, name, options)) await this.inner.save(type, name, data, options);
  }

  /** Always offered (checked like `save`), gathered where the store can, joined where it cannot. */
  readonly saveParts: Backend['saveParts'] = async (type, name, parts, options) => {
    if (!(await this.mayWrite(type, name, options))) return;
    if (this.inner.saveParts) await this.inner.saveParts(type, name, parts, options);
    else await this.inner.save(type, name, Buffer.concat(parts), options);
  };

  /** Offered where the store has it: checked like `save` when committed (an existing pack of this name
   *  holds these bytes: the written copy is dropped instead of replacing it). */
  declare readonly openWriter?: Backend['openWriter'];

  constructor(inner: Backend) {
    super(inner);
    if (inner.openWriter) {
      const open = inner.openWriter.bind(inner);
      (this as { openWriter?: Backend['openWriter'] }).openWriter = (type, options) => {
        const w = open(type, options);
        return forwardingWriter(w, {
          commit: async (name) => {
            if (await this.mayWrite(type, name, options)) await w.commit(name);
            else await w.abort();
          },
        });
      };
    }
  }

  override async remove(type: ObjectType, name: string): Promise<void> {
    if (!this.unlocked && !FREE.has(type)) throw new AppendOnlyError(`removing ${type}/${name}`);
    await this.inner.remove(type, name);
  }
}
