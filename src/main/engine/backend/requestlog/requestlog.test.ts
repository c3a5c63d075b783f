import { describe, expect, it } from 'vitest';
import { RequestLogBackend, RequestLogCollector, describeRequests, type RequestRecord } from './index.js';
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

describe('request log collector (what a run history keeps)', () => {
  const rec = (op: RequestRecord['op'], name: string, ok: boolean, ms = 1, bytes = 10): RequestRecord => ({
    op,
    type: 'data',
    name,
    bytes,
    at: 1000,
    ms,
    ok,
    ...(ok ? {} : { error: { name: 'Error', code: 'ECONNRESET', message: 'reset' } }),
  });

  it('counts everything, marks failures that were attempted again, and caps what it keeps', () => {
    const c = new RequestLogCollector({ failureCap: 2, recentCap: 3, slowestCap: 2 });
    c.record(rec('save', 'a', false));
    c.record(rec('save', 'a', true, 50, 100)); // the retry of a
    c.record(rec('load', 'b', false));
    c.record(rec('load', 'c', false)); // beyond the failure cap: counted, not kept
    c.record(rec('load', 'c', true, 7, 30)); // its retry still counts as one
    c.record(rec('stat', 'd', true, 20));
    const s = c.summary();
    expect(s).toMatchObject({
      requests: 6,
      failed: 3,
      retried: 2,
      bytesUp: 100,
      bytesDown: 30,
      failuresDropped: 1,
    });
    expect(s.byOp).toMatchObject({ save: 2, load: 3, stat: 1 });
    expect(s.failures.map((f) => [f.op, f.name, !!f.retried])).toEqual([
      ['save', 'a', true],
      ['load', 'b', false],
    ]);
    expect(s.recent.map((r) => r.name)).toEqual(['c', 'c', 'd']);
    expect(s.slowest.map((r) => r.ms)).toEqual([50, 20]);
    expect(describeRequests(s)).toBe('6 requests (3 failed, 2 retried), 100 B up, 30 B down');
    // the summary is a copy: later records do not change it
    c.record(rec('save', 'e', true));
    expect(s.requests).toBe(6);
  });
});

describe('request log over a store that writes objects from parts', () => {
  it('forwards saveParts (only where the store has it) and logs it as one save', async () => {
    const mem = new MemoryBackend();
    const written: string[] = [];
    const store = Object.assign(mem, {
      async saveParts(type: 'data', name: string, parts: readonly Uint8Array[]) {
        written.push(name);
        await mem.save(type, name, Buffer.concat(parts));
      },
    });
    const records: RequestRecord[] = [];
    const b = new RequestLogBackend(store, (r) => records.push(r));
    await b.saveParts!('data', 'p1', [Buffer.alloc(3), Buffer.alloc(4)]);
    expect(written).toEqual(['p1']);
    expect((await b.load('data', 'p1')).length).toBe(7);
    expect(records[0]).toMatchObject({ op: 'save', type: 'data', name: 'p1', bytes: 7, ok: true });
    expect(b.totals.bytesUp).toBe(7);
    expect(new RequestLogBackend(new MemoryBackend()).saveParts).toBeUndefined();
  });
});
