import { describe, it, expect } from 'vitest';
import { MemoryBackend } from '../backend/memory/index.js';
import { Repository } from './repository.js';
import type { ObjectType } from '../backend/types.js';
import type { TreeNode } from './types.js';

/** A memory backend that records every read of a data pack (offset, length). */
class CountingBackend extends MemoryBackend {
  reads: { offset: number; length?: number }[] = [];
  corruptAt: number | undefined;
  override async load(type: ObjectType, name: string, offset = 0, length?: number): Promise<Buffer> {
    if (type === 'data') this.reads.push({ offset, length });
    const b = await super.load(type, name, offset, length);
    if (
      type === 'data' &&
      this.corruptAt !== undefined &&
      this.corruptAt >= offset &&
      this.corruptAt < offset + b.length
    )
      b[this.corruptAt - offset] ^= 1;
    return b;
  }
}

const tree = (i: number) => ({
  nodes: [
    {
      name: `file-${i}.txt`,
      type: 'file',
      mode: 0o644,
      mtimeNs: String(i),
      size: i,
      content: [],
    } as TreeNode,
  ],
});

/** `count` trees written into one pack, and the repository opened afresh (no trees cached). */
async function treesInOnePack(count: number) {
  const backend = new CountingBackend();
  const writer = await Repository.init(backend, 'pw', { kdf: { N: 1024 } });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) ids.push(await writer.saveTree(tree(i)));
  await writer.flush();
  const repo = await Repository.open(backend, 'pw');
  await repo.loadIndex();
  backend.reads = [];
  return { backend, repo, ids };
}

describe('trees read from their pack', () => {
  it('reads a pack of trees whole from the fourth tree on, and serves the rest from it', async () => {
    const { backend, repo, ids } = await treesInOnePack(50);
    for (let i = 0; i < 50; i++) expect((await repo.loadTree(ids[i])).nodes[0].name).toBe(`file-${i}.txt`);
    expect(backend.reads.length).toBe(4); // three trees alone, then the pack's blobs in one read
    expect(backend.reads[3].offset).toBe(0);
    expect(backend.reads.slice(0, 3).every((r) => r.length! < 200)).toBe(true);
  });

  it('reports a damaged tree as before and still reads its neighbours', async () => {
    const { backend, repo, ids } = await treesInOnePack(10);
    const loc = repo.index.get(ids[7])!;
    backend.corruptAt = loc.offset + 20; // inside tree 7, which is read from the whole pack
    for (let i = 0; i < 10; i++)
      if (i === 7) await expect(repo.loadTree(ids[i])).rejects.toThrow(/damaged/);
      else expect((await repo.loadTree(ids[i])).nodes[0].size).toBe(i);
    expect(backend.reads.length).toBe(4);
  });
});

describe('the trees a repository keeps loaded', () => {
  it('are bounded by their entries and block lists, not their number', async () => {
    const backend = new CountingBackend();
    const writer = await Repository.init(backend, 'pw', { kdf: { N: 1024 } });
    const big = (tag: string) => ({
      nodes: Array.from(
        { length: 15_000 },
        (_, i) => ({ name: `${tag}-${i}`, type: 'file', mode: 0o644, mtimeNs: '1', size: i }) as TreeNode,
      ),
    });
    // one block file listing 262,144 blocks (8 MiB of IDs): weighs ~10,500 entries
    const list = {
      nodes: [
        {
          name: 'disk.img',
          type: 'file',
          mode: 0o644,
          mtimeNs: '1',
          size: 262_144 * 4096,
          blockSize: 4096,
          blockIds: Buffer.alloc(262_144 * 32, 7),
        } as TreeNode,
      ],
    };
    const a = await writer.saveTree(big('a'));
    const b = await writer.saveTree(big('b'));
    await writer.flush();
    const c = await writer.saveTree(list); // a pack of its own: a's pack is not read whole below
    await writer.flush();
    // the longest list there is (512 Ki blocks, a 2 GiB file's at 4 KiB: 16 MiB of IDs), in a pack of its own
    const n = 512 * 1024;
    const longest = { nodes: [{ ...list.nodes[0], size: n * 4096, blockIds: Buffer.alloc(n * 32, 9) }] };
    const d = await writer.saveTree(longest);
    await writer.flush();
    const repo = await Repository.open(backend, 'pw');
    await repo.loadIndex();
    backend.reads = [];
    await repo.loadTree(a);
    await repo.loadTree(b); // 30,000 entries: more than are kept, so a goes
    await repo.loadTree(b);
    expect(backend.reads.length).toBe(2); // b was kept
    await repo.loadTree(a); // b goes
    expect(backend.reads.length).toBe(3); // a was not kept
    await repo.loadTree(c); // one entry, but its list weighs more than the 9,000 left: a goes
    await repo.loadTree(c);
    expect(backend.reads.length).toBe(4); // c was kept
    await repo.loadTree(a);
    expect(backend.reads.length).toBe(5); // a was not
    await repo.loadTree(d);
    await repo.loadTree(d);
    expect(backend.reads.length).toBe(6); // the longest list is kept too
  });
});
