import { describe, expect, it } from 'vitest';
import { hiddenPatterns, sourceViewMap, withSourceViews } from './sourceView.js';
import { Excluder } from '../scan/index.js';
import type { EntryStat } from '../scan/stat.js';

const read = (m: ReturnType<typeof sourceViewMap>, p: string) => m.read(Buffer.from(p)).toString();
const st = (dev: number) => ({ dev }) as EntryStat;

describe('source views', () => {
  it('without views reads every path as it is (the same Buffer, no copy)', () => {
    const m = sourceViewMap(undefined);
    const b = Buffer.from('/home/ann/a');
    expect(m.read(b)).toBe(b);
    expect(sourceViewMap([{ path: '/x', readFrom: '/x' }]).read(b)).toBe(b);
  });

  it('reads a path below a view inside the snapshot, and leaves other paths alone', () => {
    const m = sourceViewMap([{ path: '/home/ann', readFrom: '/snap/s1/ann' }]);
    expect(read(m, '/home/ann')).toBe('/snap/s1/ann');
    expect(read(m, '/home/ann/mail/inbox')).toBe('/snap/s1/ann/mail/inbox');
    expect(read(m, '/home/anne/x')).toBe('/home/anne/x'); // a prefix of the name is not the folder
    expect(read(m, '/home')).toBe('/home');
  });

  it('the deepest view wins: a filesystem inside a snapshotted source is read live or from its own', () => {
    const m = sourceViewMap([
      { path: '/data', readFrom: '/data/.tidemark-snapshots/s1' },
      { path: '/data/vm', readFrom: '/data/vm' },
      { path: '/data/db', readFrom: '/run/snap/db' },
    ]);
    expect(read(m, '/data/docs/a')).toBe('/data/.tidemark-snapshots/s1/docs/a');
    expect(read(m, '/data/vm/disk.img')).toBe('/data/vm/disk.img');
    expect(read(m, '/data/db/x.sqlite')).toBe('/run/snap/db/x.sqlite');
  });

  it('a view of the root folder maps every path', () => {
    const m = sourceViewMap([{ path: '/', readFrom: '/run/snap/root' }]);
    expect(read(m, '/etc/hosts')).toBe('/run/snap/root/etc/hosts');
    expect(read(m, '/')).toBe('/run/snap/root/');
  });

  it('records entries with the original device number', () => {
    const m = sourceViewMap([{ path: '/d', readFrom: '/s', dev: { snapshot: 44, original: 43 } }]);
    expect(m.recorded(st(44)).dev).toBe(43);
    expect(m.recorded(st(7)).dev).toBe(7);
  });

  it('hidden paths are excluded exactly (glob characters in them are literal)', () => {
    const ex = new Excluder(hiddenPatterns(['/data/.tidemark-snapshots', '/odd/[x]*']));
    expect(ex.excludes('/data/.tidemark-snapshots', '.tidemark-snapshots')).toBe(true);
    expect(ex.excludes('/data/.tidemark-snapshots/tidemark-1-a-b/x', 'x')).toBe(true);
    expect(ex.excludes('/data/.tidemark-snapshotsX', '.tidemark-snapshotsX')).toBe(false);
    expect(ex.excludes('/odd/[x]*', '[x]*')).toBe(true);
    expect(ex.excludes('/odd/xy', 'xy')).toBe(false);
  });

  it('withSourceViews calls prepareSourceViews once and adds what it made', async () => {
    let calls = 0;
    const o = await withSourceViews({
      paths: ['/d'],
      hiddenPaths: ['/h'],
      prepareSourceViews: async () => {
        calls++;
        return { views: [{ path: '/d', readFrom: '/s' }], hidden: ['/d/.snap'] };
      },
    });
    expect(calls).toBe(1);
    expect(o.prepareSourceViews).toBeUndefined();
    expect(o.sourceViews).toEqual([{ path: '/d', readFrom: '/s' }]);
    expect(o.hiddenPaths).toEqual(['/h', '/d/.snap']);
    expect(await withSourceViews(o)).toBe(o);
  });
});
