/**
 * restore/worker — the restore's side of a worker thread (and check --read-data's): a decode task opens
 * the blobs of one range of a pack (decrypt, decompress, verify against the ID) and writes them where the
 * restore planned (./decode.ts): whole single-blob files, and the pieces of larger files at their offsets
 * (./partWriter.ts). A folder repository's range is read here, past the main thread (./packRange.ts);
 * otherwise it comes with the task. Plaintext never goes back to the main thread; failures go back by
 * index. Not here: planning what to write (../planner.ts), reading other repositories' packs (the main
 * thread's backend).
 */
import type { TaskHandlers } from '../../pool/thread.js';
import { decode } from './decode.js';
import { decodeFile } from './packRange.js';

export const restoreTasks: Pick<TaskHandlers, 'decode'> = {
  decode: (_taskId, task) => (task.file ? decodeFile(task) : decode(task)),
};
