/**
 * What a decode worker reports, applied to the files (main thread): a whole file written or failed; each
 * piece written or failed, and a file all of whose pieces are done finished (./files.ts). A damaged blob
 * fails only the files that use it; a write that failed has its own error code (ENOSPC, EACCES…).
 */
import fs from 'node:fs/promises';
import { mapLimit } from '../repo/repository.js';
import type { DecodeItem, DecodeOutcome } from '../pool/wire.js';
import type { TargetFiles } from './files.js';
import type { PlannedFile, Use } from './plan.js';
import type { RestoreRun } from './run.js';

export async function applyOutcomes(
  run: RestoreRun,
  files: TargetFiles,
  pack: string,
  items: DecodeItem[],
  outcomes: DecodeOutcome[],
  whole: PlannedFile[][],
  pieces: Use[][],
): Promise<void> {
  const { progress } = run;
  items.forEach((it, i) => {
    const r = outcomes[i];
    whole[i].forEach((f, k) => {
      f.remaining = 0;
      const err = r.ok ? r.writes?.[k] : { message: r.message };
      if (err) {
        // a write that failed has its own error code (ENOSPC, EACCES…); only a blob is damaged
        if (r.ok) run.fail(f, err.message, err.code ?? 'EIO');
        else
          run.fail(f, `blob ${it.id.slice(0, 12)} in pack ${pack.slice(0, 12)} is damaged (${err.message})`);
        void fs.rm(f.abs, { force: true }).catch(() => {});
      } else {
        progress.filesDone++;
        progress.bytesDone += it.rawLength;
      }
    });
  });
  // the pieces the worker wrote (or could not); files with every piece written are finished
  const complete: PlannedFile[] = [];
  let shown: PlannedFile | undefined;
  items.forEach((it, i) => {
    const r = outcomes[i];
    let k = 0;
    for (const use of pieces[i]) {
      const f = use.file;
      const written = it.parts?.[k]?.path === f.abs && it.parts[k].offset === use.offset;
      const err = !r.ok ? undefined : written ? r.parts?.[k] : null;
      if (written) k++;
      if (!r.ok)
        run.fail(f, `blob ${it.id.slice(0, 12)} in pack ${pack.slice(0, 12)} is damaged (${r.message})`);
      else if (err) run.fail(f, err.message, err.code ?? 'EIO');
      else progress.bytesDone += it.rawLength;
      if (--f.remaining === 0) complete.push(f);
      shown = f;
    }
  });
  if (shown) progress.currentFile = run.displayOf(shown);
  await mapLimit(complete, 16, files.finished);
}
