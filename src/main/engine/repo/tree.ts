/**
 * Tree blobs: a directory listing as canonical JSON (nodes sorted by raw name bytes, keys in a fixed
 * order, absent fields omitted), so the same directory always encodes to the same bytes and keeps its
 * ID: snapshots form a Merkle tree and an unchanged subtree costs nothing.
 * Block files' block lists (TreeNode.blockIds) follow the JSON in binary: the JSON gives each such node
 * `"blockIds": <count>`, then one newline byte (JSON.stringify never writes one) and the IDs, 32 bytes
 * each, node after node in the JSON's order. A tree without block lists is the JSON alone.
 *
 * Block lists in two parts: a long list (a 2 GiB file has 512 Ki blocks of 4 KiB, 16 MiB of IDs) changes
 * by a few thousand blocks a night, and writing it whole cost each block-tracked incremental megabytes
 * of encoding, hashing, sealing and writing. Such a node names a base list stored as a blob of its
 * own (`"blockBase": <ID>`, `"blockCount": <blocks>`) and lists only the blocks that differ from it
 * (`"blockPatch": <entries>`, 36 bytes each in the binary part: index uint32 LE, ascending, then the ID).
 * Repository.loadTree joins the two into blockIds; prune and check count the base blob as used.
 * Names are validated on decode: a tree naming "..", ".", "", or anything with "/" or NUL is corrupt.
 */
import { createHash } from 'node:crypto';
import type { ID, Tree, TreeNode } from './types.js';
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
  'blockIds',
  'blockBase',
  'blockCount',
  'blockPatch',
];

const ID_BYTES = 32;
/** A block-list patch entry: the block's index (uint32 LE) and its ID. */
export const PATCH_ENTRY = 4 + ID_BYTES;

export function nameBytes(n: Pick<TreeNode, 'name' | 'rawName'>): Buffer {
  return n.rawName !== undefined ? Buffer.from(n.rawName, 'base64') : Buffer.from(n.name, 'utf8');
}

export function encodeTree(tree: Tree): Buffer {
  const nodes = [...tree.nodes].sort((a, b) => Buffer.compare(nameBytes(a), nameBytes(b)));
  const lists: Buffer[] = [];
  const canonical = nodes.map((n) => {
    const o: Record<string, unknown> = {};
    for (const k of KEY_ORDER) if (n[k] !== undefined) o[k] = n[k];
    if (n.blockBase !== undefined) {
      // a list in two parts: the base's ID and the patch; the joined blockIds are not stored
      const patch = n.blockPatch ?? Buffer.alloc(0);
      if (n.content || !n.blockSize || !Number.isInteger(n.blockCount) || patch.length % PATCH_ENTRY)
        throw new Error(`${n.name}: a block list in two parts needs a block size, a count and whole entries`);
      delete o.blockIds;
      o.blockPatch = patch.length / PATCH_ENTRY;
      lists.push(patch);
    } else if (n.blockIds) {
      if (n.content || !n.blockSize || n.blockIds.length % ID_BYTES)
        throw new Error(
          `${n.name}: a block list needs a block size, whole IDs and no content (internal error)`,
        );
      o.blockIds = n.blockIds.length / ID_BYTES;
      lists.push(n.blockIds);
    }
    return o;
  });
  const json = Buffer.from(JSON.stringify({ nodes: canonical }));
  return lists.length ? Buffer.concat([json, Buffer.from('\n'), ...lists]) : json;
}

/** Whether a file node lists its content (as chunk IDs or as a block list). */
export function hasContent(n: TreeNode): boolean {
  return n.content !== undefined || n.blockIds !== undefined || n.blockBase !== undefined;
}

/** The number of chunks (or blocks) of a file node. */
export function contentCount(n: TreeNode): number {
  if (n.blockBase !== undefined) return n.blockCount ?? 0;
  return n.blockIds ? n.blockIds.length / ID_BYTES : (n.content?.length ?? 0);
}

/** The whole block list of a node whose list is in two parts, from its base list (see the top). Throws
 *  CorruptObjectError when they do not fit together. */
export function joinBlockList(n: TreeNode, base: Buffer, what: string): Buffer {
  const count = n.blockCount ?? 0;
  const patch = n.blockPatch ?? Buffer.alloc(0);
  if (base.length % ID_BYTES) throw new CorruptObjectError(`${what}: the base block list is malformed`);
  const out = Buffer.allocUnsafe(count * ID_BYTES);
  const kept = Math.min(base.length, out.length);
  base.copy(out, 0, 0, kept);
  let prev = -1;
  let beyond = 0; // entries past the base: together they must cover the rest of the list
  for (let at = 0; at < patch.length; at += PATCH_ENTRY) {
    const i = patch.readUInt32LE(at);
    if (i <= prev || i >= count) throw new CorruptObjectError(`${what}: the block list's patch is malformed`);
    prev = i;
    patch.copy(out, i * ID_BYTES, at + 4, at + PATCH_ENTRY);
    if (i * ID_BYTES >= kept) beyond++;
  }
  if (beyond !== count - kept / ID_BYTES)
    throw new CorruptObjectError(`${what}: the block list's patch does not cover the blocks past its base`);
  return out;
}

/** A file node's chunk IDs as hex, in order (a block list is converted: 256 Ki IDs take ~30 ms). */
export function contentIds(n: TreeNode): ID[] {
  if (!n.blockIds) return joinedContent(n) ?? [];
  const out = new Array<ID>(contentCount(n));
  for (let k = 0; k < out.length; k++) out[k] = contentIdAt(n, k);
  return out;
}

/** A file node's k-th chunk ID as hex (one of a block list converted alone: a restore plans a file of a
 *  million blocks a slice at a time). */
export function contentIdAt(n: TreeNode, k: number): ID {
  const b = n.blockIds;
  return b ? b.toString('hex', k * ID_BYTES, (k + 1) * ID_BYTES) : joinedContent(n)![k];
}

/** The same as the blob index looks it up: a view of the binary list where the node has one. */
export function contentIdKeyAt(n: TreeNode, k: number): Uint8Array | ID {
  const b = n.blockIds;
  return b ? b.subarray(k * ID_BYTES, (k + 1) * ID_BYTES) : joinedContent(n)![k];
}

/** `content` of a node without a binary block list; throws for a list in two parts not joined yet. */
function joinedContent(n: TreeNode): ID[] | undefined {
  if (n.blockBase !== undefined) throw new Error(`${n.name}: block list not joined (internal error)`);
  return n.content;
}

/** A block file's IDs in binary, whichever way its tree stored them (older trees: hex in `content`). */
export function blockIdsOf(n: TreeNode): Buffer | undefined {
  if (n.blockIds) return n.blockIds;
  if (n.blockBase !== undefined) throw new Error(`${n.name}: block list not joined (internal error)`);
  if (!n.content) return undefined;
  const out = Buffer.allocUnsafe(n.content.length * ID_BYTES);
  n.content.forEach((id, i) => out.write(id, i * ID_BYTES, ID_BYTES, 'hex'));
  return out;
}

/** A digest of a file node's chunk list, the same whichever way it is stored ('' when it has none). */
export function contentDigest(n: TreeNode): string {
  const ids = blockIdsOf(n);
  return ids ? createHash('sha256').update(ids).digest('hex') : '';
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
  const nl = buf.indexOf(0x0a);
  const lists = nl < 0 ? undefined : buf.subarray(nl + 1);
  let listed = 0;
  try {
    tree = JSON.parse(buf.toString('utf8', 0, nl < 0 ? buf.length : nl)) as Tree;
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
    if (n.blockBase !== undefined || n.blockCount !== undefined || n.blockPatch !== undefined) {
      const entries = n.blockPatch as unknown;
      const end = listed + (entries as number) * PATCH_ENTRY;
      if (
        !lists ||
        typeof n.blockBase !== 'string' ||
        !/^[0-9a-f]{64}$/.test(n.blockBase) ||
        !Number.isInteger(n.blockCount) ||
        (n.blockCount as number) < 0 ||
        !Number.isInteger(entries) ||
        (entries as number) < 0 ||
        end > lists.length ||
        n.type !== 'file' ||
        n.blockSize === undefined ||
        n.content !== undefined ||
        n.blockIds !== undefined
      )
        throw new CorruptObjectError(`${what} gives ${JSON.stringify(n.name)} an invalid block list`);
      n.blockPatch = lists.subarray(listed, end);
      listed = end;
    } else if (n.blockIds !== undefined) {
      const count = n.blockIds as unknown;
      const end = listed + (count as number) * ID_BYTES;
      if (
        !lists ||
        !Number.isInteger(count) ||
        (count as number) < 0 ||
        end > lists.length ||
        n.type !== 'file' ||
        n.blockSize === undefined ||
        n.content !== undefined
      )
        throw new CorruptObjectError(`${what} gives ${JSON.stringify(n.name)} an invalid block list`);
      n.blockIds = lists.subarray(listed, end);
      listed = end;
    }
    const k = raw.toString('latin1');
    if (seen.has(k)) throw new CorruptObjectError(`${what} names ${JSON.stringify(n.name)} twice`);
    seen.add(k);
  }
  if (lists && listed !== lists.length)
    throw new CorruptObjectError(`${what} has ${lists.length - listed} bytes after its block lists`);
  return tree;
}
