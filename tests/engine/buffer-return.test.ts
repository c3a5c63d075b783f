/**
 * Sealed buffers handed back (pool/ledger.ts, lent to the repository's packs): the buffer of a sealed segment goes back to the
 * workers to be sealed into again only once nothing refers to it — the caller that adds its blobs has let
 * go and every pack holding some of them is written. Handed back early, a worker would overwrite blobs of
 * a pack still being written; so the repository test holds a pack's write open and watches, and the
 * backups below seal into recycled buffers and must restore byte for byte.
 */
import { describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import path from 'node:path';
import { MemoryBackend } from '../../src/main/engine/backend/memory/index.js';
import type { ObjectType, SaveOptions } from '../../src/main/engine/backend/types.js';
import { Repository } from '../../src/main/engine/repo/repository.js';
import { BlobType } from '../../src/main/engine/repo/blobIndex.js';
import { backup } from '../../src/main/engine/backup/index.js';
import { restore } from '../../src/main/engine/restore/index.js';
import { BufferLedger, WorkerPool, spareSealedCount } from '../../src/main/engine/pool/index.js';
import { WORKER_SCRATCH_BYTES } from '../../src/main/engine/pool/wire.js';
import { describeTree, expectSameTrees, randomBytes, tempDir } from '../helpers/fixtures.js';

const MiB = 1024 * 1024;

/** A memory store whose data-pack writes wait until `open()` is called. */
class GatedBackend extends MemoryBackend {
  private opened = false;
  private waiting: (() => void)[] = [];
  open(): void {
    this.opened = true;
    for (const w of this.waiting.splice(0)) w();
  }
  override async save(
    type: ObjectType,
    name: string,
    data: Uint8Array,
    options?: SaveOptions,
  ): Promise<void> {
    if (type === 'data' && !this.opened) await new Promise<void>((r) => this.waiting.push(r));
    return super.save(type, name, data, options);
  }
}

const id = (n: number) => Buffer.alloc(32, n);

describe('sealed buffers handed back', () => {
  it('once the caller let go, and the pack referring to them (if any) is written', async () => {
    const store = new GatedBackend();
    const repo = await Repository.init(store, 'pw', { kdf: { N: 1024 } });
    const given: ArrayBuffer[] = [];
    const ledger = new BufferLedger((ab) => given.push(ab));
    const ab = new ArrayBuffer(24 * MiB);
    const bytes = Buffer.from(ab);
    randomBytes(22 * MiB, 4).copy(bytes);
    const want2 = Buffer.from(bytes.subarray(1000, 1000 + 21 * MiB));
    ledger.hold(ab);
    // a data pack's blobs are copied into its own buffer, but one larger than what that buffer holds
    // (a 16 MiB pack, one largest chunk and its header) stays a view of the caller's buffer: the first
    // pack (4 MiB) is full after it, and its write waits on the gate
    await repo.addSealedBlob(BlobType.Data, id(1), bytes.subarray(0, 1000), 1000, false, ledger);
    await repo.addSealedBlob(
      BlobType.Data,
      id(2),
      bytes.subarray(1000, 1000 + 21 * MiB),
      21 * MiB,
      false,
      ledger,
    );
    // a blob copied into the next pack: its buffer goes back as soon as the caller lets go
    const copied = new ArrayBuffer(MiB);
    const want3 = randomBytes(MiB, 5);
    want3.copy(Buffer.from(copied));
    ledger.hold(copied);
    await repo.addSealedBlob(BlobType.Data, id(3), Buffer.from(copied), MiB, false, ledger);
    ledger.release(copied);
    expect(given).toEqual([copied]);
    Buffer.from(copied).fill(7); // the caller seals into it again before that pack is written
    // a buffer nobody held is never handed back
    const other = new ArrayBuffer(MiB);
    await repo.addSealedBlob(BlobType.Data, id(4), Buffer.from(other), MiB, false, ledger);
    ledger.release(ab);
    await new Promise((r) => setTimeout(r, 20));
    expect(given).toEqual([copied]); // the first pack, which refers to `ab`, is not written yet
    // a buffer none of whose blobs went into a pack goes back as soon as the caller lets go
    const unused = new ArrayBuffer(MiB);
    ledger.hold(unused);
    ledger.release(unused);
    expect(given).toEqual([copied, unused]);
    store.open();
    await repo.flush();
    expect(given).toEqual([copied, unused, ab]);
    expect(given).not.toContain(other);
    // the blobs are stored intact, copied or not
    bytes.fill(7); // reused once given back
    const blob = async (n: number) => (await repo.loadSealedBlob(id(n).toString('hex'))).sealed;
    expect((await blob(2)).equals(want2)).toBe(true);
    expect((await blob(3)).equals(want3)).toBe(true);
    ledger.close();
  });

  it('packs are written as many at a time as the store says (a disk: one; others: two)', async () => {
    class CountingBackend extends MemoryBackend {
      inFlight = 0;
      most = 0;
      constructor(readonly writeConcurrency?: number) {
        super();
      }
      override async save(type: ObjectType, name: string, data: Uint8Array, options?: SaveOptions) {
        if (type !== 'data') return super.save(type, name, data, options);
        this.most = Math.max(this.most, ++this.inFlight);
        await new Promise((r) => setTimeout(r, 30));
        this.inFlight--;
        return super.save(type, name, data, options);
      }
    }
    for (const [concurrency, most] of [
      [1, 1],
      [undefined, 2],
    ] as const) {
      const store = new CountingBackend(concurrency);
      const repo = await Repository.init(store, 'pw', { kdf: { N: 1024 } });
      for (let i = 0; i < 12; i++) {
        const blob = randomBytes(3 * MiB, 100 + i);
        await repo.addSealedBlob(BlobType.Data, id(i + 1), blob, blob.length, false);
      }
      await repo.flush();
      expect(store.most).toBe(most);
    }
  });

  it('a worker is moved no more kept buffers than it has room for', async () => {
    // a worker keeps WORKER_SCRATCH_BYTES of them; one it is moved beyond that it lets go, and a buffer let
    // go in a worker lingers until that thread's next collection
    const pool = new WorkerPool(
      {
        encryptionKey: Buffer.alloc(32, 1),
        idKey: Buffer.alloc(32, 2),
        chunker: { min: 64 * 1024, avg: 256 * 1024, max: MiB },
        chunkerSeed: '00',
        compressionLevel: 1,
        readLimit: 0,
        lowPriority: false,
      },
      1,
    );
    try {
      const size = WORKER_SCRATCH_BYTES / 2; // whole MiBs: a shape the worker keeps
      for (let i = 0; i < 2; i++) pool.spares.keepSealed(new ArrayBuffer(size));
      expect(pool.spares.sealedCount).toBe(2);
      const seal = () =>
        pool.run({ op: 'seal', chunks: [{ id: new Uint8Array(32), data: new Uint8Array(1000) }] });
      await seal(); // moved both with it: the worker's room is used up
      expect(pool.spares.sealedCount).toBe(0);
      pool.spares.keepSealed(new ArrayBuffer(size));
      await seal(); // its answer said it has no room left: the third stays here
      await seal();
      expect(pool.spares.sealedCount).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it('backups that seal into recycled buffers restore byte for byte', async () => {
    const work = await tempDir('tm-bufret-');
    const src = path.join(work, 'src');
    await fs.mkdir(path.join(src, 'small'), { recursive: true });
    const line = (i: number) => `row ${i}: the quick brown fox jumps over the lazy dog ${i * 7919}\n`;
    const text = (n: number, seed: number) =>
      Buffer.from(Array.from({ length: n }, (_, i) => line(i * seed)).join(''));
    await fs.writeFile(path.join(src, 'a.log'), text(200_000, 3)); // ~14 MiB of text
    await fs.writeFile(path.join(src, 'b.bin'), randomBytes(12 * MiB + 5, 7));
    for (let i = 0; i < 300; i++)
      await fs.writeFile(
        path.join(src, 'small', `f${i}.txt`),
        i % 3 ? text(100 + i, i) : randomBytes(4000 + i, i),
      );
    const repo = await Repository.init(new MemoryBackend(), 'pw', { kdf: { N: 1024 } });
    const first = await backup(repo, { paths: [src], workers: 2 });
    expect(spareSealedCount()).toBeGreaterThan(0); // buffers came back once their packs were written
    // new content, sealed into the buffers the first backup gave back
    await fs.writeFile(path.join(src, 'c.log'), text(150_000, 11));
    await fs.writeFile(path.join(src, 'd.bin'), randomBytes(9 * MiB, 13));
    for (let i = 0; i < 300; i++)
      await fs.writeFile(
        path.join(src, 'small', `g${i}.txt`),
        i % 2 ? text(90 + i, i + 5) : randomBytes(3000 + i, 77 + i),
      );
    const second = await backup(repo, { paths: [src], workers: 2, parent: first.snapshotId });
    for (const snap of [first.snapshotId, second.snapshotId]) {
      const target = path.join(work, `out-${snap.slice(0, 8)}`);
      await restore(repo, { snapshot: snap, target, relativeTo: src });
      if (snap === second.snapshotId) expectSameTrees(await describeTree(src), await describeTree(target));
    }
    // the first snapshot is still whole after the second backup reused its buffers
    const firstOut = path.join(work, `out-${first.snapshotId.slice(0, 8)}`);
    expect((await fs.readFile(path.join(firstOut, 'a.log'))).equals(text(200_000, 3))).toBe(true);
    expect((await fs.readFile(path.join(firstOut, 'b.bin'))).equals(randomBytes(12 * MiB + 5, 7))).toBe(true);
    expect(await fs.readdir(path.join(firstOut, 'small'))).toHaveLength(300);
  });
});
