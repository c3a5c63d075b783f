import { describe, expect, it } from 'vitest';
import { RequestLogBackend, type RequestRecord } from './index.js';
import { MemoryBackend } from '../memory/index.js';
import { NotFoundError } from '../../errors.js';
import { backendConformance } from '../conformance.js';

describe('request log', () => {
  it('records every operation with bytes, duration and outcome, and keeps totals', async () => {
    const records: RequestRecord[] = [];
    let t = 1000;
    const b = new RequestLogBackend(
      new MemoryBackend(),
      (r) => records.push(r),
      () => (t += 5),
    );
    await b.save('data', 'd1', Buffer.alloc(300));
    await b.save('index', 'i1', Buffer.alloc(20));
    await b.load('data', 'd1', 0, 100);
    await expect(b.load('data', 'nope')).rejects.toBeInstanceOf(NotFoundError);
    for await (const _ of b.list('data'));
    expect(records.map((r) => [r.op, r.type, r.bytes, r.ok])).toEqual([
      ['save', 'data', 300, true],
      ['save', 'index', 20, true],
      ['load', 'data', 100, true],
      ['load', 'data', 0, false],
      ['list', 'data', 1, true],
    ]);
    expect(records[3].error).toMatchObject({ name: 'NotFoundError', code: 'NOT_FOUND' });
    expect(records.every((r) => r.ms === 5)).toBe(true);
    expect(b.totals).toMatchObject({ requests: 5, failed: 1, bytesUp: 320, bytesDown: 100 });
    expect(b.totals.byOp.save).toBe(2);
  });

  it('never lets a failing sink break the operation', async () => {
    const b = new RequestLogBackend(new MemoryBackend(), () => {
      throw new Error('disk full');
    });
    await b.save('keys', 'k', Buffer.from('x'));
    expect((await b.load('keys', 'k')).toString()).toBe('x');
  });
});

backendConformance('request log over memory', async () => new RequestLogBackend(new MemoryBackend()));
