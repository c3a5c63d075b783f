/**
 * The restore's last phase (main thread): hard links to files restored under another name, symlinks
 * (made only now, so no write can go through one), then folders' metadata, deepest first (a folder made
 * read-only or unreadable does not stop its subfolders' metadata being set; its own mtime sticks).
 */
import fs from 'node:fs/promises';
import { mapLimit } from '../repo/repository.js';
import { setTimes } from './times.js';
import type { Meta, PlannedDir } from './plan.js';
import type { RestoreRun } from './run.js';

export async function applyMetadata(abs: Buffer, node: Meta, isRoot: boolean): Promise<void> {
  if (isRoot && node.uid !== undefined) await fs.lchown(abs, node.uid, node.gid ?? 0);
  await fs.chmod(abs, node.mode & 0o7777);
  await setTimes(abs, node.mtimeNs, node.mtimeNs, true);
}

/** Makes the links and sets every folder's metadata. */
export async function finishLinksAndFolders(run: RestoreRun): Promise<void> {
  const { errors, policy, isRoot } = run;
  for (const h of run.hardlinks) {
    const abs = Buffer.from(h.path, 'latin1');
    if (h.first.failed || !h.first.chosen) {
      errors.push({ path: abs.toString(), code: 'EIO', message: 'hard link target was not restored' });
      continue;
    }
    await fs.rm(abs, { force: true });
    await fs
      .link(h.first.abs, abs)
      .catch((err) => errors.push({ path: abs.toString(), code: err.code, message: err.message }));
  }
  for (const s of run.symlinks) {
    const abs = Buffer.from(s.path, 'latin1');
    try {
      const exists = await fs.lstat(abs).then(
        () => true,
        () => false,
      );
      if (exists) {
        if (policy === 'skip') {
          run.skippedCount++;
          continue;
        }
        await fs.rm(abs, { force: true });
      }
      await fs.symlink(Buffer.from(s.target, 'latin1'), abs);
      if (isRoot && s.uid !== undefined) await fs.lchown(abs, s.uid, s.gid ?? 0);
      await setTimes(abs, s.mtimeNs, s.mtimeNs, true);
    } catch (err) {
      errors.push({
        path: abs.toString(),
        code: (err as NodeJS.ErrnoException).code ?? 'EIO',
        message: (err as Error).message,
      });
    }
  }
  // deepest first (a folder made read-only or unreadable does not stop its subfolders' metadata being
  // set), the folders of one depth 16 at a time: setting one folder's metadata changes nothing of
  // another's (a million-file restore has ~10,000 folders, three calls each)
  const levels: PlannedDir[][] = [];
  for (const d of run.dirs) (levels[d.depth] ??= []).push(d);
  for (const level of levels.reverse())
    if (level)
      await mapLimit(level, 16, (d) =>
        applyMetadata(Buffer.from(d.path, 'latin1'), d, isRoot).catch(() => {}),
      );
}
