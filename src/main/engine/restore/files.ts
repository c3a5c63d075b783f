/**
 * A restored file's life on the main thread: created empty at its final size (sparse) before any piece
 * is written into it (a file of one blob is created by the worker that writes it whole), then, once every
 * piece is written, given its metadata, or removed when any of it failed (reported by name, once).
 */
import fs from 'node:fs/promises';
import { constants as C } from 'node:fs';
import { applyMetadata } from './metadata.js';
import type { PlannedFile } from './plan.js';
import type { RestoreRun } from './run.js';

export class TargetFiles {
  constructor(private readonly run: RestoreRun) {}

  /** Creates the file empty at its final size (sparse) once, before any piece is written into it. */
  readonly prepare = (f: PlannedFile): Promise<void> => {
    f.created = true;
    f.ready ??= (async () => {
      const fh = await fs.open(f.abs, C.O_WRONLY | C.O_CREAT | C.O_TRUNC | C.O_NOFOLLOW, 0o600);
      try {
        if (f.size) await fh.truncate(f.size);
      } finally {
        await fh.close();
      }
    })().catch((err: NodeJS.ErrnoException) => this.run.fail(f, err.message, err.code ?? 'EIO'));
    return f.ready;
  };

  /** Every piece of the file is written (or none had to be): its metadata, or its removal if it failed. */
  readonly finished = async (f: PlannedFile): Promise<void> => {
    const { run } = this;
    if (!f.failed) await this.prepare(f); // nothing had to be written: create it, sized (sparse)
    if (f.failed) {
      await fs.rm(f.abs, { force: true });
      return;
    }
    await applyMetadata(f.abs, f, run.isRoot).catch((err) =>
      run.errors.push({ path: run.displayOf(f), code: err.code ?? 'EIO', message: err.message }),
    );
    run.progress.filesDone++;
  };
}
