/**
 * A fault-injecting wrapper around any backend, for tests of retries, crashes and full disks.
 * A rule decides, per operation, whether to fail it (throw), truncate a read, or delay it.
 * Rules are plain data plus an optional predicate so tests read as declarations.
 */
import type { Backend, ObjectInfo, ObjectType, SaveOptions } from '../types.js';
import { ForwardingBackend } from '../forwarding.js';

export type Operation = 'save' | 'load' | 'stat' | 'remove' | 'list';

export interface FaultRule {
  op?: Operation | Operation[];
  type?: ObjectType | ObjectType[];
  /** Only affect the n-th matching call (1-based) and later ones when `times` allows. */
  after?: number;
  /** How many matching calls to affect (default: all). */
  times?: number;
  /** What to do: throw the error, cut a read short, or wait before going on. */
  effect: { throw: () => Error } | { truncate: number } | { delayMs: number } | { dropAfterSave: true };
  when?: (op: Operation, type: ObjectType, name: string) => boolean;
}

function matches<T>(sel: T | T[] | undefined, v: T): boolean {
  if (sel === undefined) return true;
  return Array.isArray(sel) ? sel.includes(v) : sel === v;
}

/** Its reads may fail or come back short, so `localFile` (reads past it) is not offered; nor `saveParts`. */
export class FaultyBackend extends ForwardingBackend {
  private readonly counts = new Map<FaultRule, number>();
  private readonly applied = new Map<FaultRule, number>();
  /** Number of calls per operation, for assertions. */
  readonly calls: Record<Operation, number> = { save: 0, load: 0, stat: 0, remove: 0, list: 0 };

  constructor(
    inner: Backend,
    public rules: FaultRule[] = [],
  ) {
    super(inner);
  }

  private async check(
    op: Operation,
    type: ObjectType,
    name: string,
  ): Promise<FaultRule['effect'] | undefined> {
    this.calls[op]++;
    for (const rule of this.rules) {
      if (!matches(rule.op, op) || !matches(rule.type, type)) continue;
      if (rule.when && !rule.when(op, type, name)) continue;
      const n = (this.counts.get(rule) ?? 0) + 1;
      this.counts.set(rule, n);
      if (rule.after !== undefined && n < rule.after) continue;
      const used = this.applied.get(rule) ?? 0;
      if (rule.times !== undefined && used >= rule.times) continue;
      this.applied.set(rule, used + 1);
      const effect = rule.effect;
      if ('throw' in effect) throw effect.throw();
      if ('delayMs' in effect) {
        await new Promise((r) => setTimeout(r, effect.delayMs));
        continue;
      }
      return effect;
    }
    return undefined;
  }

  override async save(
    type: ObjectType,
    name: string,
    data: Uint8Array,
    options?: SaveOptions,
  ): Promise<void> {
    const effect = await this.check('save', type, name);
    await this.inner.save(type, name, data, options);
    if (effect && 'dropAfterSave' in effect)
      throw Object.assign(new Error('connection reset after save'), { code: 'ECONNRESET' });
  }

  override async load(type: ObjectType, name: string, offset?: number, length?: number): Promise<Buffer> {
    const effect = await this.check('load', type, name);
    const buf = await this.inner.load(type, name, offset, length);
    if (effect && 'truncate' in effect) return buf.subarray(0, Math.max(0, buf.length - effect.truncate));
    return buf;
  }

  override async stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    await this.check('stat', type, name);
    return this.inner.stat(type, name);
  }

  override async remove(type: ObjectType, name: string): Promise<void> {
    await this.check('remove', type, name);
    return this.inner.remove(type, name);
  }

  override async *list(type: ObjectType): AsyncIterable<ObjectInfo> {
    await this.check('list', type, '');
    yield* this.inner.list(type);
  }
}
