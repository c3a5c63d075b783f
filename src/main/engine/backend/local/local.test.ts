import { describe, it, expect, afterEach } from 'vitest';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';
import { LocalBackend } from './index.js';
import { savePack } from '../../repo/pack.js';
import { MemoryBackend } from '../memory/index.js';

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
