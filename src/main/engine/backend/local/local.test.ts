import { describe, it, expect, afterEach, vi } from 'vitest';
import fs from 'node:fs/promises';
import fss from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { LocalBackend } from './index.js';
import { savePack } from '../../repo/pack.js';
import { MemoryBackend } from '../memory/index.js';
import { O_DIRECT, directIoFilesystem, takeAligned } from '../../aligned.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fs.rm(d, { recursive: true, force: true });
});

describe('local backend: gathered writes', () => {
  it('stores parts as their exact concatenation (empty parts, more parts than one writev takes)', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tm-local-parts-'));
    dirs.push(dir);
    const b = new LocalBackend(dir);
    await b.init();
    const parts: Buffer[] = [];
    for (let i = 0; i < 2500; i++) parts.push(crypto.randomBytes(i % 7 === 0 ? 0 : (i * 37) % 5000));
    parts.push(crypto.randomBytes(3 * 1024 * 1024));
    const whole = Buffer.concat(parts);
    const name = crypto.createHash('sha256').update(whole).digest('hex');
    await savePack(b, name, parts);
    expect((await b.load('data', name)).equals(whole)).toBe(true);
    expect((await b.stat('data', name)).size).toBe(whole.length);
    // no temporary file is left next to it
    expect((await fs.readdir(path.join(dir, 'data', name.slice(0, 2)))).sort()).toEqual([name]);
  });

  it('backends without gathered writes get the concatenation', async () => {
    const m = new MemoryBackend();
    await m.init();
    const parts = [Buffer.from('ab'), Buffer.alloc(0), Buffer.from('cde')];
    await savePack(m, 'p1', parts);
    expect((await m.load('data', 'p1')).toString()).toBe('abcde');
  });
});

describe('local backend: packs past the page cache (O_DIRECT)', () => {
  const sizes = [
    1024 * 1024, // the smallest written direct: exactly one staging buffer
    1024 * 1024 + 1,
    4 * 1024 * 1024 - 1,
    4 * 1024 * 1024,
    4 * 1024 * 1024 + 4096,
    9 * 1024 * 1024 + 123,
  ];
  const reason =
    O_DIRECT === undefined
      ? 'this platform has no O_DIRECT (packs are written through the page cache)'
      : process.env.TIDEMARK_NO_DIRECT_IO === '1'
        ? 'TIDEMARK_NO_DIRECT_IO=1'
        : undefined;
  (reason ? it.skip : it)(
    `writes packs of any size byte for byte, the last block padded and cut${reason ? ` (skipped: ${reason})` : ''}`,
    async () => {
      // os.tmpdir() is on a disk filesystem here (CI and this VM); /dev/shm (tmpfs) refuses O_DIRECT
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tm-local-direct-'));
      dirs.push(dir);
      const b = new LocalBackend(dir);
      await b.init();
      for (const size of sizes) {
        // parts of odd sizes, so no part boundary falls on a staging or block boundary
        const parts: Buffer[] = [];
        for (let left = size; left > 0;) {
          const n = Math.min(left, 1 + crypto.randomInt(300_000));
          parts.push(crypto.randomBytes(n));
          left -= n;
        }
        const whole = Buffer.concat(parts);
        const name = crypto.createHash('sha256').update(whole).digest('hex');
        await savePack(b, name, parts);
        expect((await b.load('data', name)).equals(whole)).toBe(true);
        expect((await fs.stat(path.join(dir, 'data', name.slice(0, 2), name))).size).toBe(size);
      }
      // direct where the temp folder is on a local disk's filesystem (ext4 here), else through the cache
      const direct = (await directIoFilesystem(dir)) ? sizes.length : 0;
      expect(b.directWrites).toBe(direct);
      // small objects still go through the page cache
      await savePack(b, 'a'.repeat(64), [Buffer.from('small')]);
      expect(b.directWrites).toBe(direct);
    },
  );

  (reason ? it.skip : it)(
    `writes a pack gathered in aligned memory in one call, padded and cut${reason ? ` (skipped: ${reason})` : ''}`,
    async () => {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tm-local-gathered-'));
      dirs.push(dir);
      const b = new LocalBackend(dir);
      await b.init();
      const mem = takeAligned(8 * 1024 * 1024)!;
      const probe = await fs.open(path.join(dir, 'probe'), 'w');
      const handleProto = Object.getPrototypeOf(probe) as fs.FileHandle;
      await probe.close();
      for (const size of [4 * 1024 * 1024, 5 * 1024 * 1024 + 77]) {
        crypto.randomFillSync(mem, 0, size);
        mem.fill(0xee, size); // what lies past the pack must not reach the file
        const whole = Buffer.from(mem.subarray(0, size));
        const name = crypto.createHash('sha256').update(whole).digest('hex');
        const write = vi.spyOn(handleProto, 'write');
        await savePack(b, name, [mem.subarray(0, size)]);
        const writes = write.mock.calls.length;
        write.mockRestore();
        expect((await b.load('data', name)).equals(whole)).toBe(true);
        expect((await fs.stat(path.join(dir, 'data', name.slice(0, 2), name))).size).toBe(size);
        // straight from the pack's memory, where a 1 MiB stage takes a write per MiB
        if (await directIoFilesystem(dir)) expect(writes).toBe(1);
      }
      expect(b.directWrites).toBe((await directIoFilesystem(dir)) ? 2 : 0);
    },
  );

  it('falls back to the page cache, byte for byte, where the filesystem refuses O_DIRECT (EINVAL)', async () => {
    // a filesystem that refuses O_DIRECT at open (some network and FUSE filesystems), simulated: the real
    // ones here (ext4, tmpfs since Linux 6.6) accept it
    let refused = 0;
    const open = fs.open.bind(fs);
    const spy = vi.spyOn(fs, 'open').mockImplementation((async (p: string, flags: number, mode?: number) => {
      if (O_DIRECT !== undefined && typeof flags === 'number' && flags & O_DIRECT) {
        refused++;
        throw Object.assign(new Error('EINVAL: invalid argument, open'), { code: 'EINVAL' });
      }
      return open(p, flags, mode);
    }) as typeof fs.open);
    try {
      const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'tm-local-nodirect-'));
      dirs.push(dir);
      const b = new LocalBackend(dir);
      await b.init();
      for (const size of [2 * 1024 * 1024 + 5, 3 * 1024 * 1024]) {
        const whole = crypto.randomBytes(size);
        const name = crypto.createHash('sha256').update(whole).digest('hex');
        await savePack(b, name, [whole.subarray(0, 1000), whole.subarray(1000)]);
        expect((await b.load('data', name)).equals(whole)).toBe(true);
        expect(await fs.readdir(path.join(dir, 'data', name.slice(0, 2)))).toEqual([name]);
      }
      expect(b.directWrites).toBe(0);
      // refused once, then not asked again
      expect(refused).toBe(O_DIRECT === undefined ? 0 : 1);
    } finally {
      spy.mockRestore();
    }
  });
});

describe('direct I/O only on a local disk’s filesystem', () => {
  it('says no for tmpfs (and for anything it cannot ask about)', async () => {
    let shm = true;
    await fs.access('/dev/shm').catch(() => (shm = false));
    if (shm) expect(await directIoFilesystem('/dev/shm')).toBe(false);
    expect(await directIoFilesystem('/no/such/place')).toBe(false);
  });

  const shm = fss.existsSync('/dev/shm');
  it.skipIf(!shm)(
    `writes packs through the page cache into a tmpfs repository${shm ? '' : ' (skipped: no /dev/shm here)'}`,
    async () => {
      const dir = await fs.mkdtemp('/dev/shm/tm-local-shm-');
      dirs.push(dir);
      const b = new LocalBackend(dir);
      await b.init();
      const whole = crypto.randomBytes(3 * 1024 * 1024 + 7);
      const name = crypto.createHash('sha256').update(whole).digest('hex');
      await savePack(b, name, [whole]);
      expect((await b.load('data', name)).equals(whole)).toBe(true);
      expect(b.directWrites).toBe(0);
    },
  );
});
