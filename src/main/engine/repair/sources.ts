/**
 * Saving lost blobs again from the files they were read from. A blob's ID is a keyed hash of its
 * content, so a piece of a file that still hashes to a lost blob's ID is that blob, byte for byte:
 * whatever computer or path it comes from, storing it again (through the repository's own save path,
 * Repository.saveBlob: compression, sealing, packs) makes every snapshot that needs it whole.
 *
 * Where a file's pieces lie is known without re-chunking when the lengths of the pieces before a lost
 * one are (the index and pack headers record every blob's plaintext length; a block file's pieces are
 * its fixed-size blocks): those ranges are read and hashed. Otherwise the file is cut again with the
 * repository's chunker (FastCDC with its parameters and seed) and every piece is hashed. Files that
 * changed since keep what did not change: a piece whose hash differs is simply not the lost blob.
 */
import fs from 'node:fs/promises';
import { blobIdHex } from '../crypto/index.js';
import { FastCDC, gearTable } from '../chunk/index.js';
import { BlobType } from '../repo/blobIndex.js';
import type { Repository } from '../repo/repository.js';
import type { TreeNode } from '../repo/types.js';
import { contentIds } from '../repo/tree.js';
import { AbortedError } from '../errors.js';

/** A file (as a snapshot recorded it) that uses a lost blob. */
export interface FileRef {
  /** Its absolute path as backed up. */
  path: string;
  /** Its node, with a block list in two parts joined. */
  node: TreeNode;
}

export interface SourceResult {
  /** Lost blobs found in source files (and saved, unless a dry run). */
  found: Set<string>;
  /** Per file read: how many lost blobs it gave back. */
  files: { path: string; blobs: number }[];
  /** Files that could not be read, and why. */
  unreadable: { path: string; reason: string }[];
}

const READ_BYTES = 8 * 1024 * 1024;

const yieldToLoop = () => new Promise<void>((r) => setImmediate(r));

/**
 * Looks for `wanted` blobs in the files that used them. `rawLength` gives the plaintext length of a blob
 * where the index or a pack header recorded it. With `save` false (a dry run) nothing is written.
 */
export async function recoverFromSources(
  repo: Repository,
  wanted: Map<string, FileRef[]>,
  opts: {
    save: boolean;
    rawLength: (id: string) => number | undefined;
    signal?: AbortSignal;
    progress?: (done: number, total: number) => void;
  },
): Promise<SourceResult> {
  const result: SourceResult = { found: new Set(), files: [], unreadable: [] };
  const byPath = new Map<string, TreeNode>();
  for (const refs of wanted.values())
    for (const r of refs) if (!byPath.has(r.path)) byPath.set(r.path, r.node);
  const take = async (id: string, data: Buffer): Promise<boolean> => {
    if (!wanted.has(id) || result.found.has(id)) return false;
    if (opts.save) await repo.saveBlob(BlobType.Data, data);
    result.found.add(id);
    return true;
  };
  let done = 0;
  for (const [p, node] of byPath) {
    if (opts.signal?.aborted) throw new AbortedError();
    const ids = contentIds(node);
    const mine = () => ids.some((id) => wanted.has(id) && !result.found.has(id));
    if (!mine()) {
      opts.progress?.(++done, byPath.size);
      continue;
    }
    let fh: fs.FileHandle;
    try {
      fh = await fs.open(p, 'r');
    } catch (err) {
      result.unreadable.push({ path: p, reason: (err as Error).message });
      opts.progress?.(++done, byPath.size);
      continue;
    }
    let gave = 0;
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw new Error('is no longer a regular file');
      // 1. the pieces whose place in the file is known
      let offset = 0;
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i];
        const len = node.blockSize
          ? (opts.rawLength(id) ??
            Math.max(0, Math.min(node.blockSize, (node.size ?? 0) - i * node.blockSize)))
          : opts.rawLength(id);
        const at = node.blockSize ? i * node.blockSize : offset;
        if (len === undefined) {
          if (!node.blockSize) break; // the rest of the file's layout is unknown: cut it again below
          continue;
        }
        offset += len;
        if (!wanted.has(id) || result.found.has(id) || at + len > st.size) continue;
        const buf = Buffer.allocUnsafe(len);
        const { bytesRead } = await fh.read(buf, 0, len, at);
        if (bytesRead === len && blobIdHex(repo.key.id, buf) === id && (await take(id, buf))) gave++;
        await yieldToLoop();
        if (opts.signal?.aborted) throw new AbortedError();
      }
      // 2. content-defined pieces still missing: cut the whole file again and hash every piece
      if (!node.blockSize && mine())
        gave += await rechunk(
          repo,
          fh,
          st.size,
          (id) => wanted.has(id) && !result.found.has(id),
          take,
          opts.signal,
        );
    } catch (err) {
      if (err instanceof AbortedError) throw err;
      result.unreadable.push({ path: p, reason: (err as Error).message });
    } finally {
      await fh.close();
    }
    if (gave) result.files.push({ path: p, blobs: gave });
    opts.progress?.(++done, byPath.size);
  }
  return result;
}

async function rechunk(
  repo: Repository,
  fh: fs.FileHandle,
  size: number,
  wants: (id: string) => boolean,
  take: (id: string, data: Buffer) => Promise<boolean>,
  signal?: AbortSignal,
): Promise<number> {
  const cdc = new FastCDC(repo.config.chunker, gearTable(Buffer.from(repo.config.chunkerSeed, 'hex')));
  const max = repo.config.chunker.max;
  let buf = Buffer.allocUnsafe(READ_BYTES + max);
  let start = 0;
  let end = 0;
  let pos = 0; // file offset of buf[end]
  let gave = 0;
  for (;;) {
    if (signal?.aborted) throw new AbortedError();
    if (end - start < max && pos < size) {
      // keep what is left, then fill up
      if (start > 0) {
        buf.copy(buf, 0, start, end);
        end -= start;
        start = 0;
      }
      if (buf.length - end < READ_BYTES) {
        const bigger = Buffer.allocUnsafe(end + READ_BYTES);
        buf.copy(bigger, 0, 0, end);
        buf = bigger;
      }
      const { bytesRead } = await fh.read(buf, end, READ_BYTES, pos);
      end += bytesRead;
      pos += bytesRead;
      if (bytesRead === 0) pos = size; // the file shrank while read
    }
    if (start >= end) break;
    const eof = pos >= size;
    const len = cdc.nextCut(buf, start, end, eof);
    if (len === 0) continue; // needs more data (read above on the next turn)
    const piece = buf.subarray(start, start + len);
    const id = blobIdHex(repo.key.id, piece);
    if (wants(id) && (await take(id, Buffer.from(piece)))) gave++;
    start += len;
    await yieldToLoop();
  }
  return gave;
}
