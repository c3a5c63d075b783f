/**
 * Tree blobs: a directory listing as canonical JSON (nodes sorted by raw name bytes, keys in a fixed
 * order, absent fields omitted), so the same directory always encodes to the same bytes and keeps its
 * ID: snapshots form a Merkle tree and an unchanged subtree costs nothing.
 * Names are validated on decode: a tree naming "..", ".", "", or anything with "/" or NUL is corrupt.
 */
import type { Tree, TreeNode } from './types.js';
import { CorruptObjectError } from '../errors.js';

const KEY_ORDER: (keyof TreeNode)[] = [
  'name',
  'rawName',
  'type',
  'mode',
  'mtimeNs',
  'ctimeNs',
  'atimeNs',
  'uid',
  'gid',
  'user',
  'group',
  'size',
  'inode',
  'dev',
  'nlink',
  'rdev',
  'linkTarget',
  'linkTargetRaw',
  'subtree',
  'summary',
  'blockSize',
  'content',
];

export function nameBytes(n: Pick<TreeNode, 'name' | 'rawName'>): Buffer {
  return n.rawName !== undefined ? Buffer.from(n.rawName, 'base64') : Buffer.from(n.name, 'utf8');
}

export function encodeTree(tree: Tree): Buffer {
  const nodes = [...tree.nodes].sort((a, b) => Buffer.compare(nameBytes(a), nameBytes(b)));
  const canonical = nodes.map((n) => {
    const o: Record<string, unknown> = {};
    for (const k of KEY_ORDER) if (n[k] !== undefined) o[k] = n[k];
    return o;
  });
  return Buffer.from(JSON.stringify({ nodes: canonical }));
}

export function isSafeName(raw: Buffer): boolean {
  if (raw.length === 0 || raw.length > 4096) return false;
  if (raw.includes(0x2f) || raw.includes(0)) return false; // '/' or NUL
  if (raw.length === 1 && raw[0] === 0x2e) return false; // '.'
  if (raw.length === 2 && raw[0] === 0x2e && raw[1] === 0x2e) return false; // '..'
  if (process.platform === 'win32' && raw.includes(0x5c)) return false; // '\'
  return true;
}

export function decodeTree(buf: Buffer, what: string): Tree {
  let tree: Tree;
  try {
    tree = JSON.parse(buf.toString('utf8')) as Tree;
  } catch (err) {
    throw new CorruptObjectError(`${what} is not a valid tree`, { cause: err });
  }
  if (!tree || !Array.isArray(tree.nodes)) throw new CorruptObjectError(`${what} is not a valid tree`);
  const seen = new Set<string>();
  for (const n of tree.nodes) {
    if (typeof n?.name !== 'string' || typeof n.type !== 'string')
      throw new CorruptObjectError(`${what} has a malformed entry`);
    const raw = nameBytes(n);
    if (!isSafeName(raw))
      throw new CorruptObjectError(`${what} has an unsafe entry name ${JSON.stringify(n.name)}`);
    if (n.blockSize !== undefined && !(Number.isInteger(n.blockSize) && n.blockSize > 0))
      throw new CorruptObjectError(`${what} gives ${JSON.stringify(n.name)} an invalid block size`);
    const k = raw.toString('latin1');
    if (seen.has(k)) throw new CorruptObjectError(`${what} names ${JSON.stringify(n.name)} twice`);
    seen.add(k);
  }
  return tree;
}
