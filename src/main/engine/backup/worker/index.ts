/**
 * backup/worker — the backup's side of a worker thread: reading files, cutting them into chunks, hashing
 * them with keyed BLAKE3, asking the main thread which chunks are new (dedup), then compressing and
 * sealing only those and handing them over (transferred, not copied). Several tasks interleave on one
 * worker so reads overlap with CPU work. The tasks (pool/wire.ts): backupFile (one file: whole,
 * ./readWhole.ts; some ranges, ./readRanges.ts; a block file's blocks, ./readBlocks.ts), backupSmallFiles
 * (a batch of small files, ./smallFiles.ts), seal and sealSegment (chunks another worker read,
 * ./seal.ts). Not here: deciding what to read (../walk.ts, ../fileSaver.ts), writing packs (repo/).
 */
import fs from 'node:fs/promises';
import { segmentBuffers, type BackupFileResult, type BackupFileTask } from '../../pool/wire.js';
import { settings, type TaskHandlers } from '../../pool/thread.js';
import { BlockSource } from '../sourceRead.js';
import { backupFileBlocks } from './readBlocks.js';
import { backupFileRanges } from './readRanges.js';
import { backupWholeFile } from './readWhole.js';
import { backupSmallFiles } from './smallFiles.js';
import { sealChunks, sealSegment } from './seal.js';

async function backupFile(taskId: number, task: BackupFileTask): Promise<BackupFileResult> {
  if (task.blockSize) {
    // a block file's blocks, all or the changed ones: past the page cache where the filesystem allows
    const src = await BlockSource.open(Buffer.from(task.path), task.size);
    try {
      return await backupFileBlocks(taskId, task, src);
    } finally {
      await src.close();
    }
  }
  if (task.incremental && task.size >= settings.chunker.min) {
    // positioned reads of some parts of the file, through the page cache
    const fh = await fs.open(Buffer.from(task.path), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      return await backupFileRanges(taskId, task, fh);
    } finally {
      await fh.close();
    }
  }
  return backupWholeFile(taskId, task);
}

export const backupTasks: Pick<TaskHandlers, 'backupFile' | 'backupSmallFiles' | 'seal' | 'sealSegment'> = {
  backupFile: async (taskId, task) => {
    const r = await backupFile(taskId, task);
    const transfer = r.blobs.map((b) => b.sealed.buffer as ArrayBuffer);
    if (r.blockIds) transfer.push(r.blockIds.buffer as ArrayBuffer); // its own ArrayBuffer (allocUnsafeSlow)
    return { result: r, transfer };
  },
  backupSmallFiles: async (taskId, task) => {
    const r = await backupSmallFiles(taskId, task);
    return { result: r, transfer: r.sealed ? segmentBuffers(r.sealed) : [] };
  },
  sealSegment: (_taskId, task) => {
    const r = sealSegment(task.segment);
    // a block file's raw segment goes back to be filled again (see spareSegments in ./segments.ts)
    if (task.segment.oneFile) r.emptied = task.segment.data.buffer as ArrayBuffer;
    return { result: r, transfer: segmentBuffers(r) };
  },
  seal: (_taskId, task) => {
    const r = sealChunks(task.chunks);
    return { result: r, transfer: segmentBuffers(r) };
  },
};
