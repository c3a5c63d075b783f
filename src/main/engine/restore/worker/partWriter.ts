/**
 * Writing the pieces of restored files at their offsets (worker side), gathered into runs.
 */
import { openSync, closeSync, writeSync, constants as FS } from 'node:fs';
import { ALIGN, O_DIRECT, takeAligned } from '../../aligned.js';
import type { DecodeFailures } from '../../pool/wire.js';
import { allZero } from '../wholeFile.js';

let stagingBuf: Buffer | undefined; // reused from task to task
let alignedStaging: Buffer | undefined; // the same for runs written past the page cache, kept for good
let directRefused = false; // the target's filesystem or device said no to O_DIRECT: buffered from then on

/**
 * Writes restored blobs into files the main thread created and sized; all-zero blobs are left as holes.
 * Blobs of one decode task that follow each other in a file (a block file's blocks, packed in file order)
 * are gathered into one write, and each file is opened once per task: a restore of a 2 GiB block file at
 * 4 KiB blocks opened, wrote and closed the file 512 Ki times, two workers contending for its inode lock.
 *
 * With `direct` (the target is on a local disk), a run of DIRECT_RUN_MIN bytes or more has the whole
 * blocks it covers written past the page cache (O_DIRECT), its partial first and last block through it.
 * The run is gathered into aligned memory at the position its file offset has within a block, so that
 * memory and file line up. Writing into the page cache is most of what a restore's workers spend: in the
 * VM the bench runs in each fresh page-cache page costs the host a fault (perf: about a third of the
 * workers' time in pwrite, most of it copying into fresh pages; written directly, the same bytes cost a
 * fraction of that system time at the same speed). A block
 * written direct is written by no one else: runs never share one, and the partial blocks at their ends
 * always go through the cache.
 */
export class PartWriter {
  /** `direct`: the task's DecodeTask.direct. */
  constructor(private readonly direct = false) {}
  private fds = new Map<string, number>();
  private directFds = new Map<string, number>();
  /** Bytes written past the page cache. */
  directBytes = 0;
  private run?: {
    key: string;
    path: Uint8Array;
    offset: number;
    len: number;
    /** Where the run starts in its staging buffer: offset % ALIGN when gathered for a direct write. */
    lead: number;
    direct: boolean;
    /** The parts gathered in it (their indices in the task's batch), for their outcome. */
    slots: number[];
    failed: DecodeFailures;
  };

  /** Queues `plain` for the piece of file `path` at `offset` (part i of the task's batch); once flushed, a
   *  failure to write it lands in failed.parts. A piece longer than the room left in the run is cut at a
   *  block of the file, its rest going to the next run: the staging buffer's size bounds a run, not the
   *  largest blob. */
  add(path: Uint8Array, offset: number, plain: Buffer, failed: DecodeFailures, i: number): void {
    if (allZero(plain)) return; // a hole: the file was sized, nothing to write
    const key = Buffer.from(path.buffer, path.byteOffset, path.byteLength).toString('latin1');
    for (let done = 0; done < plain.length;) {
      let run = this.run;
      const at = offset + done;
      if (!run || run.key !== key || run.offset + run.len !== at) {
        this.flush();
        const d = this.direct && !directRefused && O_DIRECT !== undefined;
        run = this.run = {
          key,
          path,
          offset: at,
          len: 0,
          lead: d ? at % ALIGN : 0,
          direct: d,
          slots: [],
          failed,
        };
        if (d) {
          alignedStaging ??= takeAligned(ALIGNED_STAGING);
          if (!alignedStaging) {
            run.direct = false; // no aligned memory to be had: through the cache
            run.lead = 0;
          }
        }
      }
      let take = plain.length - done;
      const room = STAGING_MAX - run.len;
      if (take > room) {
        // cut where a block of the file ends: the next run's direct part then starts whole (a run with
        // something in it and less than a block of room is written first)
        take = room - ((at + room) % ALIGN);
        if (take <= 0) {
          this.flush();
          continue;
        }
      }
      const piece = plain.subarray(done, done + take);
      if (run.direct) piece.copy(alignedStaging!, run.lead + run.len);
      else {
        stagingBuf ??= Buffer.allocUnsafeSlow(STAGING_MAX); // allocated once (see compress scratchOf)
        piece.copy(stagingBuf, run.len);
      }
      run.len += take;
      done += take;
      if (run.slots[run.slots.length - 1] !== i) run.slots.push(i);
    }
  }

  /** The file's descriptor in `fds` (opened with `flags`); a few dozen stay open per task. */
  private fdOf(fds: Map<string, number>, key: string, path: Uint8Array, flags: number): number {
    let fd = fds.get(key);
    if (fd === undefined) {
      // a task's blobs may belong to many files (a night's changed blocks of many block files): a few
      // dozen stay open, the one opened first is closed for the next
      if (fds.size >= MAX_OPEN_PARTS) {
        const [oldest, ofd] = fds.entries().next().value!;
        fds.delete(oldest);
        closeSync(ofd);
      }
      fd = openSync(Buffer.from(path), flags);
      fds.set(key, fd);
    }
    return fd;
  }

  /** Writes the gathered run, if any. */
  flush(): void {
    const run = this.run;
    this.run = undefined;
    if (!run) return;
    try {
      const fd = this.fdOf(this.fds, run.key, run.path, FS.O_WRONLY | FS.O_NOFOLLOW);
      const end = run.offset + run.len;
      const bodyStart = Math.ceil(run.offset / ALIGN) * ALIGN;
      const bodyEnd = Math.floor(end / ALIGN) * ALIGN;
      if (!run.direct) {
        writeAll(fd, stagingBuf!, 0, run.len, run.offset);
        return;
      }
      if (run.len < DIRECT_RUN_MIN || bodyEnd <= bodyStart || !this.writeDirect(run, bodyStart, bodyEnd))
        writeAll(fd, alignedStaging!, run.lead, run.len, run.offset);
      else {
        writeAll(fd, alignedStaging!, run.lead, bodyStart - run.offset, run.offset);
        writeAll(fd, alignedStaging!, run.lead + (bodyEnd - run.offset), end - bodyEnd, bodyEnd);
      }
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      for (const i of run.slots) (run.failed.parts ??= []).push([i, e.message, e.code]);
    }
  }

  /** Writes [bodyStart, bodyEnd) of the run past the cache; false (nothing written) where the filesystem
   *  or device refuses direct I/O (EINVAL), and never again in this thread. Other errors are thrown. */
  private writeDirect(run: NonNullable<PartWriter['run']>, bodyStart: number, bodyEnd: number): boolean {
    try {
      const fd = this.fdOf(this.directFds, run.key, run.path, FS.O_WRONLY | FS.O_NOFOLLOW | O_DIRECT!);
      writeAll(fd, alignedStaging!, run.lead + (bodyStart - run.offset), bodyEnd - bodyStart, bodyStart);
      this.directBytes += bodyEnd - bodyStart;
      return true;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EINVAL') throw err;
      directRefused = true;
      return false;
    }
  }

  /** Writes what is left and closes the files. */
  close(): void {
    try {
      this.flush();
    } finally {
      for (const fd of this.fds.values()) closeSync(fd);
      for (const fd of this.directFds.values()) closeSync(fd);
      this.fds.clear();
      this.directFds.clear();
    }
  }
}

/** Writes buf[from, from + len) at `position`, however many calls it takes. */
function writeAll(fd: number, buf: Buffer, from: number, len: number, position: number): void {
  let done = 0;
  while (done < len) done += writeSync(fd, buf, from + done, len - done, position + done);
}

/** A run's bytes at most: what a direct write of one takes, large enough for the disk (a piece longer than
 *  that is cut into runs, see add). */
const STAGING_MAX = 2 * 1024 * 1024;
/** The aligned staging buffer: a run of STAGING_MAX bytes starting anywhere in a block (64 KiB pages). */
const ALIGNED_STAGING = STAGING_MAX + 64 * 1024;
/** Runs shorter than this go through the page cache whole: a direct write waits for the disk, which
 *  for a small file's piece costs more than the copy it saves. */
const DIRECT_RUN_MIN = 256 * 1024;
const MAX_OPEN_PARTS = 32;
