/**
 * What every backup task of a worker thread shares (worker side): its chunker and read block size, made
 * from the pool's settings (pool/thread.ts) when they arrive, and the check of a file after it was read.
 */
import type { BigIntStats } from 'node:fs';
import { FastCDC, gearTable } from '../../chunk/index.js';
import { mtimeMsOf } from '../../scan/stat.js';
import { onConfigure } from '../../pool/thread.js';

export let cdc: FastCDC;
export let READ_BLOCK: number;
export const ID_BYTES = 32;
export const MiB = 1024 * 1024;

onConfigure((settings) => {
  cdc = new FastCDC(settings.chunker, gearTable(Buffer.from(settings.chunkerSeed, 'hex')));
  READ_BLOCK = Math.max(8 * 1024 * 1024, 2 * settings.chunker.max);
});

/** A file's size and modification time after reading it, to compare with the scan's (sameMtime). */
export async function statAfter(fh: { stat(o: { bigint: true }): Promise<BigIntStats> }) {
  const st = await fh.stat({ bigint: true });
  return { size: Number(st.size), mtimeMs: mtimeMsOf(st.mtimeNs) };
}
