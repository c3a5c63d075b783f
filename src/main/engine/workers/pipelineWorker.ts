/**
 * workers/ — the entry of the engine's worker threads (pool/): it hands each task of the wire format
 * (pool/wire.ts) to the feature it belongs to. backup/worker reads, chunks, hashes and seals files;
 * restore/worker opens blobs and writes them (restores, and check --read-data); scan/listDir.ts lists
 * folders. The thread's settings, its questions to the main thread and its buffers are pool/thread.ts
 * and pool/scratch.ts. It stands above the features it puts together (docs/architecture.md §1 rule 9),
 * and loads nothing more than their worker sides: a thread's start-up is paid by every backup and restore.
 */
import { serve } from '../pool/thread.js';
import { backupTasks } from '../backup/worker/index.js';
import { restoreTasks } from '../restore/worker/index.js';
import { listFolder } from '../scan/listDir.js';

serve({
  ...backupTasks,
  ...restoreTasks,
  listDir: async (_taskId, task) => ({ result: await listFolder(task.path), transfer: [] }),
});
