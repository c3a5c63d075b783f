/**
 * Data packs written as they fill (./stream.ts, repo/pack.ts PackStream): the same bytes and name as a
 * pack gathered whole; nothing under a pack's name until it is whole; a failure mid-pack leaves nothing
 * and says what happened; a crash's temporary file is never listed and prune removes it; what the
 * writers hold is bounded by the stage pool, not by the pack.
 */
import { describe, it, expect, afterEach, vi } from 'vitest';
import fs from 'node:fs/promises';
import fss from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { LocalBackend } from './index.js';
import { STREAM_STAGE, TEMP_PREFIX } from './stream.js';
import { PackBuilder, PackStream, decodeHeader } from '../../repo/pack.js';
import { BlobType } from '../../repo/blobIndex.js';
import { newMasterKey, storageId } from '../../crypto/index.js';
import { directIoFilesystem } from '../../aligned.js';
import { DestinationFullError } from '../../errors.js';
import { Repository, initRepository } from '../../repo/repository.js';
import { FaultyBackend } from '../faulty/index.js';
import { prune } from '../../repo/retention.js';

const dirs: string[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

async function folder(base = os.tmpdir()): Promise<{ dir: string; b: LocalBackend }> {
  const dir = await fs.mkdtemp(path.join(base, 'tm-stream-'));
  dirs.push(dir);
  const b = new LocalBackend(dir);
  await b.init();
  return { dir, b };
}

const listed = async (b: LocalBackend) => {
  const names: string[] = [];
  for await (const o of b.list('data')) names.push(o.name);
  return names;
};

/** Files anywhere under data/ (temporary ones included). */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await fs.readdir(path.join(dir, 'data'), { withFileTypes: true, recursive: true }))
    if (e.isFile()) out.push(e.name);
  return out.sort();
}

const MiB = 1024 * 1024;
const sizes = [0, 1, 5000, STREAM_STAGE - 7, STREAM_STAGE + 4096, 2 * STREAM_STAGE + 13, 70_000, 3 * MiB + 1];

async function streamAndGather(dir: string, b: LocalBackend, blobSizes: number[]) {
  const key = newMasterKey();
  const blobs = blobSizes.map((n) => ({ id: crypto.randomBytes(32), data: crypto.randomBytes(n) }));
  const gathered = new PackBuilder(key);
  for (const x of blobs) gathered.add(x.id, BlobType.Data, false, x.data.length + 1, x.data);
  const whole = gathered.finish();
  const stream = new PackStream(key, (o) => b.openWriter('data', o));
  for (const x of blobs) {
    const copy = Buffer.from(x.data);
    await stream.add(x.id, BlobType.Data, false, copy.length + 1, copy);
    copy.fill(0xee); // the caller's buffer is free once add has settled
  }
  // while it is written, nothing but a temporary file is there, and no listing shows it
  expect(await listed(b)).toEqual([]);
  const during = await filesUnder(dir);
  expect(during.every((n) => n.startsWith(TEMP_PREFIX))).toBe(true);
  const done = await stream.finish();
  const bytes = await b.load('data', done.id);
  // the gathered pack's bytes but for its header's sealing (a fresh nonce each time): the same blobs at
  // the same offsets, a header listing the same entries, the same size; and the name is the bytes' hash
  const gatheredBytes = Buffer.concat(whole.parts);
  const blobBytes = blobSizes.reduce((a, n) => a + n, 0);
  expect(bytes.length).toBe(gatheredBytes.length);
  expect(bytes.subarray(0, blobBytes).equals(gatheredBytes.subarray(0, blobBytes))).toBe(true);
  const entries = (x: Buffer) =>
    decodeHeader(key, x, x.length, 'p').map((h) => [h.id.toString('hex'), h.offset, h.length, h.rawLength]);
  expect(entries(bytes)).toEqual(entries(gatheredBytes));
  expect(done.id).toBe(storageId(bytes));
  expect(done.size).toBe(bytes.length);
  return { key, whole, done, bytes };
}

describe('streamed data packs (LocalBackend.openWriter, PackStream)', () => {
  it('write the bytes a gathered pack has, under the same name, and leave no temporary file', async () => {
    const { dir, b } = await folder();
    const { done } = await streamAndGather(dir, b, sizes);
    expect(await filesUnder(dir)).toEqual([done.id]);
    expect(await listed(b)).toEqual([done.id]);
    // written past the page cache where the filesystem does it (./direct.ts decides as for a gathered pack)
    expect(b.directWrites).toBe((await directIoFilesystem(dir)) ? 1 : 0);
    expect(b.stages.inUse).toBe(0);
  });

  const shm = fss.existsSync('/dev/shm');
  it.skipIf(!shm)(
    `write through the page cache where direct I/O is not wanted (tmpfs)${shm ? '' : ' (skipped: no /dev/shm here)'}`,
    async () => {
      const { dir, b } = await folder('/dev/shm');
      const { done } = await streamAndGather(dir, b, [10, STREAM_STAGE * 2 + 5, 333]);
      expect(await listed(b)).toEqual([done.id]);
      expect(b.directWrites).toBe(0);
    },
  );

  it('hold no more stages than the pool allows, however large the pack', async () => {
    const { b } = await folder();
    const key = newMasterKey();
    let most = 0;
    const stream = new PackStream(key, (o) =>
      b.openWriter('data', {
        ...o,
        inFlightBytes: 2 * STREAM_STAGE,
        observe: (bytes) => {
          o.observe!(bytes);
          most = Math.max(most, b.stages.inUse);
        },
      }),
    );
    const adds: (Promise<void> | undefined)[] = [];
    const blob = crypto.randomBytes(700_000);
    // added without waiting in between (as concurrent sealers do): kept in order, bounded all the same
    for (let i = 0; i < 40; i++) adds.push(stream.add(crypto.randomBytes(32), BlobType.Data, false, 1, blob));
    await Promise.all(adds);
    const done = await stream.finish();
    expect(done.size).toBeGreaterThan(26 * MiB);
    expect(most).toBeLessThanOrEqual(2);
    const bytes = await b.load('data', done.id);
    expect(storageId(bytes)).toBe(done.id);
    expect(decodeHeader(key, bytes, bytes.length, 'p')).toHaveLength(40);
  });

  it('a full disk mid-pack: a named error, no pack, no temporary file, and later writes refused', async () => {
    const { dir, b } = await folder();
    const open = fs.open.bind(fs);
    let written = 0;
    vi.spyOn(fs, 'open').mockImplementation((async (...args: Parameters<typeof fs.open>) => {
      const fh = await open(...args);
      const write = fh.write.bind(fh) as (...a: unknown[]) => Promise<{ bytesWritten: number }>;
      (fh as unknown as { write: unknown }).write = async (...a: unknown[]) => {
        if (written >= 3 * STREAM_STAGE)
          throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
        const r = await write(...a);
        written += r.bytesWritten;
        return r;
      };
      return fh;
    }) as typeof fs.open);
    const stream = new PackStream(newMasterKey(), (o) => b.openWriter('data', o));
    let refused: unknown;
    for (let i = 0; i < 12 && !refused; i++)
      await stream
        .add(crypto.randomBytes(32), BlobType.Data, false, 1, crypto.randomBytes(STREAM_STAGE))
        ?.catch((err: unknown) => (refused = err));
    const err = await stream.finish().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DestinationFullError);
    expect((err as Error).message).toMatch(/destination is full while writing a new pack/);
    if (refused) expect(refused).toBe(err); // a write after the failure says the same
    expect(await filesUnder(dir)).toEqual([]);
    expect(await listed(b)).toEqual([]);
    expect(b.stages.inUse).toBe(0);
  });

  it('a disk error mid-pack stops the backup’s writes with it, in context, and leaves no pack', async () => {
    const { dir, b } = await folder();
    await (await initRepository(b, 'pw', { kdf: { N: 1024 } })).close();
    const repo = await Repository.open(b, 'pw');
    const open = fs.open.bind(fs);
    vi.spyOn(fs, 'open').mockImplementation((async (...args: Parameters<typeof fs.open>) => {
      const fh = await open(...args);
      if (String(args[0]).includes(TEMP_PREFIX + 'w-'))
        (fh as unknown as { write: unknown }).write = async () => {
          throw Object.assign(new Error('EIO: i/o error, write'), { code: 'EIO' });
        };
      return fh;
    }) as typeof fs.open);
    const err = await (async () => {
      for (let i = 0; i < 40; i++) await repo.saveBlob(BlobType.Data, crypto.randomBytes(700_000));
      await repo.flush();
    })().catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/^writing a data pack: EIO: i\/o error, write$/);
    await repo.close();
    expect(await filesUnder(dir)).toEqual([]); // no pack, and no temporary file
  });

  it('a pack abandoned mid-way (a run that stops) leaves nothing', async () => {
    const { dir, b } = await folder();
    const stream = new PackStream(newMasterKey(), (o) => b.openWriter('data', o));
    await stream.add(crypto.randomBytes(32), BlobType.Data, false, 1, crypto.randomBytes(3 * STREAM_STAGE));
    await stream.abort();
    expect(await filesUnder(dir)).toEqual([]);
    expect(b.stages.inUse).toBe(0);
  });

  it('a crash’s temporary files are never taken for packs, and prune removes them once old', async () => {
    const { dir, b } = await folder();
    const repo = await initRepository(b, 'pw', { kdf: { N: 1024 } });
    await repo.saveBlob(BlobType.Data, crypto.randomBytes(100_000));
    await repo.flush();
    // what a crash mid-pack leaves: a temporary file in data/ (and one of a whole-object save in a subfolder)
    const old = path.join(dir, 'data', `${TEMP_PREFIX}w-0123456789abcdef`);
    await fs.writeFile(old, crypto.randomBytes(5000));
    const sub = (await fs.readdir(path.join(dir, 'data'))).find((n) => !n.startsWith('.'))!;
    const oldSave = path.join(dir, 'data', sub, `${TEMP_PREFIX}${'ab'.repeat(32)}-0a0b0c0d0e0f`);
    await fs.writeFile(oldSave, 'x');
    const young = path.join(dir, 'data', `${TEMP_PREFIX}w-fedcba9876543210`);
    await fs.writeFile(young, 'y');
    const hourAgo = new Date(Date.now() - 3600_000);
    await fs.utimes(old, hourAgo, hourAgo);
    await fs.utimes(oldSave, hourAgo, hourAgo);
    expect(await listed(b)).toHaveLength(1);
    await prune(repo, { graceMs: 60_000 });
    expect(fss.existsSync(old)).toBe(false);
    expect(fss.existsSync(oldSave)).toBe(false);
    expect(fss.existsSync(young)).toBe(true); // maybe a running writer's: kept for now
  });

  it('a repository streams its data packs into a folder, and saves them whole through a wrapper that changes saves', async () => {
    const { b } = await folder();
    await (await initRepository(b, 'pw', { kdf: { N: 1024 } })).close();
    const repo = await Repository.open(b, 'pw');
    const gathered = vi.spyOn(b, 'saveParts');
    const blobs: [string, Buffer][] = [];
    for (let i = 0; i < 12; i++) {
      const data = crypto.randomBytes(700_000);
      blobs.push([await repo.saveBlob(BlobType.Data, data), data]);
    }
    await repo.flush();
    expect(gathered).not.toHaveBeenCalled();
    expect((await listed(b)).length).toBeGreaterThanOrEqual(2); // the first packs are 4 MiB
    for (const [id, data] of blobs) expect((await repo.loadBlob(id)).equals(data)).toBe(true);
    await repo.close();

    // a fault injector over the folder still sees (and fails) every data pack's save
    const { dir: dir2, b: b2 } = await folder();
    await (await initRepository(b2, 'pw', { kdf: { N: 1024 } })).close();
    const faulty = new FaultyBackend(b2, [
      { op: 'save', type: 'data', effect: { throw: () => new Error('injected') } },
    ]);
    const repo2 = await Repository.open(faulty, 'pw');
    await repo2.saveBlob(BlobType.Data, crypto.randomBytes(100_000));
    await expect(repo2.flush()).rejects.toThrow('injected');
    expect(faulty.calls.save).toBeGreaterThan(0);
    expect(await filesUnder(dir2)).toEqual([]);
  });
});
