/**
 * The one conformance suite every backend must pass (docs/architecture.md §1 rule 8). Call it from a test file
 * with a factory that returns a fresh, empty backend; it registers vitest tests.
 */
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import crypto from 'node:crypto';
import type { Backend, ObjectType } from './types.js';
import { NotFoundError, ObjectExistsError } from '../errors.js';

export function backendConformance(
  name: string,
  make: () => Promise<Backend>,
  cleanup?: (b: Backend) => Promise<void>,
): void {
  describe(`backend conformance: ${name}`, () => {
    let b: Backend;
    beforeEach(async () => {
      b = await make();
      await b.init();
    });
    afterEach(async () => {
      await b.close();
      await cleanup?.(b);
    });

    const id = () => crypto.randomBytes(32).toString('hex');
    const collect = async (type: ObjectType) => {
      const out: { name: string; size: number }[] = [];
      for await (const o of b.list(type)) out.push(o);
      return out.sort((x, y) => x.name.localeCompare(y.name));
    };

    it('round-trips objects of every type byte for byte', async () => {
      for (const type of ['keys', 'data', 'index', 'snapshots', 'locks'] as ObjectType[]) {
        const data = crypto.randomBytes(1000 + Math.floor(Math.random() * 5000));
        const n = id();
        await b.save(type, n, data);
        expect(Buffer.compare(await b.load(type, n), data)).toBe(0);
        expect((await b.stat(type, n)).size).toBe(data.length);
      }
    });

    it('reads ranges, including the last byte and a range that runs past the end', async () => {
      const data = crypto.randomBytes(10_000);
      const n = id();
      await b.save('data', n, data);
      expect(Buffer.compare(await b.load('data', n, 100, 50), data.subarray(100, 150))).toBe(0);
      expect(Buffer.compare(await b.load('data', n, 9_999, 1), data.subarray(9_999))).toBe(0);
      expect(Buffer.compare(await b.load('data', n, 9_000), data.subarray(9_000))).toBe(0);
    });

    it('stores empty objects', async () => {
      const n = id();
      await b.save('index', n, Buffer.alloc(0));
      expect((await b.load('index', n)).length).toBe(0);
      expect((await b.stat('index', n)).size).toBe(0);
    });

    it('throws NotFoundError for a missing object on load and stat', async () => {
      await expect(b.load('data', id())).rejects.toBeInstanceOf(NotFoundError);
      await expect(b.stat('snapshots', id())).rejects.toBeInstanceOf(NotFoundError);
    });

    it('lists exactly the saved objects of a type with their sizes', async () => {
      const names = [id(), id(), id()];
      for (const [i, n] of names.entries()) await b.save('data', n, Buffer.alloc(i + 1, i));
      await b.save('index', id(), Buffer.from('x'));
      const listed = await collect('data');
      expect(listed.map((o) => o.name)).toEqual([...names].sort());
      expect(listed.find((o) => o.name === names[2])?.size).toBe(3);
      expect(await collect('snapshots')).toEqual([]);
    });

    it('removes objects, and removing a missing object is fine', async () => {
      const n = id();
      await b.save('locks', n, Buffer.from('lock'));
      await b.remove('locks', n);
      await b.remove('locks', n);
      await expect(b.load('locks', n)).rejects.toBeInstanceOf(NotFoundError);
      expect(await collect('locks')).toEqual([]);
    });

    it('refuses a conditional write over an existing object and keeps the original', async () => {
      const n = id();
      await b.save('snapshots', n, Buffer.from('first'), { ifNotExists: true });
      await expect(
        b.save('snapshots', n, Buffer.from('second'), { ifNotExists: true }),
      ).rejects.toBeInstanceOf(ObjectExistsError);
      expect((await b.load('snapshots', n)).toString()).toBe('first');
    });

    it('reports whether a repository config exists', async () => {
      expect(await b.exists()).toBe(false);
      await b.save('config', 'config', Buffer.from('{}'));
      expect(await b.exists()).toBe(true);
    });

    it('handles many concurrent saves and loads', async () => {
      const items = Array.from({ length: 40 }, () => ({ n: id(), d: crypto.randomBytes(2048) }));
      await Promise.all(items.map((it) => b.save('data', it.n, it.d)));
      const back = await Promise.all(items.map((it) => b.load('data', it.n)));
      back.forEach((buf, i) => expect(Buffer.compare(buf, items[i].d)).toBe(0));
      expect((await collect('data')).length).toBe(40);
    });

    it('round-trips an object of several MiB', async () => {
      const data = crypto.randomBytes(12 * 1024 * 1024 + 17);
      const n = id();
      await b.save('data', n, data);
      const back = await b.load('data', n);
      expect(back.length).toBe(data.length);
      expect(crypto.createHash('sha256').update(back).digest('hex')).toBe(
        crypto.createHash('sha256').update(data).digest('hex'),
      );
    });
  });
}
