/**
 * Writing an object into a folder as it is made (Backend.openWriter): a backup's data pack goes to disk
 * while it fills, instead of being gathered whole in memory (~20 MiB a pack) and written at the end.
 *
 * The bytes are copied into small stages (1 MiB, aligned: ../../aligned.ts) taken from a pool the
 * folder's writers share; a full stage is handed to the disk at its offset in a temporary file while
 * the next one fills (two writes may be in flight), so what a backup holds for its packs is bounded by
 * the pool (`inFlightBytes`), not by the pack size. Where the folder is on a local disk's filesystem the
 * stages are written past the page cache (O_DIRECT, as ./direct.ts decides; the last one padded to the
 * block and the file cut back), else through it. `commit` syncs the file and renames it to the object's
 * name, then syncs the folder: as ./index.ts saves, a pack is visible under its name only when whole.
 *
 * The temporary file is `data/.tmp-w-<random>` (its final folder is known only from its name, at the
 * end): listings skip dot files, so it is never taken for a pack. A failed or abandoned writer removes
 * it; after a crash, prune removes those older than its grace period (LocalBackend.removeLeftovers).
 */
import fs from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import type { ObjectType, ObjectWriter, SaveOptions, WriterOptions } from '../types.js';
import { ALIGN, O_DIRECT, alignedAt, giveAligned, takeAligned } from '../../aligned.js';
import { DirectUnsupported, writeAt } from './direct.js';

/** One stage: the unit of a direct write (4 MiB ones were no faster in ./direct.ts). */
export const STREAM_STAGE = 1024 * 1024;
/** The pool's default: two writers (one pack filling, one being finished) double-buffered. */
export const DEFAULT_IN_FLIGHT_BYTES = 4 * STREAM_STAGE;
/** The prefix of a streamed object's temporary file (LocalBackend.removeLeftovers looks for it). */
export const TEMP_PREFIX = '.tmp-';

/** Stages shared by a folder's writers; `take` waits while `capacity` of them are out. */
export class StagePool {
  private capacity = DEFAULT_IN_FLIGHT_BYTES / STREAM_STAGE;
  private readonly free: Buffer[] = [];
  private out = 0;
  private readonly waiters: ((b: Buffer) => void)[] = [];

  /** Stages out now (filling or being written), for tests and figures. */
  get inUse(): number {
    return this.out;
  }

  setCapacity(bytes: number): void {
    this.capacity = Math.max(1, Math.floor(bytes / STREAM_STAGE));
    while (this.waiters.length && this.out < this.capacity) this.waiters.shift()!(this.grab());
  }

  take(): Buffer | Promise<Buffer> {
    if (this.out < this.capacity && !this.waiters.length) return this.grab();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  give(b: Buffer): void {
    this.out--;
    this.free.push(b);
    while (this.waiters.length && this.out < this.capacity) this.waiters.shift()!(this.grab());
  }

  /** Hands the kept stages back to ../../aligned.ts (their pages are released there). */
  close(): void {
    for (const b of this.free.splice(0)) if (alignedAt(b)) giveAligned(b, 8);
  }

  private grab(): Buffer {
    this.out++;
    // aligned memory where it can be had; without it the stage is written through the page cache
    return this.free.pop() ?? takeAligned(STREAM_STAGE) ?? Buffer.allocUnsafeSlow(STREAM_STAGE);
  }
}

/** What the folder backend lends its writers. */
export interface WriterHost {
  readonly pool: StagePool;
  /** The folder a temporary file goes in (created if missing). */
  tempDir(): Promise<string>;
  /** Whether direct I/O is used here (asked once per folder; false from the first refusal on). */
  directWanted(): Promise<boolean>;
  refuseDirect(): void;
  /** Puts the synced temporary file `tmp` in place as `name` and syncs its folder (as a whole save does:
   *  renamed, or linked with `ifNotExists`; not synced when ephemeral). */
  place(tmp: string, name: string, options: SaveOptions): Promise<void>;
  /** Translates an error into the backend's named ones (full, unwritable). */
  translate(err: unknown, what: string): unknown;
  /** A writer that wrote every byte past the page cache committed (for figures and tests). */
  committedDirect(): void;
}

export class LocalWriter implements ObjectWriter {
  size = 0;
  private stage?: Buffer;
  private fill = 0;
  /** File offset of the stage filling now. */
  private pos = 0;
  /** Writes waiting for a stage, in call order. */
  private queue?: Promise<void>;
  private readonly inFlight = new Set<Promise<void>>();
  private error?: unknown;
  private tmp?: string;
  private opened?: Promise<fs.FileHandle>;
  private buffered?: Promise<fs.FileHandle>;
  private direct = false;
  private allDirect = true;
  private padded = false;
  private flushed = false;
  private finished?: Promise<void>;
  private closed = false;

  constructor(
    private readonly host: WriterHost,
    private readonly type: ObjectType,
    private readonly options: WriterOptions = {},
  ) {}

  write(data: Uint8Array): Promise<void> | undefined {
    if (this.error) return Promise.reject(this.error);
    if (this.flushed || this.finished) return Promise.reject(new Error('write after flush'));
    this.size += data.length;
    const r = this.queue ? this.queue.then(() => this.copy(data, 0)) : this.copy(data, 0);
    if (!r) return undefined;
    this.queue = r;
    const clear = () => {
      if (this.queue === r) this.queue = undefined;
    };
    r.then(clear, clear);
    return r;
  }

  /** Copies `data` from `off` into stages; returns a promise when it has to wait for one. */
  private copy(data: Uint8Array, off: number): Promise<void> | undefined {
    if (this.error) throw this.error;
    while (off < data.length) {
      if (!this.stage) {
        const s = this.host.pool.take();
        if (s instanceof Promise)
          return s.then((stage) => {
            if (this.error) {
              this.host.pool.give(stage);
              throw this.error;
            }
            this.stage = stage;
            return this.copy(data, off);
          });
        this.stage = s;
      }
      const n = Math.min(STREAM_STAGE - this.fill, data.length - off);
      this.stage.set(data.subarray(off, off + n), this.fill);
      this.fill += n;
      off += n;
      if (this.fill === STREAM_STAGE) this.sealStage();
    }
    return undefined;
  }

  /** Hands the filled stage to the disk (after `observe` has seen it) and moves on. */
  private sealStage(): void {
    const stage = this.stage!;
    const len = this.fill;
    const pos = this.pos;
    this.stage = undefined;
    this.fill = 0;
    this.pos += len;
    this.options.observe?.(stage.subarray(0, len));
    const p: Promise<void> = this.writeStage(stage, len, pos)
      .catch((err) => this.fail(err))
      .finally(() => {
        this.host.pool.give(stage);
        this.inFlight.delete(p);
      });
    this.inFlight.add(p);
  }

  private open(): Promise<fs.FileHandle> {
    if (this.closed) return Promise.reject(new Error('writer closed'));
    this.opened ??= (async () => {
      const dir = await this.host.tempDir();
      this.tmp = path.join(dir, `${TEMP_PREFIX}w-${crypto.randomBytes(8).toString('hex')}`);
      const flags = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL;
      if (O_DIRECT !== undefined && (await this.host.directWanted())) {
        try {
          const fh = await fs.open(this.tmp, flags | O_DIRECT, 0o600);
          this.direct = true;
          return fh;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
          this.host.refuseDirect();
        }
      }
      this.allDirect = false;
      return fs.open(this.tmp, flags, 0o600);
    })();
    return this.opened;
  }

  /** A handle through the page cache: the file's own when opened so, else a second one. */
  private async bufferedHandle(): Promise<fs.FileHandle> {
    const fh = await this.open();
    if (!this.direct) return fh;
    this.buffered ??= fs.open(this.tmp!, fsConstants.O_WRONLY);
    return this.buffered;
  }

  private async writeStage(stage: Buffer, len: number, pos: number): Promise<void> {
    const fh = await this.open();
    if (this.direct && alignedAt(stage) && pos % ALIGN === 0) {
      const padded = Math.ceil(len / ALIGN) * ALIGN;
      if (padded !== len) {
        stage.fill(0, len, padded);
        this.padded = true;
      }
      try {
        await writeAt(fh, stage, padded, pos);
        return;
      } catch (err) {
        // this filesystem does not do direct I/O after all: this stage and the rest through the cache
        if (!(err instanceof DirectUnsupported)) throw err;
        this.direct = false;
        this.host.refuseDirect();
      }
    }
    this.allDirect = false;
    await writeAt(await this.bufferedHandle(), stage, len, pos, false);
  }

  private fail(err: unknown): void {
    if (this.error) return;
    this.error = this.host.translate(err, this.type === 'data' ? 'a new pack' : `a new ${this.type} object`);
    void this.abort();
  }

  private async settle(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  async flush(): Promise<void> {
    if (this.error) throw this.error;
    this.flushed = true;
    if (this.queue) await this.queue;
    if (this.stage) {
      if (this.fill) this.sealStage();
      else {
        this.host.pool.give(this.stage);
        this.stage = undefined;
      }
    }
    try {
      await this.open(); // an empty object is a file too
    } catch (err) {
      this.fail(err);
    }
    await this.settle();
    if (this.error) throw this.error;
  }

  async commit(name: string): Promise<void> {
    if (this.error) throw this.error;
    if (!this.flushed || this.queue || this.inFlight.size) throw new Error('commit before flush');
    if (this.finished) throw new Error('writer already finished');
    let done!: () => void;
    this.finished = new Promise<void>((resolve) => (done = resolve));
    try {
      const fh = await this.open();
      try {
        if (this.padded) await fh.truncate(this.size);
        if (!this.options.ephemeral) await fh.sync();
      } finally {
        await this.closeHandles();
      }
      await this.host.place(this.tmp!, name, this.options);
      if (this.allDirect && this.size > 0) this.host.committedDirect();
    } catch (err) {
      this.error = this.host.translate(err, `${this.type}/${name}`);
      await fs.rm(this.tmp!, { force: true }).catch(() => {});
      throw this.error;
    } finally {
      done();
    }
  }

  private async closeHandles(): Promise<void> {
    this.closed = true;
    for (const h of [this.opened, this.buffered]) {
      const fh = await h?.catch(() => undefined);
      await fh?.close().catch(() => {});
    }
  }

  abort(): Promise<void> {
    if (this.finished) return this.finished;
    this.error ??= new Error('writer aborted');
    let done!: () => void;
    this.finished = new Promise<void>((resolve) => (done = resolve));
    void (async () => {
      try {
        await this.settle();
        if (this.stage) {
          this.host.pool.give(this.stage);
          this.stage = undefined;
        }
        const opened = this.opened;
        await this.closeHandles();
        if (opened && this.tmp) await fs.rm(this.tmp, { force: true }).catch(() => {});
      } finally {
        done();
      }
    })();
    return this.finished;
  }
}
