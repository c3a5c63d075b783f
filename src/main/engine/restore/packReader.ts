/**
 * The pack reader (main thread): loops take the queued packs (./packQueue.ts) and hand each one's blobs,
 * in coalesced ranges, to the decode workers (./worker): a folder repository's range is read by the
 * worker that decodes it (Backend.localFile: the busy main thread no longer stands between reads), any
 * other's is loaded here and moved to it. Files made of a single blob are written whole by that worker,
 * the pieces of larger files at their offsets into files created and sized first (./files.ts); what the
 * worker reports goes to the files (./outcomes.ts). Long runs of a file's pieces are written past the
 * page cache where the target is on a local disk's filesystem, and a folder repository's ranges read so
 * where its folder is.
 */
import { giveBuffer } from '../bufferPool.js';
import { directIoFilesystem } from '../aligned.js';
import type { Repository } from '../repo/repository.js';
import { mapLimit } from '../repo/repository.js';
import { AbortedError } from '../errors.js';
import type { WorkerPool } from '../pool/index.js';
import {
  decodeBuffer,
  outcomesOf,
  packDecodeItems,
  type DecodeItem,
  type DecodeOutcome,
  type DecodeResult,
} from '../pool/wire.js';
import type { TargetFiles } from './files.js';
import { applyOutcomes } from './outcomes.js';
import type { PackQueue } from './packQueue.js';
import { NONE, wholeUse, type PackJob, type PlannedFile, type Use } from './plan.js';
import type { RestoreRun } from './run.js';

export class PackReader {
  /** Long runs of pieces are written past the page cache (the workers' PartWriter): decided once. */
  private direct: boolean | undefined;
  /** A folder repository's ranges are read past it (restore/worker/packRange.ts): decided once. */
  private readDirect: boolean | undefined;
  directBytes = 0;
  readDirectBytes = 0;

  constructor(
    private readonly run: RestoreRun,
    private readonly repo: Repository,
    private readonly pool: WorkerPool,
    private readonly packs: PackQueue,
    private readonly files: TargetFiles,
  ) {}

  /** One of the loops: takes queued packs until the walk is done and none is left. */
  async loop(): Promise<void> {
    const { run, packs } = this;
    for (;;) {
      if (packs.failure !== undefined) return;
      if (run.signal?.aborted) throw new AbortedError();
      const job = packs.take();
      if (!job) {
        if (packs.walkDone) return;
        await packs.changed.wait();
        continue;
      }
      let written = false;
      try {
        await this.read(job);
        written = true;
      } finally {
        packs.done(job, written);
      }
    }
  }

  /** Restores what a range of a pack holds for the plan. */
  private async read(range: PackJob): Promise<void> {
    const { run, repo } = this;
    const { pack } = range;
    // a folder repository's pack is read by the worker that decodes it (restore/worker/packRange.ts)
    const file = repo.backend.localFile?.('data', pack);
    let data: Buffer | undefined;
    let readError: string | undefined;
    if (!file)
      try {
        data = await repo.backend.load('data', pack, range.start, range.end - range.start);
        if (data.length !== range.end - range.start)
          readError = `pack ${pack.slice(0, 12)} is shorter than its index says`;
      } catch (err) {
        readError = `reading pack ${pack.slice(0, 12)}: ${(err as Error).message}`;
      }
    // Files made of a single blob are written whole by the worker that decodes it (synchronous
    // calls, off this thread); pieces of other files are written by it too, at their offsets.
    const whole: PlannedFile[][] = [];
    const pieces: Use[][] = [];
    const items: DecodeItem[] = range.blobs.map((b, i) => {
      const all = b.uses;
      b.uses = NONE; // planned work is dropped as it is handed out
      if (!Array.isArray(all)) {
        // (most blobs: one file's, whole)
        const own = wholeUse(all);
        whole[i] = own ? [all.file] : NONE;
        pieces[i] = own ? NONE : [all];
      } else {
        const mine = all.filter(wholeUse);
        whole[i] = mine.map((u) => u.file);
        pieces[i] = all.filter((u) => !mine.includes(u));
      }
      for (const f of whole[i]) f.created = true; // claimed by the worker
      return {
        id: b.id,
        offset: b.offset - range.start,
        length: b.length,
        compressed: b.compressed,
        rawLength: b.rawLength,
        // (no empty lists: every object in a task is cloned into the worker)
        writes: whole[i].length
          ? whole[i].map((f) => ({
              path: f.abs,
              mode: f.mode,
              uid: f.uid,
              gid: f.gid,
              mtimeNs: f.mtimeNs,
            }))
          : undefined,
        parts: undefined,
      };
    });
    // files receiving pieces exist at their full size before a worker writes into them
    const targets = new Set<PlannedFile>();
    for (const p of pieces) for (const u of p) if (!u.file.failed) targets.add(u.file);
    await mapLimit([...targets], 16, this.files.prepare);
    items.forEach((it, i) => {
      for (const u of pieces[i])
        if (!u.file.failed) (it.parts ??= []).push({ path: u.file.abs, offset: u.offset });
    });
    let outcomes: DecodeOutcome[];
    this.direct ??= await directIoFilesystem(run.targetPath); // the target exists once a file is prepared
    if (readError) outcomes = items.map(() => ({ ok: false as const, message: readError! }));
    else {
      const { batch, transfer } = packDecodeItems(items);
      let result: DecodeResult;
      if (file) {
        const length = range.end - range.start;
        this.readDirect ??= await directIoFilesystem(file);
        result = await this.pool.run<DecodeResult>(
          {
            op: 'decode',
            file: { path: file, offset: range.start, length, pack, direct: this.readDirect },
            batch,
            chown: run.isRoot,
            direct: this.direct,
          },
          undefined,
          transfer,
        );
      } else {
        const { buffer, transfer: moved } = decodeBuffer(data!);
        // let go while the worker has it (a copy's original can be collected meanwhile)
        // eslint-disable-next-line no-useless-assignment
        data = undefined;
        result = await this.pool.run<DecodeResult>(
          { op: 'decode', buffer, batch, chown: run.isRoot, direct: this.direct },
          undefined,
          [...transfer, ...moved],
        );
        giveBuffer(result.returned); // the worker is done with it: the next pack range reuses it
      }
      this.directBytes += result.direct ?? 0;
      this.readDirectBytes += result.readDirect ?? 0;
      outcomes = outcomesOf(items, result.failed);
    }
    await applyOutcomes(run, this.files, pack, items, outcomes, whole, pieces);
  }
}
