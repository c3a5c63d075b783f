/**
 * A large file's chunks are the content-defined chunks of its bytes, however the backup reads it: in
 * aligned direct reads into an aligned block (files from 4 MiB on a local disk's filesystem: the temp
 * folder here) or through the page cache, refilling the block only when no cut can be made. The reference
 * is FastCDC.chunkAll over the whole file in one buffer, and the repository's blob ID of each chunk.
 */
import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { FastCDC, gearTable } from '../../src/main/engine/chunk/index.js';
import { blobId } from '../../src/main/engine/crypto/index.js';
import { contentIds } from '../../src/main/engine/repo/tree.js';
import type { TreeNode } from '../../src/main/engine/repo/types.js';
import { directIoFilesystem } from '../../src/main/engine/aligned.js';
import { DIRECT_READ_MIN_BYTES, SourceReader } from '../../src/main/engine/backup/sourceRead.js';
import { randomBytes, tempDir } from '../helpers/fixtures.js';

const MiB = 1024 * 1024;

/** Random stretches and repeated text, so cuts fall at every distance from the read block's ends. */
function mixed(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  let pos = 0;
  for (let k = 0; pos < size; k++) {
    const len = Math.min(size - pos, ((k * 7919 + seed * 104729) % (3 * MiB)) + 4096);
    if (k % 3 === 2)
      out.write(`line ${k} of text that repeats\n`.repeat(len / 24 + 1).slice(0, len), pos, 'latin1');
    else randomBytes(len, seed * 1000 + k).copy(out, pos);
    pos += len;
  }
  return out;
}

async function fileNode(repo: Repository, treeId: string, name: string): Promise<TreeNode | undefined> {
  for (const n of (await repo.loadTree(treeId, { joinLists: true })).nodes) {
    if (n.type === 'file' && n.name === name) return n;
    if (n.type === 'dir' && n.subtree) {
      const found = await fileNode(repo, n.subtree, name);
      if (found) return found;
    }
  }
  return undefined;
}

/** Backs up `dir` (with `opts`) and expects each file's content to be FastCDC.chunkAll's chunks of it. */
async function expectChunksOfWholeFiles(
  dir: string,
  files: Record<string, Buffer>,
  opts: { workers?: number } = {},
): Promise<void> {
  const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
  const r = await backup(repo, { paths: [dir], ...opts });
  expect(r.status).toBe('completed');
  const cdc = new FastCDC(repo.config.chunker, gearTable(Buffer.from(repo.config.chunkerSeed, 'hex')));
  for (const [name, data] of Object.entries(files)) {
    const want: string[] = [];
    let off = 0;
    for (const len of cdc.chunkAll(data)) {
      want.push(blobId(repo.key.id, data.subarray(off, off + len)).toString('hex'));
      off += len;
    }
    const node = await fileNode(repo, r.snapshot.tree, name);
    expect(node?.size, name).toBe(data.length);
    expect(contentIds(node!), name).toEqual(want);
    expect(want.length, name).toBeGreaterThan(1);
  }
}

describe('chunks of large files', () => {
  it('are the content-defined chunks of the whole file, read directly or through the cache', async () => {
    const dir = await tempDir('tm-large-chunks-');
    const files: Record<string, Buffer> = {
      'mixed.bin': mixed(21 * MiB + 4097, 1), // several read blocks, an unaligned end
      'aligned.bin': mixed(8 * MiB, 2), // ends on a block boundary
      'just-direct.bin': mixed(DIRECT_READ_MIN_BYTES + 1, 3),
      'cached.bin': mixed(DIRECT_READ_MIN_BYTES - 1, 4), // under the direct-read size: through the cache
      'text.log': Buffer.from('the same line again and again\n'.repeat(400_000)), // 12 MB, few cuts
    };
    for (const [name, data] of Object.entries(files)) await fs.writeFile(path.join(dir, name), data);
    // where the temp folder is on a local disk's filesystem, the large files are read directly
    const probe = await SourceReader.open(
      Buffer.from(path.join(dir, 'mixed.bin')),
      files['mixed.bin'].length,
    );
    expect(probe.direct).toBe(await directIoFilesystem(dir));
    await probe.close();

    await expectChunksOfWholeFiles(dir, files);
  });

  it('are the same read through the page cache in read blocks of chunker.max + 2 MiB, cuts across their ends', async () => {
    // TIDEMARK_NO_DIRECT_IO=1: the worker threads (a pool of one, new: the setting is read as a thread
    // starts) read every file through the cache, into the same 6 MiB blocks, refilled when no cut can
    // be made: files of several blocks, whose chunks straddle the blocks' ends
    const dir = await tempDir('tm-large-chunks-cached-');
    const files: Record<string, Buffer> = {
      'mixed.bin': mixed(27 * MiB + 12345, 5),
      'random.bin': randomBytes(13 * MiB + 1, 6),
      'block-and-one.bin': mixed(6 * MiB + 1, 7),
    };
    for (const [name, data] of Object.entries(files)) await fs.writeFile(path.join(dir, name), data);
    const was = process.env.TIDEMARK_NO_DIRECT_IO;
    process.env.TIDEMARK_NO_DIRECT_IO = '1';
    try {
      await expectChunksOfWholeFiles(dir, files, { workers: 1 });
    } finally {
      if (was === undefined) delete process.env.TIDEMARK_NO_DIRECT_IO;
      else process.env.TIDEMARK_NO_DIRECT_IO = was;
    }
  });
});
