import { describe, it, expect } from 'vitest';
import { metadataNode, type EntryStat } from './index.js';
import { encodeTree, nameBytes } from '../repo/tree.js';

const st = (over: Partial<EntryStat> = {}): EntryStat => ({
  type: 'file',
  mode: 0o640,
  size: 1234,
  mtimeNs: '1764581234123456789',
  mtimeMs: 1764581234123.456,
  ctimeNs: '1764581234987654321',
  uid: 1000,
  gid: 100,
  ino: 42,
  dev: 2049,
  nlink: 1,
  rdev: 0,
  ...over,
});

describe('metadataNode', () => {
  it('keeps a UTF-8 name as text and gives a file its size, hard links their count', () => {
    const n = metadataNode(Buffer.from('résumé.txt'), st({ nlink: 3 }));
    expect(n).toStrictEqual({
      name: 'résumé.txt',
      type: 'file',
      mode: 0o640,
      mtimeNs: '1764581234123456789',
      ctimeNs: '1764581234987654321',
      uid: 1000,
      gid: 100,
      inode: 42,
      dev: 2049,
      size: 1234,
      nlink: 3,
    });
  });

  it('keeps the exact bytes of a name that is not UTF-8, and devices their number, not a size', () => {
    const raw = Buffer.from([0x61, 0xff, 0xfe, 0x62]);
    const n = metadataNode(raw, st({ type: 'chardev', rdev: 0x0501 }));
    expect(n.rawName).toBe(raw.toString('base64'));
    expect(nameBytes(n).equals(raw)).toBe(true);
    expect(n.rdev).toBe(0x0501);
    expect(n.size).toBeUndefined();
    // the tree's bytes do not depend on the order the node's fields were set in
    const json = JSON.parse(encodeTree({ nodes: [n] }).toString()).nodes[0];
    expect(Object.keys(json).slice(0, 3)).toEqual(['name', 'rawName', 'type']);
  });
});
