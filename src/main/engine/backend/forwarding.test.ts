/**
 * The wrappers' base (forwarding.ts): a wrapper overrides only what it changes, and the optional
 * capabilities are neither lost (a wrapper that does not touch reads or writes offers what its store
 * offers) nor a way around a wrapper (one that counts, limits, retries or alters reads offers no
 * `localFile`; one that changes saves offers no `saveParts` unless it has its own).
 */
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ForwardingBackend, forwardingWriter } from './forwarding.js';
import { LocalBackend } from './local/index.js';
import { MemoryBackend } from './memory/index.js';
import { ReadOnlyBackend } from './readonly/index.js';
import { RetryBackend } from './retry/index.js';
import { ThrottleBackend } from './throttle/index.js';
import { RequestLogBackend, type RequestRecord } from './requestlog/index.js';
import { FaultyBackend } from './faulty/index.js';
import { AppendOnlyBackend } from './appendonly/index.js';
import { openBackend } from './open.js';
import type { Backend, ObjectType } from './types.js';

const dirs: string[] = [];
const folder = async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tm-forwarding-'));
  dirs.push(dir);
  const store = new LocalBackend(dir);
  await store.init();
  return store;
};
afterAll(async () => {
  for (const d of dirs) await fs.rm(d, { recursive: true, force: true });
});

const offers = (b: Backend) => ({ saveParts: !!b.saveParts, localFile: !!b.localFile });
const streams = (b: Backend) => !!b.openWriter;
/** Writes a small pack through a backend's streamed writer and names it `name`. */
async function streamed(b: Backend, name: string, bytes: Buffer): Promise<void> {
  const w = b.openWriter!('data');
  await w.write(bytes);
  await w.flush();
  await w.commit(name);
}

describe('storage wrappers on the forwarding base', () => {
  it('a wrapper that changes nothing forwards every call and every capability of its store', async () => {
    const store = await folder();
    const plain = new (class extends ForwardingBackend {})(store);
    expect(offers(plain)).toEqual({ saveParts: true, localFile: true });
    expect(streams(plain)).toBe(true);
    expect(plain.location).toBe(store.location);
    expect(plain.writeConcurrency).toBe(store.writeConcurrency);
    await plain.saveParts!('data', 'p1', [Buffer.from('ab'), Buffer.from('cd')]);
    expect((await store.load('data', 'p1')).toString()).toBe('abcd');
    expect(plain.localFile!('data', 'p1')).toBe(store.localFile('data', 'p1'));
    expect((await plain.load('data', 'p1', 1, 2)).toString()).toBe('bc');
    expect((await plain.stat('data', 'p1')).size).toBe(4);
    const names: string[] = [];
    for await (const o of plain.list('data')) names.push(o.name);
    expect(names).toEqual(['p1']);
    await plain.remove('data', 'p1');
    await expect(store.stat('data', 'p1')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    // a store without the optional calls: none offered, and the clock is ours
    const mem = new (class extends ForwardingBackend {})(new MemoryBackend());
    expect(offers(mem)).toEqual({ saveParts: false, localFile: false });
    expect(streams(mem)).toBe(false);
    const before = Date.now();
    expect(await mem.storeNow()).toBeGreaterThanOrEqual(before);
  });

  it('a wrapper that changes reads offers no reads past it; one that changes saves no gathered saves', async () => {
    const store = await folder();
    const loads: string[] = [];
    const counting = new (class extends ForwardingBackend {
      override load(type: ObjectType, name: string, offset?: number, length?: number) {
        loads.push(name);
        return super.load(type, name, offset, length);
      }
    })(store);
    expect(offers(counting)).toEqual({ saveParts: true, localFile: false });
    const saves: string[] = [];
    const writing = new (class extends ForwardingBackend {
      override save(type: ObjectType, name: string, data: Uint8Array) {
        saves.push(name);
        return super.save(type, name, data);
      }
    })(store);
    expect(offers(writing)).toEqual({ saveParts: false, localFile: true });
    expect(streams(counting)).toBe(true);
    expect(streams(writing)).toBe(false); // a stream would pass its save by
    // below another wrapper, a capability it withholds stays withheld
    expect(offers(new (class extends ForwardingBackend {})(counting))).toEqual({
      saveParts: true,
      localFile: false,
    });
  });

  it('each wrapper offers what it did before it had the base', async () => {
    const store = await folder();
    const records: RequestRecord[] = [];
    expect(offers(new ReadOnlyBackend(store))).toEqual({ saveParts: false, localFile: true });
    expect(offers(new RetryBackend(store))).toEqual({ saveParts: false, localFile: false });
    expect(offers(new ThrottleBackend(store))).toEqual({ saveParts: false, localFile: false });
    expect(offers(new FaultyBackend(store))).toEqual({ saveParts: false, localFile: false });
    // append-only checks writes in both its saves, and reads pass
    expect(offers(new AppendOnlyBackend(store))).toEqual({ saveParts: true, localFile: true });
    // append-only streams too, and still never writes over an object: a pack already there is kept
    const appendOnly = new AppendOnlyBackend(store);
    expect(streams(appendOnly)).toBe(true);
    await streamed(appendOnly, 'p5', Buffer.from('first'));
    await streamed(appendOnly, 'p5', Buffer.from('other'));
    expect((await store.load('data', 'p5')).toString()).toBe('first');
    const left: string[] = [];
    for (const e of await fs.readdir(path.join(store.location, 'data'), { recursive: true }))
      if (path.basename(e).startsWith('.')) left.push(e);
    expect(left).toEqual([]); // the dropped copy's temporary file is gone
    const logged = new RequestLogBackend(store, (r) => records.push(r));
    expect(offers(logged)).toEqual({ saveParts: true, localFile: false });
    await logged.saveParts!('data', 'p2', [Buffer.from('x'), Buffer.from('yz')]);
    expect(records).toMatchObject([{ op: 'save', type: 'data', name: 'p2', bytes: 3, ok: true }]);
    expect(offers(new RequestLogBackend(new MemoryBackend()))).toEqual({
      saveParts: false,
      localFile: false,
    });
    // streamed writes: never past a wrapper that limits, retries, refuses or alters saves (the backup then
    // saves whole packs through it); logged by the request log, checked by append-only
    expect(streams(new ReadOnlyBackend(store))).toBe(false);
    expect(streams(new RetryBackend(store))).toBe(false);
    expect(streams(new ThrottleBackend(store))).toBe(false);
    expect(streams(new FaultyBackend(store))).toBe(false);
    expect(streams(logged)).toBe(true);
    await streamed(logged, 'p3', Buffer.from('streamed'));
    expect(records.at(-1)).toMatchObject({ op: 'save', type: 'data', name: 'p3', bytes: 8, ok: true });
    expect((await store.load('data', 'p3')).toString()).toBe('streamed');
    expect(streams(await openBackend(store.location))).toBe(true); // a folder job's default stack
    expect(streams(await openBackend(store.location, { uploadBytesPerSec: 1e9 }))).toBe(false);
    expect(streams(await openBackend(store.location, { retry: true }))).toBe(false);
    // a failed streamed save is logged as a failed save
    const failing = new RequestLogBackend(
      new (class extends ForwardingBackend {
        override openWriter = (type: ObjectType) =>
          forwardingWriter(store.openWriter(type), { flush: () => Promise.reject(new Error('EIO')) });
      })(store),
      (r) => records.push(r),
    );
    await expect(streamed(failing, 'p4', Buffer.from('x'))).rejects.toThrow('EIO');
    expect(records.at(-1)).toMatchObject({ op: 'save', type: 'data', ok: false });
    // a restore's stack over a folder: the workers read its packs themselves
    const opened = await openBackend(store.location, { readOnly: true });
    expect(offers(opened)).toEqual({ saveParts: false, localFile: true });
    // with a download limit they may not (the limit would not see their reads)
    const limited = await openBackend(store.location, { readOnly: true, downloadBytesPerSec: 1e9 });
    expect(offers(limited)).toEqual({ saveParts: false, localFile: false });
  });
});
