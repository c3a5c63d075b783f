/**
 * Repair's first step: every pack is read whole and every blob it holds, by its header and by the index,
 * is opened and compared with its ID (in the decode workers, as `check --read-data` does). A pack is
 * intact when its bytes match its name, its header opens and every blob the header lists is sound; any
 * other pack is damaged, and the sound blobs found in it are what can be saved from it.
 */
import { giveBuffer } from '../bufferPool.js';
import type { Repository } from '../repo/repository.js';
import { mapLimit } from '../repo/repository.js';
import { BlobType, type BlobLocation } from '../repo/blobIndex.js';
import { decodeHeader, type PackedBlob } from '../repo/pack.js';
import { Blake3Hasher } from '../crypto/index.js';
import { AbortedError, NotFoundError, addContext } from '../errors.js';
import { acquireDecodePool, releasePool, defaultWorkerCount } from '../pool/index.js';
import {
  decodeBuffer,
  outcomesOf,
  packDecodeItems,
  type DecodeItem,
  type DecodeResult,
} from '../pool/wire.js';
import { breather } from './breathe.js';

export interface PackScan {
  pack: string;
  size: number;
  intact: boolean;
  /** Why the pack is not intact (without the pack's name). */
  problem?: string;
  /** The blobs the header lists (intact packs: all of them sound). */
  header?: PackedBlob[];
  /** Sound blobs found in the pack, by ID (the first sound copy). */
  sound: Map<string, BlobLocation>;
  /** IDs the header or the index place in this pack that did not open or match their ID here. */
  unsound: Set<string>;
}

export interface PackSurvey {
  /** Every stored pack, scanned. */
  packs: Map<string, PackScan>;
  /** Packs the index names that are not stored, with the blobs it placed there. */
  missing: Map<string, string[]>;
  /** Stored packs with blobs no index file listed. */
  unindexed: string[];
  /** Raw (plaintext) lengths of every blob any header or index entry named, sound or not: where a
   *  damaged blob's bytes lie in its source file. */
  rawLengths: Map<string, number>;
}

interface Candidate extends DecodeItem {
  type: BlobType;
}

/**
 * Reads and verifies every pack. `indexed` is what the index files (those that could be read) say,
 * pack by pack. Never writes.
 */
export async function surveyPacks(
  repo: Repository,
  indexed: Map<string, { id: string; loc: BlobLocation }[]>,
  opts: {
    signal?: AbortSignal;
    workers?: number;
    progress?: (done: number, total: number) => void;
  } = {},
): Promise<PackSurvey> {
  const stored = new Map<string, number>();
  for await (const o of repo.backend.list('data')) stored.set(o.name, o.size);
  const rawLengths = new Map<string, number>();
  const missing = new Map<string, string[]>();
  for (const [pack, blobs] of indexed) {
    for (const b of blobs) rawLengths.set(b.id, b.loc.rawLength);
    if (!stored.has(pack))
      missing.set(
        pack,
        blobs.map((b) => b.id),
      );
  }
  const packs = new Map<string, PackScan>();
  const unindexed: string[] = [];
  const names = [...stored.keys()].sort();
  const pool = acquireDecodePool(repo.key, repo.config, opts.workers ?? defaultWorkerCount());
  let done = 0;
  try {
    await mapLimit(names, 2, async (pack) => {
      if (opts.signal?.aborted) throw new AbortedError();
      let bytes: Buffer;
      try {
        bytes = await repo.backend.load('data', pack);
      } catch (err) {
        if (err instanceof NotFoundError) return; // removed meanwhile: nothing to judge
        // a read that fails for another reason (a disk error, a dropped connection) decides nothing:
        // repair stops before it has changed anything
        throw addContext(`reading pack ${pack.slice(0, 12)}`, err);
      }
      const scan = await scanPack(repo, pack, bytes, indexed.get(pack) ?? [], pool);
      for (const b of scan.header ?? []) rawLengths.set(b.id.toString('hex'), b.rawLength);
      const listed = new Set((indexed.get(pack) ?? []).map((b) => b.id));
      if (scan.header?.some((b) => !listed.has(b.id.toString('hex')))) unindexed.push(pack);
      packs.set(pack, scan);
      opts.progress?.(++done, names.length);
    });
  } finally {
    await releasePool(pool, !!opts.signal?.aborted);
  }
  return { packs, missing, unindexed: unindexed.sort(), rawLengths };
}

/** A pack's name from its bytes (BLAKE3), hashed a few MiB at a time: a 16 MiB pack hashed at once held
 *  the event loop ~10 ms, two packs at a time twice that. */
async function hashInSteps(bytes: Buffer): Promise<string> {
  const h = new Blake3Hasher();
  const STEP = 2 * 1024 * 1024;
  for (let at = 0; at < bytes.length; at += STEP) {
    h.update(bytes.subarray(at, Math.min(bytes.length, at + STEP)));
    if (at + STEP < bytes.length) await new Promise<void>((r) => setImmediate(r));
  }
  return h.digest('hex');
}

async function scanPack(
  repo: Repository,
  pack: string,
  bytes: Buffer,
  indexed: { id: string; loc: BlobLocation }[],
  pool: ReturnType<typeof acquireDecodePool>,
): Promise<PackScan> {
  const size = bytes.length;
  const what = `pack ${pack.slice(0, 12)}`;
  const hashOk = (await hashInSteps(bytes)) === pack;
  let header: PackedBlob[] | undefined;
  let problem: string | undefined;
  try {
    header = decodeHeader(repo.key, bytes, size, what);
  } catch (err) {
    const m = (err as Error).message;
    problem = m.startsWith(`${what}: `) ? m.slice(what.length + 2) : m;
  }
  // what the header says is there, then what the index says (a pack whose header is lost or cut off
  // still has its blobs where the index put them); one candidate per offset unless they disagree
  const breathe = breather();
  const all: Candidate[] = [];
  const atOffset = new Map<number, Candidate>();
  const add = (c: Candidate) => {
    const same = atOffset.get(c.offset);
    if (same && same.id === c.id && same.length === c.length) return;
    if (!same) atOffset.set(c.offset, c);
    all.push(c);
  };
  const headerIds = (header ?? []).map((b) => b.id.toString('hex'));
  for (const [i, b] of (header ?? []).entries()) {
    add({
      id: headerIds[i],
      type: b.type,
      offset: b.offset,
      length: b.length,
      rawLength: b.rawLength,
      compressed: b.compressed,
    });
    if (breathe.due) await breathe.rest();
  }
  for (const { id, loc } of indexed) {
    if (breathe.due) await breathe.rest();
    add({
      id,
      type: loc.type as BlobType,
      offset: loc.offset,
      length: loc.length,
      rawLength: loc.rawLength,
      compressed: loc.compressed,
    });
  }
  const readable = all.filter((c) => c.offset + c.length <= size && c.length > 0);
  const ok = new Set<Candidate>();
  if (readable.length) {
    const { buffer, transfer } = decodeBuffer(bytes);
    const packed = packDecodeItems(readable);
    const r = await pool.run<DecodeResult>({ op: 'decode', buffer, batch: packed.batch }, undefined, [
      ...transfer,
      ...packed.transfer,
    ]);
    giveBuffer(r.returned);
    outcomesOf(readable, r.failed).forEach((res, i) => {
      if (res.ok) ok.add(readable[i]);
    });
  }
  const sound = new Map<string, BlobLocation>();
  const unsound = new Set<string>();
  for (const c of all) {
    if (breathe.due) await breathe.rest();
    if (ok.has(c) && !sound.has(c.id))
      sound.set(c.id, {
        pack,
        offset: c.offset,
        length: c.length,
        rawLength: c.rawLength,
        type: c.type,
        compressed: c.compressed,
      });
  }
  for (const c of all) if (!sound.has(c.id)) unsound.add(c.id);
  const headerSound = !!header && headerIds.every((id) => sound.has(id));
  if (!problem && header && !headerSound) {
    const bad = headerIds.filter((id) => !sound.has(id)).length;
    problem = `${bad} of its ${header.length} blobs are damaged`;
  }
  if (!problem && !hashOk) problem = 'it does not match its hash';
  const intact = hashOk && !!header && headerSound;
  return { pack, size, intact, problem: intact ? undefined : problem, header, sound, unsound };
}
