/**
 * Local-folder backend (a USB drive, a NAS mount, a folder). Layout:
 *   config/config, keys/<id>, data/<2 hex>/<id>, index/<id>, snapshots/<id>, locks/<id>
 * Writes go to a temporary file in the same folder, are fsynced, then renamed into place and the
 * folder fsynced, so a crash or a full disk never leaves a half-written object under its real name.
 * Data packs may be written as they fill (openWriter, ./stream.ts: a temporary file in data/, renamed
 * to the pack's hash at the end). Temporary files start with a dot, which listings skip; a crash's are
 * removed by prune (removeLeftovers).
 * Ephemeral objects (locks) skip both fsyncs: after a crash of this computer a lock of its is stale
 * anyway, and a damaged one is ignored by readers (lock.ts listLocks).
 * Errors are translated: ENOSPC → DestinationFullError, EACCES/EROFS → DestinationUnwritableError.
 */
import fs from 'node:fs/promises';
import { constants as fsConstants } from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import type { Backend, ObjectInfo, ObjectType, ObjectWriter, SaveOptions, WriterOptions } from '../types.js';
import { OBJECT_TYPES } from '../types.js';
import { takeBuffer } from '../../bufferPool.js';
import { DIRECT_MIN_BYTES, DirectUnsupported, writePartsDirect } from './direct.js';
import { DEFAULT_IN_FLIGHT_BYTES, LocalWriter, StagePool, TEMP_PREFIX, type WriterHost } from './stream.js';
import { O_DIRECT, directIoFilesystem } from '../../aligned.js';
import {
  DestinationFullError,
  DestinationUnwritableError,
  NotFoundError,
  ObjectExistsError,
} from '../../errors.js';

function translate(err: unknown, what: string): unknown {
  const e = err as NodeJS.ErrnoException;
  if (e?.code === 'ENOSPC' || e?.code === 'EDQUOT')
    return new DestinationFullError(
      `the destination is full while writing ${what} (free some space and run again)`,
      { cause: err },
    );
  if (e?.code === 'EACCES' || e?.code === 'EPERM' || e?.code === 'EROFS')
    return new DestinationUnwritableError(
      `the destination cannot be written (${e.code}) while writing ${what}`,
      { cause: err },
    );
  return err;
}

/** Writes buffers in order with as few writev calls as the kernel allows (it may write less than asked). */
async function writeAll(fh: fs.FileHandle, parts: readonly Uint8Array[]): Promise<void> {
  let rest = parts.filter((p) => p.length > 0);
  while (rest.length) {
    // at most 1024 buffers per call (IOV_MAX on Linux)
    const batch = rest.slice(0, 1024);
    let { bytesWritten: n } = await fh.writev(batch);
    let i = 0;
    while (i < batch.length && n >= batch[i].length) n -= batch[i++].length;
    rest = rest.slice(i);
    if (n > 0) rest[0] = rest[0].subarray(n); // partly written
  }
}

/** Packs a backup writes into a folder at once (see LocalBackend.writeConcurrency). */
export const FOLDER_PACK_WRITES = 1;

export class LocalBackend implements Backend {
  readonly location: string;
  /** One pack written at a time: a disk gains nothing from more, and each pack waiting to be written
   *  holds its buffer (repo/pack.ts: ~17 MB; two at a time were no faster and only raised peak RSS). */
  readonly writeConcurrency = FOLDER_PACK_WRITES;
  private readonly root: string;
  private readonly madeDirs = new Set<string>();
  /** Whether packs are written past the page cache (./direct.ts): asked of the repository's filesystem at
   *  the first pack, and false from the first refusal on. */
  private direct: boolean | undefined;
  /** Objects written with direct I/O (for tests and figures). */
  directWrites = 0;
  /** The stages of streamed writes (openWriter), shared by all of them: their bytes in flight. */
  readonly stages = new StagePool();
  private readonly writerHost: WriterHost = {
    pool: this.stages,
    tempDir: async () => {
      const dir = path.join(this.root, 'data');
      await this.ensureDir(dir);
      return dir;
    },
    directWanted: async () => (this.direct ??= await directIoFilesystem(this.root)),
    refuseDirect: () => {
      this.direct = false;
    },
    place: (tmp, name, options) => this.place(tmp, 'data', name, options),
    translate,
    committedDirect: () => {
      this.directWrites++;
    },
  };

  constructor(root: string) {
    this.root = path.resolve(root);
    this.location = this.root;
  }

  private dirOf(type: ObjectType, name: string): string {
    if (type === 'data') return path.join(this.root, 'data', name.slice(0, 2));
    return path.join(this.root, type);
  }

  private pathOf(type: ObjectType, name: string): string {
    if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith('.'))
      throw new Error(`invalid object name ${JSON.stringify(name)}`);
    return path.join(this.dirOf(type, name), name);
  }

  private async ensureDir(dir: string): Promise<void> {
    if (this.madeDirs.has(dir)) return;
    await fs.mkdir(dir, { recursive: true });
    this.madeDirs.add(dir);
  }

  save(type: ObjectType, name: string, data: Uint8Array, options?: SaveOptions): Promise<void> {
    return this.saveWith(type, name, (fh) => fh.writeFile(data), options);
  }

  /** A pack as its blobs: one gathered write (writev) instead of a concatenated copy in memory. */
  async saveParts(
    type: ObjectType,
    name: string,
    parts: readonly Uint8Array[],
    options?: SaveOptions,
  ): Promise<void> {
    let total = 0;
    for (const p of parts) total += p.length;
    if (total >= DIRECT_MIN_BYTES) this.direct ??= await directIoFilesystem(this.root);
    if (this.direct && total >= DIRECT_MIN_BYTES) {
      try {
        await this.saveWith(type, name, (fh) => writePartsDirect(fh, parts), options, O_DIRECT);
        this.directWrites++;
        return;
      } catch (err) {
        // this filesystem (or this memory) does not do direct I/O: through the page cache from now on
        if (!(err instanceof DirectUnsupported) && (err as NodeJS.ErrnoException).code !== 'EINVAL')
          throw err;
        this.direct = false;
      }
    }
    return this.saveWith(type, name, (fh) => writeAll(fh, parts), options);
  }

  /**
   * A data pack written as it fills (./stream.ts), holding a few 1 MiB stages instead of the pack; other
   * objects are small and saved whole.
   */
  openWriter(type: ObjectType, options?: WriterOptions): ObjectWriter {
    if (type !== 'data') throw new Error(`streamed writes are for packs, not ${type}`);
    this.stages.setCapacity(options?.inFlightBytes ?? DEFAULT_IN_FLIGHT_BYTES);
    return new LocalWriter(this.writerHost, type, options);
  }

  /**
   * Removes temporary files (a crash's half-written objects) last modified before `before` (ms since the
   * epoch); returns how many. Only prune calls it, under the exclusive lock and with its grace period,
   * so no running writer's file is touched.
   */
  async removeLeftovers(before: number): Promise<number> {
    const dirs = OBJECT_TYPES.map((t) => path.join(this.root, t));
    try {
      for (const s of await fs.readdir(path.join(this.root, 'data')))
        if (!s.startsWith('.')) dirs.push(path.join(this.root, 'data', s));
    } catch {
      // no data folder: nothing there to remove
    }
    let removed = 0;
    for (const dir of dirs) {
      let names: string[];
      try {
        names = await fs.readdir(dir);
      } catch {
        continue;
      }
      for (const n of names) {
        if (!n.startsWith(TEMP_PREFIX)) continue;
        const p = path.join(dir, n);
        try {
          const st = await fs.lstat(p);
          if (!st.isFile() || st.mtimeMs >= before) continue;
          await fs.unlink(p);
          removed++;
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT')
            throw translate(err, `${path.basename(dir)}/${n}`);
        }
      }
    }
    return removed;
  }

  private async saveWith(
    type: ObjectType,
    name: string,
    write: (fh: fs.FileHandle) => Promise<void>,
    options?: SaveOptions,
    extraFlags = 0,
  ): Promise<void> {
    const dir = path.dirname(this.pathOf(type, name));
    const tmp = path.join(dir, `${TEMP_PREFIX}${name}-${crypto.randomBytes(6).toString('hex')}`);
    try {
      await this.ensureDir(dir);
      const fh = await fs.open(
        tmp,
        fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | extraFlags,
        0o600,
      );
      try {
        await write(fh);
        if (!options?.ephemeral) await fh.sync();
      } finally {
        await fh.close();
      }
      await this.place(tmp, type, name, options);
    } catch (err) {
      await fs.rm(tmp, { force: true }).catch(() => {});
      throw translate(err, `${type}/${name}`);
    }
  }

  /**
   * Puts a written, synced temporary file in place under `type/name` (its folder made if missing) and
   * syncs the folder: renamed, or with `ifNotExists` linked (link() fails with EEXIST when the name is
   * taken: an atomic create-if-absent) and the temporary name removed. Errors are not translated.
   */
  private async place(tmp: string, type: ObjectType, name: string, options?: SaveOptions): Promise<void> {
    const final = this.pathOf(type, name);
    const dir = path.dirname(final);
    await this.ensureDir(dir);
    if (options?.ifNotExists) {
      try {
        await fs.link(tmp, final);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new ObjectExistsError(`${type}/${name}`);
        throw err;
      } finally {
        await fs.rm(tmp, { force: true });
      }
    } else await fs.rename(tmp, final);
    if (!options?.ephemeral) await this.syncDir(dir);
  }

  private async syncDir(dir: string): Promise<void> {
    let fh: fs.FileHandle | undefined;
    try {
      fh = await fs.open(dir, fsConstants.O_RDONLY | fsConstants.O_DIRECTORY);
      await fh.sync();
    } catch {
      // Some filesystems (e.g. certain network mounts) refuse fsync on directories; the rename is still atomic.
    } finally {
      await fh?.close();
    }
  }

  localFile(type: ObjectType, name: string): string {
    return this.pathOf(type, name);
  }

  async load(type: ObjectType, name: string, offset = 0, length?: number): Promise<Buffer> {
    const p = this.pathOf(type, name);
    let fh: fs.FileHandle;
    try {
      fh = await fs.open(p, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError(`${type}/${name}`);
      throw err;
    }
    try {
      if (length === undefined) {
        const size = (await fh.stat()).size;
        length = Math.max(0, size - offset);
      }
      const buf = takeBuffer(length); // a reused buffer for large ranges (see bufferPool.ts)
      let done = 0;
      while (done < length) {
        const { bytesRead } = await fh.read(buf, done, length - done, offset + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
      return done === length ? buf : buf.subarray(0, done);
    } finally {
      await fh.close();
    }
  }

  async stat(type: ObjectType, name: string): Promise<ObjectInfo> {
    try {
      const st = await fs.stat(this.pathOf(type, name));
      return { name, size: st.size };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new NotFoundError(`${type}/${name}`);
      throw err;
    }
  }

  async remove(type: ObjectType, name: string): Promise<void> {
    try {
      await fs.unlink(this.pathOf(type, name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw translate(err, `${type}/${name}`);
    }
  }

  async *list(type: ObjectType): AsyncIterable<ObjectInfo> {
    const base = path.join(this.root, type);
    const dirs: string[] = [];
    if (type === 'data') {
      let subs: string[];
      try {
        subs = await fs.readdir(base);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw err;
      }
      // skipping the temporary files of streamed packs (./stream.ts) that sit beside the folders
      for (const s of subs.sort()) if (!s.startsWith('.')) dirs.push(path.join(base, s));
    } else {
      dirs.push(base);
    }
    for (const dir of dirs) {
      let entries: import('node:fs').Dirent[];
      try {
        entries = await fs.readdir(dir, { withFileTypes: true });
      } catch (err) {
        if (
          (err as NodeJS.ErrnoException).code === 'ENOENT' ||
          (err as NodeJS.ErrnoException).code === 'ENOTDIR'
        )
          continue;
        throw err;
      }
      for (const e of entries) {
        if (!e.isFile() || e.name.startsWith('.')) continue;
        try {
          const st = await fs.stat(path.join(dir, e.name));
          yield { name: e.name, size: st.size, modified: st.mtimeMs };
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        }
      }
    }
  }

  async exists(): Promise<boolean> {
    try {
      await fs.access(path.join(this.root, 'config', 'config'));
      return true;
    } catch {
      return false;
    }
  }

  async init(): Promise<void> {
    try {
      for (const t of OBJECT_TYPES) await this.ensureDir(path.join(this.root, t));
    } catch (err) {
      throw translate(err, 'the repository folders');
    }
  }

  async close(): Promise<void> {
    this.stages.close();
  }

  /** A folder has no clock of its own worth asking (a network share's times are close enough): ours. */
  async storeNow(): Promise<number> {
    return Date.now();
  }
}
