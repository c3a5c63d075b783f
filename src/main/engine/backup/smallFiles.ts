/**
 * Small-file batches (main thread): files below the minimum chunk size are read, hashed and sealed by
 * one worker task per batch (up to 256 files or 4 MiB, or whatever is queued when the event loop next
 * turns), one message each way instead of several per file. Each file's blobs come back as views of the
 * batch's one sealed buffer, held in the ledger until the file saver has stored them.
 */
import type { BufferLedger, WorkerPool } from '../pool/index.js';
import { sealedBlobOf, type SmallFileResult, type SmallFilesResult, type TaskEvent } from '../pool/wire.js';
import type { Semaphore } from './limits.js';
import { show, type BackupRun } from './run.js';

interface SmallItem {
  abs: Buffer;
  size: number;
  mtimeMs: number;
  resolve: (r: SmallFileResult) => void;
  reject: (e: unknown) => void;
}

const BATCH_FILES = 256;
const BATCH_BYTES = 4 * 1024 * 1024;

export class SmallFileBatches {
  private queue: SmallItem[] = [];
  private bytes = 0;
  private flushScheduled = false;

  constructor(
    private readonly run: BackupRun,
    private readonly pool: WorkerPool,
    private readonly ledger: BufferLedger,
    /** Slots of tasks in flight, shared with the large files' tasks. */
    private readonly taskSlots: Semaphore,
    private readonly onEvent: (ev: TaskEvent) => Promise<unknown>,
  ) {}

  /** Reads a small file in the next batch; its blobs (if any) are held in the ledger for the caller. */
  read(abs: Buffer, size: number, mtimeMs: number): Promise<SmallFileResult> {
    return new Promise<SmallFileResult>((resolve, reject) => {
      this.queue.push({ abs, size, mtimeMs, resolve, reject });
      this.bytes += size;
      if (this.queue.length >= BATCH_FILES || this.bytes >= BATCH_BYTES) this.flush();
      else if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flush);
      }
    });
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    const batch = this.queue;
    this.queue = [];
    this.bytes = 0;
    if (!batch.length) return;
    void this.runBatch(batch);
  };

  private async runBatch(batch: SmallItem[]): Promise<void> {
    const { run, ledger } = this;
    await this.taskSlots.take();
    await run.opts.pauseGate?.wait(); // paused: start nothing new
    try {
      run.progress.currentFile = show(batch[batch.length - 1].abs);
      const r = await this.pool.run<SmallFilesResult>(
        {
          op: 'backupSmallFiles',
          files: batch.map((b) => ({ path: run.view.read(b.abs), size: b.size, mtimeMs: b.mtimeMs })),
        },
        this.onEvent,
      );
      const sealed = r.sealed;
      batch.forEach((b, i) => {
        const f = r.files[i];
        // the file's blobs, as views of the task's one sealed buffer, held until the file saver stored them
        if (!f.error && f.blobRefs?.length && sealed) {
          f.blobs = f.blobRefs.map((k) => sealedBlobOf(sealed, k));
          ledger.hold(sealed.data.buffer);
        }
        b.resolve(f);
      });
    } catch (err) {
      batch.forEach((b) => b.reject(err));
    } finally {
      this.taskSlots.give();
    }
  }
}
