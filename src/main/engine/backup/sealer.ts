/**
 * Sealing into packs (main thread): what the workers send while they read files becomes blobs in the
 * repository's packs. A dedup query is answered by claiming each chunk ID (Repository.claimBlob: only
 * the first asker stores a chunk); new chunks of large files are compressed and sealed by whichever
 * worker is free (one big file's compression spreads over all cores), their bytes bounded by a budget
 * that pauses the readers; sealed segments' blobs are added to the packs as views of their one buffer,
 * which the ledger hands back to the workers once no pack refers to it.
 */
import type { Repository } from '../repo/repository.js';
import { BlobType } from '../repo/blobIndex.js';
import { throwIfAborted } from '../errors.js';
import type { BufferLedger, WorkerPool } from '../pool/index.js';
import {
  segmentBuffers,
  sealedBlobOf,
  type QueryReply,
  type SealedBlobMsg,
  type SealedSegment,
  type Task,
  type TaskEvent,
} from '../pool/wire.js';
import { ByteBudget } from './limits.js';
import type { BackupRun } from './run.js';

/** Bytes of new chunks waiting to be sealed by any worker before the readers pause. 8 MiB (four 2 MiB
 *  groups) keeps two workers busy: three times that was no faster in `npm run bench` and held tens of MB
 *  more at the peak when the engine's threads ran unhindered (real-time priority). */
export const SEAL_BUDGET_BYTES = 8 * 1024 * 1024;
/** Raw chunks are sealed in groups of about this many bytes (one task each). */
const SEAL_GROUP_BYTES = 2 * 1024 * 1024;

export class Sealer {
  private readonly budget: ByteBudget;
  private readonly sealing = new Set<Promise<void>>();
  private sealError: unknown;

  constructor(
    private readonly run: BackupRun,
    private readonly repo: Repository,
    private readonly pool: WorkerPool,
    private readonly ledger: BufferLedger,
    budgetBytes = SEAL_BUDGET_BYTES,
  ) {
    this.budget = new ByteBudget(budgetBytes);
  }

  /** Bytes waiting to be sealed now. */
  get pendingBytes(): number {
    return this.budget.bytes;
  }

  /** Adds sealed blobs to the packs; `speculative` ones (a small file's, sealed before asking) only if new. */
  async storeBlobs(blobs: SealedBlobMsg[], speculative: boolean): Promise<void> {
    for (const b of blobs) {
      const id = Buffer.from(b.id);
      if (speculative && !this.repo.claimBlob(id.toString('hex'))) continue;
      await this.repo.addSealedBlob(
        BlobType.Data,
        id,
        Buffer.from(b.sealed.buffer, b.sealed.byteOffset, b.sealed.byteLength),
        b.rawLength,
        b.compressed,
        this.ledger,
      );
    }
  }

  /** The handler of a file task's events (pool.run): dedup queries, chunks to seal, sealed blobs, progress. */
  readonly onEvent = async (ev: TaskEvent): Promise<QueryReply | null> => {
    throwIfAborted(this.run.signal);
    if (ev.kind === 'read') {
      this.run.progress.bytesRead += ev.bytes;
      return null;
    }
    if (ev.kind === 'query')
      return {
        store: ev.ids.map((id) => this.repo.claimBlob(id)),
        handOver: this.pool.withoutFiles > 0,
        spares: this.pool.spares.takeSegments(ev.spares),
      } satisfies QueryReply;
    if (ev.kind === 'raw') {
      this.sealChunks(ev.chunks);
      await this.budget.wait();
      return null;
    }
    if (ev.kind === 'segments') {
      for (const segment of ev.segments)
        this.dispatch(
          { op: 'sealSegment', segment },
          segment.data.byteLength,
          segmentBuffers(segment),
          this.storeSegment,
        );
      await this.budget.wait();
      return null;
    }
    for (const s of ev.segments) await this.storeSegment(s); // sealedSegments
    return null;
  };

  /** Stores the blobs of a sealed segment (views into its one buffer: nothing is copied), and keeps the
   *  raw segment's buffer for the next reading worker that asks (QueryReply.spares). */
  private readonly storeSegment = async (s: SealedSegment): Promise<void> => {
    this.pool.spares.keepSegment(s.emptied);
    this.ledger.hold(s.data.buffer);
    try {
      await this.storeBlobs(
        Array.from(s.lengths, (_, k) => sealedBlobOf(s, k)),
        false,
      );
    } finally {
      this.ledger.release(s.data.buffer);
    }
  };

  /** Hands a seal task to the least busy worker and stores what it returns; its bytes count against
   *  the budget until then. */
  private dispatch<T>(
    task: Task,
    bytes: number,
    transfer: ArrayBuffer[],
    store: (sealed: T) => Promise<void>,
  ): void {
    this.budget.add(bytes);
    const p: Promise<void> = this.pool
      .run<T>(task, undefined, transfer)
      .then(store)
      .catch((err) => {
        this.sealError ??= err;
      })
      .finally(() => {
        this.budget.release(bytes);
        this.sealing.delete(p);
      });
    this.sealing.add(p);
  }

  /** Raw chunks handed over by a reading worker, sealed in groups of ~2 MiB by any worker. */
  private sealChunks(chunks: { id: Uint8Array; data: Uint8Array }[]): void {
    let group: typeof chunks = [];
    let bytes = 0;
    const dispatch = () => {
      const g = group;
      const n = bytes;
      group = [];
      bytes = 0;
      this.dispatch<SealedSegment>(
        { op: 'seal', chunks: g },
        n,
        g.map((c) => c.data.buffer as ArrayBuffer),
        this.storeSegment,
      );
    };
    for (const c of chunks) {
      group.push(c);
      bytes += c.data.length;
      if (bytes >= SEAL_GROUP_BYTES) dispatch();
    }
    if (group.length) dispatch();
  }

  /** Waits for every seal in flight; throws the first one's failure. */
  async settled(): Promise<void> {
    while (this.sealing.size) await Promise.all([...this.sealing]);
    if (this.sealError) throw this.sealError;
  }
}
