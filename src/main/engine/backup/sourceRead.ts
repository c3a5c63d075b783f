/**
 * Reading large source files past the page cache (O_DIRECT, Linux): from start to end (SourceReader),
 * or a block file's blocks at their positions (BlockSource).
 *
 * A full backup reads gigabytes the user will not open again soon. Read through the page cache they
 * push the user's own working set out of memory (the PC feels slow after a backup) and cost the kernel
 * a page allocation and a copy per page; on a VM whose freed memory goes back to the host, a fault on
 * the host as well: read directly, a large file costs a small fraction of that system time.
 *
 * Direct reads go 1 MiB at a time, at 1 MiB offsets, into an aligned buffer (../aligned.ts), and are
 * copied out to the caller (4 MiB stages were no faster and held more memory); a caller whose buffer is
 * aligned itself gets them there directly (readAligned). Only on local disk
 * filesystems (../aligned.ts, directIoFilesystem): a source on a NAS share is read through the cache. After a full backup
 * only the small files sit in the page cache, and the backup takes less system time (docs/performance.md).
 * Where the platform has no O_DIRECT, the filesystem refuses it (EINVAL: some
 * network and FUSE filesystems) or aligned memory cannot be had, the file is read through the page
 * cache as before. Dirty pages of a file being written are written back by the kernel before a direct
 * read of them, so what is read is what a buffered read would return.
 */
import fs from 'node:fs/promises';
import { ALIGN, O_DIRECT, directIoFilesystem, giveAligned, releaseAligned, takeAligned } from '../aligned.js';

/** Files smaller than this are read through the page cache (one or two reads: not worth a stage). */
export const DIRECT_READ_MIN_BYTES = 4 * 1024 * 1024;
const STAGE = 1024 * 1024;
const READ_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW;

/** Opens a source file (never following a final symlink): direct when it is large, on a local disk's
 *  filesystem and the filesystem accepts it, else through the page cache. */
async function openSource(path: Buffer, size: number): Promise<{ fh: fs.FileHandle; direct: boolean }> {
  if (O_DIRECT !== undefined && size >= DIRECT_READ_MIN_BYTES && (await directIoFilesystem(path))) {
    try {
      return { fh: await fs.open(path, READ_FLAGS | O_DIRECT), direct: true };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
    }
  }
  return { fh: await fs.open(path, READ_FLAGS), direct: false };
}

/** The file opened again through the page cache (direct reads were refused or cannot be done); the
 *  direct handle is closed. */
async function reopenBuffered(path: Buffer, direct: fs.FileHandle): Promise<fs.FileHandle> {
  const fresh = await fs.open(path, READ_FLAGS);
  await direct.close().catch(() => {});
  return fresh;
}

export class SourceReader {
  private stage: Buffer | undefined;
  private from = 0; // first unread byte in stage
  private to = 0; // end of the data in stage
  private pos = 0; // file offset of the next direct read
  private ended = false;
  /** After a switch from direct reads: where buffered reads go on (else the file position is used). */
  private resumeAt: number | null = null;

  private constructor(
    private fh: fs.FileHandle,
    private readonly path: Buffer,
    stage: Buffer | undefined,
  ) {
    this.stage = stage;
  }

  /** Opens `path` (never following a final symlink); direct when it is large and the platform allows. */
  static async open(path: Buffer, size: number): Promise<SourceReader> {
    const { fh, direct } = await openSource(path, size);
    if (!direct) return new SourceReader(fh, path, undefined);
    const stage = takeAligned(STAGE);
    return stage
      ? new SourceReader(fh, path, stage)
      : new SourceReader(await reopenBuffered(path, fh), path, undefined);
  }

  /** Whether reads bypass the page cache. */
  get direct(): boolean {
    return this.stage !== undefined;
  }

  /** Reads the next bytes of the file (up to `length`) into `into` at `offset`; 0 at the end. */
  async read(into: Buffer, offset: number, length: number): Promise<number> {
    if (!this.stage) {
      const { bytesRead } = await this.fh.read(into, offset, length, this.resumeAt);
      if (this.resumeAt !== null) this.resumeAt += bytesRead;
      return bytesRead;
    }
    if (this.from === this.to) {
      if (this.ended) return 0;
      let n: number;
      try {
        ({ bytesRead: n } = await this.fh.read(this.stage, 0, this.stage.length, this.pos));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
        // this filesystem opens files for direct I/O but does not read them so: on through the cache
        await this.switchToBuffered();
        return this.read(into, offset, length);
      }
      this.pos += n;
      this.from = 0;
      this.to = n;
      // a direct read stops short only at the end of the file (an unaligned end, or nothing left)
      if (n === 0 || n % ALIGN !== 0) this.ended = true;
      if (n === 0) return 0;
    }
    const k = Math.min(length, this.to - this.from);
    this.stage.copy(into, offset, this.from, this.from + k);
    this.from += k;
    return k;
  }

  /**
   * Like read, into memory the caller took from takeAligned (../aligned.ts): where `offset` is a multiple
   * of ALIGN and the stage is empty, a direct read lands there (up to `length` rounded down to a multiple
   * of ALIGN), with no copy out of the stage. Otherwise large files' bytes are copied once more (perf: a
   * noticeable share of a full backup's CPU in memmove, Buffer.copy from SourceReader.read).
   */
  async readAligned(into: Buffer, offset: number, length: number): Promise<number> {
    if (!this.stage || this.from !== this.to || offset % ALIGN !== 0 || length < ALIGN)
      return this.read(into, offset, length);
    if (this.ended) return 0;
    let n: number;
    try {
      ({ bytesRead: n } = await this.fh.read(into, offset, length - (length % ALIGN), this.pos));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
      await this.switchToBuffered();
      return this.read(into, offset, length);
    }
    this.pos += n;
    if (n === 0 || n % ALIGN !== 0) this.ended = true;
    return n;
  }

  private async switchToBuffered(): Promise<void> {
    this.fh = await reopenBuffered(this.path, this.fh);
    if (this.stage) giveAligned(this.stage);
    this.stage = undefined;
    // the bytes handed out so far end where the data still in the stage begins
    this.resumeAt = this.pos - (this.to - this.from);
  }

  stat(opts: { bigint: true }) {
    return this.fh.stat(opts);
  }

  async close(): Promise<void> {
    if (this.stage) giveAligned(this.stage);
    this.stage = undefined;
    await this.fh.close();
  }
}

/**
 * The file a block file's blocks are read from (a VM disk, a database), all of them or the changed
 * ones, at positions. Past the page cache like SourceReader — a first backup of a 40 GB VM disk read
 * through the cache would push the user's working set out of memory, and scattered reads of a few of a
 * file's pages cost less system time direct than through the cache (`npm run bench:cbt`) — into
 * aligned buffers it hands out; through the cache where that cannot be, or after a refused read.
 */
export class BlockSource {
  private readonly aligned = new Set<Buffer>();
  private constructor(
    public fh: fs.FileHandle,
    public direct: boolean,
    private readonly path: Buffer,
  ) {}

  static async open(path: Buffer, size: number): Promise<BlockSource> {
    const { fh, direct } = await openSource(path, size);
    return new BlockSource(fh, direct, path);
  }

  /** A buffer to read into: aligned while reads are direct (a plain one when no aligned memory can be
   *  had — the read is then refused and the caller goes on through the cache). */
  readBuffer(size: number): Buffer {
    if (this.direct && process.env.TIDEMARK_TEST_UNALIGNED_READS === '1') {
      // tests: an odd address, which the kernel refuses direct reads into (EINVAL) — the way some
      // filesystems refuse direct reads of files they opened for direct I/O
      return Buffer.allocUnsafeSlow(size + 1).subarray(1);
    }
    const b = this.direct ? takeAligned(size) : undefined;
    if (!b) return Buffer.allocUnsafeSlow(size);
    this.aligned.add(b);
    return b;
  }

  giveBuffer(b: Buffer): void {
    if (!this.aligned.delete(b)) return;
    releaseAligned(b); // kept, but not resident until the next block file (a few faults in huge pages)
    giveAligned(b);
  }

  /** Goes on through the page cache (the filesystem refused a direct read). */
  async toBuffered(): Promise<void> {
    this.fh = await reopenBuffered(this.path, this.fh);
    this.direct = false;
  }

  close(): Promise<void> {
    return this.fh.close();
  }
}
