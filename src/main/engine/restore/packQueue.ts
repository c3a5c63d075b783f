/**
 * The plan of each pack, and the queue of packs ready to read (main thread). The planner adds what each
 * file needs to the plans of the packs its blobs lie in; a pack is queued once the walk has asked for
 * every data blob the index lists in it (so it is read once, whole, while the walk goes on), the others
 * when the walk ends or when the plan held passes `planLimit` (the planner then waits until half is
 * written: memory is bounded by that, not by the snapshot). Packs are queued whole, when complete, not
 * batch by batch: a large file's blobs lie in many packs, between other files' blobs, and reading a
 * pack's part for each batch reads ranges again (cutting batches made the bench's restore read a fifth
 * more bytes in three times the ranges, and take longer). On the bench's dataset half of the packs are
 * complete after its first files (large ones). A pack is queued as the ranges it is read in (coalesce), so
 * the loops read ranges of one pack at once and each range's uses stop being held once it is written.
 * Also the restore's coordination: the first failure of any stage, and a notice whenever something any
 * stage may wait for changed.
 */
import type { Repository } from '../repo/repository.js';
import { BlobType, type BlobLocation } from '../repo/blobIndex.js';
import type { TreeNode } from '../repo/types.js';
import { contentCount, contentIdAt, contentIdKeyAt } from '../repo/tree.js';
import {
  BULK_BLOB,
  batchPieces,
  type PackJob,
  type PackPlan,
  type PlannedBlob,
  type PlannedFile,
} from './plan.js';
import type { RestoreRun } from './run.js';

/** Loops taking queued packs, each handing one range at a time to the workers, and how many may be on
 *  bulk packs while packs of small files wait (see take). Four: fewer left the disk idle between packs,
 *  more were no faster; and while two loops are on packs of large blobs (mostly disk), a free loop takes
 *  a waiting pack of small files (mostly CPU) first, so the two overlap (docs/performance.md). */
export const RESTORE_LOOPS = 4;
const BULK_LOOPS = 2;

/** Where planning a file's pieces goes on: its next piece, and where that piece goes in the file. */
export interface PieceCursor {
  next: number;
  at: number;
}

/** Wakes everyone waiting, whenever something they may wait for changed. */
export class Notify {
  private waiters: (() => void)[] = [];
  wait(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
  notify(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const resolve of w) resolve();
  }
}

export class PackQueue {
  /** Packs planned, not queued yet. */
  private readonly pending = new Map<string, PackPlan>();
  /** Packs queued once (a later use is queued at the end). */
  private readonly dispatched = new Set<string>();
  private readonly jobs: PackJob[] = [];
  /** Data blobs per pack, as the index lists them. */
  private readonly blobsIn: Map<string, number>;
  private bulkRunning = 0;
  /** Uses planned and not written: in `pending` and in queued or running jobs. */
  held = 0;
  walkDone = false;
  failure: unknown;
  readonly changed = new Notify();
  /** Pieces planned at a time: a batch's, and a large file's slice (plan.ts batchPieces). */
  readonly slice: number;

  constructor(
    private readonly run: RestoreRun,
    private readonly repo: Repository,
    readonly planLimit: number,
  ) {
    this.blobsIn = repo.index.countsByPack(BlobType.Data);
    this.slice = batchPieces(planLimit);
  }

  /** Queues a pack's plan, as the ranges it is read in (the loops read ranges of one pack at once). */
  private queue(pack: string, plan: PackPlan): void {
    this.pending.delete(pack);
    this.dispatched.add(pack);
    plan.blobs.sort((a, b) => a.offset - b.offset);
    for (const range of coalesce(plan.blobs)) {
      let bytes = 0;
      let count = 0;
      for (const b of range.blobs) {
        bytes += b.length;
        count += Array.isArray(b.uses) ? b.uses.length : 1;
      }
      this.jobs.push({ pack, ...range, count, bulk: bytes >= range.blobs.length * BULK_BLOB });
    }
    this.run.progress.phase = 'restoring';
    this.changed.notify();
  }

  /** Queues every pack planned so far. */
  queueAll(): void {
    for (const pack of [...this.pending.keys()].sort()) this.queue(pack, this.pending.get(pack)!);
  }

  /** Once the plan held is at its bound: queues every pack planned, and waits until half is written. */
  async makeRoom(): Promise<void> {
    if (this.held <= this.planLimit) return;
    this.queueAll();
    while (this.held > this.planLimit / 2 && this.failure === undefined) await this.changed.wait();
  }

  /**
   * Adds the blobs a file needs (and where in it each goes) to the plans of their packs, from piece
   * `from.next` on and at most `max` of them, queueing each pack whose every data blob is now asked for.
   * Returns where to go on, or undefined once every piece is planned. At the first slice, fails the file
   * if a blob is missing from the index (nothing of it is planned then). Synchronous: V8 compiles this hot
   * loop on its own, where inside a large async function it cost a helper thread a large share of a
   * restore's compile time (`node --trace-opt`).
   */
  plan(
    f: PlannedFile,
    node: TreeNode,
    from: PieceCursor = { next: 0, at: 0 },
    max = Infinity,
  ): PieceCursor | undefined {
    const { pending, repo } = this;
    const count = contentCount(node);
    const end = Math.min(count, from.next + max);
    // every blob must be in the index before any piece is planned: a file planned in slices is looked
    // at whole first, one planned at once as its locations are taken
    let missing = -1;
    if (from.next === 0 && end < count)
      for (let k = 0; k < count && missing < 0; k++)
        if (!repo.index.has(contentIdKeyAt(node, k))) missing = k;
    const locs = new Array<BlobLocation | undefined>(end - from.next);
    for (let k = from.next; k < end && missing < 0; k++)
      if (!(locs[k - from.next] = repo.index.get(contentIdKeyAt(node, k)))) missing = k;
    if (missing >= 0) {
      this.run.fail(f, `blob ${contentIdAt(node, missing).slice(0, 12)} is missing from the repository`);
      return undefined; // nothing of it is written (finished removes what is in the way)
    }
    let at = from.at; // where the blob goes in the file
    for (let k = from.next; k < end; k++) {
      const id = contentIdAt(node, k);
      const loc = locs[k - from.next]!;
      let plan = pending.get(loc.pack);
      if (!plan) pending.set(loc.pack, (plan = { blobs: [], byId: new Map(), count: 0 }));
      const use = { file: f, offset: at };
      const blob = plan.byId.get(id);
      if (!blob) {
        // where it lies in its pack, copied out of the index's answer (one object kept, not two)
        const b = {
          id,
          offset: loc.offset,
          length: loc.length,
          rawLength: loc.rawLength,
          compressed: loc.compressed,
          uses: use,
        };
        plan.byId.set(id, b);
        plan.blobs.push(b);
      } else if (Array.isArray(blob.uses)) blob.uses.push(use);
      else blob.uses = [blob.uses, use];
      at += loc.rawLength;
      plan.count++;
      this.held++;
      if (!this.dispatched.has(loc.pack) && plan.blobs.length === this.blobsIn.get(loc.pack))
        this.queue(loc.pack, plan);
    }
    return end < count ? { next: end, at } : undefined;
  }

  /**
   * The next queued range, mostly in order (a pack's ranges one after the other). Packs of large blobs (bulk) are mostly waiting for the disk,
   * packs of small files mostly CPU: while BULK_LOOPS loops are on bulk packs, the next free loop takes a
   * pack of small files if one is queued, so that the two overlap instead of the bulk packs queued first
   * holding every loop. Give it back with `done`.
   */
  take(): PackJob | undefined {
    const { jobs } = this;
    let job: PackJob | undefined;
    if (this.bulkRunning >= BULK_LOOPS) {
      const i = jobs.findIndex((j) => !j.bulk);
      if (i >= 0) job = jobs.splice(i, 1)[0];
    }
    job ??= jobs.shift();
    if (job?.bulk) this.bulkRunning++;
    return job;
  }

  /** A range taken is over (its pieces written or failed); `written`: its uses are no longer held. */
  done(job: PackJob, written: boolean): void {
    if (job.bulk) this.bulkRunning--;
    if (!written) return;
    this.held -= job.count;
    this.changed.notify();
  }
}

/** A pack's blobs (sorted by offset) in ranges read at once: gaps under 512 KiB are read through, and a
 *  range stays under 2 MiB (a worker keeps a read buffer of that size for each range it has at once; 4
 *  MiB took 4 MiB more per worker, and restored no faster). */
function coalesce(blobs: PlannedBlob[]): { start: number; end: number; blobs: PlannedBlob[] }[] {
  const out: { start: number; end: number; blobs: PlannedBlob[] }[] = [];
  for (const b of blobs) {
    const last = out[out.length - 1];
    const end = b.offset + b.length;
    if (last && b.offset - last.end < 512 * 1024 && end - last.start < 2 * 1024 * 1024) {
      last.end = Math.max(last.end, end);
      last.blobs.push(b);
    } else out.push({ start: b.offset, end, blobs: [b] });
  }
  return out;
}
