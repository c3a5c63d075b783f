import { describe, expect, it } from 'vitest';
import { ReadOnlyBackend, ReadOnlyError } from './index.js';
import { MemoryBackend } from '../memory/index.js';
import { FaultyBackend } from '../faulty/index.js';

describe('read-only wrapper', () => {
  it('passes reads through and refuses writes before they reach the store', async () => {
    const mem = new MemoryBackend();
    await mem.save('snapshots', 's1', Buffer.from('snap'));
    await mem.save('config', 'config', Buffer.from('{}'));
    const spy = new FaultyBackend(mem);
    const ro = new ReadOnlyBackend(spy);
    expect((await ro.load('snapshots', 's1')).toString()).toBe('snap');
    expect((await ro.load('snapshots', 's1', 1, 2)).toString()).toBe('na');
    expect((await ro.stat('snapshots', 's1')).size).toBe(4);
    expect(await ro.exists()).toBe(true);
    const names: string[] = [];
    for await (const o of ro.list('snapshots')) names.push(o.name);
    expect(names).toEqual(['s1']);

    await expect(ro.save('snapshots', 's2', Buffer.from('x'))).rejects.toBeInstanceOf(ReadOnlyError);
    await expect(ro.remove('snapshots', 's1')).rejects.toMatchObject({ code: 'READ_ONLY' });
    await ro.init();
    expect(spy.calls.save).toBe(0);
    expect(spy.calls.remove).toBe(0);
    expect((await mem.load('snapshots', 's1')).toString()).toBe('snap');
  });
});
