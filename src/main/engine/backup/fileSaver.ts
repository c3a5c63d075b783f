/**
 * The file saver (main thread): one changed or new file read into the repository by the workers. A small
 * file (below the minimum chunk size) goes into a batch (./smallFiles.ts) and its one blob is stored if new;
 * a large one is one task (several for a whole block file: stripes, one per worker), given the changed
 * ranges when block tracking has them (./incremental.ts), its new chunks stored as the worker sends them
 * (./sealer.ts) and a block file's list saved (./blockLists.ts). Tasks in flight are bounded (two per
 * worker), and so are small files waiting in batches: backpressure reaches the walk.
 * Guarantees: a file that cannot be read, vanished or was replaced is skipped and listed, never fatal; one
 * that changed while it was read is kept and listed.
 */
import type { Repository } from '../repo/repository.js';
import type { TreeNode } from '../repo/types.js';
import { TidemarkError, throwIfAborted } from '../errors.js';
import type { BufferLedger, WorkerPool } from '../pool/index.js';
import type { BackupFileResult, BackupFileTask } from '../pool/wire.js';
import { blockPolicy, joinStripes, STRIPE_BYTES, stripeParts } from './blockFiles.js';
import { saveBlockList } from './blockLists.js';
import type { Incrementals } from './incremental.js';
import { Semaphore } from './limits.js';
import { show, type BackupRun } from './run.js';
import type { Sealer } from './sealer.js';
import type { SmallFileBatches } from './smallFiles.js';

export class FileSaver {
  /** Small files waiting in batches at most (MemoryProfile.smallFilesWaiting). */
  private readonly smallSlots: Semaphore;
  private readonly smallLimit: number;
  private readonly blockSizeOf: ReturnType<typeof blockPolicy>;

  constructor(
    private readonly run: BackupRun,
    private readonly repo: Repository,
    private readonly pool: WorkerPool,
    private readonly ledger: BufferLedger,
    private readonly sealer: Sealer,
    private readonly small: SmallFileBatches,
    private readonly incrementals: Incrementals,
    /** Slots of tasks in flight, shared with the small files' batches. */
    private readonly taskSlots: Semaphore,
    private readonly workers: number,
    smallFilesWaiting: number,
  ) {
    this.smallSlots = new Semaphore(smallFilesWaiting);
    this.smallLimit = repo.config.chunker.min;
    this.blockSizeOf = blockPolicy(run.opts.blockFiles);
  }

  /** Reads a file into the repository and completes its node; undefined when it is skipped. */
  async save(abs: Buffer, node: TreeNode, mtimeMs: number, prev?: TreeNode): Promise<TreeNode | undefined> {
    const { run } = this;
    const small = (node.size ?? 0) < this.smallLimit;
    if (small) await this.smallSlots.take();
    try {
      throwIfAborted(run.signal);
      let r: BackupFileResult;
      if (small) {
        const res = await this.small.read(abs, node.size ?? 0, mtimeMs);
        if (res.error) throw Object.assign(new Error(res.error.message), { code: res.error.code });
        r = res;
      } else {
        const blockSize = this.blockSizeOf?.(node.name, node.size ?? 0);
        if (blockSize) node.blockSize = blockSize;
        if (prev) await this.incrementals.arrive();
        const inc = this.incrementals.of(abs, node, prev);
        r = await this.readLarge(abs, node.size ?? 0, mtimeMs, inc, blockSize);
        if (r.blockIds)
          await saveBlockList(
            this.repo,
            node,
            r,
            inc ? prev : undefined,
            show(abs),
            run.opts.listInPartsFrom,
          );
        if (inc)
          run.log(
            `${show(abs)}: block-level tracking: read ${r.bytesRead} of ${node.size ?? 0} bytes (${inc.changed.length} changed ranges)`,
          );
      }
      try {
        await this.sealer.storeBlobs(r.blobs, true);
      } finally {
        if (small && r.blobs.length) this.ledger.release(r.blobs[0].sealed.buffer); // held by the batch
      }
      run.progress.filesRead++;
      if (r.changedWhileReading) {
        run.skip(
          show(abs),
          undefined,
          'changed while it was being read; the saved copy may mix old and new content',
        );
        node.size = r.size;
      }
      if (!node.blockIds && node.blockBase === undefined) node.content = r.content;
      const read = run.view.read(abs);
      run.watch?.read(show(abs), node, prev, read === abs ? undefined : show(read));
      return node;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') run.skip(show(abs), err, 'vanished before it could be read');
      else if (code === 'EACCES' || code === 'EPERM') run.skip(show(abs), err, 'permission denied');
      else if (code === 'ELOOP') run.skip(show(abs), err, 'was replaced by a symlink while being read');
      else if (err instanceof TidemarkError) throw err;
      else run.skip(show(abs), err);
      return undefined;
    } finally {
      if (small) this.smallSlots.give();
      run.progress.filesDone++;
      run.progress.bytesDone += node.size ?? 0;
    }
  }

  /** One task, once a slot is free and the backup is not paused; `shown`: the file's recorded path. */
  private async runTask(task: BackupFileTask & { path: Buffer }, shown: Buffer): Promise<BackupFileResult> {
    await this.taskSlots.take();
    await this.run.opts.pauseGate?.wait(); // paused: start nothing new
    try {
      throwIfAborted(this.run.signal);
      this.run.progress.currentFile = show(shown);
      return await this.pool.run<BackupFileResult>(task, this.sealer.onEvent);
    } finally {
      this.taskSlots.give();
    }
  }

  private async readLarge(
    abs: Buffer,
    size: number,
    mtimeMs: number,
    incremental?: BackupFileTask['incremental'],
    blockSize?: number,
  ): Promise<BackupFileResult> {
    const task = {
      op: 'backupFile' as const,
      path: this.run.view.read(abs),
      size,
      mtimeMs,
      incremental,
      blockSize,
    };
    const stripeBytes = this.run.opts.stripeBytes ?? STRIPE_BYTES;
    const parts = blockSize && !incremental ? stripeParts(size, this.workers, stripeBytes) : 1;
    if (parts < 2) return this.runTask(task, abs);
    // A whole block file is read by every worker at once, each taking every parts-th stripe. In one task
    // the reading thread was busy all along hashing blocks (BLAKE3 gets little of its SIMD from 4 KiB
    // inputs) and copying them: a whole read of an already stored file at 4 KiB blocks takes about a
    // third less time in two tasks (bench:cbt's whole-file incremental).
    const stripe = Math.max(1, Math.floor(stripeBytes / blockSize!));
    const settled = await Promise.allSettled(
      Array.from({ length: parts }, (_, part) =>
        this.runTask({ ...task, stripes: { blocks: stripe, parts, part } }, abs),
      ),
    );
    for (const r of settled) if (r.status === 'rejected') throw r.reason;
    const results = settled.map((r) => (r as PromiseFulfilledResult<BackupFileResult>).value);
    const bytesRead = results.reduce((a, r) => a + r.bytesRead, 0);
    if (results.some((r) => r.short)) {
      // it shrank while it was read: once more in one task, which keeps what was there
      const again = await this.runTask(task, abs);
      return { ...again, bytesRead: bytesRead + again.bytesRead, changedWhileReading: true };
    }
    return {
      content: [],
      blockIds: joinStripes(
        results.map((r) => r.blockIds!),
        Math.ceil(size / blockSize!),
        stripe,
      ),
      bytesRead,
      size,
      changedWhileReading: results.some((r) => r.changedWhileReading),
      blobs: [],
    };
  }
}
