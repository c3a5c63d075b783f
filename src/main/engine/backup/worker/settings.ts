/**
 * What every backup task of a worker thread shares (worker side): its chunker and read block size, made
 * from the pool's settings (pool/thread.ts) when they arrive, and the check of a file after it was read.
 */
import type { BigIntStats } from 'node:fs';
import { FastCDC, gearTable } from '../../chunk/index.js';
import { mtimeMsOf } from '../../scan/stat.js';
import { onConfigure } from '../../pool/thread.js';

export let cdc: FastCDC;
/** A read block's bytes (./readWhole.ts, ./readRanges.ts). */
export let READ_BLOCK: number;
export const ID_BYTES = 32;
export const MiB = 1024 * 1024;

onConfigure((settings) => {
  cdc = new FastCDC(settings.chunker, gearTable(Buffer.from(settings.chunkerSeed, 'hex')));
  // the unfinished chunk (under chunker.max) and at least 2 MiB more (two average chunks when larger),
  // in whole 64 KiB pages (aligned memory: ../../aligned.ts)
  const more = Math.max(2 * MiB, 2 * settings.chunker.avg);
  READ_BLOCK = Math.ceil((settings.chunker.max + more) / 65536) * 65536;
});

/** A file's size and modification time after reading it, to compare with the scan's (sameMtime). */
export async function statAfter(fh: { stat(o: { bigint: true }): Promise<BigIntStats> }) {
  const st = await fh.stat({ bigint: true });
  return { size: Number(st.size), mtimeMs: mtimeMsOf(st.mtimeNs) };
}
