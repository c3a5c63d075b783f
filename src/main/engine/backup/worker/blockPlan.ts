/**
 * Which blocks of a block file a task reads, as runs and batches of scattered reads, and the hashing of
 * a batch's blocks (worker side: ./readBlocks.ts drives them).
 */
import { blobId } from '../../crypto/index.js';
import { idKey } from '../../pool/thread.js';
import type { BackupFileTask } from '../../pool/wire.js';
import type { Piece } from '../scatterRead.js';
import type { SegmentQueue } from './segments.js';
import { ID_BYTES } from './settings.js';

export type BlockRun = { first: number; count: number };

/** The bytes of the file a run of blocks covers (a file's last block may be short). */
export function extentOf(p: BlockRun, B: number, size: number): Piece {
  return { offset: p.first * B, length: Math.min(p.count * B, size - p.first * B) };
}

/*
 * The loops over a block file's blocks (up to 512 Ki) and over a batch's blocks are functions of their
 * own. Inside the large async backupFileBlocks they made V8 optimize all of it, on-stack replacement
 * included (~100 ms of a helper thread's time per incremental of a 2 GiB file, thrown away when a rarely
 * taken path deoptimized it, so paid again next run); on a two-core PC that is time the reads and the
 * hashing wait for (`node --trace-opt` on bench:cbt's incremental shows the compile time).
 */

/** Which blocks to read of a file of n blocks, in ascending order: all of them (undefined), or for an
 *  incremental the blocks the changed ranges touch and those the previous version does not have whole.
 *  Built from the ranges, not from a flag per block: an incremental of a 2 GiB file reads ~5,000 of its
 *  256 Ki blocks, and a loop over all of them costs more than the reads it plans before V8 optimizes it. */
export function blocksToRead(
  n: number,
  B: number,
  size: number,
  inc: BackupFileTask['incremental'],
): Uint32Array | undefined {
  if (!inc || inc.prevSize === undefined) return undefined;
  const oldSize = inc.prevSize;
  const prevCount = inc.prevCount ?? 0;
  const whole = Math.floor(Math.min(oldSize, size) / B); // blocks whole in both versions
  const list: number[] = [];
  let tailEnd = n;
  if (oldSize === size && n > 0 && n === prevCount) tailEnd = n - 1; // same short last block
  for (let i = Math.min(whole, prevCount, n); i < tailEnd; i++) list.push(i);
  for (const r of inc.changed) {
    if (r.length <= 0) continue;
    const last = Math.min(n - 1, Math.floor((r.offset + r.length - 1) / B));
    for (let i = Math.floor(r.offset / B); i <= last; i++) list.push(i);
  }
  const sorted = Uint32Array.from(list).sort();
  let u = 0;
  for (let i = 0; i < sorted.length; i++) if (i === 0 || sorted[i] !== sorted[u - 1]) sorted[u++] = sorted[i];
  return sorted.subarray(0, u);
}

/** The blocks to read (all n when `blocks` is undefined) as runs of consecutive blocks of at most
 *  maxPiece bytes. */
export function piecesOf(
  blocks: Uint32Array | undefined,
  n: number,
  B: number,
  maxPiece: number,
): BlockRun[] {
  const per = Math.max(1, Math.floor(maxPiece / B));
  const pieces: BlockRun[] = [];
  if (!blocks) {
    for (let i = 0; i < n; i += per) pieces.push({ first: i, count: Math.min(per, n - i) });
    return pieces;
  }
  for (let k = 0; k < blocks.length;) {
    const first = blocks[k];
    let count = 1;
    while (k + count < blocks.length && blocks[k + count] === first + count && count < per) count++;
    pieces.push({ first, count });
    k += count;
  }
  return pieces;
}

/** A striped task's blocks (BackupFileTask.stripes) as runs of at most maxPiece bytes, stripe by stripe,
 *  and how many blocks they hold. */
export function stripedPieces(
  n: number,
  B: number,
  maxPiece: number,
  st: NonNullable<BackupFileTask['stripes']>,
): { pieces: BlockRun[]; count: number } {
  const per = Math.max(1, Math.floor(maxPiece / B));
  const pieces: BlockRun[] = [];
  let count = 0;
  for (let first = st.part * st.blocks; first < n; first += st.parts * st.blocks) {
    const end = Math.min(n, first + st.blocks);
    for (let i = first; i < end; i += per) pieces.push({ first: i, count: Math.min(per, end - i) });
    count += end - first;
  }
  return { pieces, count };
}

/** Runs grouped into batches of at most `limit` bytes and 256 runs (one scattered read each). */
export function batchesOf(pieces: BlockRun[], B: number, limit: number): BlockRun[][] {
  const batches: BlockRun[][] = [];
  let cur: BlockRun[] = [];
  let bytes = 0;
  for (const p of pieces) {
    if (cur.length && (bytes + p.count * B > limit || cur.length >= 256)) {
      batches.push(cur);
      cur = [];
      bytes = 0;
    }
    cur.push(p);
    bytes += p.count * B;
  }
  if (cur.length) batches.push(cur);
  return batches;
}

/**
 * Hashes the blocks of one batch of reads into `segs`, noting each block's ID and length in `ids` and
 * `lens` in the order the blocks are read, from index `at` (the blocks of the batches before it).
 * Returns the bytes read and whether a piece came back short (the file shrank while it was read).
 */
export function hashBlocks(
  segs: SegmentQueue,
  ids: Buffer,
  lens: Int32Array,
  at: number,
  B: number,
  size: number,
  pieces: BlockRun[],
  asked: Piece[],
  buffer: Buffer,
  got: Uint32Array,
): { read: number; short: boolean } {
  let pos = 0;
  let read = 0;
  let short = false;
  for (let j = 0; j < pieces.length; j++) {
    const piece = pieces[j];
    const want = extentOf(piece, B, size).length;
    const n = Math.min(got[j], want); // a direct read may return bytes past the block list's end
    const buf = buffer.subarray(pos, pos + n);
    pos += asked[j].length;
    if (n < want) short = true;
    read += n;
    for (let k = 0; k < piece.count; k++) {
      const data = buf.subarray(k * B, Math.min(buf.length, (k + 1) * B));
      if (!data.length) break; // its slots keep length 0 (a file that shrank: see the caller)
      const id = blobId(idKey, data);
      id.copy(ids, (at + k) * ID_BYTES);
      lens[at + k] = data.length;
      segs.add(id, id.toString('hex'), data);
    }
    at += piece.count; // the next piece's slots, however much of this one came back
  }
  return { read, short };
}
