import { describe, expect, it } from 'vitest';
import { prependCapped, setCapped } from './bounded';

describe('store caps', () => {
  it('keeps the newest history rows, each id once', () => {
    let list: { id: string }[] = [];
    for (let i = 0; i < 50; i++) list = prependCapped(list, { id: String(i) }, 10);
    expect(list.map((r) => r.id)).toEqual(['49', '48', '47', '46', '45', '44', '43', '42', '41', '40']);
    list = prependCapped(list, { id: '45' }, 10);
    expect(list.length).toBe(10);
    expect(list.filter((r) => r.id === '45').length).toBe(1);
    expect(list[0].id).toBe('45');
  });

  it('keeps only the most recently set keys of a record', () => {
    let rec: Record<string, number> = {};
    for (let i = 0; i < 30; i++) rec = setCapped(rec, `k${i}`, i, 5);
    expect(Object.keys(rec)).toEqual(['k25', 'k26', 'k27', 'k28', 'k29']);
    rec = setCapped(rec, 'k26', 99, 5);
    expect(Object.keys(rec)).toEqual(['k25', 'k27', 'k28', 'k29', 'k26']);
    expect(rec.k26).toBe(99);
  });
});
