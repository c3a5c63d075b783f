/**
 * New chunks to the repository (worker side): one dedup query to the main thread for a batch of chunks,
 * then the new ones sealed here, or handed over raw for any free worker to seal (QueryReply.handOver).
 */
import { ask, settings } from '../../pool/thread.js';
import type { QueryReply } from '../../pool/wire.js';
import { sealChunks } from './seal.js';

/** Asks the main thread which of these chunks the repository lacks (one dedup query for the batch) and
 *  stores those. */
export async function storeIfNew(taskId: number, chunks: { id: Buffer; data: Uint8Array }[]): Promise<void> {
  if (!chunks.length) return;
  const { store, handOver } = (await ask(taskId, {
    kind: 'query',
    ids: chunks.map((c) => c.id.toString('hex')),
  })) as QueryReply;
  await storeNew(
    taskId,
    chunks.filter((_, i) => store[i]),
    handOver,
  );
}

/** Stores new chunks: sealed here, or handed over raw so that any free worker compresses them. */
export async function storeNew(
  taskId: number,
  chunks: { id: Buffer; data: Uint8Array }[],
  handOver: boolean,
): Promise<void> {
  if (!chunks.length) return;
  if (settings.distributeSeal && handOver) {
    const raw = chunks.map((c) => {
      const data = new Uint8Array(c.data.length);
      data.set(c.data);
      return { id: new Uint8Array(c.id), data };
    });
    await ask(taskId, { kind: 'raw', chunks: raw });
    return;
  }
  await ask(taskId, { kind: 'sealedSegments', segments: [sealChunks(chunks)] });
}
